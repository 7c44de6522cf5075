"""The picture that answers the spec's question, for one launch: one row per interval, with the
distribution of its durations per owner role (median, p10/p90, in timer ticks, or in cycles where
the SM clock times them: intervals.durations) next to a swimlane
zoomed on a window that shows a few of its instances among everything else recorded there.

A launch can last 600 µs while its intervals last 0.5 µs; drawn to the launch's scale they are
invisible. So each row gets its own window (`auto`): centred on the interval's median-duration
instance and wide enough for about three of them on that owner (or the whole instance, margins
included, when an owner records it once); the lanes are the owners with the most events in that
window. A fixed window (µs since the launch's first event) applies to every row. Lanes are named
as in the Perfetto trace, with their SM. `draw` returns the figure and what each row shows, so
tests and the JSON read the picture's facts from its data, not its pixels.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .decode import Launch
from .errors import AtrexError
from .owners import cta_name, owner_name
from .selection import parse_window as parse_span
from .intervals import CYCLES, Durations, drawn_ends, durations, pairs
from .manifest import Manifest
from .smclock import MODEL
from .stats import median, quantiles, rank
from .summary import FEW_TICKS, clock_line, timer_tick_ns

INSTANCES_SHOWN = 3  # instances of the row's interval an auto window spans on the median instance's owner
MARK_SPACING_PX = 7  # marks closer than this on one lane are drawn as ticks instead of symbols


@dataclass(frozen=True)
class Window:
    """A time window in ns since the launch's first event."""
    start: float
    end: float


def parse_window(text: str) -> Window | None:
    """`auto` (None) or `START:END` in µs since the launch's first event (`--png-window`)."""
    if text == "auto":
        return None
    lo, hi = parse_span(text, "--png-window", "us", open_ends=False)
    return Window(float(lo), float(hi))


def _unit(ns: float) -> tuple[str, float]:
    return ("ns", 1.0) if ns < 1e3 else ("µs", 1e3) if ns < 1e6 else ("ms", 1e6)


def median_instance(dur: np.ndarray) -> int:
    """Index of the instance whose duration (intervals.durations' ns) is the median (`stats.rank`)."""
    return int(np.argsort(dur, kind="stable")[rank(dur.size, 0.5)])


def auto_window(p: dict, dur: np.ndarray, t_first: int, span: float) -> Window | None:
    """Around the median-duration instance: about INSTANCES_SHOWN of them on its owner."""
    if dur.size == 0:
        return None
    m = median_instance(dur)
    t0, t1 = float(p["t0"][m] - t_first), float(p["t1"][m] - t_first)
    starts = np.sort(p["t0"][p["owner"] == p["owner"][m]])
    period = float(median(np.diff(starts))) if starts.size > 1 else 0.0
    if period <= t1 - t0:  # recorded once per owner (or overlapping): the instance with margins
        pad = max(t1 - t0, 1.0) / 4
        a, b = t0 - pad, t1 + pad
    else:
        a, b = t0 - period / 2, max(t0 + (INSTANCES_SHOWN - 0.5) * period, t1 + period / 4)
    return Window(max(a, 0.0), min(b, span))  # never past the launch's first and last events


def _lanes(launch: Launch, w: Window, t_first: int, max_rows: int, must: int | None) -> np.ndarray:
    """Owners with the most events in the window (and the median instance's owner), in trace order:
    SM, then CTA, then thread."""
    ev, own = launch.events, launch.owners
    t = ev["t_ns"] - t_first
    inside = ev["owner"][(t >= w.start) & (t <= w.end)]
    counts = np.bincount(inside, minlength=own["claims"].size)
    ranked = [o for o in np.argsort(-counts, kind="stable")[:max_rows] if counts[o] > 0]
    if must is not None and must not in ranked:
        ranked = ranked[:max_rows - 1] + [must]
    ranked = np.array(ranked, dtype=np.int64)
    return ranked[np.lexsort((own["thread"][ranked], own["cta"][ranked], own["smid"][ranked]))]


def lane_name(launch: Launch, manifest: Manifest, o: int) -> str:
    own = launch.owners
    return (f"SM {int(own['smid'][o])} · {cta_name(int(own['cta'][o]), launch.meta.grid)} · "
            f"{owner_name(manifest.role_of_group(int(own['group'][o])), int(own['thread'][o]))}")


def _distribution(ax, launch: Launch, manifest: Manifest, name: str, p: dict, d: Durations, tick: int | None,
                  color) -> dict:
    """Histogram of durations (intervals.durations) per owner role, with median and p10/p90, in the
    unit that fits; timer ticks, or cycles where the SM clock times every instance."""
    ax.set_gid(f"dist:{name}")
    if d.ns.size == 0:
        ax.text(0.5, 0.5, "no instances", ha="center", va="center", transform=ax.transAxes)
        return {"count": 0}
    dur = d.ns.astype(np.float64)
    p10, med, p90 = quantiles(dur, (0.1, 0.5, 0.9))
    unit, scale = _unit(med)
    lo, hi = dur.min(), dur.max()
    by_cycles = d.resolution == CYCLES
    step = 1 / d.rate_ghz if by_cycles else tick  # one bar per value the clock can read
    if step and (hi - lo) / step <= 80:  # the quantization is visible
        edges = np.arange(lo - step / 2, hi + step, step)
    else:
        edges = np.linspace(lo, hi if hi > lo else lo + 1, 61)
    roles = np.array([g.role.value for g in manifest.groups])[launch.owners["group"][p["owner"]]]
    for r in np.unique(roles):
        ax.hist(dur[roles == r] / scale, bins=edges / scale, alpha=0.8 if r == roles[0] else 0.45, color=color,
                label=f"{r} ({int((roles == r).sum())})", gid=f"hist:{name}:{r}")
    for q, v, style in (("p10", p10, ":"), ("median", med, "-"), ("p90", p90, ":")):
        ax.axvline(v / scale, color="black", linestyle=style, linewidth=1.1, gid=f"{q}:{name}")
    ticks = float(med / tick) if tick else None
    cycles = quantiles(d.cycles, (0.5,))[0] if by_cycles else None
    count = f" = {cycles:.0f} cycles" if by_cycles else f" = {ticks:.0f} ticks" if ticks else ""
    ax.set_title(f"{name}: median {med / scale:.4g} {unit}{count}"
                 + f"  (p10 {p10 / scale:.4g}, p90 {p90 / scale:.4g} {unit})", fontsize=9, loc="left")
    if not by_cycles and ticks is not None and ticks < FEW_TICKS:
        ax.text(0.99, 0.95, f"median under {FEW_TICKS} timer ticks ({tick} ns): quantized",
                ha="right", va="top", color="crimson", fontsize=8, transform=ax.transAxes)
    ax.set_xlabel(f"duration ({unit}); {p['dur'].size} instances", fontsize=8)
    ax.set_ylabel("instances", fontsize=8)
    ax.legend(title="owner role", fontsize=7, title_fontsize=7, frameon=False, loc="upper right",
              bbox_to_anchor=(1.0, 0.85))
    ax.tick_params(labelsize=7)
    clocked = {} if d.rates is None else {"rate_model": MODEL, "varied": int(np.count_nonzero(d.varied))}
    return {"count": int(dur.size), "median_ns": float(med), "p10_ns": float(p10), "p90_ns": float(p90),
            "unit": unit, "median_ticks": ticks, "resolution": d.resolution, "median_cycles": cycles, **clocked}


def _bars(x: np.ndarray, width: np.ndarray, y: np.ndarray, height: float, **style):
    """Rectangles from (x, y), `width` wide and `height` high, as one collection: a swimlane holds
    hundreds of instances, and as many patches they took most of the picture's time to make and
    draw."""
    from matplotlib.collections import PolyCollection

    x1, y1 = x + width, y + height
    verts = np.stack([np.stack([x, y], 1), np.stack([x1, y], 1), np.stack([x1, y1], 1), np.stack([x, y1], 1)], 1)
    return PolyCollection(verts, facecolors=style.pop("color"), edgecolors="none", **style)


def _swimlane(ax, launch, manifest, k: int, w: Window, lanes, all_pairs, t_first, colors, markers) -> int:
    """Every interval's instances and every mark in the window on the given lanes; returns how many
    complete instances of interval k lie inside the window."""
    name = manifest.intervals[k].name
    ax.set_gid(f"lanes:{name}")
    ev = launch.events
    row_of = {int(o): i for i, o in enumerate(lanes)}
    n_iv = len(manifest.intervals)
    h = 0.8 / n_iv
    complete = 0
    for j, (iv, p) in enumerate(zip(manifest.intervals, all_pairs)):
        a, b = p["t0"] - t_first, p["t1"] - t_first
        keep = np.isin(p["owner"], lanes) & (b >= w.start) & (a <= w.end)
        if j == k:
            complete = int((keep & (a >= w.start) & (b <= w.end)).sum())
        if not keep.any():
            continue
        rows = np.array([row_of[int(o)] for o in p["owner"][keep]])
        ax.add_collection(_bars(a[keep] / 1e3, np.maximum(b[keep] - a[keep], 1) / 1e3, rows - 0.4 + j * h, h,
                                color=colors[j], alpha=1.0 if j == k else 0.45, label=iv.name, gid=f"bars:{iv.name}"))
    t = ev["t_ns"] - t_first
    inside = (np.isin(ev["owner"], lanes) & (t >= w.start) & (t <= w.end)
              & ~np.isin(ev["site"], list(manifest.endpoint_ids)))
    width_px = ax.get_window_extent().width or 800
    for sid in np.unique(ev["site"][inside]):
        sel = inside & (ev["site"] == sid)
        per_lane = np.bincount(ev["owner"][sel]).max()
        crowded = per_lane > width_px / MARK_SPACING_PX
        ax.scatter(t[sel] / 1e3, [row_of[int(o)] for o in ev["owner"][sel]], s=30 if crowded else 18,
                   marker="|" if crowded else markers[int(sid) % len(markers)], color="black", linewidths=0.8,
                   zorder=3, label=manifest.sites[int(sid)].name, gid=f"marks:{manifest.sites[int(sid)].name}")
    ax.set_xlim(w.start / 1e3, w.end / 1e3)
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([lane_name(launch, manifest, int(o)) for o in lanes], fontsize=7)
    ax.tick_params(axis="x", labelsize=7)
    ax.set_xlabel("µs since the launch's first event", fontsize=8)
    ax.set_title(f"{w.start / 1e3:.2f}–{w.end / 1e3:.2f} µs: {complete} complete instance(s) of {name} "
                 f"on {len(lanes)} lanes", fontsize=9, loc="left")
    ax.grid(axis="x", alpha=0.3)
    return complete


def draw(launch: Launch, manifest: Manifest, window: Window | None = None, max_rows: int = 8):
    """The figure and, per interval, what its row shows (window, lanes, complete instances)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    intervals = manifest.intervals
    if not intervals:
        raise AtrexError("the spec names no intervals: there is nothing for the picture to compare",
                         hint="add `intervals = [\"a -> b\"]` to the spec, or open the Perfetto trace")
    ev = launch.events
    t_first = int(ev["t_ns"].min()) if ev["t_ns"].size else 0
    span = float(ev["t_ns"].max() - t_first) if ev["t_ns"].size else 0.0
    tick = timer_tick_ns(ev["t_ns"])
    all_pairs = [pairs(launch, iv.start_id, iv.end_id) for iv in intervals]
    all_durations = [durations(launch, p) for p in all_pairs]
    # instances are drawn from their start event as long as they lasted (as in the Perfetto trace)
    all_pairs = [{**p, "t1": drawn_ends(p, d)} for p, d in zip(all_pairs, all_durations)]
    colors = [plt.get_cmap("tab10")(j % 10) for j in range(len(intervals))]
    fig = plt.figure(figsize=(15, 0.9 + 2.5 * len(intervals)), dpi=110)
    grid = fig.add_gridspec(len(intervals), 2, width_ratios=[1, 2.4], hspace=0.65, wspace=0.42)
    rows = []
    for k, (iv, p, d) in enumerate(zip(intervals, all_pairs, all_durations)):
        dist = _distribution(fig.add_subplot(grid[k, 0]), launch, manifest, iv.name, p, d, tick, colors[k])
        ax = fig.add_subplot(grid[k, 1])
        w = window or auto_window(p, d.ns, t_first, span)
        must = int(p["owner"][median_instance(d.ns)]) if window is None and w is not None else None
        lanes = _lanes(launch, w, t_first, max_rows, must) if w is not None else np.zeros(0, dtype=np.int64)
        if lanes.size == 0:
            ax.set_gid(f"lanes:{iv.name}")
            ax.text(0.5, 0.5, "no instances to zoom on" if w is None else "no events in this window",
                    ha="center", va="center", transform=ax.transAxes)
            rows.append({"interval": iv.name, **dist, "window_us": w and [w.start / 1e3, w.end / 1e3],
                         "lanes": [], "complete_in_window": 0})
            continue
        complete = _swimlane(ax, launch, manifest, k, w, lanes, all_pairs, t_first, colors, "v^osdP*X<>")
        rows.append({"interval": iv.name, **dist, "window_us": [w.start / 1e3, w.end / 1e3],
                     "lanes": [lane_name(launch, manifest, int(o)) for o in lanes], "complete_in_window": complete})
    handles = {}
    for ax in fig.axes:
        if (ax.get_gid() or "").startswith("lanes:"):
            for hnd, lab in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(lab, hnd)
    order = [iv.name for iv in intervals] + [s.name for s in manifest.sites]
    handles = {lab: handles[lab] for lab in order if lab in handles}
    fig.legend(handles.values(), handles.keys(), loc="upper right", ncols=min(6, len(handles)) or 1, fontsize=8,
               frameon=False)
    fig.suptitle(f"{manifest.question or manifest.kernel}\n{manifest.kernel} launch "
                 f"{launch.meta.launch_seq}, {int((launch.owners['claims'] > 0).sum())} owners, timer tick "
                 f"{tick or '?'} ns; {clock_line(launch.meta.clock)}", x=0.01, ha="left", fontsize=10)
    fig.subplots_adjust(left=0.05, right=0.99, top=1 - 0.85 / fig.get_figheight(), bottom=0.55 / fig.get_figheight())
    return fig, rows


def render_png(launch: Launch, manifest: Manifest, out: str | Path, window: Window | None = None,
               max_rows: int = 8) -> tuple[Path, list[dict]]:
    import matplotlib.pyplot as plt

    fig, rows = draw(launch, manifest, window, max_rows)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out, rows
