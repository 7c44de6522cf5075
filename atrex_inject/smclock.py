"""The SM cycle clock of a capture recorded with `[capture] clock = true` (docs/summary.md,
"Resolution"): unwrapping its 32-bit reads, measuring its rate against the global timer in the
same launch, and the bound within which the two clocks must agree.

Each event of such a capture carries `%clock` (the low 32 bits of the SM's cycle counter, read a
few instructions after `%globaltimer`), and each owner header the clock and full timer read when
the owner was claimed (clk0, t0). One owner is one thread on one SM, so within an owner the clock
is one counter: an interval's cycles are its end's clock less its start's. decode unwraps each read
against its owner's clk0, as it unwraps the timer against t0: exact while the event lies within
2^32 cycles of the owner's start (2.17 s at 1.98 GHz), which validation's 2^31 ns window
(time_order) guarantees for any clock up to 2 GHz; a longer or faster clock could only show as a
disagreement with the timer, which the `clock_consistency` check reports.

The rate (cycles per ns, i.e. GHz) is measured per launch: each owner's cycles from its claim to
its last event against the global timer's ns over the same span; the launch's rate is the sum of
the cycles over the sum of the ns of the owners whose span is long enough to measure it to 1%
(MIN_SPAN_TICKS, while any is) and whose own rate lies within the tolerance of the median owner's
(the others are the check's to report), and its spread is given across owners and across SMs.
"""
from __future__ import annotations

import numpy as np

U32 = np.uint64(1 << 32)
# How far (relative) a step's cycles at the launch's rate may stray from the global timer's ns,
# beyond the timer's own error (AGREE_TICKS ticks): the SM clock's rate varying within a launch.
TOLERANCE = 0.01
# One tick: the timer truncates both ends of a step; one more: the clock is read a few instructions
# after the timer in an event, and at another distance in the owner's start stamp.
AGREE_TICKS = 2
# An owner whose span is shorter than this many ticks measures the rate worse than 1% (the timer
# truncates its ends): such owners calibrate only a launch that has no longer one.
MIN_SPAN_TICKS = 100


def unwrap(c_lo: np.ndarray, clk0: np.ndarray) -> np.ndarray:
    """32-bit %clock reads as int64 cycles on the owner's own counter: clk0 plus the uint32
    difference from it (the reads' owners' clk0 given per read)."""
    c = np.asarray(c_lo, dtype=np.uint64)
    base = np.asarray(clk0, dtype=np.uint64)
    return (base + ((c - base) & (U32 - np.uint64(1)))).view(np.int64)


def bound_ns(ns: np.ndarray | float, tick: int) -> np.ndarray | float:
    """How far a step's cycles (at the launch's rate) may lie from its global-timer ns."""
    return AGREE_TICKS * tick + TOLERANCE * np.abs(ns)


def agrees(cycles: np.ndarray, ns: np.ndarray, rate_ghz: float, tick: int) -> np.ndarray:
    """Per step: the cycles run forward and, at the launch's rate, agree with the timer's ns."""
    return (cycles >= 0) & (np.abs(cycles / rate_ghz - ns) <= bound_ns(ns, tick))


def steps(owner: np.ndarray, t_ns: np.ndarray, cycles: np.ndarray, t0: np.ndarray,
          clk0: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each event's step on both clocks, from the event before it in its owner, or, for an owner's
    first event, from the owner's start stamp (t0 and clk0 per owner, indexed by `owner`): (cycles,
    ns, first) for events in owner-then-sequence order."""
    first = np.r_[True, owner[1:] != owner[:-1]] if owner.size else np.zeros(0, dtype=bool)
    dc = np.where(first, cycles - clk0[owner], cycles - np.r_[cycles[:1], cycles[:-1]])
    dt = np.where(first, t_ns - t0[owner], t_ns - np.r_[t_ns[:1], t_ns[:-1]])
    return dc, dt, first


def _quantiles(x: np.ndarray) -> dict:
    return {"min": float(x.min()), "median": float(np.median(x)), "max": float(x.max())}


def calibrate(cycles: np.ndarray, ns: np.ndarray, sm: np.ndarray, tick: int) -> dict | None:
    """The launch's clock rate from each owner's span (its cycles and global-timer ns from its
    claim to its last event, one entry per owner that has both): {rate_ghz, uncertainty_ghz (the
    span-weighted standard deviation of the owners' rates about it, which includes each owner's
    own timer truncation, tick / span), owners and sms it comes from, owners_outside (owners whose
    rate lies beyond the tolerance of the median's), owners_short (spans under MIN_SPAN_TICKS
    ticks, left out while longer ones exist: their truncation alone passes 1%), owner_rate_ghz and
    sm_rate_ghz (min, median, max), span_ns (the spans used: min, median, max), tolerance,
    agree_ticks, tick_ns}; None when no owner's clock and timer both advanced."""
    ok = (ns > 0) & (cycles > 0)
    if not ok.any():
        return None
    long = ok & (ns >= MIN_SPAN_TICKS * tick)
    use = long if long.any() else ok
    c, t, s = cycles[use].astype(np.float64), ns[use].astype(np.float64), sm[use]
    r = c / t
    med = float(np.median(r))
    inside = np.abs(r - med) <= TOLERANCE * med + med * tick / t  # an owner's own truncation on top
    c, t, s, r_in = c[inside], t[inside], s[inside], r[inside]
    rate = float(c.sum() / t.sum())
    spread = float(np.sqrt(np.sum(t * (r_in - rate) ** 2) / t.sum())) if r_in.size > 1 else rate * tick / float(t[0])
    sms, at = np.unique(s, return_inverse=True)
    per_sm = np.bincount(at, c) / np.bincount(at, t)
    return {"rate_ghz": rate, "uncertainty_ghz": spread, "owners": int(r_in.size), "sms": int(sms.size),
            "owners_outside": int(r.size - r_in.size), "owners_short": int(np.count_nonzero(ok & ~use)),
            "owner_rate_ghz": _quantiles(r_in), "sm_rate_ghz": _quantiles(per_sm), "span_ns": _quantiles(t),
            "tolerance": TOLERANCE, "agree_ticks": AGREE_TICKS, "tick_ns": tick}
