"""Cycle-resolution intervals (docs/summary.md, "Resolution"): the SM clock's 32-bit reads unwrapped,
its rate measured locally, per owner around each interval, every interval timed by cycles where one
owner's clock times both its ends (else by the global timer, saying why), and the clock_consistency
check, which rejects only what no correct capture shows (docs/validate.md).

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
from atrex_inject.smclock import LAG_NS, LOCAL_NS, RATE_GHZ, READ_TICKS, around, impossible, readings, unwrap
from atrex_inject.spec import with_recorder
from atrex_inject.validate import validate_capture
from atrex_inject.linemap import without_directives
from conftest import cli, nvcc_compile
from pftrace import by_track, read
from test_validate import Synthetic, failing

FIX = Path(__file__).parent.parent / "fixtures" / "h200"
# each ground-truth capture: the source stem under tests/sources/ and whether it has resident rings
# (clock_phases_loaded: the phases timed while other warps of the CTA stream memory)
SOURCES = {"clock_phases": ("clock_phases", False), "clock_phases_resident": ("clock_phases", True),
           "clock_phases_loaded": ("clock_phases_loaded", False)}
GROUND_TRUTH = tuple(SOURCES)
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
# With other warps of the SM streaming memory (clock_phases_loaded) the probe's instructions and
# the spin's trips wait for issue slots now and then: on the H200 91-93% of warm instances lay
# within FEW_CYCLES of the median cost, the rest up to 55 cycles past it; a spin overshot by up to 65
# cycles (one trip more), and the two reads of an event lay up to 8 ns apart. Per fixture: (the share
# of warm instances within FEW_CYCLES, the most any lies beyond it, the read skew in ns).
LOAD = {"clock_phases_loaded": (0.9, 56, 8)}
STEADY = (1.0, 0, READ_SKEW_NS)


def _ground_truth_project(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """The source and spec of ground-truth capture `name` (SOURCES) in a project of their own: (the
    spec gpu-clock.sh applies for it, the source)."""
    stem, resident = SOURCES[name]
    (tmp_path / ".git").mkdir()
    src = tmp_path / "tests" / "sources"
    src.mkdir(parents=True)
    for f in (f"{stem}.cu", f"{stem}.toml"):
        (src / f).write_bytes((Path(__file__).parent.parent / "sources" / f).read_bytes())
    spec = src / f"{stem}.toml"
    return (with_recorder(spec, "resident", 4) if resident else spec), src / f"{stem}.cu"


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


def test_unwrap():
    """A read past the counter's 2^32 wrap continues the owner's count from clk0."""
    clk0 = np.array([2**32 - 10, 5], dtype=np.uint32)
    got = unwrap(np.array([5, 7], dtype=np.uint32), clk0)
    assert got.tolist() == [2**32 - 10 + 15, 7]


def test_impossible_steps():
    """One owner at 1.5 GHz, one reading every 1000 ns: a step whose clock runs backward, one whose
    cycles imply 3 GHz (beyond RATE_GHZ whatever the truncation), and one at half its
    neighbours' rate (within the range, beyond the local model) are named, each once; a 32 ns step
    whose cycles imply 3 GHz is not (its two readings' truncation allows 1 GHz); a 5% speed change
    from one step on is not either."""
    tick = 32
    t = np.arange(1, 41) * 1000
    dc = np.full(40, 1500)
    dc[10], dc[20], dc[30] = -10, 3000, 750
    dc[25:] = np.where(dc[25:] == 1500, 1575, dc[25:])  # the clock runs 5% faster from here on
    t = np.r_[t[:35], t[34] + 32, t[35:] + 32]  # a 32-ns step of 96 cycles: 3 GHz by the timer alone
    dc = np.r_[dc[:35], 96, dc[35:]]
    c = np.cumsum(dc)
    owner = np.zeros(t.size, dtype=np.int64)
    im = impossible(readings(owner, t, c, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)), tick)
    assert np.flatnonzero(im.backward).tolist() == [10]
    assert np.flatnonzero(im.out_of_range).tolist() == [20]
    assert np.flatnonzero(im.jump).tolist() == [30]
    assert not im.paused.any()


@pytest.mark.parametrize("late", [+1, -1])
def test_an_events_clock_and_timer_read_apart_is_a_pause_and_a_lasting_shift_a_jump(late):
    """One owner at 1.95 GHz, a reading every 2000 ns: one event's clock 600 ns after its timer or
    600 ns before it (the warp paused between the two reads, whichever came first: 1170 cycles more
    into it and as many fewer out of it, or the reverse) is a pause, neither step a fault; the same
    1170 cycles kept by every later event (the counter jumped) is a fault at that event (a jump, or
    a rate no SM clock runs at)."""
    t = np.arange(1, 41) * 2000
    c = (t * 1.95).astype(np.int64)

    def judged(cycles):
        return impossible(readings(np.zeros(t.size, dtype=np.int64), t, cycles, np.zeros(1, dtype=np.int64),
                                   np.zeros(1, dtype=np.int64)), 32)
    one = c.copy()
    one[20] += late * 1170
    im = judged(one)
    assert not im.backward.any()
    assert np.flatnonzero(im.paused).tolist() == [20] and not (im.jump | im.out_of_range).any()
    lasting = c.copy()
    lasting[20:] += late * 1170
    im = judged(lasting)
    assert not im.paused.any() and np.flatnonzero(im.jump | im.out_of_range).tolist() == [20]


@pytest.mark.parametrize("name", ["gemm_mma", "reduce_sumsq_resident", "reduce_sumsq_packed"])
def test_captures_without_the_clock_keep_the_global_timer(name):
    """8- and 4-byte events carry no %clock: every interval is timed by the global timer, as before,
    and the summary says so; the clock check has nothing to check."""
    launch, m = _launch(name)
    assert not launch.meta.clock_recorded and launch.meta.clock is None
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
    assert 1.0 < clock["rate_ghz"] < 2.1
    assert clock["uncertainty_ghz"] < 0.005 * clock["rate_ghz"]
    assert clock["sms"] == len(np.unique(_launch(name)[0].owners["smid"]))
    assert clock["model"].startswith("local:") and clock["speed"]["changed"] is False  # a steady clock
    for r in s["intervals"]:
        assert r["resolution"] == "cycles" and r["resolution_note"] is None, r["name"]
        assert r["cycles"]["count"] == r["count"] and r["rate_model"] == clock["model"] and r["varied"] == 0
        assert r["median"] == pytest.approx(r["cycles"]["median"] / clock["rate_ghz"], rel=0.005)
    code, text = cli("summary", FIX / name)
    assert f"SM clock {clock['rate_ghz']:.4f} GHz" in text and "cycles converted at each owner's local rate" in text
    assert "steady within its measurement" in text


@pytest.mark.parametrize("name", [_fixture(n) for n in GROUND_TRUTH])
def test_cycle_intervals_give_the_programmed_phases(name):
    """Each cycle-mode interval is its spin plus the recorder's fixed cost to within FEW_CYCLES,
    where the spin is what the kernel measured itself (the payload), at least its programmed length
    and less than one trip of its loop (SPIN_TRIP) past it: every instance past its warp's first
    round (_phase) comes out within a few cycles of its programmed length once the probe's own cost
    is taken off (the first rounds: no less than it)."""
    launch, m = _launch(name)
    share, tail, _ = LOAD.get(name, STEADY)
    for phase, n in PHASES.items():
        p, d, spun, warm = _phase(launch, m, phase)
        assert d.resolution == "cycles" and p["dur"].size == launch.owners["claims"].size * 16
        assert (spun >= n).all() and (spun[warm] < n + SPIN_TRIP + tail).all(), phase
        cost = d.cycles - spun  # the recorder's instructions between the two clock reads
        fixed = int(np.median(cost[warm]))
        assert 0 < fixed < 200, (phase, fixed)
        off = np.abs(cost[warm] - fixed)
        assert np.mean(off <= FEW_CYCLES) >= share and off.max() <= FEW_CYCLES + tail, (phase, fixed, off.max())
        assert (cost >= fixed - FEW_CYCLES - tail).all()
        assert (np.abs(d.cycles[warm] - fixed - n) < SPIN_TRIP + FEW_CYCLES + 2 * tail).all()
    # the 0-cycle spin: a phase's cost beyond its spin (its start is the loop-begin probe's)
    p, d, spun, warm = _phase(launch, m, "round -> spun_0")
    assert (spun[warm] < SPIN_TRIP).all() and np.ptp((d.cycles - spun)[warm]) <= 2 * (FEW_CYCLES + tail)


@pytest.mark.parametrize("name", [_fixture(n) for n in GROUND_TRUTH])
def test_ns_at_the_measured_clock_are_within_one_percent(name):
    """The ns of a cycle-mode interval are its cycles at its owner's local rate, within 1% of the
    launch's on this steady clock. Against an independent clock: the 5000 ns spin on %globaltimer,
    less the recorder's cost (the 2000-cycle phase's: the same probes), comes out within 1% of what
    the spin read on the timer itself (at least 5000 ns, up to a tick and a trip past it), and within
    one tick of it, give or take the recorder's few cycles and the local rate's own uncertainty; the
    2000-cycle spin within 1% of its own measured length (warm instances: _phase)."""
    launch, m = _launch(name)
    _, tail, _ = LOAD.get(name, STEADY)
    rate = launch.meta.clock["rate_ghz"]
    tick = launch.meta.timer_resolution_ns
    p, d, spun, warm = _phase(launch, m, "spun_200 -> spun_2000")
    assert np.array_equal(d.ns, d.cycles / d.rates) and (np.abs(d.rates / rate - 1) < 0.01).all()
    fixed = np.median((d.cycles - spun)[warm])
    assert (np.abs((d.cycles - fixed) / rate - spun / rate) <= (0.01 * spun + tail) / rate)[warm].all()
    p, d, spun_ns, warm = _phase(launch, m, NS_PHASE)
    ns, read, u = (d.ns - fixed / d.rates)[warm], spun_ns[warm], d.uncertainty[warm]
    assert (read >= NS_PROGRAMMED).all() and (read < NS_PROGRAMMED + 2 * tick).all()
    assert (np.abs(ns - read) <= 0.01 * read).all(), (ns.min(), ns.max())
    assert (u < 0.02).all() and (np.abs(ns - read) < tick + (FEW_CYCLES + tail) / rate + u * ns).all()


@pytest.mark.parametrize("name", [_fixture(n) for n in GROUND_TRUTH])
def test_global_timer_figures_are_off_by_up_to_a_tick(name):
    """The same instances by the global timer alone: multiples of its tick, each within one tick of
    the cycle-mode ns (the timer truncates both ends; READ_SKEW_NS more for the probe reading the
    clock a few instructions after the timer, at each end; and the owners' rates' spread about the
    launch's, on the interval's length), so the 40-cycle phase, one length within a few cycles, reads
    as two or three neighbouring multiples of the tick."""
    launch, m = _launch(name)
    _, _, skew = LOAD.get(name, STEADY)
    tick = launch.meta.timer_resolution_ns
    assert tick == 32
    for phase in (*PHASES, NS_PHASE):
        p, d, _, _ = _phase(launch, m, phase)
        spread = np.ptp(d.rates) / np.median(d.rates)  # the local rates' spread
        assert (p["dur"] % tick == 0).all()
        off = np.abs(p["dur"] - d.ns)
        assert (off < tick + 2 * skew + spread * d.ns).all(), (phase, off.max())
    p, d, _, warm = _phase(launch, m, "spun_0 -> spun_40")
    if name not in LOAD:  # under load, test_cycle_intervals_give_the_programmed_phases bounds the tail
        assert np.ptp(d.ns[warm]) < tick / 4  # by cycles: one length, within a few cycles
    assert len(np.unique(p["dur"][warm])) >= 2 and np.ptp(p["dur"][warm]) <= 2 * tick  # by the timer: ±1 tick


@pytest.mark.parametrize("name", [_fixture(n) for n in CLOCK_FIXTURES])
def test_the_local_model_leaves_room_on_real_captures(name):
    """On the real captures, the steady ground truth's and the GEMM's whose clock changed speed by 7%
    (docs/validate.md states what the H200 showed), no step is impossible, and every step's cycles
    at its owner's neighbouring rate lie within 80% of what the local model allows."""
    launch, m = _launch(name)
    tick, ev, o = launch.meta.timer_resolution_ns, launch.events, launch.owners
    r = readings(ev["owner"], ev["t_ns"], ev["cycles"], o["t0"], o["clk0"])
    im = impossible(r, tick)
    assert not (im.backward.any() or im.out_of_range.any() or im.jump.any())
    lo, hi = RATE_GHZ
    assert (im.dc <= hi * (im.dt + READ_TICKS * tick)).all() and (im.dc >= lo * (im.dt - READ_TICKS * tick)).all()
    has = np.isfinite(im.neighbours_ghz)
    assert has.mean() > 0.99
    off = np.abs(im.dc[has] / im.neighbours_ghz[has] - im.dt[has])
    assert (off <= 0.8 * im.allowed_ns[has]).all(), (off / im.allowed_ns[has]).max()


@pytest.mark.parametrize("name", [_fixture("clock_phases"), _fixture("clock_phases8")])
def test_backward_clock_within_an_owner_is_rejected_by_name(name, tmp_path):
    """SYNTHETIC copy of the real capture: one event's %clock set 5000 cycles back (its second word in
    a 16-byte event, its first in an 8-byte one). Its owner's clock runs backwards into it and jumps
    forward out of it: clock_consistency fails, twice, naming the owner and the event; nothing else
    fails."""
    s = Synthetic(tmp_path, name)
    owner, seq = 7, 30
    s.events[owner, seq, 0 if s.words == 2 else 1] -= 5000
    r = s.save().validate()
    assert r["verdict"] == "rejected" and failing(r) == {"clock_consistency": 2}
    details = next(c for c in r["checks"] if c["name"] == "clock_consistency")["details"]
    assert "1 events whose %clock runs backwards" in details[0] and f"owner {owner} " in details[0]
    assert f"event {seq} " in details[0]
    assert "1 steps of 1 owners on 1 SMs" in details[1] and "imply a rate outside the 0.3-2.1 GHz" in details[1]
    assert f"owner {owner} " in details[1] and f"event {seq + 1} " in details[1]


@pytest.mark.parametrize("name", [_fixture("gemm_mma_clock")])
def test_a_real_clock_that_changes_speed_is_valid_and_reported(name, tmp_path):
    """The bf16 GEMM captured with `clock = true` on the H200 (real, unedited): under its tensor-core
    load the SM clock ran at 1.66 to 1.79 GHz at different times of the launch, the same on every
    SM. It validates; the summary times every interval by cycles at the local rate, reports the
    change (the slowest and the fastest reading, where and when) and flags the instances of the
    whole-tile interval inside which the clock changed speed; the text, the report and compare say
    so."""
    r = validate_capture(FIX / name, _launch(name)[1])
    assert r["verdict"] == "valid", failing(r)
    code, out = cli("summary", FIX / name, "--json")
    (s,) = json.loads(out)["launches"]
    speed = s["clock"]["speed"]
    assert speed["changed"] and speed["fastest"]["ghz"] > 1.05 * speed["slowest"]["ghz"]
    assert speed["slowest"]["t_ns"] != speed["fastest"]["t_ns"]
    rows = {r["name"]: r for r in s["intervals"]}
    assert all(r["resolution"] == "cycles" and r["resolution_note"] is None for r in rows.values())
    assert rows["tile_start -> epilogue"]["varied"] > 0 and rows["mma_done -> synced"]["varied"] == 0
    code, text = cli("summary", FIX / name)
    assert "the clock changed speed: 1.6" in text and "instances: the clock changed speed inside" in text
    code, out = cli("report", FIX / name, "-o", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert "the clock changed speed: 1.6" in page
    row = re.search(r"tile_start -&gt; epilogue</td>(.*?)</tr>", page[page.index('<table class="intervals">'):])[1]
    assert f">cycles; {rows['tile_start -> epilogue']['varied']} with a speed change inside<" in row
    code, out = cli("compare", FIX / name, FIX / name)
    varied = rows["tile_start -> epilogue"]["varied"]
    assert code == 0 and f"clock: tile_start -> epilogue: BEFORE cycles ({varied} with a speed change inside)" in out


@pytest.mark.parametrize("name", [_fixture("clock_phases")])
def test_clock_jump_beyond_the_devices_rate_is_rejected_by_name(name, tmp_path):
    """SYNTHETIC copy: from one event on, an owner's clock reads 100000 cycles later: that step's
    cycles imply a rate no SM clock runs at. The instances timed by the global timer instead are
    that owner's, those across the jump or with it in their local rate's readings, and the summary
    says why."""
    s = Synthetic(tmp_path, name)
    owner, seq = 3, 40
    s.events[owner, seq:, 1] += 100_000
    r = s.save().validate()
    assert failing(r) == {"clock_consistency": 1}
    (detail,) = next(c for c in r["checks"] if c["name"] == "clock_consistency")["details"]
    assert f"owner {owner} " in detail and f"event {seq} " in detail and "imply a rate outside" in detail
    m = load_manifest(s.dir / "manifest.json")
    launch = decode_file(s.raw_path, m)
    at = launch.events["t_ns"][(launch.events["owner"] == owner) & (launch.events["seq"] == seq)][0]
    timer = 0
    for iv in m.intervals:
        p = pairs(launch, iv.start_id, iv.end_id)
        d = durations(launch, p)
        off = ~d.by_cycles
        assert (p["owner"][off] == owner).all() and (p["t0"][off] < at + 2 * LOCAL_NS).all()
        assert (p["t1"][off] > at - 2 * LOCAL_NS).all()
        timer += int(off.sum())
    assert timer > 0
    code, out = cli("summary", s.dir, "--json")
    for r in json.loads(out)["launches"][0]["intervals"]:
        assert r["resolution"] == "cycles" or "cannot run at" in r["resolution_note"]


def _plant(s: Synthetic, name: str, owners, cycles_of) -> None:
    """Rewrite the %clock of `owners`' events in a Synthetic copy of fixture `name`: cycles_of(owner,
    t_ns, cycles) gives each event's new unwrapped count from its decoded time and count."""
    launch, _ = _launch(name)
    ev = launch.events
    for o in owners:
        mine = ev["owner"] == o
        new = cycles_of(o, ev["t_ns"][mine], ev["cycles"][mine])
        s.events[o, ev["seq"][mine], 1] = (np.asarray(new, dtype=np.int64) & 0xFFFFFFFF).astype(np.uint32)


@pytest.mark.parametrize("name", [_fixture("gemm_mma_clock")])
def test_clock_jump_within_the_devices_range_is_rejected_by_the_local_model(name, tmp_path):
    """SYNTHETIC copy of the GEMM (a clock that changed speed by 7%): from one event on, an owner's
    clock reads 1500 cycles less (a long step counted at about 1.1 GHz instead of 1.7: a rate an SM
    can run at, but not between readings that run at 1.7 GHz on either side): clock_consistency
    names the owner and the event, as a jump against its own readings; nothing else fails."""
    s = Synthetic(tmp_path, name)
    launch, m = _launch(name)
    ev = launch.events
    owner = 5
    i = np.flatnonzero((ev["owner"] == owner) & (ev["site"] == m.site_ids["iter"]))[10]  # a 2.5 us step
    seq = int(ev["seq"][i])
    _plant(s, name, [owner], lambda o, t, c: np.where(np.arange(c.size) >= seq, c - 1500, c))
    r = s.save().validate()
    assert failing(r) == {"clock_consistency": 1}
    (detail,) = next(c for c in r["checks"] if c["name"] == "clock_consistency")["details"]
    assert "1 owners whose %clock jumps against their own timer readings beyond the local model" in detail
    assert f"owner {owner} " in detail and f"event {seq} " in detail


@pytest.mark.parametrize("name", [_fixture("clock_phases")])
def test_one_owner_on_two_sms_is_rejected_by_name(name, tmp_path):
    """SYNTHETIC copy: from one event on, an owner reads the counter of an SM other than its own (its
    CTA moved: the other SM's owner's count at the same times): clock_consistency names the owner,
    the event, and the SMs whose counter it reads (the other SM among those that count alike)."""
    s = Synthetic(tmp_path, name)
    launch, _ = _launch(name)
    o, rate = launch.owners, launch.meta.clock["rate_ghz"]
    owner, seq = 3, 40
    line = o["clk0"] - rate * (o["t0"] - o["t0"][owner])  # each owner's counter at the owner's start
    other = int(np.flatnonzero(np.abs(line - line[owner]) > 10**6)[0])  # an SM whose counter is far from its own
    moved = lambda _, t, c: np.where(np.arange(c.size) >= seq,
                                     np.rint(o["clk0"][other] + rate * (t - o["t0"][other])), c)
    _plant(s, name, [owner], moved)
    r = s.save().validate()
    assert set(failing(r)) == {"clock_consistency"}
    details = " ".join(next(c for c in r["checks"] if c["name"] == "clock_consistency")["details"])
    assert f"owner {owner} " in details and f"event {seq} " in details
    named = re.search(r"it reads the counter of SM ([\d, ]+) \(they count alike\), not SM (\d+)'s", details)
    assert int(o["smid"][other]) in map(int, named[1].split(", ")) and int(named[2]) == int(o["smid"][owner])


def _scaled(launch, factor: float):
    """cycles_of for _plant: the owner's clock running `factor` times as fast from its start stamp."""
    clk0 = launch.owners["clk0"]
    return lambda o, t, c: clk0[o] + np.rint((c - clk0[o]) * factor)


@pytest.mark.parametrize("factor", [2, 4])
@pytest.mark.parametrize("name", [_fixture("clock_phases")])
def test_a_launch_at_a_rate_no_sm_runs_at_is_rejected(name, factor, tmp_path):
    """SYNTHETIC copy: every owner's clock at 2x or 4x (3.96 or 7.9 GHz, beyond any H200 clock):
    clock_consistency names the rate and every SM; no interval is timed by cycles."""
    s = Synthetic(tmp_path, name)
    launch, _ = _launch(name)
    _plant(s, name, range(launch.owners["claims"].size), _scaled(launch, factor))
    r = s.save().validate()
    assert set(failing(r)) == {"clock_consistency"}
    details = next(c for c in r["checks"] if c["name"] == "clock_consistency")["details"]
    sms = np.unique(launch.owners["smid"]).size
    assert any(f"on {sms} SMs" in d and "imply a rate outside the 0.3-2.1 GHz" in d for d in details), details
    code, out = cli("summary", s.dir, "--json")
    assert all(iv["resolution"] != "cycles" for iv in json.loads(out)["launches"][0]["intervals"])


@pytest.mark.parametrize("name", [_fixture("clock_phases"), _fixture("gemm_mma_clock")])
def test_half_the_sms_at_twice_the_rate_are_rejected_by_name(name, tmp_path):
    """SYNTHETIC copy: the owners of half the SMs at twice their clock, each whose events span at
    least 1 us from its start stamp (over a shorter span, twice the clock stays within what the
    timer's lag allows, LAG_NS: the GEMM's owners of one 160-384 ns step): clock_consistency (no
    internal error) names those SMs' owners, and only those."""
    s = Synthetic(tmp_path, name)
    launch, _ = _launch(name)
    sm, ev = launch.owners["smid"], launch.events
    span = np.zeros(sm.size, dtype=np.int64)
    np.maximum.at(span, ev["owner"], ev["t_ns"] - launch.owners["t0"][ev["owner"]])
    fast_sms = np.unique(sm)[::2]
    fast = np.flatnonzero(np.isin(sm, fast_sms) & (launch.owners["claims"] > 0) & (span >= 1000))
    _plant(s, name, fast, _scaled(launch, 2))
    r = s.save().validate()
    assert set(failing(r)) == {"clock_consistency"}
    detail = next(d for d in next(c for c in r["checks"] if c["name"] == "clock_consistency")["details"]
                  if "imply a rate outside" in d)
    assert f"of {fast.size} owners on {fast_sms.size} SMs (SM {', '.join(map(str, fast_sms[:5]))}" in detail


@pytest.mark.parametrize("name", [_fixture("gemm_mma_clock")])
def test_a_speed_change_mid_launch_is_reported_not_rejected(name, tmp_path):
    """SYNTHETIC copy of the GEMM: every owner's clock runs 5% faster from the middle of the launch
    on. It validates; the summary says the clock changed speed, its fastest reading after the change,
    and times every interval by cycles."""
    s = Synthetic(tmp_path, name)
    launch, _ = _launch(name)
    ev, o = launch.events, launch.owners
    mid = int(np.median(ev["t_ns"]))

    def faster(w, t, c):
        at = np.interp(mid, np.r_[o["t0"][w], t], np.r_[o["clk0"][w], c])  # the owner's count at the change
        return np.where(t > mid, np.rint(at + (c - at) * 1.05), c)
    _plant(s, name, np.unique(ev["owner"]), faster)
    r = s.save().validate()
    assert r["verdict"] == "valid", failing(r)
    code, out = cli("summary", s.dir, "--json")
    (summary,) = json.loads(out)["launches"]
    speed = summary["clock"]["speed"]
    assert speed["changed"] and speed["fastest"]["ghz"] > 1.8
    assert speed["fastest"]["t_ns"] > mid - summary["t_first_ns"]
    assert all(iv["resolution"] == "cycles" for iv in summary["intervals"])


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
    exported = json.loads(out)
    assert "at its owner's rate (local:" in exported["slice_durations"]
    for panel in exported["panels"]:
        assert panel["resolution"] == "cycles" and panel["rate_model"].startswith("local:") and panel["varied"] == 0
        assert panel["median_cycles"] == summary[panel["interval"]]["cycles"]["median"]
    code, out = cli("report", FIX / name, "-o", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    table = page[page.index('<table class="intervals">'):]
    assert "median (cycles)" in table
    for name_, r in summary.items():
        row = re.search(re.escape(name_.replace(">", "&gt;")) + r"</td>(.*?)</tr>", table)[1]
        assert f">{r['cycles']['median']:.0f}<" in row and ">cycles<" in row


@pytest.mark.parametrize("name", GROUND_TRUTH)
def test_ground_truth_builds_and_reads_the_clock_right_before_the_timer(name, tmp_path):
    """The ground truth applies and compiles (nvcc, sm_90a) as gpu-clock.sh captures it (both paths,
    and under memory load), and in its instrumented copy each of the six probes reads %clock by the
    instruction right before %globaltimer (docs/format.md: the event's two reads, one asm statement:
    nothing the compiler schedules falls between them, and a wait ptxas puts on the clock read
    comes before both)."""
    spec, src = _ground_truth_project(tmp_path, name)
    code, out = cli("apply", spec)
    assert code == 0, out
    cubin = tmp_path / "k.cubin"
    proc = nvcc_compile(src, cubin, ["-O3", "-cubin"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (copy,) = [f for fn, f in sass.disassemble(cubin).items() if f"{SOURCES[name][0]}__atrex" in fn]
    texts = [t for _, _, t in copy]
    timer = [i for i, t in enumerate(texts) if "CS2R.32" in t and "SR_GLOBALTIMERLO" in t]
    clock = [i for i, t in enumerate(texts) if "CS2R.32" in t and "SR_CLOCKLO" in t]
    assert len(timer) == 6
    assert all(i - 1 in clock for i in timer), texts


@pytest.mark.parametrize("name", [_fixture(n) for n in GROUND_TRUTH])
def test_fixture_is_the_ground_truth_source_instrumented(name, tmp_path):
    """apply writes, from tests/sources/ (SOURCES; clock_phases_resident: with the resident rings
    with_recorder adds), the bytes the GPU host compiled, and the capture validates against them.
    With the recorder the fixture's manifest names: the GPU host applied without a build of the
    clean kernel to choose from, so it fell back to the global path."""
    spec, src = _ground_truth_project(tmp_path, name)
    recorder = json.loads((FIX / name / "manifest.json").read_text())["recorder"]["recorder"]
    code, out = cli("apply", spec, "--recorder", recorder)
    assert code == 0, out
    compiled = FIX / name / f"{name}.instrumented.cu"
    assert without_directives(src.read_text()) == without_directives(compiled.read_text())  # #line aside (linemap.py)
    code, out = cli("validate", FIX / name, "--source", compiled, "--json")
    assert code == 0 and "source file" not in json.loads(out)["unchecked_provenance"], out


# With resident rings a probe's own cost depends on what ran before it: 63 cycles after the empty
# spin, 45 after the spins of 200 and 2000 cycles (measured per instance on the H200 captures), so
# the empty phase's cost leaves those phases up to 25 cycles short of the kernel's own count. The
# loaded ground truth was recorded with the resident rings the tool chose for it.
FIXED_COST_SPREAD = {"clock_phases": 0, "clock_phases_resident": 18, "clock_phases_loaded": 18}


@pytest.mark.parametrize("name", [_fixture(n) for n in GROUND_TRUTH])
def test_phases_less_the_reported_fixed_cost_match_the_kernels_own_count(name):
    """`summary --fixed-cost "round -> spun_0"` (the empty phase) reports its median cycles as the
    recorder's fixed cost, keeps every interval's cycles as counted, and gives each less that cost,
    labelled: the phases of 40, 200 and 2000 cycles come out within 20 cycles of what the kernel
    measured itself (its payload) on the global path; with resident rings within 20 more the
    probe's cost varies (FIXED_COST_SPREAD)."""
    launch, m = _launch(name)
    code, out = cli("summary", FIX / name, "--fixed-cost", "round -> spun_0", "--json")
    assert code == 0, out
    (s,) = json.loads(out)["launches"]
    rows = {r["name"]: r for r in s["intervals"]}
    fixed = s["fixed_cost"]
    assert fixed["interval"] == "round -> spun_0" and fixed["cycles"] == rows["round -> spun_0"]["cycles"]["median"]
    for phase in PHASES:
        r = rows[phase]
        less = r["cycles_less_fixed_cost"]
        assert less["fixed_cost"] == fixed["cycles"] and less["median"] == r["cycles"]["median"] - fixed["cycles"]
        _, _, spun, _ = _phase(launch, m, phase)
        assert abs(less["median"] - np.median(spun)) <= 20 + FIXED_COST_SPREAD[name], (phase, less["median"])
    code, text = cli("summary", FIX / name, "--fixed-cost", "round -> spun_0")
    assert f"fixed cost {fixed['cycles']:.0f} cycles per probe (median of round -> spun_0" in text
    assert "less fixed cost" in text


@pytest.mark.parametrize("name", [_fixture("clock_phases8"), _fixture("clock_phases8_resident")])
def test_the_clock_in_8_byte_events_gives_the_programmed_phases(name):
    """The ground truth recorded with the clock in 8-byte events ({clock, timer | site id + 1}: no
    payloads, so the spins' own counts come from the 16-byte capture of the same kernel and
    recorder): it validates, decodes every event's site from the timer's low bits, and each phase
    less the empty phase's median is within 20 cycles of what the spins measured themselves (20
    more with resident rings, FIXED_COST_SPREAD)."""
    launch, m = _launch(name)
    assert launch.meta.event_bytes == 8 and launch.meta.flags & 1 and m.capture.clock
    assert sorted(np.unique(launch.events["site"]).tolist()) == list(range(len(m.sites)))
    r = validate_capture(FIX / name, m)
    assert r["verdict"] == "valid", [c for c in r["checks"] if not c["ok"]]
    wide = name.replace("clock_phases8", "clock_phases")
    ref, ref_m = _launch(wide)
    code, out = cli("summary", FIX / name, "--fixed-cost", "round -> spun_0", "--json")
    assert code == 0, out
    rows = {r["name"]: r for r in json.loads(out)["launches"][0]["intervals"]}
    for phase in PHASES:
        _, _, spun, _ = _phase(ref, ref_m, phase)
        less = rows[phase]["cycles_less_fixed_cost"]["median"]
        assert abs(less - np.median(spun)) <= 20 + FIXED_COST_SPREAD[wide], (phase, less, np.median(spun))


def test_a_fixed_cost_that_is_no_interval_is_refused():
    """--fixed-cost names an interval of the spec; anything else exits 2 listing them."""
    code, out = cli("summary", FIX / "gemm_mma", "--fixed-cost", "nope -> nothing")
    assert code == 2 and "'nope -> nothing' is not an interval of the spec" in out and "iter -> copies_issued" in out


REAL = FIX / "realkernels"


@pytest.mark.parametrize("folder", [REAL / "fi_segment_packbits_clock", REAL / "fi_decode_clock",
                                    *(FIX / f"{ex}_clock" for ex in ("gemm_mma", "layernorm", "softmax_rows",
                                                                     "reduce_sumsq", "rmsnorm_nvrtc"))],
                         ids=lambda f: f.name)
def test_real_kernels_recorded_with_the_clock_are_valid(folder):
    """Seven kernels recorded with `clock = true` on the H200 after their program's own warm-up, the
    clocks not locked: two flashinfer kernels, the examples' GEMM, layernorm, row softmax and
    reduction as their specs are written, and an RMSNorm in a Python string launched through NVRTC.
    Each validates, clock_consistency included, although the SM clock changed speed inside most."""
    r = validate_capture(folder, load_manifest(folder / "manifest.json"))
    assert r["verdict"] == "valid", [c for c in r["checks"] if not c["ok"]]


@pytest.mark.parametrize("folder", [FIX / f"{ex}_clock8" for ex in ("layernorm", "reduce_sumsq", "rmsnorm_nvrtc",
                                                                     "softmax_rows")],
                         ids=lambda f: f.name)
def test_real_kernels_recorded_with_the_clock_in_8_byte_events_are_valid(folder):
    """The examples' layernorm and reduction (resident rings: the choice the spec gets without the
    clock), the NVRTC RMSNorm and the row softmax, their clock in 8-byte events {clock, timer | site},
    recorded on the H200 after their program's own warm-up: each validates, clock_consistency
    included. The softmax's was rejected while the recorder read the timer first: its last event,
    right after its stores, read the clock up to 3000 cycles late (docs/validate.md)."""
    m = load_manifest(folder / "manifest.json")
    launch = decode_file(next(folder.glob("*.atrex")), m)
    assert launch.meta.event_bytes == 8 and launch.meta.flags == 1 and "cycles" in launch.events
    r = validate_capture(folder, m)
    assert r["verdict"] == "valid", [c for c in r["checks"] if not c["ok"]]


def test_a_short_step_after_the_start_stamp_is_within_the_timers_lag():
    """softmax_rows_clock (the timer read first): owner 1803's first event has 419 cycles in the
    timer's 96 ns after its start stamp (4.4 GHz by those readings alone), 119 ns of cycles beyond its
    timer at 1.98 GHz: within the 3 ticks and LAG_NS a step may be off, so neither a fault nor a
    pause, and no step of the capture is a fault."""
    folder = FIX / "softmax_rows_clock"
    m = load_manifest(folder / "manifest.json")
    launch = decode_file(next(folder.glob("*.atrex")), m)
    ev, o, tick = launch.events, launch.owners, launch.meta.timer_resolution_ns
    im = impossible(readings(ev["owner"], ev["t_ns"], ev["cycles"], o["t0"], o["clk0"]), tick)
    first = np.flatnonzero((ev["owner"] == 1803) & (ev["seq"] == 0))
    assert first.tolist() == [10818] and im.dc[10818] == 419 and im.dt[10818] == 96
    assert 419 / 1.98 - 96 <= READ_TICKS * tick + LAG_NS
    assert not (im.paused | im.jump | im.out_of_range | im.backward).any()


def test_a_paused_event_times_no_interval_on_a_real_capture():
    """softmax_rows_clock_wide (16-byte events, the clock read first): 127 events whose timer lags
    their clock beyond the step's reading error and comes back at the next reading (pauses), no step
    of the capture a fault; the max pass's instances that start or end at a paused event keep the
    timer's ns, and nearly all the others are timed by the clock."""
    folder = FIX / "softmax_rows_clock_wide"
    m = load_manifest(folder / "manifest.json")
    launch = decode_file(next(folder.glob("*.atrex")), m)
    ev, o, tick = launch.events, launch.owners, launch.meta.timer_resolution_ns
    im = impossible(readings(ev["owner"], ev["t_ns"], ev["cycles"], o["t0"], o["clk0"]), tick)
    assert int(im.paused.sum()) == 127 and not (im.jump | im.out_of_range | im.backward).any()
    iv = next(i for i in m.intervals if i.name == "row_start -> max_done")
    p = pairs(launch, iv.start_id, iv.end_id)
    d = durations(launch, p)
    touched = im.paused[p["i0"]] | im.paused[p["i1"]]
    assert touched.any() and not d.by_cycles[touched].any() and d.by_cycles[~touched].mean() > 0.95
    assert "paused" in d.why



def test_a_pause_beside_a_lagging_window_end_is_a_pause():
    """perturbation/sgemm_smem_clock (the shared-memory GEMM's clock arm of the perturbation
    benchmark, clock read first): owner 65's fma_done at its 976th event reads the timer 515 ns
    after its clock (1641 cycles in 1344 ns into it, 1281 in 128 ns out of it, the step over them at
    1.99 GHz). The readings around it measure 2.107 GHz because the window's first reading lags
    too; within that window's reading error the rate is one an SM runs at, so it judges the step, the
    event is a pause, and the capture is valid (it was rejected as a 10 GHz step and a CTA that
    moved)."""
    folder = FIX / "perturbation" / "sgemm_smem_clock"
    m = load_manifest(folder / "manifest.json")
    launch = decode_file(next(folder.glob("*.atrex")), m)
    ev, o, tick = launch.events, launch.owners, launch.meta.timer_resolution_ns
    r = readings(ev["owner"], ev["t_ns"], ev["cycles"], o["t0"], o["clk0"])
    im = impossible(r, tick)
    i = int(np.flatnonzero(ev["owner"] == 65)[975])  # the paused fma_done
    assert m.sites[int(ev["site"][i])].name == "fma_done"
    assert (int(im.dc[i]), int(im.dt[i]), int(im.dc[i + 1]), int(im.dt[i + 1])) == (1641, 1344, 1281, 128)
    lo, hi = around(r, r.point[[i - 1]], r.point[[i + 1]])
    side_c = (r.c[r.point[i - 1]] - r.c[lo]) + (r.c[hi] - r.c[r.point[i + 1]])
    side_t = (r.t[r.point[i - 1]] - r.t[lo]) + (r.t[hi] - r.t[r.point[i + 1]])
    assert RATE_GHZ[1] < float(side_c[0] / side_t[0]) < 2.11
    assert im.paused[i] and not (im.jump | im.out_of_range | im.backward).any()
    code, out = cli("validate", folder, "--json")
    assert code == 0 and json.loads(out)["verdict"] == "valid", out
