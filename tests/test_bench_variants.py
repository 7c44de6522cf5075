"""bench/perturbation/variants.py builds designs the rewriter does not emit; the H200 measured them
(bench/RESULTS.md, session 9) and none was adopted. What each does to the SASS is checked here, on
real sm_90a builds, so that the reasons docs/perturbation.md gives for leaving them out stay true."""
from __future__ import annotations

import importlib.util
import re
import shutil

import pytest

from atrex_inject import sass
from conftest import REPO

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")

# loaded from its file, not through sys.path: bench/perturbation/iket.py would shadow the iket package
_spec = importlib.util.spec_from_file_location("atrex_bench_variants", REPO / "bench" / "perturbation" / "variants.py")
variants = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(variants)


def _copy(funcs: dict) -> list:
    return next(v for k, v in funcs.items() if "__atrex" in k)


def _clean(funcs: dict) -> list:
    return next(v for k, v in funcs.items() if "__atrex" not in k)


def test_outlined_clean_body_keeps_the_schedule_but_spills_in_its_loop(project):
    """layernorm's copy bounded at the clean kernel's 32 registers with its clean body out of line:
    that function keeps every clean loop's loads in flight (ptxas schedules a function for the
    registers its kernel may use), but the call costs it the registers of its return address, so
    the normalize loop reloads a spilled pointer every trip: +3.6% with one recording CTA (run 66).
    check-sass counts spill loads and stores per trip, so it names that loop and no other. Inline,
    the same bound reschedules the clean side (the normalize loop with 6 loads in flight)."""
    bins, regs = variants.build(project, "layernorm", ["outlined"])
    assert regs["outlined"] == regs["clean"] == 32
    clean, copy = sass.disassemble(bins["clean"]), sass.disassemble(bins["outlined"])
    clean_side, _ = sass.sides(_copy(copy))
    missing, _ = sass.compare_loops(sass.loops(_clean(clean)), [], (clean_side, []))
    assert [(m["loop"]["LDG"], m["loop"]["STG"], m["loop"]["LDL"], m["in_flight"]) for m in missing] == [(12, 4, 0, 3)]
    spilled = [l for l in clean_side if l.count("LDG") == 12 and l.count("LDL")]
    assert [(l.count("LDL"), l.in_flight) for l in spilled] == [(1, 3)]


@pytest.mark.parametrize("state", ["local", "warpid", "warpid_hybrid"])
def test_state_outside_registers_keeps_the_clean_loop_in_recording_ctas(project, state):
    """reduce_sumsq, resident rings, the entry site alone: with the recorder's state in registers,
    live across the clean loop, the recording side keeps 2 of its 4 loads in flight (+14% on the
    H200, runs 66 and 69); in local memory (`local`, +2.3%, run 66) or in a shared table indexed by
    %warpid (`warpid`, +1.1%, run 69), read at each probe, it keeps 4, at the clean kernel's
    registers. Inside the strip-mined loop the same reads cost the full spec +8.4% and +3.4%;
    `warpid_hybrid` keeps the pointer in registers there (not measured yet)."""
    variant = f"{state}-resident@entry"
    bins, regs = variants.build(project, "reduce_sumsq", ["spec-resident@entry", variant])

    def recording_flight(b):
        _, recording = sass.sides(_copy(sass.disassemble(b)))
        return sorted(l.in_flight for l in recording if l.count("LDG") == 4)

    assert recording_flight(bins["spec-resident@entry"]) == [2]
    assert recording_flight(bins[variant]) == [4]
    assert regs[variant] == regs["clean"]


def test_deferred_end_keeps_the_event_order(project):
    """`defer` stores the end of group g after group g+1's loads and before its begin event, and
    the last group's after the loop: the events keep their order, only the store moves."""
    from atrex_inject import snapshot

    spec = project / "examples" / "specs" / "reduce_sumsq.toml"
    snapshot.apply(spec, root=project)
    text = (project / "examples" / "cuda" / "reduce_sumsq.cu").read_text()
    out = variants.deferred_end(text)
    loop = out[out.index("uint32_t __atrex_tend"):out.index("/* atrex: the last iterations, clean */")]
    store = "if (__atrex_pend) __atrex_r0.rec_at(2u, __atrex_tend);"
    assert loop.count(store) == 2
    assert loop.index(store) < loop.index("__atrex_r0.rec(1u);") < loop.index("__atrex_tend = atrex::globaltimer_lo();")
    assert loop.rindex(store) > loop.index("__atrex_pend = true; }")
    with pytest.raises(ValueError, match="no strip-mined loop"):
        variants.deferred_end(text.replace("loop-end", "loop-exit"))


def test_hybrid_holds_the_slot_pointer_in_the_strip_mined_loop_only(project):
    """`hybrid` (runs 67-68): the entry's and the strip-mined loop's probes use the slot pointer in
    registers, loaded before the loop; every other probe reads it from local memory."""
    from atrex_inject import snapshot
    from atrex_inject.spec import staged_copy

    spec = staged_copy(project / "examples" / "specs" / "reduce_sumsq.toml", None, 8)
    snapshot.apply(spec, root=project)
    out = variants.held_probes((project / "examples" / "cuda" / "reduce_sumsq.cu").read_text())
    held = sorted(int(x) for x in re.findall(r"\.rec_held\((\d+)u\)", out))
    assert held == [0, 1, 2]  # start (entry), iter_begin, iter_end
    assert out.count("__atrex_r0.hold();  // atrex: strip-mined by") == 1
    assert out.index("__atrex_r0.hold();") < out.index("__atrex_r0.rec_held(1u);")
    assert ".rec(3u);" in out and ".rec(6u);" in out  # stream_done, finish: parked
