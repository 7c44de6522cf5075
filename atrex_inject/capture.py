"""`atrex-inject capture`: run a program so that the instrumented kernel's launches land in one
folder as format-2 raw files with sidecars, whatever the backend (backend.Backend.capture: the
CUDA recorder writes them itself, the CuTe DSL route runs IKeT's run-iket and normalizes its
output), with the manifest copied in as it is, so the folder decodes by itself, and the run
record (runrecord.py: the program and its argument files, hashed before and after the run), so
the folder names the binary it is evidence of.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from . import registry
from . import manifest as mf
from . import runrecord, snapshot
from .decode import capture_files
from .errors import CaptureError
from .fsio import sha256_bytes
from .spec import load_spec


def run_capture(spec_path: Path, root: Path | None, out_dir: Path, cmd: list[str], workload: str | None) -> dict:
    """Run `cmd` under capture into `out_dir`: {"out", "launches" (file names), "program" {path, sha256}}."""
    spec = load_spec(spec_path, root)
    manifest = snapshot.load_manifest(snapshot.workspace(spec))
    if manifest is None:
        raise CaptureError(f"spec {spec.name!r} is not applied", hint="atrex-inject apply SPEC, then build and capture")
    # ATREX_MANIFEST: a launch from Python (pycapture.capture_launch) reads its capture plan there
    env = dict(os.environ, ATREX_WORKLOAD=workload or os.environ.get("ATREX_WORKLOAD", ""),
               ATREX_MANIFEST=str(snapshot.workspace(spec) / mf.FILE_NAME))
    src = spec.root / manifest.source.path
    if sha256_bytes(src.read_bytes()) != manifest.source.instrumented_sha256:
        raise CaptureError(f"{manifest.source.path} is not the instrumented source of spec {spec.name!r}",
                           hint="apply the spec (and rebuild) before capturing")
    ran = runrecord.record(cmd, env)  # a program that cannot be recorded is refused before anything is written
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    registry.get(manifest.backend).capture(manifest, cmd, out_dir, env)
    runrecord.check_unchanged(ran)
    shutil.copyfile(snapshot.workspace(spec) / mf.FILE_NAME, out_dir / mf.FILE_NAME)
    runrecord.write(out_dir, ran)
    files = capture_files(out_dir)
    return {"out": str(out_dir), "launches": [f.name for f in files], "program": ran.program.to_json()}
