"""Which interval each site starts and ends: the backend's check and the rewriter's range tokens
read it from here."""
from __future__ import annotations


def interval_ends(spec) -> tuple[dict[str, int], dict[str, int]]:
    """(site -> the interval it starts, site -> the interval it ends): an IKeT range token belongs
    to one range, so a site starts at most one interval and ends at most one (check refuses more)."""
    starts, ends = {}, {}
    for k, iv in enumerate(spec.intervals):
        starts.setdefault(iv.start, k)
        ends.setdefault(iv.end, k)
    return starts, ends
