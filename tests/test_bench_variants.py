"""bench/perturbation/variants.py builds designs the rewriter does not emit; the H200 measured them
(bench/RESULTS.md, sessions 9 to 11) and none was adopted. What each does to the SASS is checked here, on
real sm_90a builds, so that the reasons docs/perturbation.md gives for leaving them out stay true."""
from __future__ import annotations

import importlib.util
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


def _trip_loop(binary):
    """reduce_sumsq's strip-mined trip in a build's copy: the loop with the four 16-byte loads and
    the probes' timer reads."""
    insns = sass.function(sass.disassemble(binary), "reduce_sumsq__atrex")
    trip = [l for l in sass.loops(insns) if l.count("LDG") == 4 and "CS2R.32" in l.ops]
    assert len(trip) == 1, [l.ops for l in sass.loops(insns)]
    return trip[0]


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


def test_holding_across_the_whole_loop_raises_layernorm_registers(project):
    """Resident, the rewriter holds a recorder's slot in registers within each trip of a
    strip-mined loop: layernorm's copy keeps the clean kernel's 32 registers and its clean loops'
    loads in flight. Held across the whole stats loop instead (`held`; reduce_sumsq +4.16% against
    +3.95%, run 71) the copy takes 46 registers and its clean side keeps 6 loads in flight where
    the clean kernel keeps 4: the schedule of the copy that ran −14% against the clean kernel."""
    bins, regs = variants.build(project, "layernorm", ["spec-resident", "held-resident"])
    text = (project / "layernorm.held-resident.cu").read_text()
    assert text.count("__atrex_r0.hold();") == 1 and "{ __atrex_r0.hold();" not in text
    assert regs["spec-resident"] == regs["clean"] == 32 < regs["held-resident"]
    clean = sass.loops(_clean(sass.disassemble(bins["clean"])))
    for name, ok in (("spec-resident", True), ("held-resident", False)):
        clean_side, _ = sass.sides(_copy(sass.disassemble(bins[name])))
        missing, _ = sass.compare_loops(clean, [], (clean_side, []))
        assert (not missing) is ok, (name, missing)


@pytest.mark.parametrize("name", ["exit_none", "exit_header", "exit_copy"])
def test_exit_variants_leave_out_their_part_of_the_resident_exit(tmp_path, name):
    """The exit variants of run 76 each edit the recorder's exit once; what they leave out is gone
    from the edited runtime and nothing else is."""
    folder = variants.runtime_variant(tmp_path / name, variants.RUNTIME[name])
    text = (folder / "atrex_recorder.cuh").read_text()
    clean = (REPO / "runtime" / "atrex_recorder.cuh").read_text()
    gone = {"exit_none": "resident_close<Rs...>(__activemask()", "exit_header": "k += lanes) copy_out(",
            "exit_copy": "publish_owner(e, cta, tid);"}[name]
    assert gone in clean and gone not in text
    assert len(clean.splitlines()) - len(text.splitlines()) == (1 if name == "exit_none" else 0)


@pytest.mark.parametrize("name", ["exit_call", "exit_store", "exit_red", "exit_bulk", "exit_warm", "exit_sector"])
def test_exit_variants_that_return_early_make_only_their_one_write(tmp_path, name):
    """Runs 77-80's variants: the exit returns after finding the owners, having made only the one
    kind of global write the variant names (SASS of reduce_sumsq's copy, resident; the kernel's own
    float atomicAdd aside)."""
    import subprocess

    from atrex_inject import snapshot
    from atrex_inject.spec import staged_copy

    variants.run.workspace(tmp_path)
    spec = staged_copy(tmp_path / "examples" / "specs" / "reduce_sumsq.toml", None, 8)
    snapshot.apply(spec, root=tmp_path)
    folder = variants.runtime_variant(tmp_path / name, variants.RUNTIME[name])
    src = tmp_path / "examples" / "cuda" / "reduce_sumsq.cu"
    proc = subprocess.run([*variants.run.NVCC, f"-I{folder}", f"-I{src.parent}", "-cubin", "-o", tmp_path / "k.cubin", src],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    ops = [op for _, op, _ in sass.function(sass.disassemble(tmp_path / "k.cubin"), "reduce_sumsq__atrex")]
    writes = {o.split(".")[0] for o in ops if o.startswith(("STG", "REDG", "UBLKCP", "ATOMG")) and ".F32" not in o}
    assert writes == {"exit_call": set(), "exit_store": {"STG"}, "exit_red": {"REDG"}, "exit_bulk": {"UBLKCP"},
                      "exit_warm": {"STG"}, "exit_sector": {"STG"}}[name], (writes, ops)


def test_early_exit_moves_every_finish_after_the_strip_mined_loop(project):
    """`exit_early` (run 81): the copy's exits keep no `atrex::finish`, and one follows the first
    `after` probe behind the strip-mined loop (reduce_sumsq resident: its stream_done site)."""
    from atrex_inject import snapshot
    from atrex_inject.spec import staged_copy

    spec = staged_copy(project / "examples" / "specs" / "reduce_sumsq.toml", None, 8)
    m = snapshot.apply(spec).manifest
    text = (project / m.source.path).read_text()
    out = variants.early_exit(text)
    assert text.count("atrex::finish(__atrex_r0, __atrex_r1);") == 2 and out.count("atrex::finish(") == 1
    assert "__atrex_r0.rec(3u); atrex::finish(__atrex_r0, __atrex_r1);  // atrex: site stream_done" in out
    with pytest.raises(ValueError, match="no atrex::finish call"):
        variants.early_exit(out.replace("atrex::finish(__atrex_r0, __atrex_r1);", ""))


def test_norecord_keeps_the_recording_side_and_its_shared_memory(project):
    """`norecord` (run 82): the guard is false at run time only, so the copy keeps its recording side
    and the resident rings' static shared memory, and every CTA runs the clean side."""
    from atrex_inject import snapshot
    from atrex_inject.spec import staged_copy

    spec = staged_copy(project / "examples" / "specs" / "reduce_sumsq.toml", None, 8)
    m = snapshot.apply(spec).manifest
    text = (project / m.source.path).read_text()
    out = variants.no_recording_cta(text)
    assert out.count("gridDim.x == 0u") == 1 and "atrex::cta_selected(8u, 0u)" in out
    with pytest.raises(ValueError, match="no versioned body"):
        variants.no_recording_cta(out.replace("if (gridDim.x == 0u && (", "if (("))


def test_late_release_restores_the_trip_end_write_back(project):
    """`late` (run 83's reference): the trip's write-back after its begin probe, as the rewriter
    emits it, moved back to the trip's end, as session 10 wrote it."""
    from atrex_inject import snapshot
    from atrex_inject.spec import staged_copy

    spec = staged_copy(project / "examples" / "specs" / "reduce_sumsq.toml", None, 8)
    m = snapshot.apply(spec).manifest
    text = (project / m.source.path).read_text()
    assert "/* atrex: site iter_begin (id 1, loop-begin) */ __atrex_r0.release(1u);" in text
    out = variants.late_release(text)
    assert "release(1u)" not in out
    assert "__atrex_r0.rec_held(2u); /* atrex: site iter_end (id 2, loop-end) */ __atrex_r0.release(); }" in out
    with pytest.raises(ValueError, match="no trip that releases"):
        variants.late_release(out)


def test_session_15_trip_variants_build_as_measured(tmp_path):
    """Runs 107 and 113's variants of reduce_sumsq's resident copy: warm_asm prefetches (CCTL) in the
    trip loop and keeps the clean kernel's 32 registers; drain calls drain_behind<2> before each trip's
    begin probe and stores (STG) inside the trip loop. Both keep the loop's four loads ahead of the
    probes' stores."""
    variants.run.workspace(tmp_path)
    bins, regs = variants.build(tmp_path, "reduce_sumsq", ["warm_asm-resident", "drain-resident"])
    assert regs["warm_asm-resident"] == regs["clean"] == 32
    assert "__atrex_r0.drain_behind<2u>(); __atrex_r0.rec_held(1u);" in (
        tmp_path / "reduce_sumsq.drain-resident.cu").read_text()
    for name, op in (("warm_asm-resident", "CCTL"), ("drain-resident", "STG")):
        trip = _trip_loop(bins[name])
        assert any(o.startswith(op) for o in trip.ops) and trip.in_flight == 4, (name, trip)


def test_session_16_exit_variants_build_as_measured(tmp_path):
    """Runs 114 and 115's variants of reduce_sumsq's resident copy, both at the clean kernel's 32
    registers: exit_clock reads %clock four times in the exit call and nowhere else; warm_consts loads
    the exit's four constants (register-indexed, so ptxas cannot move them to their use at exit, as
    it does a fixed-address constant load) before the kernel's barrier."""
    variants.run.workspace(tmp_path)
    bins, regs = variants.build(tmp_path, "reduce_sumsq", ["exit_clock-resident", "warm_consts-resident"])
    assert regs["exit_clock-resident"] == regs["warm_consts-resident"] == regs["clean"] == 32
    clocked = sass.function(sass.disassemble(bins["exit_clock-resident"]), "reduce_sumsq__atrex")
    assert sum("SR_CLOCKLO" in text for _, _, text in clocked) == 4
    warm = sass.function(sass.disassemble(bins["warm_consts-resident"]), "reduce_sumsq__atrex")
    first_bar = next(i for i, (_, op, _) in enumerate(warm) if op.startswith("BAR"))
    early = [text for _, op, text in warm[:first_bar] if op == "LDC" and "c[0x3][R" in text]
    assert len(early) == 4, early


def test_exit_phases_reads_a_real_capture(project):
    """bench/perturbation/exit_phases.py on the committed H200 capture of reduce_sumsq with resident
    rings (run 109): its owner headers carry no phase clocks (zero), and each owner's time from its last
    event to its end time is what decode gives."""
    spec = importlib.util.spec_from_file_location("atrex_bench_exit_phases",
                                                  REPO / "bench" / "perturbation" / "exit_phases.py")
    exit_phases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(exit_phases)
    from atrex_inject.manifest import load

    fixture = REPO / "tests" / "fixtures" / "h200" / "reduce_sumsq_resident"
    p = exit_phases.phases(fixture / "reduce_sumsq-launch2.atrex", load(fixture / "manifest.json"))
    got = [(s["group"], s["warp"], s["owners"], s["reads"], s["total_ns"]) for s in exit_phases.summary(p)]
    assert got == [(0, "1-7", 462, 0, 480), (0, "0", 66, 0, 416), (1, "0", 66, 0, 768)]


def test_session_17_trip_variant_takes_the_loop_control_ahead_of_the_end_probe(tmp_path):
    """Runs 119-120's `trip` variant of reduce_sumsq's resident copy: the strip-mined loop's test is
    one `&` and is computed before the trip's end probe, so the trip's last timer read is followed
    only by the end event's store and the branch (3 instructions), where the rewriter's loop runs
    its increment and one of its tests there (10; the other test at the loop's top); the copy keeps
    32 registers and four loads in flight."""
    variants.run.workspace(tmp_path)
    bins, regs = variants.build(tmp_path, "reduce_sumsq", ["spec-resident", "trip-resident"])
    assert regs["trip-resident"] == regs["clean"] == 32
    assert "for (bool __atrex_more = (i < n4) & ((n4) - (i) > 3 * ((long)gridDim.x * kThreads)); __atrex_more; )" in (
        tmp_path / "reduce_sumsq.trip-resident.cu").read_text()
    after = {}
    for name in ("spec-resident", "trip-resident"):
        trip = _trip_loop(bins[name])
        assert trip.in_flight == 4, (name, trip)
        after[name] = len(trip.ops) - 1 - max(i for i, o in enumerate(trip.ops) if o == "CS2R.32")
    assert after["trip-resident"] == 3 < after["spec-resident"], after
    with pytest.raises(ValueError, match="no strip-mined loop"):
        variants.trip_order("for (int i = 0; i < n; ++i) {}")
