"""What capture gives NVIDIA IKeT's run-iket: the command line that records a program's launches of
the manifest's kernel, and, when the spec records the first CTA only, IKeT's per-kernel selection
(`--enabled-cluster-config`). The backend builds the command; normalize.py reads what it recorded
and checks the selection was honoured."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .check import entry_prefix

LOG_NAME = "run-iket.log"
SELECT_NAME = "iket-select.json"  # the selection capture gives run-iket, kept beside its log
FIRST_CTA = "ctas = { limit = 1 }"  # how a spec asks IKeT to record the first CTA only


def selects_first_cta(groups) -> bool:
    """Whether a manifest's owner groups record the first CTA only, IKeT's one selection (check()
    lets through this or every CTA, on all sites alike)."""
    return any(g.cta_limit for g in groups)


def prepare_run_iket(manifest, out_dir: Path, cmd: list[str], tracker: Path | None = None) -> list[str]:
    """The run-iket command line that records `cmd`'s launches of the manifest's kernel into
    OUT_DIR/iket/ (decoded to JSON for normalize.py), with warnings in its output (iketlog.py).
    When the spec records the first CTA only, this writes OUT_DIR/iket-select.json, IKeT's
    per-kernel selection: the target kernel's cluster 0,0,0 (its first CTA), every other kernel of
    the program as run-iket records it by default, and passes it (else removes an earlier one). With `tracker` (the tracker/
    folder of an earlier `run-iket profile --keep` of the program) the discovery pass is skipped,
    nothing is decoded, and OUT_DIR/iket/ is overwritten: each process runs the program once, as a
    measurement's recording side needs (one sample line per process)."""
    out_dir = Path(out_dir)
    # -u: run-iket's own lines reach the terminal as printed, not when its pipe buffer fills
    argv = [sys.executable, "-u", "-m", "iket.cli.main", "-o", str(out_dir / "iket"), "--log-level", "warn"]
    if tracker is not None:
        argv += ["--clobber", "profile", "--use-tracker-dir", str(tracker), "--postprocess", "none"]
    else:
        argv += ["profile", "--postprocess", "json"]
    select = out_dir / SELECT_NAME
    if not selects_first_cta(manifest.groups):
        select.unlink(missing_ok=True)  # an earlier capture's selection in this folder would mislead its reader
        return [*argv, "--", *cmd]
    out_dir.mkdir(parents=True, exist_ok=True)
    select.write_text(json.dumps({entry_prefix(manifest.kernel): [0, 0, 0]}) + "\n")
    return [*argv, "--enabled-cluster-config", str(select), "--", *cmd]
