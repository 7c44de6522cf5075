"""Two-sample statistics for `atrex-inject compare` (docs/compare.md): is a figure of AFTER another
than BEFORE's, by more than chance and the timer's tick?

A figure is a quantile (`stats.rank`, the summary's rule) of values that belong to units: interval
instances to their owner, a CTA's p90 to that CTA. Values of one unit are not independent (an
owner's loop instances share its SM and its data), so the bootstrap resamples units, never values
(`stats.Design`), and a figure under every drawn set is a weighted quantile
(`stats.weighted_quantile`) counted on the points `grid_of` gives: the values' own, or bins of
equal counts for very large figures, never a grid set by their range: one outlier cannot coarsen
it. The rank test is Mann-Whitney's U on one value per independent unit (its median), for the same
reason. A verdict needs both (`judge`). Everything is seeded (`seed_of`): the same inputs give the
same figures.
"""
from __future__ import annotations

import math
import zlib

import numpy as np

from .measure import SEED
from .stats import interval

ALPHA = 0.05  # the rank test's level, two-sided
MAX_CELLS = 1 << 21  # units x distinct values of one figure; past it values are counted in bins of equal counts


def seed_of(*names: str) -> np.random.Generator:
    """A generator seeded by SEED and names (a side, what it draws): a side's sets do not depend on
    the other side, nor on which figures are computed from them."""
    return np.random.default_rng([SEED, zlib.crc32("\0".join(names).encode())])


def grid_of(values: list[np.ndarray], n_units: int) -> tuple[np.ndarray, bool]:
    """(points, coarse): the ascending values the bootstrap counts these values on. Their distinct
    values (exact), or, when units x distinct values would pass MAX_CELLS (figures of very large
    captures), the pooled values at evenly spaced ranks: bins of equal counts, so one outlier widens
    only the last bin and never coarsens the rest (a grid set by the range would)."""
    allv = np.sort(np.concatenate(values)) if values else np.zeros(0, dtype=np.int64)
    if allv.size == 0:
        return allv, False
    distinct = np.unique(allv)
    cap = max(MAX_CELLS // max(n_units, 1), 16)
    if distinct.size <= cap:
        return distinct, False
    return np.unique(allv[np.linspace(0, allv.size - 1, cap).astype(np.int64)]), True


def mann_whitney(x: np.ndarray, y: np.ndarray) -> dict:
    """Mann-Whitney U of y (AFTER's unit values) against x (BEFORE's), two-sided, normal
    approximation with the tie correction and a continuity correction; `p_after_lower` is the
    probability that an AFTER value is below a BEFORE one (ties count half)."""
    n1, n2 = x.size, y.size
    if n1 == 0 or n2 == 0:
        return {"u": None, "p": None, "p_after_lower": None}
    both = np.concatenate([x, y]).astype(np.float64)
    _, inv, cnt = np.unique(both, return_inverse=True, return_counts=True)
    mid = np.cumsum(cnt) - (cnt - 1) / 2.0  # the average rank of each distinct value
    r2 = float(mid[inv[n1:]].sum())
    u2 = r2 - n2 * (n2 + 1) / 2.0  # pairs with the AFTER value above, ties half
    n = n1 + n2
    var = n1 * n2 / 12.0 * ((n + 1) - float((cnt.astype(np.float64) ** 3 - cnt).sum()) / (n * (n - 1))) if n > 1 else 0
    if var <= 0:
        p = 1.0
    else:
        z = (abs(u2 - n1 * n2 / 2.0) - 0.5) / math.sqrt(var)
        p = math.erfc(max(z, 0.0) / math.sqrt(2))
    return {"u": u2, "p": min(p, 1.0), "p_after_lower": 1.0 - u2 / (n1 * n2)}


def judge(before: float | None, after: float | None, boot_before: np.ndarray, boot_after: np.ndarray,
          resolution: int, words: tuple[str, str], rank: dict) -> dict:
    """The change of a figure from BEFORE to AFTER (ns and relative), its bootstrap interval (each
    set pairs a BEFORE set with an AFTER one, drawn independently), and the verdict: words[0]
    (smaller) or words[1] (larger) when the interval excludes 0, the rank test agrees (p < ALPHA,
    the same direction) and the figure moved by more than `resolution` ns (the timer's tick: one
    tick can be quantization alone); else "no change detected"; "not compared" when a side has no
    values. The rank test guards the percentile interval where the independent units are few (it is
    too narrow from a handful of launches), and is met by any change the units show."""
    if before is None or after is None:
        side = "BEFORE" if before is None else "AFTER"
        return {"change_ns": None, "change": None, "ci95_ns": None, "ci95": None, "verdict": "not compared",
                "why": f"no values in {side}"}
    delta = after - before
    ci_ns = interval(boot_after - boot_before)
    rel = delta / before if before else None
    ci = interval(boot_after / boot_before - 1) if before and (boot_before > 0).all() else None
    out = {"change_ns": delta, "change": rel, "ci95_ns": ci_ns, "ci95": ci}
    if ci_ns is None:
        return {**out, "verdict": "no change detected", "why": "a resampled set had no values: too few units"}
    if ci_ns[0] <= 0 <= ci_ns[1]:
        return {**out, "verdict": "no change detected",
                "why": f"the 95% interval [{ci_ns[0]:+.0f}, {ci_ns[1]:+.0f}] ns includes 0"}
    p, lower = rank["p"], rank["p_after_lower"]
    if p is None or p >= ALPHA or (lower > 0.5) != (delta < 0):
        return {**out, "verdict": "no change detected",
                "why": "the rank test does not confirm it (" + ("no units" if p is None else f"p = {p:.2g}") + ")"}
    if abs(delta) <= resolution:
        return {**out, "verdict": "no change detected",
                "why": f"moved {delta:+.0f} ns, not more than the timer's tick ({resolution} ns)"}
    return {**out, "verdict": words[0] if delta < 0 else words[1],
            "why": f"the 95% interval [{ci_ns[0]:+.0f}, {ci_ns[1]:+.0f}] ns excludes 0, the rank test agrees "
                   f"(p = {p:.2g}) and the move exceeds the timer's tick ({resolution} ns)"}
