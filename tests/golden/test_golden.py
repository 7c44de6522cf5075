"""Behaviour kept byte for byte: what the demo prints, the manifests apply writes, and the
validation, summary and default trace of every committed fixture equal tests/golden/outputs/, written by
golden_outputs.py from the commit before the typed-manifest refactor (issue 11). One test per part
of the outputs (a fixture, the comparison, the applies, the demo), so that parallel workers share
them out; every golden file belongs to one part, so together they compare every file."""
from __future__ import annotations

from pathlib import Path

import pytest

from golden_outputs import PARTS, outputs, part_of, stored

GOLDEN = Path(__file__).resolve().parent / "outputs"


def test_every_golden_file_belongs_to_a_part():
    names = [p.name for p in GOLDEN.iterdir()]
    assert names and not [n for n in names if part_of(n) not in PARTS]
    assert {part_of(n) for n in names} == set(PARTS)  # and every part has golden files


@pytest.mark.parametrize("part", [pytest.param(p, marks=pytest.mark.long) if p in ("apply", "demo") else p for p in PARTS])
def test_outputs_equal_the_golden_files(tmp_path, part):
    got = stored(outputs([part]))
    want = {p.name: p.read_bytes() for p in GOLDEN.iterdir() if part_of(p.name) == part}
    assert sorted(got) == sorted(want)
    differ = sorted(n for n in want if got[n] != want[n])
    for n in differ:
        (tmp_path / n).write_bytes(got[n])  # diff tests/golden/outputs/NAME against these
    assert not differ, f"outputs differ from tests/golden/outputs/: {differ} (this run's are in {tmp_path})"
