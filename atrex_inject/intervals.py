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
(decode's `Launch.meta.clock`): pairing keeps both its ends on one owner, one thread on one SM, so its
cycles are what that SM counted. Its ns are its cycles at its owner's local rate around it
(smclock.local_rates: the SM clock changes speed within a launch), and it is flagged `varied` when
the local rates at its start and at its end differ by more than their own uncertainty (the clock
changed speed inside it). An instance whose cycles imply a rate the device cannot run at
(smclock.RATE_GHZ; validate's clock_consistency names them), or one of whose ends had its clock read
apart from its timer (smclock.pauses: the warp paused between the two reads), keeps the global
timer's ns, in steps of its tick (32 ns on an H200), and `why` says why.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .decode import Launch
from .smclock import RATE_GHZ, READ_TICKS, impossible, local_rates, readings

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
        return {"i0": i0, "i1": i0 + 1, "owner": o, "sm": launch.owner_column("sm")[o], "t0": t0, "t1": t1,
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
    return {"i0": i0, "i1": i1, "owner": o, "sm": launch.owner_column("sm")[o], "t0": t0, "t1": t1, "dur": t1 - t0}


NS_STEPS = 16  # a clock-timed duration's ns are tallied to 1/16 ns (Durations.grid)


@dataclass(frozen=True)
class Durations:
    """How long each instance of an interval lasted (module docstring). `ns`: float64 where the
    launch has a calibrated clock (cycles at the local rate where `by_cycles`, else the timer's ns),
    else the timer's int64 ns as they are; `cycles`: int64, -1 where not `by_cycles`, None without a
    calibrated clock; `rates`: each instance's local rate in GHz (NaN where not `by_cycles`, None
    without) and `uncertainty` its relative uncertainty (smclock.local_rates); `varied`: the clock changed speed inside the instance; `rate_ghz`: the launch's
    whole-span rate (the scale of a cycle in ns for pictures and resampling grids; None without);
    `why`: why instances that are not timed by the clock are not ("" when all are)."""
    ns: np.ndarray
    cycles: np.ndarray | None
    by_cycles: np.ndarray
    rate_ghz: float | None
    why: str
    rates: np.ndarray | None = None
    uncertainty: np.ndarray | None = None
    varied: np.ndarray | None = None

    @property
    def resolution(self) -> str:
        """"cycles" (every instance timed by the clock), "globaltimer" (none) or "mixed"."""
        n = int(np.count_nonzero(self.by_cycles))
        return TIMER if n == 0 else CYCLES if n == self.by_cycles.size else MIXED

    def grid(self) -> tuple[np.ndarray, float]:
        """The durations as integers and how many of them make a ns, for exact tallies: the timer's
        ns and 1 without a calibrated clock, else the ns to 1/NS_STEPS ns (local rates make the ns
        of one cycle count differ between instances). A value / that is its ns, as in `ns`."""
        if self.rate_ghz is None:
            return self.ns, 1.0
        return np.rint(self.ns * NS_STEPS).astype(np.int64), float(NS_STEPS)


def durations(launch: Launch, p: dict[str, np.ndarray]) -> Durations:
    """The durations of the instances `p` (pairs() of this launch or part): by the clock where it
    can time them, else by the global timer (module docstring)."""
    dur = p["dur"]
    clock = launch.meta.clock
    if not launch.meta.clock_recorded:
        return Durations(dur, None, np.zeros(dur.size, dtype=bool), None,
                         "the capture records no %clock ([capture] clock = true records it)")
    if clock is None:
        return Durations(dur, None, np.zeros(dur.size, dtype=bool), None,
                         "no owner's %clock advanced with the global timer: its rate could not be measured")
    ev, o = launch.events, launch.owners
    r = readings(ev["owner"], ev["t_ns"], ev["cycles"], o["t0"], o["clk0"])
    a, b = r.point[p["i0"]], r.point[p["i1"]]
    cycles = r.c[b] - r.c[a]
    tick = launch.meta.timer_resolution_ns
    rates, u = local_rates(r, a, b, tick)
    read = READ_TICKS * tick
    lo, hi = RATE_GHZ
    paused = impossible(r, tick).paused  # per event: its clock and timer read apart (smclock.pauses)
    ok = ((cycles >= 0) & (cycles <= hi * (dur + read)) & (cycles >= lo * (dur - read))
          & (rates >= lo) & (rates <= hi) & ~paused[p["i0"]] & ~paused[p["i1"]])
    ns = np.where(ok, cycles / np.where(ok, rates, 1.0), dur.astype(np.float64))
    start, u0 = local_rates(r, a, a, tick)
    end, u1 = local_rates(r, b, b, tick)
    varied = ok & (np.abs(end - start) > u0 * start + u1 * end)
    why = "" if ok.all() else ("their cycles, or their owner's readings around them, imply a rate the SM clock "
                               "cannot run at (validate's clock_consistency names them), or an end's clock was "
                               "read apart from its timer (the warp paused between the two reads)")
    return Durations(ns, np.where(ok, cycles, -1), ok, clock["rate_ghz"], why, np.where(ok, rates, np.nan),
                     np.where(ok, u, np.nan), varied)


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
