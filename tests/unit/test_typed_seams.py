"""Typed records at the seam between the recorder choice and the SASS comparison: the comparison
(sassrecord.Comparison), the choice and its evidence (choicerecord.Choice, Evidence) and the CUDA
rewriter's copy (backend.CopyFacts) are read by attribute. Their string keys appear only in the
modules that convert them, so a renamed field breaks at its reader instead of reading as absent.
Checked on the source text (grep), and on the round trip of what the conversions write."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from atrex_inject.choicerecord import Choice, Evidence, mode_of_record
from atrex_inject.plan import BufferPath, RecorderMode
from atrex_inject.sassrecord import Figures, Occupancy

PACKAGE = Path(__file__).resolve().parents[2] / "atrex_inject"
# the modules that own a conversion: what they read and write by key is theirs
OWNERS = {"sassrecord.py", "choicerecord.py", "backend.py"}
# keys only sass.compare's result (and the evidence it feeds) has: nowhere else by key
COMPARISON_KEYS = ("off_identical", "local_accesses", "copy_clean_side", "threads_per_block", "ctas_per_sm",
                   "warps_per_sm_by_registers", "clean_loops", "recording_fewer_in_flight",
                   "recording_more_in_flight", "shared_added", "copy_in_flight", "clean_loads")
# every key of the comparison, the choice and the evidence: none at the seam itself
RECORD_KEYS = COMPARISON_KEYS + ("registers", "shared", "spills", "missing", "versioned", "clone", "clean", "off",
                                 "copy", "in_flight", "recording", "trip", "loop", "loads", "verdict", "problems",
                                 "doubts", "evidence", "recorder", "how", "why", "notes", "max_registers", "held",
                                 "not_warp_uniform", "barrier_loop", "sized_at_launch", "perturbation", "ok", "hint", "kernel")
# the seam: the modules (or, in cli.py, the functions) that read these records
SEAM = {"choice.py": None, "sasscheck.py": None, "cli.py": ("check_sass", "_render_recorder")}


def _by_key(keys) -> re.Pattern:
    """`x["key"]`, `x['key']`, `x.get("key"` of one of `keys`."""
    words = "|".join(map(re.escape, keys))
    return re.compile(rf"""(?:\[|\bget\(|\bpop\()\s*(["'])({words})\1""")


def _text(path: Path, functions) -> str:
    """The module's text, or only those of its functions (nested ones included)."""
    text = path.read_text()
    if functions is None:
        return text
    found = [ast.get_source_segment(text, n) for n in ast.walk(ast.parse(text))
             if isinstance(n, ast.FunctionDef) and n.name in functions]
    assert len(found) == len(functions), f"{path.name}: {functions} not all found"
    return "\n".join(found)


def _hits(text: str, pattern: re.Pattern) -> list[str]:
    return [line.strip() for line in text.splitlines() if pattern.search(line.split("#")[0])]


def test_backend_data_is_read_by_key_only_where_it_is_converted():
    """Rewrite.backend_data is the rewriter's manifest JSON: Rewrite.copy types it for the choice and
    check-sass, manifest.perturbation_of for the manifest (through snapshot), nothing else by key."""
    pattern = re.compile(r"backend_data\s*(?:\[|\.get\()")
    found = {p.name: h for p in PACKAGE.rglob("*.py") if p.name not in OWNERS and (h := _hits(p.read_text(), pattern))}
    assert found == {}, f"backend_data read by key outside {sorted(OWNERS)}: {found}"


def test_the_comparisons_keys_are_read_only_where_it_is_converted():
    pattern = _by_key(COMPARISON_KEYS)
    found = {p.relative_to(PACKAGE).as_posix(): h for p in PACKAGE.rglob("*.py")
             if p.name not in OWNERS and (h := _hits(p.read_text(), pattern))}
    assert found == {}, f"the SASS comparison's keys read outside {sorted(OWNERS)}: {found}"


def test_the_seam_reads_attributes():
    pattern = _by_key(RECORD_KEYS)
    found = {name: h for name, functions in SEAM.items() if (h := _hits(_text(PACKAGE / name, functions), pattern))}
    assert found == {}, f"record keys read at the seam (use the records' attributes): {found}"


def test_the_grep_finds_a_planted_key():
    """What the checks above look for, found where it is planted."""
    planted = 'regs = r["registers"]; ctas = r.get("ctas_per_sm"); c = rw.backend_data["perturbation"]["clone"]'
    keys = [k for _, k in _by_key(RECORD_KEYS).findall(planted)]
    assert keys == ["registers", "ctas_per_sm", "perturbation", "clone"]
    assert _hits(planted, _by_key(COMPARISON_KEYS)) and _hits(planted, re.compile(r"backend_data\s*(?:\[|\.get\()"))
    assert not _hits("x = {'registers': 1}  # r['registers']", _by_key(RECORD_KEYS))


MODE = RecorderMode(BufferPath.RESIDENT, 8, 1024, 8, max_registers=32)


def _evidence(**kw) -> Evidence:
    return Evidence(**{"mode": MODE, "registers": Figures(32, 32, 40), "ctas_per_sm": Occupancy(2, 2),
                       "shared_added": 4096, "spills": Figures(0, 0, 0), "problems": (), "doubts": ("a loop",), **kw})


def test_a_choice_reads_back_as_it_was_written():
    ch = Choice(MODE, "chosen", "kept", (_evidence(),), notes=("no staged rings",), verdict="unsure")
    obj = ch.to_json()
    assert list(obj) == ["recorder", "max_registers", "how", "why", "verdict", "evidence", "notes"]
    assert obj["evidence"][0]["verdict"] == "unsure" and obj["evidence"][0]["registers"] == {"clean": 32, "off": 32,
                                                                                              "copy": 40}
    capture = RecorderMode(BufferPath.RESIDENT, 8, 1024, 8)  # what a manifest's capture settings say
    again = Choice.from_json(obj, mode_of_record(obj, capture))
    assert again == ch and again.to_json() == obj


def test_evidence_of_an_older_tool_writes_back_as_it_was():
    """Evidence written before verdicts and doubts existed: read, judged by its problems, written
    back without them (an older manifest round-trips byte for byte)."""
    old = {k: v for k, v in _evidence(problems=("fewer CTAs",), doubts=()).to_json().items()
           if k not in ("verdict", "doubts")}
    e = Evidence.from_json(old)
    assert e.verdict == "another kernel" and e.to_json() == old


@pytest.mark.parametrize("bad", [
    {"registers": {"clean": 32, "off": 32, "copy": 40}}, {"shared_added": "4096"}, {"problems": ["a list"]},
    {"ctas_per_sm": {"clean": 2, "copy": 2}}])
def test_evidence_checks_itself(bad):
    with pytest.raises(ValueError):
        _evidence(**bad)
    with pytest.raises(ValueError, match="is not a count"):
        Figures(32, True, 40)


@pytest.mark.parametrize("how,verdict", [("guessed", ""), ("chosen", "fine")])
def test_a_choice_checks_itself(how, verdict):
    with pytest.raises(ValueError):
        Choice(MODE, how, "why", verdict=verdict)
