"""bench/probe_cost/run.py: what each recorder's probe adds to a loop's SASS an event, read at build
time by diffing the instrumented loop against the clean one (real nvcc and cuobjdump, no GPU); the
IKeT side (bench/probe_cost/iket_loops.py) has the same loops, and its event is read the same way."""
from __future__ import annotations

import importlib.util
import json
import shutil

import pytest

from atrex_inject import sass
from conftest import REPO

_spec = importlib.util.spec_from_file_location("atrex_probe_cost", REPO / "bench" / "probe_cost" / "run.py")
probe_cost = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe_cost)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_the_sass_diff_finds_the_global_probe_in_the_fma_loop(tmp_path):
    """The FMA loop with its site at loop-begin on the global path: the loop keeps its 128 FFMA an
    iteration and the probe adds a %globaltimer read (CS2R) and a global store (STG) an event, with
    the slot arithmetic around them. Resident rings of 2048 events a warp do not fit a CTA: apply
    refuses them, and the plan says why instead of a build."""
    probe_cost.build(tmp_path, ["fma"], ["loop-begin"], ["global", "resident"])
    plan = json.loads((tmp_path / "plan.json").read_text())
    s = plan["fma.loop-begin.global"]["sass"]
    assert s["added"] >= 3 and s["kinds"]["CS2R"] == 1 and s["kinds"]["STG"] == 1, s
    assert "FFMA" not in s["kinds"] and s["added"] == pytest.approx(sum(s["kinds"].values()), abs=0.05), s
    assert "1 iteration a trip" in s["loop"], s
    resident = plan["fma.loop-begin.resident"]
    assert "rings need" in resident["refused"] and "binary" not in resident


def _loop(start: int, body: list[str]) -> list[sass.Insn]:
    return [(start + 16 * k, op, op) for k, op in enumerate(body)]


def test_a_strip_mined_trip_spreads_its_copy_out_over_its_iterations():
    """SYNTHETIC SASS: the clean loop unrolled twice (2 x 2 FFMA an iteration) against a staged
    trip of 4 iterations: an inner loop of one iteration with a timer read and a shared store,
    inside a trip loop whose own 4 instructions (the copy-out) are spread over its 4 iterations,
    a quarter of each an iteration. The inner loop also lost the unrolling: one branch and one
    counter update an iteration against half of each."""
    clean = _loop(0x100, ["FFMA", "FFMA", "FFMA", "FFMA", "IADD3", "BRA>256"])
    inner = _loop(0x210, ["CS2R.32", "STS.64", "FFMA", "FFMA", "IADD3", "BRA>528"])
    copy = [*_loop(0x200, ["MOV"]), *inner, *_loop(0x270, ["LDS.64", "STG.E.64", "BRA>512"])]
    loops = [sass.Loop(0x100, 0x150, tuple(o for _, o, _ in clean))]
    mix, where = probe_cost.iteration_mix(loops, ("FFMA", 2), 0)
    assert mix == {"FFMA": 2, "IADD3": 0.5, "BRA": 0.5} and "2 iterations a trip" in where
    nest = [sass.Loop(0x210, 0x260, tuple(o for _, o, _ in inner)),
            sass.Loop(0x200, 0x290, tuple(o for _, o, _ in copy))]
    mix, where = probe_cost.iteration_mix(nest, ("FFMA", 2), 4)
    assert mix == {"FFMA": 2, "CS2R": 1, "STS": 1, "IADD3": 1, "BRA": 1.25, "MOV": 0.25, "LDS": 0.25, "STG": 0.25}
    assert "a trip of 4 iterations around 0x0210-0x0260" in where


def test_each_round_is_set_against_its_own_clean_run():
    """SYNTHETIC samples of three rounds, two trip counts a process: each column's round is its
    time at the row's trip count over the same round's clean time (IKeT's over the same round's
    clean CuTe DSL process), in round order; a column whose rounds do not pair with the clean
    kernel's (a round missing) is left out rather than paired with another round."""
    def proc(ms1024: float, ms2048: float) -> dict:
        return {"runs": [{"iterations": 1024, "loop_ms": ms1024}, {"iterations": 2048, "loop_ms": ms2048}]}

    def one(ms: float) -> dict:
        return {"runs": [{"iterations": 2048, "loop_ms": ms}]}

    samples = {"mma.clean": [proc(1.0, 2.0), proc(1.1, 2.2), proc(1.0, 1.9)],
               "mma.loop-end.default": [proc(9.0, 2.1), proc(9.0, 2.2), proc(9.0, 1.995)],
               "mma.loop-end.global": [proc(9.0, 2.4), proc(9.0, 2.4)],
               "mma.iket_none": [one(4.0), one(4.4), one(4.0)], "mma.iket_bottom": [one(4.2), one(4.4), one(4.1)]}
    row = {"loop": "mma", "site": "loop-end", "iterations": 2048, "default": 0.05, "global": 0.1,
           "iket_mark": "bottom"}
    got = probe_cost.by_round(samples, row)
    assert list(got) == ["default", "iket"]
    assert got["default"] == pytest.approx([0.05, 0.0, 0.05]) and got["iket"] == pytest.approx([0.05, 0.0, 0.025])


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_iket_s_event_is_read_from_the_same_loops_in_cute_dsl(tmp_path):
    """The IKeT side, compiled on the CPU (CuTe DSL for sm_90a, fake tensors) as run-iket compiles it:
    each shape's loop in CuTe DSL does per iteration what nvcc's does, give or take a few integer
    instructions (the dependent FMA chain exactly: its z a kernel argument in both), and IKeT's mark
    adds a timer read and a shared store to it; without run-iket's compiler option the mark is
    stripped and adds nothing."""
    pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl is not installed")
    if not probe_cost.iket_available():
        pytest.skip("IKeT is not installed")
    probe_cost.build(tmp_path, ["fma_dep"], ["loop-begin"], ["staged"], iket=True)
    got = json.loads((tmp_path / "plan.json").read_text())["iket"]["sass"]
    assert list(got) == list(probe_cost.SHAPES)
    for shape, at in got.items():
        assert list(at) == ["top", "bottom"], (shape, at)
        for s in at.values():
            assert s["kinds"]["CS2R"] == 1 and s["kinds"]["STS"] == 1, (shape, s)
            assert abs(s["cute_clean"] - s["cuda_clean"]) <= 4, (shape, s)
    assert got["fma_dep"]["top"]["cute_clean"] == got["fma_dep"]["top"]["cuda_clean"] == 131
    stripped = probe_cost._cute_cubins(tmp_path / "stripped", False)
    mix = {m: probe_cost.iteration_mix(sass.loops(stripped["fma_dep", m]), ("FFMA", 128), 0)[0]
           for m in ("none", "top", "bottom")}
    assert mix["top"] == mix["bottom"] == mix["none"]


def test_every_round_of_an_instrumented_build_records(tmp_path):
    """An instrumented build writes a capture in every round: without ATREX_TIMELINE_OUT its probes
    are off and it runs the clean kernel, so a round without a capture folder timed the clean kernel
    under the recorder's name (the median of two rounds, one recording and one not, halved every
    overhead). The first round's capture is the one validated; the clean binary writes none."""
    work, tmp = tmp_path / "work", tmp_path / "tmp"
    got = [probe_cost.capture_folder(work, "fma.loop-end.staged", "fma.loop-end.staged", r, tmp) for r in range(3)]
    assert got == [work / "cap_fma.loop-end.staged", tmp / "cap_fma.loop-end.staged_1", tmp / "cap_fma.loop-end.staged_2"]
    assert all(probe_cost.capture_folder(work, "fma.clean", "clean", r, tmp) is None for r in range(3))
