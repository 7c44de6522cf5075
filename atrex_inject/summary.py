"""Named intervals `start -> end` and marks, recomputed from canonical events (docs/summary.md).

Pairing rule: within one owner, events of the two sites in sequence order; an interval instance is
a start event immediately followed (among those two sites) by an end event. Its duration is
t_end - t_start in ns. Everything is numpy over the launch's event columns.
"""
from __future__ import annotations

import numpy as np

from .decode import Launch

QUANTILES = {"min": 0.0, "p10": 0.10, "median": 0.50, "p90": 0.90, "max": 1.0}
FEW_TICKS = 10  # a median under this many timer ticks is mostly quantization: flagged


def timer_tick_ns(t_ns: np.ndarray) -> int | None:
    """The timer's resolution as the data shows it: the gcd of the timestamps' offsets from the
    first one (32 ns for %globaltimer on an H200). Durations are multiples of it."""
    t = np.asarray(t_ns, dtype=np.int64)
    tick = int(np.gcd.reduce(t - t.min())) if t.size else 0
    return tick or None


def site_ids(manifest: dict) -> dict[str, int]:
    return {s["name"]: s["id"] for s in manifest["sites"]}


def pairs(launch: Launch, start: int, end: int) -> dict[str, np.ndarray]:
    """Interval instances: event indices of each start and its end, owner, SM, times."""
    ev = launch.events
    idx = np.flatnonzero((ev["site"] == start) | (ev["site"] == end))
    is_start = ev["site"][idx] == start
    own = ev["owner"][idx]
    ok = is_start[:-1] & ~is_start[1:] & (own[:-1] == own[1:])
    i0, i1 = idx[:-1][ok], idx[1:][ok]
    return {"i0": i0, "i1": i1, "owner": ev["owner"][i0], "sm": launch.owners["col_sm"][ev["owner"][i0]], "t0": ev["t_ns"][i0],
            "t1": ev["t_ns"][i1], "dur": ev["t_ns"][i1] - ev["t_ns"][i0]}


def stats(x: np.ndarray) -> dict:
    if x.size == 0:
        return {"count": 0, **{k: None for k in QUANTILES}}
    q = np.quantile(x, list(QUANTILES.values()), method="inverted_cdf")
    return {"count": int(x.size), **{k: float(v) for k, v in zip(QUANTILES, q)}}


def _grouped(keys: np.ndarray, values: np.ndarray) -> list[dict]:
    """Per key: count and median of values (keys sorted)."""
    if keys.size == 0:
        return []
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order]
    uniq, first, counts = np.unique(k, return_index=True, return_counts=True)
    lo = first + (counts - 1) // 2
    hi = first + counts // 2
    med = (v[lo] + v[hi]) / 2
    return [{"key": int(a), "count": int(c), "median": float(m)} for a, c, m in zip(uniq, counts, med)]


def summarize_launch(launch: Launch, manifest: dict) -> dict:
    ids = site_ids(manifest)
    ev = launch.events
    t_launch = int(ev["t_ns"].min()) if ev["t_ns"].size else 0
    tick = timer_tick_ns(ev["t_ns"])
    intervals = []
    for iv in manifest["intervals"]:
        p = pairs(launch, ids[iv["start"]], ids[iv["end"]])
        st = stats(p["dur"])
        intervals.append({"name": iv["name"], "unit": "ns", **st,
                          "median_ticks": st["median"] / tick if tick and st["count"] else None,
                          "per_sm": _grouped(p["sm"].astype(np.int64), p["dur"].astype(np.float64)),
                          "per_owner": _grouped(p["owner"].astype(np.int64), p["dur"].astype(np.float64))})
    marks = []
    for s in manifest["sites"]:
        t = ev["t_ns"][ev["site"] == s["id"]] - t_launch
        marks.append({"site": s["name"], "id": s["id"], "offset_unit": "ns since the launch's first event",
                      **stats(t.astype(np.float64))})
    return {"launch": launch.name, "launch_seq": launch.meta["launch_seq"], "events": launch.n_events,
            "owners": int((launch.owners["claims"] > 0).sum()), "t_first_ns": t_launch, "timer_tick_ns": tick,
            "span_ns": int(ev["t_ns"].max() - t_launch) if ev["t_ns"].size else 0,
            "intervals": intervals, "marks": marks}


def render_text(summary: dict) -> str:
    def flag(r: dict) -> str:
        few = r.get("median_ticks") is not None and r["median_ticks"] < FEW_TICKS
        return f"  median {r['median_ticks']:.0f} ticks: quantized" if few else ""

    def table(title: str, rows: list[dict], key: str) -> list[str]:
        head = [f"  {title:<32}{'count':>8}" + "".join(f"{k:>10}" for k in QUANTILES) + "  (us)"]
        return head + [f"  {r[key]:<32}{r['count']:>8}" + "".join(
            f"{r[k] / 1e3:>10.3f}" if r[k] is not None else f"{'-':>10}" for k in QUANTILES) + flag(r) for r in rows]

    tick = summary.get("timer_tick_ns")
    return "\n".join([f"{summary['launch']}: {summary['events']} events from {summary['owners']} owners, "
                      f"span {summary['span_ns'] / 1e3:.1f} us, timer tick "
                      + (f"{tick} ns (durations are multiples of it)" if tick else "unknown (fewer than 2 times)"),
                      *table("interval", summary["intervals"], "name"),
                      *table("mark (offset from first event)", summary["marks"], "site")])
