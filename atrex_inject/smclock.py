"""The SM cycle clock of a capture recorded with `[capture] clock = true` (docs/summary.md,
"Resolution"; docs/validate.md, clock_consistency): unwrapping its 32-bit reads, the local model
that converts cycles to ns, and what no correct capture can show.

Each event of such a capture carries `%clock` (the low 32 bits of the SM's cycle counter, read by
the instruction next to `%globaltimer`'s: before it since the recorder reads the clock first, after
it in captures recorded before), and each owner header the clock and full timer read when
the owner was claimed (clk0, t0). One owner is one thread on one SM, so within an owner the clock
is one counter: an interval's cycles are its end's clock less its start's. decode unwraps each read
against its owner's clk0, as it unwraps the timer against t0: exact while the event lies within
2^32 cycles of the owner's start (2.17 s at 1.98 GHz), which validation's 2^31 ns window
(time_order) guarantees for any clock up to 2 GHz.

Why one rate per launch failed on real kernels: the H200's SM clock changes speed over time,
the same way on every SM (the GPU's frequency, not the SM's). On the bf16 GEMM (gemm_mma_clock) the
rate over 2.5 us steps went 1.71 -> 1.77 -> 1.67 -> 1.77 GHz within the launch's 580 us, so steps
in the slow stretch missed the launch's average by up to 6% (281 ns on a 4.5 us step) while every
owner's and SM's whole-span rate, averaged over the same stretches, agreed within 1.5%. Owners
that ran at different times averaged different stretches; the timer's truncation (one tick on a
difference of two readings) and the two reads' distance account for the rest, which is why short
steps pass and long ones fail.

So the model is local: each owner's rate near a span is its cycles over its timer's ns from its
reading LOCAL_NS before the span to its reading LOCAL_NS after it (piecewise between the owner's
own readings; `local_rates`). What cannot happen on a correct capture (`impossible`): a step whose
cycles run backward, or imply a rate outside RATE_GHZ whatever the two readings' truncation and
the timer's lag (READ_TICKS, LAG_NS), or disagree with the rate of the owner's neighbouring readings
by more than those plus a speed change of CHANGE over the step; or an owner's whole span at a rate
outside RATE_GHZ. Up to MAX_PAUSE events in a row whose two reads lie apart (the warp paused
between the two adjacent reads, or the timer lagging under load: more cycles into them and fewer
out, or the reverse, the step over them agreeing with the model) are a pause (`pauses`), not a
fault.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .stats import median

U32 = np.uint64(1 << 32)
# The rates an SM clock can run at: an H200 lists SM clocks of 345 to 1980 MHz (nvidia-smi -q -d
# SUPPORTED_CLOCKS); a few percent of margin either side. A launch at 2x or 4x its clock is not one.
RATE_GHZ = (0.3, 2.1)
# How far two readings of the timer and the clock may disagree on one step, in ticks: the timer
# truncates each reading (one tick on their difference), and the clock is read by the instruction
# next to the timer's. On the bf16 GEMM, two events 0 ns apart on the timer were 107 cycles (61 ns)
# apart on the clock. Two ticks for that leave room.
READ_TICKS = 3
# How far the timer's reading may lag the clock's at one event beyond that, in ns, where a step is
# judged for a fault: on the shared-memory GEMM the timer advanced 32 ns while 376 cycles (about
# 200 ns) passed, at a k-tile's end right after a barrier, and the readings after it agreed with
# the clock again (a pause that the step over it cannot show: the lag came back slowly). Rates
# keep READ_TICKS alone as their uncertainty.
LAG_NS = 160
# How much the SM clock's speed may change between a step and the owner's readings around it
# (LOCAL_NS either side): the GEMM's fastest change was 6% over 20 us; 10% leaves room.
CHANGE = 0.10
# How far either side of a span its owner's readings measure the local rate: long enough that the
# timer's truncation costs about 1%, short enough to follow the clock's changes (tens of us).
LOCAL_NS = 3200
# How many readings in a row a pause may hold: the shared-memory GEMM's timer lagged its clock at two
# events in a row (tile_loaded, then fma_done, each after a barrier or the FMA loop); 3 leaves room.
MAX_PAUSE = 3
MODEL = (f"local: each owner's cycles over its global timer's ns, from its reading {LOCAL_NS / 1e3:g} us before a "
         f"span to its reading {LOCAL_NS / 1e3:g} us after it")


def unwrap(c_lo: np.ndarray, clk0: np.ndarray) -> np.ndarray:
    """32-bit %clock reads as int64 cycles on the owner's own counter: clk0 plus the uint32
    difference from it (the reads' owners' clk0 given per read)."""
    c = np.asarray(c_lo, dtype=np.uint64)
    base = np.asarray(clk0, dtype=np.uint64)
    return (base + ((c - base) & (U32 - np.uint64(1)))).view(np.int64)


@dataclass(frozen=True)
class Readings:
    """Every owner's readings of both clocks in order, its start stamp (t0, clk0) first, then its
    events: `point[i]` is event i's reading, `point[i] - 1` the one before it in its owner."""
    t: np.ndarray
    c: np.ndarray
    key: np.ndarray  # owner rank * 2^34 + ns since the owner's start: sorted within an owner
    first: np.ndarray  # per reading: its owner's first and last reading
    last: np.ndarray
    point: np.ndarray
    owner: np.ndarray  # per reading


def readings(owner: np.ndarray, t_ns: np.ndarray, cycles: np.ndarray, t0: np.ndarray, clk0: np.ndarray) -> Readings:
    """The readings of events in owner order (t0 and clk0 per owner, indexed by `owner`)."""
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]) if owner.size else np.zeros(0, dtype=np.int64)
    rank = np.cumsum(np.r_[False, owner[1:] != owner[:-1]]) if owner.size else np.zeros(0, dtype=np.int64)
    point = np.arange(owner.size) + rank + 1
    stamp = starts + np.arange(starts.size)
    n = owner.size + starts.size
    own = np.empty(n, dtype=np.int64)
    t, c = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    own[point], t[point], c[point] = owner, t_ns, cycles
    who = owner[starts]
    own[stamp], t[stamp], c[stamp] = who, t0[who], clk0[who]
    r = np.repeat(np.arange(starts.size), np.diff(np.r_[stamp, n]))
    key = (r << 34) + np.clip(t - t0[own], 0, (1 << 34) - 1)
    first = stamp[r]
    last = np.r_[stamp[1:] - 1, n - 1][r] if n else first
    return Readings(t, c, key, first, last, point, own)


def around(r: Readings, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For spans from reading a to reading b of one owner: the owner's last reading at least
    LOCAL_NS before a, and its first at least LOCAL_NS after b (its first and last where it has
    none so far)."""
    lo = np.searchsorted(r.key, r.key[a] - LOCAL_NS, side="right") - 1
    hi = np.searchsorted(r.key, r.key[b] + LOCAL_NS, side="left")
    return np.clip(lo, r.first[a], a), np.clip(hi, b, r.last[b])


def _ratio(c: np.ndarray, t: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t > 0, c / np.where(t > 0, t, 1), np.nan)


def local_rates(r: Readings, a: np.ndarray, b: np.ndarray, tick: int) -> tuple[np.ndarray, np.ndarray]:
    """Cycles per ns around each span a -> b (`around`), the span included (NaN where the owner's
    timer did not advance), and each rate's relative uncertainty: READ_TICKS (how far the difference
    of two readings may be off) over the ns it was measured on (NaN where none)."""
    lo, hi = around(r, a, b)
    ns = r.t[hi] - r.t[lo]
    return _ratio(r.c[hi] - r.c[lo], ns), _ratio(np.full(ns.size, READ_TICKS * tick), ns)


def speed(r: Readings, tick: int, sm: np.ndarray, owner_base: int = 0) -> dict | None:
    """Whether the SM clock changed speed, from the local rate at each reading of these owners (`sm`
    per owner): the reading whose rate is surely slowest (least rate x (1 + its uncertainty)) and the
    one surely fastest (greatest rate x (1 - it)), each {ghz, bound_ghz, owner, sm, t_ns}; `changed`
    when the fastest's lower bound exceeds the slowest's upper bound. None without a measurable rate.
    `merge` joins the parts of a launch."""
    at = np.arange(r.t.size)
    rate, u = local_rates(r, at, at, tick)
    ok = np.isfinite(rate) & np.isfinite(u)
    if not ok.any():
        return None
    up, down = np.where(ok, rate * (1 + u), np.inf), np.where(ok, rate * (1 - u), -np.inf)

    def one(i: int, bound: float) -> dict:
        o = int(r.owner[i])
        return {"ghz": float(rate[i]), "bound_ghz": float(bound), "owner": o + owner_base, "sm": int(sm[o]),
                "t_ns": int(r.t[i])}
    i, j = int(np.argmin(up)), int(np.argmax(down))
    return merge(None, {"slowest": one(i, up[i]), "fastest": one(j, down[j])})


def merge(a: dict | None, b: dict | None) -> dict | None:
    """Two parts' `speed` as one."""
    if a is None or b is None:
        out = a or b
    else:
        out = {"slowest": min(a["slowest"], b["slowest"], key=lambda x: x["bound_ghz"]),
               "fastest": max(a["fastest"], b["fastest"], key=lambda x: x["bound_ghz"])}
    return out and {**out, "changed": out["fastest"]["bound_ghz"] > out["slowest"]["bound_ghz"]}


@dataclass(frozen=True)
class Impossible:
    """Per event (its step from the reading before it in its owner): the faults a correct capture
    cannot show, and the rates that make them so."""
    backward: np.ndarray  # the clock ran backward
    out_of_range: np.ndarray  # the step's cycles imply a rate outside RATE_GHZ
    jump: np.ndarray  # the step's cycles disagree with the owner's neighbouring readings
    paused: np.ndarray  # the event's two reads lie apart (`pauses`): its steps are not faults
    dc: np.ndarray
    dt: np.ndarray
    neighbours_ghz: np.ndarray  # the rate of the owner's readings around the step, the step left out (NaN: none)
    allowed_ns: np.ndarray  # how far the step's cycles at that rate may lie from its timer's ns (NaN: no rate)


def impossible(r: Readings, tick: int) -> Impossible:
    """Each event's step against what the hardware can do (module docstring)."""
    b = r.point
    a = b - 1
    dc, dt = r.c[b] - r.c[a], r.t[b] - r.t[a]
    read = READ_TICKS * tick + LAG_NS
    lo_rate, hi_rate = RATE_GHZ
    backward = dc < 0
    out = ~backward & ((dc > hi_rate * (dt + read)) | (dc < lo_rate * (dt - read)))
    nb, usable, slack = _neighbours(r, a, b, read)
    allowed = read + slack * np.abs(dt)
    with np.errstate(divide="ignore", invalid="ignore"):
        late = np.where(usable, dc / np.where(usable, nb, 1) - dt, np.nan)  # ns the step's clock runs ahead
        jump = ~backward & ~out & usable & (np.abs(late) > allowed)
    run = pauses(r, tick)
    starts = np.flatnonzero(run)
    # the pauses that explain a step that would otherwise be a fault: into, within or out of them
    hit = np.r_[0, np.cumsum(_cover(starts, run[starts] + 1, b.size) & (out | jump))]
    needed = starts[hit[starts + run[starts] + 1] > hit[starts]]
    paused = _cover(needed, run[needed], b.size)
    explained = _cover(needed, run[needed] + 1, b.size)
    out &= ~explained
    jump &= ~explained
    # each owner's whole span, its start stamp to its last event, where no step of it is a fault: a
    # clock at twice its rate in steps short enough for LAG_NS each is still out of range over it
    faulty = np.zeros(int(r.owner.max(initial=-1)) + 1, dtype=bool)
    np.logical_or.at(faulty, r.owner[b], backward | out | jump)
    span_c, span_t = r.c[b] - r.c[r.first[b]], r.t[b] - r.t[r.first[b]]
    out |= ((r.last[b] == b) & ~faulty[r.owner[b]]
            & ((span_c > hi_rate * (span_t + read)) | (span_c < lo_rate * (span_t - read))))
    return Impossible(backward, out, jump, paused, dc, dt, np.where(usable, nb, np.nan),
                      np.where(usable, allowed, np.nan))


def _cover(starts: np.ndarray, lengths: np.ndarray, n: int) -> np.ndarray:
    """Of n indices, those within start .. start + length - 1 for any of the runs given."""
    edge = np.zeros(n + 1, dtype=np.int64)
    np.add.at(edge, starts, 1)
    np.add.at(edge, np.minimum(starts + lengths, n), -1)
    return np.cumsum(edge)[:n] > 0


def _neighbours(r: Readings, a: np.ndarray, b: np.ndarray, read: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For spans from reading a to reading b of one owner: the rate of the owner's readings within
    LOCAL_NS either side (`around`), the span left out; whether it can judge the span (measured over
    more than two readings' error, and within RATE_GHZ up to that error: an end of the window that
    is itself a lagging reading bends the rate by its lag over the window's ns, which made a
    shared-memory GEMM's owner read 2.107 GHz beside a pause and the pause a fault); and the slack
    per ns of a span judged at it (the two readings' error over the ns it was measured on, plus a
    speed change of CHANGE)."""
    lo, hi = around(r, a, b)
    side_ns = (r.t[a] - r.t[lo]) + (r.t[hi] - r.t[b])
    rate = _ratio((r.c[a] - r.c[lo]) + (r.c[hi] - r.c[b]), side_ns)
    with np.errstate(divide="ignore", invalid="ignore"):
        err = 2 * read / np.where(side_ns > 0, side_ns, 1)
    usable = (side_ns > 2 * read) & (rate * (1 + err) >= RATE_GHZ[0]) & (rate * (1 - err) <= RATE_GHZ[1])
    return rate, usable, err + CHANGE


def pauses(r: Readings, tick: int) -> np.ndarray:
    """Per event: the number of readings, from it on, whose clock and timer were read apart (0:
    none). The two are read by adjacent instructions, but a warp can be paused between any two
    instructions, and under load the timer's read lags the clock's by up to hundreds of ns (the
    shared-memory GEMM on the H200: its fma_done and tile_loaded events, one after the other, up to
    490 ns). Then the steps into and out of those readings disagree with the owner's rate in
    opposite directions, while the step over them, from the reading before the first to the one
    after the last, agrees with the model (`impossible` calls it a pause where a step touching them
    would otherwise be a fault). A pause spans at most MAX_PAUSE readings, and no clock runs backward
    in it. The rate the step over is judged at is the owner's around it, so the paused readings do
    not bend the rate they are judged by (a pause after a short first step, 419 cycles in 96 ns,
    counted in its own step out's neighbours, made that rate 2.02 GHz and the pause a fault). That
    is a pause, not a fault; its events' cycles time no interval (intervals.durations)."""
    b = r.point
    a = b - 1
    read, lag = READ_TICKS * tick, READ_TICKS * tick + LAG_NS
    run = np.zeros(b.size, dtype=np.int64)
    forward = r.c[b] >= r.c[a]
    for k in range(1, MAX_PAUSE + 1):
        nxt = np.minimum(b + k, r.last[b])
        forward &= r.c[nxt] >= r.c[nxt - 1]
        rate, usable, slack = _neighbours(r, a, nxt, lag)
        ok = (nxt == b + k) & usable & forward & (run == 0)
        rate = np.where(ok, rate, 1.0)
        dt_in, dt_out, dt_over = r.t[b] - r.t[a], r.t[nxt] - r.t[nxt - 1], r.t[nxt] - r.t[a]
        late_in = (r.c[b] - r.c[a]) / rate - dt_in
        late_out = (r.c[nxt] - r.c[nxt - 1]) / rate - dt_out
        late_over = (r.c[nxt] - r.c[a]) / rate - dt_over
        run[ok & (late_in * late_out < 0) & (np.minimum(np.abs(late_in), np.abs(late_out)) > read)
            & (np.abs(late_over) <= lag + slack * np.abs(dt_over))] = k
    return run


def counter_of(r: Readings, sm: np.ndarray, i: int, rate_ghz: float, tick: int) -> list[int]:
    """The SMs, other than its owner's, whose counter reading i agrees with (`sm` per owner), by the
    other owners' readings on each SM nearest it in time, run on at rate_ghz to its time: within the
    readings' READ_TICKS and a speed change of CHANGE over the gap. Empty where none does or its own
    SM's does too. An owner whose clock jumps onto another SM's counter ran its CTA on two SMs. On
    the H200 the SMs' counters fall into 8 groups of 16 to 18 that count alike, to a cycle: a move
    within a group cannot be seen, and changes no interval's cycles."""
    who, t, c = int(r.owner[i]), int(r.t[i]), int(r.c[i])
    others = np.flatnonzero(r.owner != who)
    near = others[np.abs(r.t[others] - t) <= 100 * LOCAL_NS]  # the readings that predict it best, where there are
    others = near if near.size else others
    where = sm[r.owner[others]]
    agree = []
    for s in np.unique(where).tolist():
        j = others[where == s]
        k = j[np.argmin(np.abs(r.t[j] - t))]
        gap = abs(t - int(r.t[k]))
        if abs(c - (int(r.c[k]) + rate_ghz * (t - int(r.t[k])))) <= rate_ghz * (READ_TICKS * tick + CHANGE * gap):
            agree.append(s)
    return [] if int(sm[who]) in agree else agree


def _quantiles(x: np.ndarray) -> dict:
    return {"min": float(x.min()), "median": float(median(x)), "max": float(x.max())}


def calibrate(cycles: np.ndarray, ns: np.ndarray, sm: np.ndarray, tick: int) -> dict | None:
    """The launch's clock over each owner's whole span (its cycles and global-timer ns from its
    claim to its last event, one entry per owner that has both), for the picture's scale and the
    summary's headline; intervals are converted at local rates (`local_rates`), and the rates'
    changes in time are the summary's to report. {rate_ghz (the spans' cycles over their ns),
    uncertainty_ghz (the span-weighted standard deviation of the owners' rates about it), owners and
    sms it comes from, owner_rate_ghz and sm_rate_ghz (min, median, max), span_ns (min, median, max),
    tick_ns}; None when no owner's clock and timer both advanced. Owners with spans under 100 ticks
    count only when no longer one exists: the timer's truncation alone moves their rate by 1%."""
    ok = (ns > 0) & (cycles > 0)
    if not ok.any():
        return None
    long = ok & (ns >= 100 * tick)
    use = long if long.any() else ok
    c, t, s = cycles[use].astype(np.float64), ns[use].astype(np.float64), sm[use]
    r = c / t
    rate = float(c.sum() / t.sum())
    spread = float(np.sqrt(np.sum(t * (r - rate) ** 2) / t.sum())) if r.size > 1 else rate * tick / float(t[0])
    sms, at = np.unique(s, return_inverse=True)
    per_sm = np.bincount(at, c) / np.bincount(at, t)
    return {"rate_ghz": rate, "uncertainty_ghz": spread, "owners": int(r.size), "sms": int(sms.size),
            "owner_rate_ghz": _quantiles(r), "sm_rate_ghz": _quantiles(per_sm), "span_ns": _quantiles(t),
            "tick_ns": tick}
