"""Cycle-resolution intervals (docs/summary.md, "Resolution"): the SM clock's 32-bit reads unwrapped,
its rate measured in the launch itself, every interval timed by cycles where one owner's clock
times both its ends (else by the global timer, saying why), and the clock_consistency check.

Ground truth: tests/sources/clock_phases.cu, whose warps spin for 0, 40, 200 and 2000 cycles on
%clock64 and for 5000 ns on %globaltimer between sites, each end site storing what its spin measured
itself as the payload. scripts/gpu-clock.sh captures it on an H200 with `clock = true`, on the global
path (tests/fixtures/h200/clock_phases/) and with resident rings (clock_phases_resident/), and the bf16
GEMM example with `clock = true` (gemm_mma_clock/: a real kernel's clock);
scripts/clock_fixtures.py commits them (PROVENANCE.md). Until then the tests that read them skip.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from atrex_inject import sass
from atrex_inject.decode import decode_file
from atrex_inject.intervals import durations, pairs
from atrex_inject.manifest import load as load_manifest
from atrex_inject.smclock import TOLERANCE, agrees, bound_ns, steps, unwrap
from atrex_inject.spec import with_recorder
from atrex_inject.validate import validate_capture
from atrex_inject.linemap import without_directives
from conftest import cli, nvcc_compile
from pftrace import by_track, read
from test_validate import Synthetic, failing

FIX = Path(__file__).parent / "fixtures" / "h200"
GROUND_TRUTH = ("clock_phases", "clock_phases_resident")
CLOCK_FIXTURES = (*GROUND_TRUTH, "gemm_mma_clock")
PHASES = {"spun_0 -> spun_40": 40, "spun_40 -> spun_200": 200, "spun_200 -> spun_2000": 2000}  # cycles
NS_PHASE, NS_PROGRAMMED = "spun_2000 -> spun_5000ns", 5000
# The recorder's own instructions between a phase's two %clock reads (its end probe's timer read
# and address arithmetic before the clock read, its start probe's store, which the spin's first
# clock read waits on) are the same for every phase of one shape; where they land relative to the
# issue slots, and when the store releases its registers, moves by a few cycles: on the H200 all but
# a handful of 7920 warm instances per phase lay within 8 cycles of the median, none beyond 11.
FEW_CYCLES = 12
# The spin reads the clock once per trip of its loop (six dependent instructions, about 34 cycles
# by the SASS' stall counts on sm_90a), so it stops less than one trip past its length.
SPIN_TRIP = 64
# An event reads the timer, then the clock a few instructions later (the resident path: after its
# ring lookup); how far apart varies by a few cycles from one event to the next.
READ_SKEW_NS = 2


def _ground_truth_project(tmp_path: Path, resident: bool) -> tuple[Path, Path]:
    """tests/sources/clock_phases.* in a project of their own: (the spec gpu-clock.sh applies for
    that path, the source)."""
    (tmp_path / ".git").mkdir()
    src = tmp_path / "tests" / "sources"
    src.mkdir(parents=True)
    for f in ("clock_phases.cu", "clock_phases.toml"):
        (src / f).write_bytes((Path(__file__).parent / "sources" / f).read_bytes())
    spec = src / "clock_phases.toml"
    return (with_recorder(spec, "resident", 4) if resident else spec), src / "clock_phases.cu"


def _missing(name: str) -> str:
    return (f"no real H200 capture tests/fixtures/h200/{name}/ yet: run `bash scripts/gpu-clock.sh` on the GPU "
            "host, then `python3 scripts/clock_fixtures.py clock.tar.gz LABEL` here")


def _fixture(name: str):
    return pytest.param(name, marks=pytest.mark.skipif(not (FIX / name / "manifest.json").exists(),
                                                       reason=_missing(name)))


def _launch(name: str):
    m = load_manifest(FIX / name / "manifest.json")
    return decode_file(next((FIX / name).glob("*.atrex")), m), m


def _phase(launch, m, name: str) -> tuple[dict, object, np.ndarray, np.ndarray]:
    """An interval's instances, their durations, the payload of each end (what the spin measured)
    and whether each is warm: past its owner's first round. The fixed cost and the spins are exact
    from a warp's second round on; in its first, a warp may be the first to run these instructions
    on its SM sub-partition and wait on the instruction cache between a probe's clock read and its
    spin's (the warmup launches ran the same code, but not necessarily there, or since it was
    evicted)."""
    iv = next(i for i in m.intervals if i.name == name)
    p = pairs(launch, iv.start_id, iv.end_id)
    warm = launch.events["seq"][p["i0"]] >= len(m.sites)  # each round records every site once
    return p, durations(launch, p), launch.events["payload"][p["i1"]].astype(np.int64), warm


def test_unwrap_and_agreement():
    """A read past the counter's 2^32 wrap continues the owner's count from clk0; a step agrees with
    the timer when its cycles at the rate lie within bound_ns (2 ticks + 1%) of its ns, and never
    when they run backwards."""
    clk0 = np.array([2**32 - 10, 5], dtype=np.uint32)
    got = unwrap(np.array([5, 7], dtype=np.uint32), clk0)
    assert got.tolist() == [2**32 - 10 + 15, 7]
    tick, rate = 32, 2.0
    edge = bound_ns(1000, tick)
    assert agrees(np.array([2000, int(2 * (1000 + edge)), int(2 * (1000 + edge)) + 2, -2]),
                  np.array([1000, 1000, 1000, 0]), rate, tick).tolist() == [True, True, False, False]


@pytest.mark.parametrize("name", ["gemm_mma", "reduce_sumsq_resident", "reduce_sumsq_packed"])
def test_captures_without_the_clock_keep_the_global_timer(name):
    """8- and 4-byte events carry no %clock: every interval is timed by the global timer, as before,
    and the summary says so; the clock check has nothing to check."""
    launch, m = _launch(name)
    assert "clock" not in launch.meta
    for iv in m.intervals:
        p = pairs(launch, iv.start_id, iv.end_id)
        d = durations(launch, p)
        assert d.resolution == "globaltimer" and d.cycles is None and d.rate_ghz is None
        assert d.ns is p["dur"]  # the timer's ns, untouched
    code, out = cli("summary", FIX / name, "--json")
    (s,) = json.loads(out)["launches"]
    assert code == 0 and s["clock"] is None
    for r in s["intervals"]:
        assert r["resolution"] == "globaltimer" and r["cycles"] is None
        assert "records no %clock" in r["resolution_note"]
    code, out = cli("summary", FIX / name)
    assert "no %clock recorded: intervals are timed by the global timer" in out
    rows = out.splitlines()[2:2 + len(m.intervals)]  # cycles "-", resolution "timer"
    assert all(re.search(r" - +timer( |$)", row) for row in rows), rows
    check = next(c for c in validate_capture(FIX / name, m)["checks"] if c["name"] == "clock_consistency")
    assert check["ok"] and check["count"] == 0


@pytest.mark.parametrize("name", [_fixture(n) for n in GROUND_TRUTH])
def test_ground_truth_is_valid_and_timed_by_cycles(name):
    """The ground truth validates (clock_consistency included), and `summary --json` gives every
    interval in cycles and ns with the rate they were converted at."""
    code, out = cli("validate", FIX / name, "--json")
    assert code == 0 and json.loads(out)["verdict"] == "valid", out
    code, out = cli("summary", FIX / name, "--json")
    (s,) = json.loads(out)["launches"]
    clock = s["clock"]
    assert 1.0 < clock["rate_ghz"] < 2.1 and clock["owners_outside"] == 0
    assert clock["uncertainty_ghz"] < 0.005 * clock["rate_ghz"]
    assert clock["sms"] == len(np.unique(_launch(name)[0].owners["smid"]))
    for r in s["intervals"]:
        assert r["resolution"] == "cycles" and r["resolution_note"] is None, r["name"]
        assert r["cycles"]["count"] == r["count"]
        assert r["median"] == pytest.approx(r["cycles"]["median"] / clock["rate_ghz"], rel=1e-12)
    code, text = cli("summary", FIX / name)
    assert f"SM clock {clock['rate_ghz']:.4f} GHz" in text


@pytest.mark.parametrize("name", [_fixture(n) for n in GROUND_TRUTH])
def test_cycle_intervals_give_the_programmed_phases(name):
    """Each cycle-mode interval is its spin plus the recorder's fixed cost to within FEW_CYCLES,
    where the spin is what the kernel measured itself (the payload), at least its programmed length
    and less than one trip of its loop (SPIN_TRIP) past it: every instance past its warp's first
    round (_phase) comes out within a few cycles of its programmed length once the probe's own cost
    is taken off (the first rounds: no less than it)."""
    launch, m = _launch(name)
    for phase, n in PHASES.items():
        p, d, spun, warm = _phase(launch, m, phase)
        assert d.resolution == "cycles" and p["dur"].size == launch.owners["claims"].size * 16
        assert (spun >= n).all() and (spun[warm] < n + SPIN_TRIP).all(), phase
        cost = d.cycles - spun  # the recorder's instructions between the two clock reads
        fixed = int(np.median(cost[warm]))
        assert 0 < fixed < 200, (phase, fixed)
        assert np.abs(cost[warm] - fixed).max() <= FEW_CYCLES, (phase, fixed, cost[warm].min(), cost[warm].max())
        assert (cost >= fixed - FEW_CYCLES).all()
        assert (np.abs(d.cycles[warm] - fixed - n) < SPIN_TRIP + FEW_CYCLES).all()
    # the 0-cycle spin: a phase's cost beyond its spin (its start is the loop-begin probe's)
    p, d, spun, warm = _phase(launch, m, "round -> spun_0")
    assert (spun[warm] < SPIN_TRIP).all() and np.ptp((d.cycles - spun)[warm]) <= 2 * FEW_CYCLES


@pytest.mark.parametrize("name", [_fixture(n) for n in GROUND_TRUTH])
def test_ns_at_the_measured_clock_are_within_one_percent(name):
    """The ns of a cycle-mode interval are its cycles at the launch's measured rate. Against an
    independent clock: the 5000 ns spin on %globaltimer, less the recorder's cost (the 2000-cycle
    phase's: the same probes), comes out within 1% of what the spin read on the timer itself (at
    least 5000 ns, up to a tick and a trip past it), and within one tick of it, give or take the
    recorder's few cycles; the 2000-cycle spin within 1% of its own measured length (warm
    instances: _phase)."""
    launch, m = _launch(name)
    rate = launch.meta["clock"]["rate_ghz"]
    tick = launch.meta["timer_resolution_ns"]
    p, d, spun, warm = _phase(launch, m, "spun_200 -> spun_2000")
    assert np.array_equal(d.ns, d.cycles / rate)
    fixed = np.median((d.cycles - spun)[warm])
    assert (np.abs((d.cycles - fixed) / rate - spun / rate) <= 0.01 * spun / rate)[warm].all()
    p, d, spun_ns, warm = _phase(launch, m, NS_PHASE)
    ns, read = (d.ns - fixed / rate)[warm], spun_ns[warm]
    assert (read >= NS_PROGRAMMED).all() and (read < NS_PROGRAMMED + 2 * tick).all()
    assert (np.abs(ns - read) <= 0.01 * read).all(), (ns.min(), ns.max())
    assert (np.abs(ns - read) < tick + FEW_CYCLES / rate).all(), (np.abs(ns - read).max(), tick)


@pytest.mark.parametrize("name", [_fixture(n) for n in GROUND_TRUTH])
def test_global_timer_figures_are_off_by_up_to_a_tick(name):
    """The same instances by the global timer alone: multiples of its tick, each within one tick of
    the cycle-mode ns (the timer truncates both ends; READ_SKEW_NS more for the probe reading the
    clock a few instructions after the timer, at each end; and the owners' rates' spread about the
    launch's, on the interval's length), so the 40-cycle phase, one length within a few cycles, reads
    as two or three neighbouring multiples of the tick."""
    launch, m = _launch(name)
    tick, clock = launch.meta["timer_resolution_ns"], launch.meta["clock"]
    spread = (clock["owner_rate_ghz"]["max"] - clock["owner_rate_ghz"]["min"]) / clock["rate_ghz"]
    assert tick == 32
    for phase in (*PHASES, NS_PHASE):
        p, d, _, _ = _phase(launch, m, phase)
        assert (p["dur"] % tick == 0).all()
        off = np.abs(p["dur"] - d.ns)
        assert (off < tick + 2 * READ_SKEW_NS + spread * d.ns).all(), (phase, off.max())
    p, d, _, warm = _phase(launch, m, "spun_0 -> spun_40")
    assert np.ptp(d.ns[warm]) < tick / 4  # by cycles: one length, within a few cycles
    assert len(np.unique(p["dur"][warm])) >= 2 and np.ptp(p["dur"][warm]) <= 2 * tick  # by the timer: ±1 tick


@pytest.mark.parametrize("name", [_fixture(n) for n in GROUND_TRUTH])
def test_the_bound_leaves_room_over_the_h200_spread(name):
    """On the ground truth's real captures (a steady clock) the owners' rates lie within a quarter of
    the tolerance of the launch's, the SMs' too, and no step strays past three quarters of the bound
    (docs/validate.md states what the H200 showed)."""
    launch, m = _launch(name)
    clock = launch.meta["clock"]
    rate, tick = clock["rate_ghz"], launch.meta["timer_resolution_ns"]
    for spread in (clock["owner_rate_ghz"], clock["sm_rate_ghz"]):
        assert spread["max"] - spread["min"] < TOLERANCE / 4 * rate, spread
    ev, o = launch.events, launch.owners
    dc, dt, _ = steps(ev["owner"], ev["t_ns"], ev["cycles"], o["t0"], o["clk0"])
    assert (np.abs(dc / rate - dt) <= 0.75 * bound_ns(dt, tick)).all()


@pytest.mark.parametrize("name", [_fixture("gemm_mma_clock")])
def test_a_real_clock_that_changes_speed_is_rejected(name):
    """The bf16 GEMM captured with `clock = true` on the H200 (real, unedited): under its tensor-core
    load the SM clock ran at different speeds within the launch (the owners' whole-span rates differ
    by more than the 1% tolerance), so cycles are not one time base: clock_consistency, and nothing
    else, rejects it, naming the owners; summary times the instances whose cycles disagree with the
    timer by the global timer and says how many."""
    launch, m = _launch(name)
    rates = launch.meta["clock"]["owner_rate_ghz"]
    assert rates["max"] - rates["min"] > TOLERANCE * launch.meta["clock"]["rate_ghz"]
    r = validate_capture(FIX / name, m)
    assert r["verdict"] == "rejected" and set(failing(r)) == {"clock_consistency"}
    details = next(c for c in r["checks"] if c["name"] == "clock_consistency")["details"]
    assert any("owners whose clock over their whole span disagrees with the global timer" in d for d in details)
    code, out = cli("summary", FIX / name, "--json")
    rows = json.loads(out)["launches"][0]["intervals"]
    mixed = [r for r in rows if r["resolution"] == "mixed"]
    assert code == 0 and mixed and all(re.match(r"\d+ of \d+ instances by the global timer", r["resolution_note"])
                                       for r in mixed)


@pytest.mark.parametrize("name", [_fixture("clock_phases")])
def test_backward_clock_within_an_owner_is_rejected_by_name(name, tmp_path):
    """SYNTHETIC copy of the real capture: one event's %clock set 5000 cycles back. Its owner's clock
    runs backwards into it and jumps forward out of it: clock_consistency fails, twice, naming the
    owner and the event; nothing else fails."""
    s = Synthetic(tmp_path, name)
    owner, seq = 7, 30
    s.events[owner, seq, 1] -= 5000
    r = s.save().validate()
    assert r["verdict"] == "rejected" and failing(r) == {"clock_consistency": 2}
    details = next(c for c in r["checks"] if c["name"] == "clock_consistency")["details"]
    assert "1 events whose %clock runs backwards" in details[0] and f"owner {owner} " in details[0]
    assert f"event {seq} " in details[0]
    assert "1 steps whose cycles at the launch's rate disagree" in details[1] and f"event {seq + 1} " in details[1]
    assert f"owner {owner} " in details[1]


@pytest.mark.parametrize("name", [_fixture("clock_phases")])
def test_clock_jump_is_rejected_by_name(name, tmp_path):
    """SYNTHETIC copy: from one event on, an owner's clock reads 100000 cycles later (its CTA moved to
    an SM whose counter runs ahead): that step and the owner's span disagree with the timer."""
    s = Synthetic(tmp_path, name)
    owner, seq = 3, 40
    s.events[owner, seq:, 1] += 100_000
    r = s.save().validate()
    assert failing(r) == {"clock_consistency": 2}
    details = next(c for c in r["checks"] if c["name"] == "clock_consistency")["details"]
    assert f"owner {owner} " in details[0] and f"event {seq} " in details[0] and "disagree" in details[0]
    assert "1 owners whose clock over their whole span disagrees" in details[1]
    # the summary times the one instance across the jump by the global timer, and says so
    code, out = cli("summary", s.dir, "--json")
    mixed = [r for r in json.loads(out)["launches"][0]["intervals"] if r["resolution"] == "mixed"]
    assert len(mixed) == 1 and mixed[0]["resolution_note"].startswith("1 of ")
    assert "instances by the global timer: their cycles disagree with the global timer" in mixed[0]["resolution_note"]


@pytest.mark.parametrize("name", [_fixture("clock_phases")])
def test_trace_picture_and_report_show_the_cycle_durations(name, tmp_path):
    """The Perfetto slices start at their start event's time and last the calibrated ns (to the ns);
    the picture's panels and the report's table show the same medians in cycles as the summary."""
    launch, m = _launch(name)
    code, out = cli("summary", FIX / name, "--json")
    summary = {r["name"]: r for r in json.loads(out)["launches"][0]["intervals"]}
    code, out = cli("export", FIX / name, "--perfetto", tmp_path / "t.pftrace", "--png", tmp_path / "t.png", "--json")
    assert code == 0, out
    tracks, events = read(tmp_path / "t.pftrace")
    for iv in m.intervals:
        p = pairs(launch, iv.start_id, iv.end_id)
        want = sorted(np.rint(durations(launch, p).ns).astype(np.int64).tolist())
        got = []
        for track in by_track(events).values():
            if track[0].name == iv.name:
                got += [b.ts - a.ts for a, b in zip(track[0::2], track[1::2])]
        assert sorted(got) == want, iv.name
    for panel in json.loads(out)["panels"]:
        assert panel["resolution"] == "cycles"
        assert panel["median_cycles"] == summary[panel["interval"]]["cycles"]["median"]
    code, out = cli("report", FIX / name, "-o", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    table = page[page.index('<table class="intervals">'):]
    assert "median (cycles)" in table
    for name_, r in summary.items():
        row = re.search(re.escape(name_.replace(">", "&gt;")) + r"</td>(.*?)</tr>", table)[1]
        assert f">{r['cycles']['median']:.0f}<" in row and ">cycles<" in row


@pytest.mark.parametrize("resident", [False, True])
def test_ground_truth_builds_and_reads_the_clock_right_after_the_timer(resident, tmp_path):
    """The ground truth applies and compiles (nvcc, sm_90a) on both paths gpu-clock.sh captures, and
    in its instrumented copy each of the six probes reads %clock within a few instructions of
    %globaltimer (docs/format.md: the event's two reads)."""
    spec, src = _ground_truth_project(tmp_path, resident)
    code, out = cli("apply", spec)
    assert code == 0, out
    cubin = tmp_path / "k.cubin"
    proc = nvcc_compile(src, cubin, ["-O3", "-cubin"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (copy,) = [f for name, f in sass.disassemble(cubin).items() if "clock_phases__atrex" in name]
    texts = [t for _, _, t in copy]
    timer = [i for i, t in enumerate(texts) if "CS2R.32" in t and "SR_GLOBALTIMERLO" in t]
    clock = [i for i, t in enumerate(texts) if "CS2R.32" in t and "SR_CLOCKLO" in t]
    assert len(timer) == 6
    assert all(any(0 < c - i <= 4 for c in clock) for i in timer), texts


@pytest.mark.parametrize("name", [_fixture(n) for n in GROUND_TRUTH])
def test_fixture_is_the_ground_truth_source_instrumented(name, tmp_path):
    """apply writes, from tests/sources/clock_phases.* (clock_phases_resident: with the resident
    rings with_recorder adds), the bytes the GPU host compiled, and the capture validates against them."""
    spec, src = _ground_truth_project(tmp_path, name == "clock_phases_resident")
    code, out = cli("apply", spec)
    assert code == 0, out
    compiled = FIX / name / f"{name}.instrumented.cu"
    assert without_directives(src.read_text()) == compiled.read_text()  # the #line directives aside (linemap.py)
    code, out = cli("validate", FIX / name, "--source", compiled, "--json")
    assert code == 0 and "source file" not in json.loads(out)["unchecked_provenance"], out
