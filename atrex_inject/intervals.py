"""The interval model: how the events of a named interval `start -> end` pair into instances.

Pairing rule: within one owner, events of the two sites in sequence order; an instance is a start
event immediately followed (among those two sites) by an end event. Its duration is t_end - t_start
in ns. The summary, the Perfetto export, the owner selection and the picture all pair through
here (validate's interval_pairing check counts the events this rule leaves unpaired); an
interval's site ids come from the manifest (manifest.Interval).
"""
from __future__ import annotations

import numpy as np

from .decode import Launch


def pairs(launch: Launch, start: int, end: int) -> dict[str, np.ndarray]:
    """Interval instances: event indices of each start and its end, owner, SM, times."""
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
