"""`capture --spec A --spec B`: one run of a program whose kernels each have an applied spec; each
kernel's launches land in a capture folder of its own under --out (its manifest, the run record),
which `summary`/`export`/`validate` read together as a folder holding captures. The program here is
a stand-in that replays the files of two real H200 captures into ATREX_TIMELINE_OUT (the recorder
of an instrumented build writes them so); scripts/gpu-multikernel.sh captures the real thing."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import cli, tree_hashes

H200 = Path(__file__).parent.parent / "fixtures" / "h200"
SPECS = ("examples/specs/reduce_sumsq.toml", "examples/specs/layernorm.toml")


def _replay(tmp_path: Path) -> Path:
    prog = tmp_path / "replay.py"
    prog.write_text("import os, shutil, pathlib\n"
                    f"for d in ({str(H200 / 'reduce_sumsq')!r}, {str(H200 / 'layernorm')!r}):\n"
                    "    for f in pathlib.Path(d).glob('*-launch*'):\n"
                    "        shutil.copy(f, os.environ['ATREX_TIMELINE_OUT'])\n")
    return prog


def test_each_kernel_gets_its_capture_folder(project, tmp_path):
    for s in SPECS:
        code, out = cli("apply", project / s, "--recorder", "global", "--json")
        assert code == 0, out
    out_dir = tmp_path / "cap"
    code, out = cli("capture", "--spec", project / SPECS[0], "--spec", project / SPECS[1], "--out", out_dir, "--json",
                    "--", sys.executable, _replay(tmp_path))
    assert code == 0, out
    r = json.loads(out)
    assert [(c["spec"], c["launches"]) for c in r["captures"]] == [
        ("reduce_sumsq", ["reduce_sumsq-launch2.atrex"]), ("layernorm", ["layernorm_fwd-launch3.atrex"])]
    assert sorted(p.name for p in out_dir.iterdir()) == ["layernorm", "reduce_sumsq"]
    for spec, kernel, seq in (("reduce_sumsq", "reduce_sumsq", 2), ("layernorm", "layernorm_fwd", 3)):
        folder = out_dir / spec
        assert sorted(p.name for p in folder.iterdir()) == sorted(
            [f"{kernel}-launch{seq}.atrex", f"{kernel}-launch{seq}.json", "manifest.json", "run.json"])
        assert (folder / "manifest.json").read_bytes() == (project / f".atrex/{spec}/manifest.json").read_bytes()
        assert json.loads((folder / "run.json").read_text())["argv"][1] == str(tmp_path / "replay.py")


def test_specs_that_cannot_share_a_run_are_refused(project, tmp_path):
    code, out = cli("apply", project / SPECS[0], "--recorder", "global", "--json")
    assert code == 0, out
    prog = _replay(tmp_path)
    before = tree_hashes(project)
    code, out = cli("capture", "--spec", project / SPECS[0], "--spec", project / SPECS[0], "--out", tmp_path / "cap",
                    "--", sys.executable, prog)
    assert code == 2 and "the specs' spec names repeat (reduce_sumsq, reduce_sumsq)" in out, out
    assert not (tmp_path / "cap").exists() and tree_hashes(project) == before
    code, out = cli("capture", "--spec", project / SPECS[0], "--spec", project / SPECS[1], "--out", tmp_path / "cap",
                    "--", sys.executable, prog)
    assert code == 2 and "spec 'layernorm' is not applied" in out, out
