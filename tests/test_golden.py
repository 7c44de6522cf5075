"""Behaviour kept byte for byte: what the demo prints, the manifests apply writes, and the
validation, summary and default trace of every committed fixture equal tests/golden/, written by
golden_outputs.py from the commit before the typed-manifest refactor (issue 11)."""
from __future__ import annotations

from pathlib import Path

from golden_outputs import outputs, stored

GOLDEN = Path(__file__).resolve().parent / "golden"


def test_outputs_equal_the_golden_files(tmp_path):
    got = stored(outputs())
    want = {p.name: p.read_bytes() for p in GOLDEN.iterdir()}
    assert sorted(got) == sorted(want)
    differ = sorted(n for n in want if got[n] != want[n])
    for n in differ:
        (tmp_path / n).write_bytes(got[n])  # diff tests/golden/NAME against these
    assert not differ, f"outputs differ from tests/golden/: {differ} (this run's are in {tmp_path})"
