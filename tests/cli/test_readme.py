"""The README's "loop, by hand" runs top to bottom as written, on a CPU, in a fresh git clone of
the examples: every command is the README's own line, except the lines that run the GPU binaries,
for which the bundled H200 capture of the same instrumented source stands in. It also checks
that every file the loop reads was built or written by an earlier line, and that the loop
leaves nothing untracked that git does not ignore."""
from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, sha

FIX = REPO / "tests" / "fixtures" / "h200" / "gemm_mma"
GPU = ("atrex-inject capture", "atrex-inject measure", "python3 examples/evaluator.py", "atrex-inject verdict",
       "atrex-inject report")
WRITES = ("-o", "--out", "--perfetto", "--png")  # options naming a file the command writes

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def readme_loop() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = re.search(r"## The loop, by hand\n.*?```\n(.*?)```", text, re.S).group(1)
    return [re.sub(r"\s+# .*$", "", line).strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def test_loop_reads_only_what_it_made():
    made = set()
    for line in readme_loop():
        words = shlex.split(line)
        for w in words:
            if w.startswith("build/") or w.startswith("[\"build/"):
                path = w.split('"')[1] if w.startswith("[") else w
                written = any(words[i] in WRITES and words[i + 1] == path for i in range(len(words) - 1))
                produced = written or line.startswith(("mkdir", "cp "))
                assert produced or any(path == m or path.startswith(m + "/") for m in made), \
                    f"{path} is read before any line of the loop makes it: {line}"
                if produced:
                    made.add(path.rstrip("/"))
    assert {"build/gemm.clean", "build/gemm.inst", "build/measurement.json", "build/evaluations.jsonl"} <= made


@pytest.mark.long
def test_loop_runs_as_written(tmp_path):
    root = tmp_path / "clone"
    shutil.copytree(REPO / "examples", root / "examples")
    shutil.copy(REPO / ".gitignore", root / ".gitignore")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(root)]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "clone"], check=True)
    clean = sha(root / "examples/cuda/gemm_mma.cu")
    prelude = f'set -euo pipefail\natrex-inject() {{ {shlex.quote(sys.executable)} -m atrex_inject.cli "$@"; }}\n'
    ran = []
    for line in readme_loop():
        if line.startswith(GPU):
            if line.startswith("atrex-inject capture"):  # the capture run: the H200 recorded these files
                (root / "build" / "cap").mkdir()
                for f in FIX.glob("*-launch*"):
                    shutil.copy(f, root / "build" / "cap")
                shutil.copy(root / ".atrex/gemm_mma/manifest.json", root / "build" / "cap")  # as capture does
            continue
        p = subprocess.run(["bash", "-c", prelude + line], cwd=root, capture_output=True, text=True)
        assert p.returncode == 0, f"{line}\n{p.stdout}\n{p.stderr}"
        ran.append((line, p.stdout))
    out = dict(ran)
    summary = next(v for k, v in out.items() if k.startswith("atrex-inject summary"))
    first = json.loads((root / "build/cap/manifest.json").read_text())["intervals"][0]["name"]
    assert "timer tick 32 ns" in summary and first in summary
    assert (root / "build/gemm.clean").is_file() and (root / "build/gemm.inst").is_file()
    assert (root / "build/gemm.png").stat().st_size > 0 and (root / "build/gemm.pftrace").stat().st_size > 0
    assert sha(root / "examples/cuda/gemm_mma.cu") == clean  # the loop ends with a byte-exact revert
    status = subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True, check=True).stdout
    assert status == "", f"the loop left files git does not ignore:\n{status}"
