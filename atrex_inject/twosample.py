"""Two-sample statistics for `atrex-inject compare` (docs/compare.md): is a figure of AFTER another
than BEFORE's, by more than chance and the timer's tick?

A figure is a quantile (the median, as the summary takes it: the ceil(q n)-th smallest value) of
values that belong to units: interval instances to their owner, a CTA's p90 to that CTA. Values of
one unit are not independent (an owner's loop instances share its SM and its data), so the
bootstrap resamples units, never values: each side's units are drawn with replacement, launches
first when a side holds several, then units within each drawn launch (`Design.draw`). A drawn set
is a weight per unit; a figure under every drawn set at once is one matrix product, weights x
(unit x value counts), and a cumulative sum (`boot_quantile`), counted on the values' ranks (bins of
equal counts for very large figures), never on a grid set by their range: one outlier cannot
coarsen it. The rank test is Mann-Whitney's U
on one value per independent unit (its median), for the same reason. A verdict needs both
(`judge`). Everything is seeded: the same inputs give the same figures.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

from .measure import BOOTSTRAP, SEED

LEVEL = 0.95
ALPHA = 0.05  # the rank test's level, two-sided
MAX_UNITS = 8192  # past this many units a side's units are resampled in blocks of consecutive ones
SPARSE = 8  # gathering a cell's weights costs about this many dense product terms
MAX_CELLS = 1 << 21  # units x distinct values of one figure; past it values are counted in bins of equal counts


def seed_of(*names: str) -> np.random.Generator:
    """A generator seeded by SEED and names (a side, what it draws): a side's sets do not depend on
    the other side, nor on which figures are computed from them."""
    return np.random.default_rng([SEED, zlib.crc32("\0".join(names).encode())])


@dataclass(frozen=True)
class Design:
    """How one side's units are resampled: `launch[u]` is unit u's launch (0..K-1, units in launch
    order). With K > 1, each bootstrap set draws K launches with replacement, then, for each drawn
    launch, its units with replacement; with K = 1, just the units."""
    launch: np.ndarray
    block: int = 1  # consecutive units of a launch drawn together (MAX_UNITS)

    @classmethod
    def of(cls, launch: np.ndarray) -> "Design":
        return cls(np.asarray(launch, dtype=np.int64), max(1, -(-launch.size // MAX_UNITS)))

    @property
    def n(self) -> int:
        return int(self.launch.size)

    @property
    def launches(self) -> int:
        return int(self.launch.max()) + 1 if self.launch.size else 0

    def draw(self, rng: np.random.Generator, b: int = BOOTSTRAP) -> tuple[np.ndarray, np.ndarray]:
        """(unit weights (b, n) float32: how often each unit is drawn, launch counts (b, K))."""
        k = self.launches
        counts = _multinomial_rows(rng, b, k, k)  # launches drawn per set
        w = np.zeros((b, self.n), dtype=np.float32)
        first = np.searchsorted(self.launch, np.arange(k))
        last = np.r_[first[1:], self.n]
        for l in range(k):
            lo, hi = int(first[l]), int(last[l])
            blocks = -(-(hi - lo) // self.block)
            for c in range(1, k + 1):  # sets that drew launch l c times draw its units c times over
                rows = np.flatnonzero(counts[:, l] == c)
                if rows.size == 0:
                    continue
                drawn = _multinomial_rows(rng, rows.size, blocks, c * blocks)
                if self.block > 1:
                    drawn = np.repeat(drawn, self.block, axis=1)[:, :hi - lo]
                if rows.size == b:
                    w[:, lo:hi] = drawn
                else:
                    w[rows, lo:hi] = drawn
        return w, counts


def _multinomial_rows(rng: np.random.Generator, rows: int, n: int, draws: int) -> np.ndarray:
    """(rows, n) counts of `draws` uniform draws from n cells per row (bincount: fast, exact)."""
    if n == 0 or rows == 0:
        return np.zeros((rows, n), dtype=np.int64)
    d = rng.integers(0, n, (rows, draws), dtype=np.int64)
    d += np.arange(rows, dtype=np.int64)[:, None] * n
    return np.bincount(d.ravel(), minlength=rows * n).reshape(rows, n)


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


def boot_quantile(values: np.ndarray, unit: np.ndarray, w: np.ndarray, q: float, points: np.ndarray) -> np.ndarray:
    """Quantile q of the values under each bootstrap set's unit weights w (b, units): unit u's
    values count w[b, u] times. Values are counted on `points` (grid_of), each as the point at or
    below it (exact when the points are the values' own); NaN where a set drew no value.

    The (unit, point) cells holding values, in point order, are few when units hold few values:
    then each set's running count over those cells is w's gathered columns times the cells' counts;
    else it is the product w @ (units x points) summed along the points."""
    if values.size == 0:
        return np.full(w.shape[0], np.nan)
    n = w.shape[1]
    cell = np.searchsorted(points, values, side="right") - 1
    nv = int(cell.max()) + 1
    exact = np.float32 if values.size < 1 << 22 else np.float64  # counts stay exact integers either way
    cells, count = np.unique(cell * n + unit, return_counts=True)  # point, then unit
    if cells.size * SPARSE < n * nv:
        cum = np.cumsum(w[:, cells % n].astype(exact) * count.astype(exact), axis=1)
        at = cells // n
    else:
        h = np.bincount(unit * nv + cell, minlength=n * nv).reshape(n, nv).astype(exact)
        cum = np.cumsum(w.astype(exact, copy=False) @ h, axis=1)
        at = np.arange(nv)
    total = cum[:, -1]
    need = np.maximum(np.ceil(q * total), 1)
    idx = np.minimum((cum < need[:, None]).sum(axis=1), at.size - 1)
    return np.where(total > 0, points[at[idx]].astype(np.float64), np.nan)


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


def interval_of(boot: np.ndarray) -> list[float] | None:
    """The percentile interval at LEVEL of bootstrap values (None if any set had none)."""
    if boot.size == 0 or np.isnan(boot).any():
        return None
    a = (1 - LEVEL) / 2
    return [float(v) for v in np.quantile(boot, [a, 1 - a])]


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
    ci_ns = interval_of(boot_after - boot_before)
    rel = delta / before if before else None
    ci = interval_of(boot_after / boot_before - 1) if before and (boot_before > 0).all() else None
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
