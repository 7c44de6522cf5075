"""The interval model: how the events of a named interval `start -> end` pair into instances, and
how long each instance lasted.

Pairing rule: within one owner, events of the two sites in sequence order; an instance is a start
event immediately followed (among those two sites) by an end event. The summary, the Perfetto
export, the owner selection and the picture all pair through here (validate's interval_pairing
check counts the events this rule leaves unpaired); an interval's site ids come from the manifest
(manifest.Interval).

Durations (docs/summary.md, "Resolution"): `durations` is the one place that says how long each
instance lasted, in ns and, where the capture carries the SM clock, in cycles; every consumer (the
summary, the picture, the Perfetto slices, the report, compare) reads it. An instance is timed by
the clock when the launch recorded %clock (`[capture] clock = true`) and its rate could be measured
(smclock.calibrate, decode's meta["clock"]), and its cycles agree with the global timer within
smclock's bound: both ends were then recorded by one owner on one SM (pairing keeps both ends on
one owner; a CTA moved to another SM would read another SM's counter, which the bound catches). Its
ns are its cycles at the launch's rate. Every other instance keeps the global timer's ns, in steps of
its tick (32 ns on an H200), and `why` says why.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .decode import Launch
from .smclock import agrees

CYCLES, TIMER, MIXED = "cycles", "globaltimer", "mixed"


def pairs(launch: Launch, start: int, end: int) -> dict[str, np.ndarray]:
    """Interval instances: event indices of each start and its end, owner, SM, times, and `dur`,
    the global timer's t1 - t0 (durations() gives the duration at the capture's finest resolution)."""
    ev = launch.events
    site, owner, t = ev["site"], ev["owner"], ev["t_ns"]
    if (start != end and site.size % 2 == 0 and (site[0::2] == start).all() and (site[1::2] == end).all()
            and np.array_equal(owner[0::2], owner[1::2])):
        # every owner's events are start, end, start, end... (a loop's interval, the common case):
        # the pairs are the even and odd events, no search and no gathers
        i0 = np.arange(0, site.size, 2)
        o, t0, t1 = owner[0::2], t[0::2], t[1::2]
        return {"i0": i0, "i1": i0 + 1, "owner": o, "sm": launch.owners["col_sm"][o], "t0": t0, "t1": t1,
                "dur": t1 - t0}
    is_a = site == start
    sel = is_a | (site == end)
    if sel.all():  # the two sites are all there is: no gathers
        is_start, own = is_a, owner
    else:
        idx = np.flatnonzero(sel)
        is_start, own = is_a[idx], owner[idx]
    k = np.flatnonzero(is_start[:-1] & ~is_start[1:] & (own[:-1] == own[1:]))
    i0, i1 = (k, k + 1) if own is owner else (idx[k], idx[k + 1])
    o = owner[i0]
    t0, t1 = t[i0], t[i1]
    return {"i0": i0, "i1": i1, "owner": o, "sm": launch.owners["col_sm"][o], "t0": t0, "t1": t1, "dur": t1 - t0}


@dataclass(frozen=True)
class Durations:
    """How long each instance of an interval lasted (module docstring). `ns`: float64 where the
    launch has a calibrated clock (cycles / rate where `by_cycles`, else the timer's ns), else the
    timer's int64 ns as they are; `cycles`: int64, -1 where not `by_cycles`, None without a
    calibrated clock; `rate_ghz`: cycles per ns (None without); `why`: why instances that are not
    timed by the clock are not ("" when all are)."""
    ns: np.ndarray
    cycles: np.ndarray | None
    by_cycles: np.ndarray
    rate_ghz: float | None
    why: str

    @property
    def resolution(self) -> str:
        """"cycles" (every instance timed by the clock), "globaltimer" (none) or "mixed"."""
        n = int(np.count_nonzero(self.by_cycles))
        return TIMER if n == 0 else CYCLES if n == self.by_cycles.size else MIXED

    def grid(self) -> tuple[np.ndarray, float]:
        """The durations as integers and how many of them make a ns, for exact tallies: cycles (the
        timer's instances at the launch's rate, rounded to a cycle) and the rate with a calibrated
        clock; else the timer's ns and 1. A value / that is its ns, as in `ns`."""
        if self.rate_ghz is None:
            return self.ns, 1.0
        return np.where(self.by_cycles, self.cycles, np.rint(self.ns * self.rate_ghz)).astype(np.int64), self.rate_ghz


def durations(launch: Launch, p: dict[str, np.ndarray]) -> Durations:
    """The durations of the instances `p` (pairs() of this launch or part): by the clock where it
    can time them, else by the global timer (module docstring)."""
    dur = p["dur"]
    clock = launch.meta.get("clock", False)
    if clock is False:
        return Durations(dur, None, np.zeros(dur.size, dtype=bool), None,
                         "the capture records no %clock ([capture] clock = true records it)")
    if clock is None:
        return Durations(dur, None, np.zeros(dur.size, dtype=bool), None,
                         "no owner's %clock advanced with the global timer: its rate could not be measured")
    rate = clock["rate_ghz"]
    c = launch.events["cycles"]
    cycles = c[p["i1"]] - c[p["i0"]]
    ok = agrees(cycles, dur, rate, launch.meta["timer_resolution_ns"])
    ns = np.where(ok, cycles / rate, dur.astype(np.float64))
    why = "" if ok.all() else ("their cycles disagree with the global timer beyond the bound (validate's "
                               "clock_consistency names them)")
    return Durations(ns, np.where(ok, cycles, -1), ok, rate, why)


def drawn_ends(p: dict[str, np.ndarray], d: Durations) -> np.ndarray:
    """Where each instance ends on the global timer's axis (a Perfetto slice, a bar of the picture's
    swimlane): its start event's time plus its duration where the SM clock times it (to the ns),
    else its end event's time; never past the start of the owner's next instance, so that one
    owner's slices of an interval do not overlap (the timer may read a start up to a tick early)."""
    if not d.by_cycles.any():
        return p["t1"]
    end = np.where(d.by_cycles, p["t0"] + np.rint(d.ns).astype(np.int64), p["t1"])
    same = np.r_[p["owner"][1:] == p["owner"][:-1], False]
    return np.where(same, np.minimum(end, np.r_[p["t0"][1:], 0]), end)
