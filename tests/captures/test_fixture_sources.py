"""Real H200 captures of the examples whose kernel is not a plain .cu (tests/fixtures/h200/
PROVENANCE.md): the two kernel.py examples and the header kernel launched from another file.
Each validates against the instrumented source it came from, and a copy edited
after the capture is refused as stale."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import cli

FIX = Path(__file__).parent.parent / "fixtures" / "h200"


@pytest.mark.parametrize("example,source,events", [("kernelpy/softmax_inline", "kernel.instrumented.py", 1024),
                                                   ("kernelpy/rmsnorm_nvrtc", "kernel.instrumented.py", 20480),
                                                   ("rowscale_split", "rowscale.instrumented.cuh", 4096)])
def test_capture_validates_against_its_source(example, source, events, tmp_path):
    d = FIX / example
    code, out = cli("validate", str(d), "--source", str(d / source), "--json")
    r = json.loads(out)
    assert code == 0 and r["verdict"] == "valid", out
    assert r["events"] == events
    edited = tmp_path / source
    shutil.copy(d / source, edited)
    text = edited.read_text()
    edited.write_text(text.replace("__global__", "__global__ ", 1))
    code, out = cli("validate", str(d), "--source", str(edited), "--json")
    stale = json.loads(out)
    assert code == 1 and stale["verdict"] == "rejected", out
    assert [c["name"] for c in stale["checks"] if c["count"]] == ["stale_provenance"]
