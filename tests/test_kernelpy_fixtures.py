"""Real H200 captures of the two kernel.py examples (tests/fixtures/h200/PROVENANCE.md, run 35):
each validates against the instrumented kernel.py it came from, and a copy whose CUDA string was
edited after the capture is refused as stale."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import cli

FIX = Path(__file__).parent / "fixtures" / "h200" / "kernelpy"


@pytest.mark.parametrize("example,events", [("softmax_inline", 1024), ("rmsnorm_nvrtc", 20480)])
def test_kernelpy_capture_validates_against_its_source(example, events, tmp_path):
    d = FIX / example
    code, out = cli("validate", str(d), "--source", str(d / "kernel.instrumented.py"), "--json")
    r = json.loads(out)
    assert code == 0 and r["verdict"] == "valid", out
    assert r["events"] == events
    edited = tmp_path / "kernel.instrumented.py"
    shutil.copy(d / "kernel.instrumented.py", edited)
    text = edited.read_text()
    edited.write_text(text.replace("__global__", "__global__ ", 1))
    code, out = cli("validate", str(d), "--source", str(edited), "--json")
    stale = json.loads(out)
    assert code == 1 and stale["verdict"] == "rejected", out
    assert [c["name"] for c in stale["checks"] if c["count"]] == ["stale_provenance"]
