"""Where the shipped non-Python files are: the grammars, the runtime header, and the demo's example,
its real H200 captures (without and with the SM clock) and the H200 captures its comparison reads
(before and after one change).

Installed (`pip install .`), they are folders inside the package (pyproject maps the repository's
folders onto atrex_inject.grammars, .runtime, .examples, .demo_capture, .demo_clock_capture and
.compare_captures); run from a source checkout, or installed editable, they are the repository's
own folders.
"""
from __future__ import annotations

from pathlib import Path

SOURCE_DIRS = {"grammars": "grammars", "runtime": "runtime", "examples": "examples",
               "demo_capture": "tests/fixtures/h200/gemm_mma",
               "demo_clock_capture": "tests/fixtures/h200/gemm_mma_clock", "compare_captures": "tests/fixtures/h200/compare"}


def asset_dir(kind: str) -> Path:
    """kind: a key of SOURCE_DIRS."""
    here = Path(__file__).resolve().parent
    installed = here / kind
    return installed if installed.is_dir() else here.parent / SOURCE_DIRS[kind]
