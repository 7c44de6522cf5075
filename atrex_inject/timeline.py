"""A swimlane PNG of one launch: a subset of owners (rows) against time, interval instances as
bars coloured by interval, marks as ticks. For a glance, not for analysis: the numbers live in
the summary and the Perfetto trace."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .decode import Launch
from .summary import pairs, site_ids


def pick_owners(launch: Launch, max_rows: int) -> np.ndarray:
    """Claimed owners spread evenly over the launch (first, last and between), in owner order."""
    claimed = np.flatnonzero(launch.owners["claims"] > 0)
    if claimed.size <= max_rows:
        return claimed
    return claimed[np.linspace(0, claimed.size - 1, max_rows).round().astype(int)]


def render_png(launch: Launch, manifest: dict, out: str | Path, max_rows: int = 16) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = pick_owners(launch, max_rows)
    row_of = {int(o): i for i, o in enumerate(rows)}
    ev, own = launch.events, launch.owners
    t0 = ev["t_ns"].min() if ev["t_ns"].size else 0
    ids = site_ids(manifest)
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.38 * len(rows)), dpi=120)
    colors = plt.get_cmap("tab10")
    for k, iv in enumerate(manifest["intervals"]):
        p = pairs(launch, ids[iv["start"]], ids[iv["end"]])
        keep = np.isin(p["owner"], rows)
        for o in np.unique(p["owner"][keep]):
            sel = keep & (p["owner"] == o)
            spans = list(zip((p["t0"][sel] - t0) / 1e3, p["dur"][sel] / 1e3))
            ax.broken_barh(spans, (row_of[int(o)] - 0.4 + 0.8 * k / max(1, len(manifest["intervals"])),
                                   0.8 / max(1, len(manifest["intervals"]))),
                           facecolors=colors(k % 10), label=iv["name"] if o == np.unique(p["owner"][keep])[0] else None)
    endpoints = {ids[iv[x]] for iv in manifest["intervals"] for x in ("start", "end")}
    marks = np.isin(ev["owner"], rows) & ~np.isin(ev["site"], list(endpoints))
    markers = "v^osdP*X<>"
    for j, sid in enumerate(np.unique(ev["site"][marks])):
        sel = marks & (ev["site"] == sid)
        ax.scatter((ev["t_ns"][sel] - t0) / 1e3, [row_of[int(o)] for o in ev["owner"][sel]], marker=markers[j % 10],
                   s=22, color="black", zorder=3, label=manifest["sites"][int(sid)]["name"])
    roles = [g["role"] for g in manifest["groups"]]
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"CTA {int(own['cta'][o])} · {'warp ' + str(int(own['thread'][o]) // 32)} "
                        f"({roles[own['group'][o]]})" for o in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time since the launch's first event (µs)")
    ax.set_title(f"{manifest['kernel']} launch {launch.meta['launch_seq']}: {len(rows)} of "
                 f"{int((own['claims'] > 0).sum())} owners", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out
