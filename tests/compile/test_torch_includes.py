"""check-sass on a kernel.py built with torch's load_inline: with torch importable it compiles
against torch's include folders (torch.utils.cpp_extension.include_paths(), here the stand-in
package in tests/stubs, whose include folder holds the stand-in <torch/extension.h>); without
torch it says so and names the way out."""
from __future__ import annotations

import json
import shutil
import sys

import pytest

from conftest import REPO, cli

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
STUBS = REPO / "tests" / "stubs"
SPEC = "examples/specs/softmax_inline.toml"


@pytest.fixture
def no_torch(monkeypatch):
    """torch as this machine has it (not installed): importing it fails."""
    for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "torch", None)


@pytest.fixture
def stub_torch(monkeypatch):
    for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(STUBS))


def test_check_sass_finds_torch_include_paths(project, stub_torch):
    """Built and compared (exit 0, or 1 for what the loop checks find in this kernel's copy; a
    failed compile is exit 2)."""
    code, out = cli("check-sass", project / SPEC, "--json")
    assert code in (0, 1), out
    r = json.loads(out)
    assert r["include_dirs"][0] == str(STUBS) and r["off_identical"] is True
    assert r["copy"] == "softmax_rows__atrex"


def test_check_sass_without_torch_says_what_to_do(project, no_torch):
    code, out = cli("check-sass", project / SPEC)
    assert code == 2, out
    assert "fatal error: torch/extension.h: No such file or directory" in out
    assert ("hint: the source includes torch's headers and torch is not importable here: install torch (its include "
            "paths are then passed), or pass them with --nvcc-flag=-I<folder>") in out
    code, out = cli("check-sass", project / SPEC, f"--nvcc-flag=-I{STUBS}", "--nvcc-flag=-O3",
                    "--nvcc-flag=-gencode=arch=compute_90a,code=sm_90a", "--nvcc-flag=-std=c++17")
    assert code in (0, 1) and "probes off: the clean kernel, instruction for instruction" in out, out
