"""The picture of a comparison (`compare --png`, and the report's section): one row per interval,
left both sides' distributions as ECDFs on one shared axis (each side's median dashed), right the
per-SM medians of each side, so a change that moved a few SMs (or all of them) shows."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from .compare import Comparison, compare_dirs, parse_map
from .fsio import write_atomic
from .timeline import _unit
from .stats import median, quantiles
from .progress import step

POINTS = 2000  # an ECDF is drawn through at most this many of its quantiles
COLORS = {"before": "#4c72b0", "after": "#dd8452"}


def _ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = np.sort(values)
    if v.size > POINTS:
        v = v[np.linspace(0, v.size - 1, POINTS).astype(np.int64)]
    return v, np.linspace(1 / v.size, 1.0, v.size)


def draw(c: Comparison):
    """The figure: a row per interval (none: one row saying so)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = c.pictures
    fig = plt.figure(figsize=(13, 0.9 + 2.6 * max(len(rows), 1)), dpi=100)
    grid = fig.add_gridspec(max(len(rows), 1), 2, width_ratios=[1.4, 1], hspace=0.7, wspace=0.25)
    for k, p in enumerate(rows):
        allv = np.concatenate([p["before"], p["after"]])
        unit, scale = _unit(float(median(allv)) if allv.size else 0.0)
        ax = fig.add_subplot(grid[k, 0])
        for side in ("before", "after"):
            v = p[side]
            if v.size:
                x, y = _ecdf(v)
                ax.step(x / scale, y, where="post", color=COLORS[side], label=f"{side.upper()} ({v.size})")
                ax.axvline(quantiles(v, (0.5,))[0] / scale, color=COLORS[side], ls="--", lw=0.8)
        change = "" if p["change"] is None else f" {100 * p['change']:+.1f}%"
        ci = "" if p["ci95"] is None else f" [{100 * p['ci95'][0]:+.1f}, {100 * p['ci95'][1]:+.1f}]"
        ax.set_title(f"{p['name']}: {p['verdict']}{change}{ci}", fontsize=10, loc="left")
        ax.set_xlabel(f"duration ({unit})", fontsize=8)
        ax.set_ylabel("fraction of instances", fontsize=8)
        ax.legend(fontsize=8, loc="lower right", frameon=False)
        ax.tick_params(labelsize=8)
        ax = fig.add_subplot(grid[k, 1])
        for side in ("before", "after"):
            pts = [(r["sm"], r[side]["median"]) for r in p["per_sm"] if r[side]["median"] is not None]
            if pts:
                sm, med = np.array(pts, dtype=float).T
                ax.scatter(sm, med / scale, s=9, color=COLORS[side], label=side.upper())
        ax.set_title("median per SM", fontsize=10, loc="left")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, frameon=False)
        ax.set_xlabel("SM", fontsize=8)
        ax.set_ylabel(unit, fontsize=8)
        ax.tick_params(labelsize=8)
    if not rows:
        fig.text(0.5, 0.5, "the specs name no intervals: see the site offsets in the text or --json", ha="center")
    r = c.result
    fig.suptitle(f"BEFORE {r['before']['path']} ({r['before']['kernel']}) -> AFTER {r['after']['path']} "
                 f"({r['after']['kernel']}); 95% intervals resample {r['statistics']['bootstrap']['resamples']}",
                 x=0.01, ha="left", fontsize=9)
    fig.subplots_adjust(left=0.06, right=0.99, top=1 - 0.6 / fig.get_figheight(), bottom=0.5 / fig.get_figheight())
    return fig


def png_bytes(c: Comparison) -> bytes:
    import matplotlib.pyplot as plt

    fig = draw(c)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def render_png(comparison: Comparison, out: str | Path) -> Path:
    out = Path(out)
    write_atomic(out, png_bytes(comparison))
    return out


def compare(before: str | Path, after: str | Path, mapping: list[str] | tuple[str, ...] = (),
            allow_workload_change: bool = False, allow_device_change: bool = False,
            measurement_before: str | Path | None = None, measurement_after: str | Path | None = None,
            png: str | Path | None = None) -> dict:
    """`atrex-inject compare`: compare_dirs' result, and the picture written to `png` when given."""
    step(f"comparing {before} with {after} (validating both, then the bootstrap)")
    c = compare_dirs(before, after, parse_map(mapping), allow_workload_change, allow_device_change,
                     measurement_before, measurement_after)
    if png is not None:
        step(f"drawing the picture {png}")
        c.result["png"] = str(render_png(c, png))
    return c.result
