"""`pip install .` (not editable) carries everything the demo needs: the grammars, the runtime
header, the example and its spec, and the bundled real H200 captures (issue 11)."""
from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.long
def test_demo_runs_from_a_plain_install(tmp_path):
    wheels, target = tmp_path / "wheels", tmp_path / "installed"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                    *map(str, wheels.glob("*.whl"))], check=True)
    # -S: no site processing, so an editable install of this checkout (a .pth hook) cannot take over;
    # the dependencies come from this Python's site-packages, after the installed copy
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), *site.getsitepackages()]))
    py = [sys.executable, "-S"]
    away = tmp_path / "elsewhere"  # run from another folder: the current folder comes first on sys.path
    away.mkdir()
    where = subprocess.run([*py, "-c", "import atrex_inject; print(atrex_inject.__file__)"], env=env, cwd=away,
                           capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(target))  # the installed copy, not the checkout
    run = subprocess.run([*py, "-m", "atrex_inject.cli", "demo", "--out", str(away / "demo")], cwd=away, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "restored byte for byte: yes" in run.stdout and (away / "demo" / "report.html").is_file()
    # the bundled clock = true capture of the GEMM (and the instrumented source it validates against) came along
    assert "At the SM clock's resolution" in run.stdout and "record the clock" not in run.stdout
