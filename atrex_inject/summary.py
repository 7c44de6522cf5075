"""Named intervals `start -> end` and marks, recomputed from canonical events (docs/summary.md):
per interval count, quantiles, per SM and per owner, in ns and (with the SM clock) in cycles, and
the resolution they were timed at; per site its offsets from the launch's first event. Instances
come from intervals.pairs (the pairing rule), their durations from intervals.durations; everything
is numpy over the launch's event columns.
"""
from __future__ import annotations

import math

import numpy as np

from .decode import PART_EVENTS, Launch, capture_files, decode_parts
from .errors import AtrexError
from .intervals import CYCLES, durations, pairs
from .manifest import Manifest
from .smclock import LOCAL_NS, MODEL, merge, readings, speed
from .stats import run_medians
from .tally import QUANTILES, Tally, step_of
from .progress import step

FEW_TICKS = 10  # a median under this many timer ticks is mostly quantization: flagged


def timer_tick_ns(t_ns: np.ndarray) -> int | None:
    """The timer's resolution as the data shows it: the gcd of the timestamps' offsets from the
    first one (32 ns for %globaltimer on an H200). Durations are multiples of it."""
    t = np.asarray(t_ns, dtype=np.int64)
    return (step_of(t - t.min()) or None) if t.size else None


class Summarizer:
    """One launch's summary from its owner-range parts (decode.decode_parts) in one pass, so a
    capture larger than memory is summarized part by part. Per part, per-owner medians are final;
    each interval's durations (by SM) and every event's time (by site) go into a Tally (tally.py):
    counts on the timer's grid, or on 1/16 ns where the SM clock times them (Durations.grid), and
    their cycles, not the events themselves. `fixed_cost` names an interval between two probes with
    nothing between them: its median cycles are the recorder's fixed cost, reported beside the
    intervals and taken off in a column of its own."""

    def __init__(self, manifest: Manifest, fixed_cost: str | None = None):
        self.manifest = manifest
        n = len(manifest.intervals)
        self.dur = [Tally() for _ in range(n)]  # keyed by SM, on Durations.grid
        self.cycles = [Tally() for _ in range(n)]  # the instances timed by the clock, in cycles
        self.per_ns = [1.0] * n  # grid steps per ns
        self.by_cycles, self.why = [0] * n, [set() for _ in range(n)]  # instances timed by the clock; why not
        self.varied = [0] * n  # instances inside which the clock changed speed
        self.speed = None  # smclock.speed, merged over parts
        names = [iv.name for iv in manifest.intervals]
        if fixed_cost is not None and fixed_cost not in names:
            raise AtrexError(f"--fixed-cost {fixed_cost!r} is not an interval of the spec",
                             hint="name one of: " + ", ".join(names))
        self.fixed_cost, self.fixed = fixed_cost, None
        self.per_owner: list[list] = [[] for _ in range(n)]
        self.times = Tally()  # t_ns - t_ref, keyed by site
        self.launch = None
        self.events = self.owners = 0
        self.t_min, self.t_max = None, None
        self.tick, self.t_ref = 0, None  # gcd of every time's offset from t_ref, the first part's first time

    def add(self, part: Launch) -> None:
        ev = part.events
        self.launch, self.events = part, self.events + part.n_events
        self.owners += int(np.count_nonzero(part.owners["claims"] > 0))
        if ev["t_ns"].size:
            lo, hi = int(ev["t_ns"].min()), int(ev["t_ns"].max())
            self.t_min = lo if self.t_min is None else min(self.t_min, lo)
            self.t_max = hi if self.t_max is None else max(self.t_max, hi)
            if self.t_ref is None:
                self.t_ref = lo
            # the launch's timer tick (timer_tick_ns of all its times), part by part: gcds of
            # differences need no common origin
            t = ev["t_ns"] - self.t_ref
            self.tick = math.gcd(self.tick, step_of(t))
            known = ev["site"].view(np.uint32) < len(self.manifest.sites)  # unknown ids: validate's
            if known.all():
                self.times.add(t, ev["site"])
            else:
                self.times.add(t[known], ev["site"][known])
        if part.meta.clock:
            o = part.owners
            r = readings(ev["owner"], ev["t_ns"], ev["cycles"], o["t0"], o["clk0"])
            self.speed = merge(self.speed, speed(r, part.meta.timer_resolution_ns, o["smid"], part.owner_base))
        for k, iv in enumerate(self.manifest.intervals):
            p = pairs(part, iv.start_id, iv.end_id)
            d = durations(part, p)
            values, self.per_ns[k] = d.grid()
            self.by_cycles[k] += int(np.count_nonzero(d.by_cycles))
            if d.cycles is not None:
                self.cycles[k].add(d.cycles[d.by_cycles])
                self.varied[k] += int(np.count_nonzero(d.varied))
            if d.why and not d.by_cycles.all():
                self.why[k].add(d.why)
            self.dur[k].add(values, p["sm"])
            for r in run_medians(p["owner"], values):
                r["key"] += part.owner_base
                r["median"] /= self.per_ns[k]
                self.per_owner[k].append(r)

    def _note(self, k: int, resolution: str, n: int) -> str | None:
        """Why interval k's instances by the global timer are not in cycles (None: there are none)."""
        why = "; ".join(sorted(self.why[k]))
        if resolution == "mixed":
            return f"{n - self.by_cycles[k]} of {n} instances by the global timer: {why}"
        return why or None

    def result(self) -> dict:
        t_launch = self.t_min or 0
        tick = self.tick or None
        intervals = []
        for k, iv in enumerate(self.manifest.intervals):
            st, per_sm = self.dur[k].result()
            per, n = self.per_ns[k], st["count"]
            ns = {q: None if v is None else v / per for q, v in st.items() if q in QUANTILES}
            resolution = "globaltimer" if self.by_cycles[k] == 0 else CYCLES if self.by_cycles[k] == n else "mixed"
            spans = {"spans_iterations": self.manifest.spans[iv.name]} if iv.name in self.manifest.spans else {}
            intervals.append({"name": iv.name, "unit": "ns", **spans, "count": n, **ns,
                              "median_ticks": ns["median"] / tick if tick and n else None,
                              "per_sm": [{"key": sm, "count": r["count"], "median": r["middle"] / per}
                                         for sm, r in sorted(per_sm.items())],
                              "per_owner": self.per_owner[k],
                              "resolution": resolution if n else None,
                              "cycles": {"count": n, **{q: st[q] for q in QUANTILES}} if resolution == CYCLES and n
                              else None,
                              "resolution_note": self._note(k, resolution, n)})
        clock = self.launch.meta.clock
        if clock:
            self._clocked(intervals)
        per_site = self.times.result((self.t_ref or 0) - t_launch)[1]
        none = {"count": 0, **{q: None for q in QUANTILES}}
        marks = [{"site": s.name, "id": s.id, "offset_unit": "ns since the launch's first event",
                  **{q: per_site.get(s.id, none)[q] for q in none}} for s in self.manifest.sites]
        return {"launch": self.launch.name, "launch_seq": self.launch.meta.launch_seq, "events": self.events,
                "owners": self.owners, "t_first_ns": t_launch, "timer_tick_ns": tick,
                "span_ns": self.t_max - t_launch if self.t_max is not None else 0,
                "intervals": intervals, "marks": marks,
                "clock": clock and {**clock, "model": MODEL, "speed": self._speed(t_launch)},
                **({"fixed_cost": self.fixed} if clock else {})}

    def _speed(self, t_launch: int) -> dict | None:
        """smclock.speed with its times as ns since the launch's first event."""
        return self.speed and {**self.speed, **{k: {**self.speed[k], "t_ns": self.speed[k]["t_ns"] - t_launch}
                                                for k in ("slowest", "fastest")}}

    def _clocked(self, intervals: list[dict]) -> None:
        """Each interval's cycles (the instances the clock timed), the rate model, how many instances
        the clock changed speed inside, and, with a fixed cost, the cycles less it (labelled)."""
        stats = [self.cycles[k].result()[0] for k in range(len(intervals))]
        if self.fixed_cost is not None:
            k = [iv.name for iv in self.manifest.intervals].index(self.fixed_cost)
            if stats[k]["count"]:
                self.fixed = {"interval": self.fixed_cost, "cycles": stats[k]["median"],
                              "what": "the median cycles of an interval between two probes with nothing between "
                                      "them: the recorder's own cost per event, as the clock counts it"}
        for r, st, varied in zip(intervals, stats, self.varied):
            r["rate_model"], r["varied"] = MODEL, varied
            r["cycles"] = st if st["count"] else None
            if self.fixed and st["count"]:
                r["cycles_less_fixed_cost"] = {"count": st["count"], "fixed_cost": self.fixed["cycles"],
                                               **{q: st[q] - self.fixed["cycles"] for q in QUANTILES}}


def summarize_launch(launch: Launch, manifest: Manifest, fixed_cost: str | None = None) -> dict:
    s = Summarizer(manifest, fixed_cost)
    s.add(launch)
    return s.result()


def summarize_file(path, manifest: Manifest, part_events: int | None = None, fixed_cost: str | None = None) -> dict:
    """Summary of one raw capture file, decoded `part_events` events at a time (None: at once)."""
    s = Summarizer(manifest, fixed_cost)
    for part in decode_parts(path, manifest, part_events):
        s.add(part)
    return s.result()


def summarize_capture(capture_dir, manifest: Manifest, fixed_cost: str | None = None) -> dict:
    """`atrex-inject summary`: {"launches": [summary per launch file]}, each streamed in parts of
    PART_EVENTS events, so a capture larger than memory is summarized."""
    def one(f):
        step(f"summarizing {f.name}")
        return summarize_file(f, manifest, PART_EVENTS, fixed_cost)
    return {"launches": [one(f) for f in capture_files(capture_dir)]}


def quantized(r: dict) -> bool:
    """An interval timed by the global timer whose median is under FEW_TICKS of its ticks."""
    return r.get("resolution") != CYCLES and r.get("median_ticks") is not None and r["median_ticks"] < FEW_TICKS


def clock_line(clock: dict | None) -> str:
    """The SM clock a launch's cycles were converted with, in words (summary text, picture, report)."""
    if not clock:
        return "no %clock recorded: intervals are timed by the global timer"
    sm = clock["sm_rate_ghz"]
    line = (f"SM clock {clock['rate_ghz']:.4f} GHz ± {clock['uncertainty_ghz']:.4f} over the owners' spans, measured "
            f"on {clock['owners']} owners of {clock['sms']} SMs (per SM {sm['min']:.4f}-{sm['max']:.4f}); cycles "
            f"converted at each owner's local rate ({LOCAL_NS / 1e3:g} us either side)")
    speed = clock.get("speed")
    if not speed:
        return line
    lo, hi = speed["slowest"], speed["fastest"]
    where = lambda x: f"{x['ghz']:.4f} GHz (SM {x['sm']}, owner {x['owner']}, at {x['t_ns'] / 1e3:.1f} us)"
    return line + (f"; the clock changed speed: {where(lo)} to {where(hi)}" if speed["changed"] else
                   f"; steady within its measurement ({lo['ghz']:.4f}-{hi['ghz']:.4f} GHz)")


RESOLUTION_WORD = {CYCLES: "cycles", "globaltimer": "timer", "mixed": "mixed", None: "-"}


def render_text(summary: dict) -> str:
    def flag(r: dict) -> str:
        spans = (f"  spans {r['spans_iterations']} iterations (a strip-mined group)"
                 if r.get("spans_iterations") else "")
        varied = f"  {r['varied']} instances: the clock changed speed inside" if r.get("varied") else ""
        return spans + varied + (f"  median {r['median_ticks']:.0f} ticks: quantized" if quantized(r) else "")

    def cycles(r: dict) -> str:
        """The median in cycles and the resolution (intervals only)."""
        median = f"{r['cycles']['median']:>10.0f}" if r.get("cycles") else f"{'-':>10}"
        less = r.get("cycles_less_fixed_cost")
        word = RESOLUTION_WORD[r.get("resolution")]
        return f"{median}  " + (f"{word:<10}" + (f"{less['median']:>10.0f}" if less else f"{'-':>10}")
                                if fixed else word)

    def table(title: str, rows: list[dict], key: str, durations: bool) -> list[str]:
        head = [f"  {title:<32}{'count':>8}" + "".join(f"{k:>10}" for k in QUANTILES) + "  (us)"
                + (f"{'cycles':>10}  resolution" + ("  less fixed cost" if fixed else "") if durations else "")]
        return head + [f"  {r[key]:<32}{r['count']:>8}" + "".join(
            f"{r[k] / 1e3:>10.3f}" if r[k] is not None else f"{'-':>10}" for k in QUANTILES)
            + (cycles(r) if durations else "") + flag(r) for r in rows]

    tick = summary.get("timer_tick_ns")
    clock = summary.get("clock")
    fixed = summary.get("fixed_cost")
    timer = (f"{tick} ns" + ("" if clock else " (durations are multiples of it)") if tick
             else "unknown (fewer than 2 times)")
    return "\n".join([f"{summary['launch']}: {summary['events']} events from {summary['owners']} owners, "
                      f"span {summary['span_ns'] / 1e3:.1f} us, timer tick {timer}; {clock_line(clock)}",
                      *table("interval", summary["intervals"], "name", True),
                      *([f"  fixed cost {fixed['cycles']:.0f} cycles per probe (median of {fixed['interval']}: "
                         "two probes, nothing between), taken off in the last column"] if fixed else []),
                      *table("mark (offset from first event)", summary["marks"], "site", False)])
