"""The statistics every figure and interval is computed with, in one place: the quantile rule, the
midpoint median, bootstrap draws (plain and clustered), the weighted quantile a bootstrap set's
figure is, and the percentile interval. The summary, the answer, compare and measure call these,
so a median and its interval mean the same wherever they are printed.

Two medians, each named where it is used. A capture's figures (the summary's quantiles, the
answer's and compare's medians) take `rank`: the ceil(q n)-th smallest value, a duration that
occurred. measure's medians of process latencies and the summary's per-owner and per-SM medians
take `middle`: the mean of the two middle values (recorded measurements are recomputed bit for bit
by validation, so their rule stays). Every interval is the percentile bootstrap's (`interval`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000  # bootstrap sets per interval
LEVEL = 0.95
TAIL = 0.025  # (1 - LEVEL) / 2 written out: computed, it is 0.025000000000000022, and measurements took 0.025
MAX_UNITS = 8192  # past this many units a launch's units are resampled in blocks of consecutive ones
SPARSE = 8  # gathering a cell's weights costs about this many dense product terms
CELLS = 4_000_000  # a weighted quantile's running counts, per chunk of sets
BLOCK = 64  # cells a weighted quantile sums before it runs a count through them (_passes)


def rank(n, q):
    """0-based position, in sorted order, of the q-quantile of n values (n an int or an array of
    counts): the ceil(q n)-th smallest, the inverted CDF with no interpolation, so a capture's
    figure is a duration that occurred (whole timer ticks) and counts alone locate it."""
    return np.maximum(np.ceil(q * n).astype(np.int64) - 1, 0)


def middle(n: int) -> tuple[int, int]:
    """0-based positions of the two middle values of n (one position twice when n is odd): the
    midpoint median is their mean (numpy's `median`), the rule of measure's medians, which
    validation recomputes bit for bit, and of the summary's per-owner and per-SM medians."""
    return (n - 1) // 2, n // 2


def median(x: np.ndarray, axis: int | None = None):
    """The midpoint median of x (along axis): the mean of its `middle` values, numpy's `median`."""
    return np.median(x, axis=axis)


def quantiles(values: np.ndarray, qs=(0.10, 0.50, 0.90)) -> list[float | None]:
    """The values' quantiles qs by `rank` (None when there are none), from one partition."""
    n = values.size
    if n == 0:
        return [None] * len(qs)
    at = sorted({int(rank(n, q)) for q in qs})
    part = np.partition(values, at)
    return [float(part[rank(n, q)]) for q in qs]


def grouped_quantile(keys: np.ndarray, values: np.ndarray, q: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct key: (keys, counts, quantile q of its values by `rank`), from one sort."""
    if keys.size == 0:
        return keys[:0], np.zeros(0, dtype=np.int64), values[:0]
    order = np.lexsort((values, keys))
    k = keys[order]
    first = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    n = np.diff(np.r_[first, k.size])
    return k[first], n, values[order][first + rank(n, q)]


def run_medians(keys: np.ndarray, values: np.ndarray) -> list[dict]:
    """Per key: count and midpoint median (`middle`) for keys in runs (all of a key's values
    adjacent, as an owner's are in owner order). Runs of equal length are one matrix partitioned
    along its rows: linear time, a numpy call per distinct run length."""
    if keys.size == 0:
        return []
    first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    length = np.diff(np.r_[first, keys.size])
    med = np.empty(first.size, dtype=np.float64)
    for n in np.flatnonzero(np.bincount(length)).tolist():  # the distinct lengths (np.unique imports numpy.ma)
        rows = np.flatnonzero(length == n)
        block = values.reshape(-1, n).copy() if rows.size == first.size else values[first[rows, None] + np.arange(n)]
        lo, hi = middle(n)
        block.partition(sorted({lo, hi}), axis=1)
        med[rows] = (block[:, lo].astype(np.int64) + block[:, hi]) / 2
    return [{"key": int(k), "count": int(c), "median": float(m)}
            for k, c, m in zip(keys[first].tolist(), length.tolist(), med.tolist())]


def _picks(rng: np.random.Generator, rows: int, n: int, draws: int) -> np.ndarray:
    """(rows, draws) indices drawn uniformly from n with replacement: every bootstrap's draws."""
    return rng.integers(0, n, (rows, draws), dtype=np.int64)


def resample(x: np.ndarray, rng: np.random.Generator, b: int = RESAMPLES) -> np.ndarray:
    """Plain bootstrap, for independent values (measure's fresh processes): b sets (rows) of
    x.size values drawn from x with replacement, the draws of rng.choice(x, (b, x.size))."""
    return x[_picks(rng, b, x.size, x.size)]


def cluster_counts(rng: np.random.Generator, rows: int, n: int, draws: int | None = None) -> np.ndarray:
    """Cluster bootstrap, for values that are not independent (a CTA's instances share its SM and
    barriers): (rows, n) how often each of n clusters is drawn in `draws` (default n) draws with
    replacement; a cluster's values count that often (`weighted_quantile`). Exact, by bincount."""
    draws = n if draws is None else draws
    if n == 0 or rows == 0:
        return np.zeros((rows, n), dtype=np.int64)
    d = _picks(rng, rows, n, draws)
    d += np.arange(rows, dtype=np.int64)[:, None] * n
    return np.bincount(d.ravel(), minlength=rows * n).reshape(rows, n)


@dataclass(frozen=True)
class Design:
    """A two-level cluster bootstrap, for units of several launches (a launch's units share its
    clocks and placement): `launch[u]` is unit u's launch (0..K-1, units in launch order). With
    K > 1, each set draws K launches with replacement, then, for each drawn launch, its units with
    replacement; with K = 1, just the units."""
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

    def draw(self, rng: np.random.Generator, b: int = RESAMPLES) -> tuple[np.ndarray, np.ndarray]:
        """(unit weights (b, n) float32: how often each unit is drawn, launch counts (b, K))."""
        k = self.launches
        counts = cluster_counts(rng, b, k)  # launches drawn per set
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
                drawn = cluster_counts(rng, rows.size, blocks, c * blocks)
                if self.block > 1:
                    drawn = np.repeat(drawn, self.block, axis=1)[:, :hi - lo]
                if rows.size == b:
                    w[:, lo:hi] = drawn
                else:
                    w[rows, lo:hi] = drawn
        return w, counts


def _passes(m: np.ndarray, r: np.ndarray) -> np.ndarray:
    """For each row of m (counts, not negative), how many of its leading cells keep the running
    count at or below r[row]: the running counts of whole blocks of BLOCK cells first, then of the
    cells of the one block where it passes r (a running count over every cell took most of a
    comparison's time). Counts are whole numbers, so every sum is exact whatever its order."""
    rows, c = m.shape
    nb = -(-c // BLOCK)
    if nb * BLOCK != c:
        m = np.pad(m, ((0, 0), (0, nb * BLOCK - c)))
    m = m.reshape(rows, nb, BLOCK)
    run = np.cumsum(m.sum(axis=2), axis=1)
    k = (run <= r[:, None]).sum(axis=1)  # whole blocks at or below r
    at = np.arange(rows)
    inside = np.cumsum(m[at, np.minimum(k, nb - 1)], axis=1) + np.where(k > 0, run[at, np.maximum(k - 1, 0)], 0)[:, None]
    return np.where(k >= nb, c, k * BLOCK + (inside <= r[:, None]).sum(axis=1))


def weighted_quantile(values: np.ndarray, unit: np.ndarray, w: np.ndarray, q: float, points: np.ndarray) -> np.ndarray:
    """Quantile q (`rank`) of the values under each bootstrap set's unit weights w (sets, units):
    unit u's values count w[s, u] times, so no set's values are ever copied. Values are counted on
    `points`, ascending, each as the point at or below it (exact when the points are the values'
    own); NaN where a set drew no value.

    The (unit, point) cells holding values, in point order, are few when units hold few values:
    then each set's running count over those cells is w's gathered columns times the cells' counts;
    else it is the product w @ (units x points) summed along the points. Sets go in chunks of
    CELLS running counts, in float32, or again in float64 where a set's total passes 2^24 (float32
    counts are exact integers below it)."""
    if values.size == 0:
        return np.full(w.shape[0], np.nan)
    n = w.shape[1]
    cell = np.searchsorted(points, values, side="right") - 1
    nv = int(cell.max()) + 1
    cells, count = np.unique(cell * n + unit, return_counts=True)  # point, then unit
    if cells.size * SPARSE < n * nv:
        cols, count, at = cells % n, count.astype(np.float32), cells // n

        def counts(part: np.ndarray, dtype) -> np.ndarray:  # np.take: a fancy index of columns ran 13x slower
            return np.take(part, cols, axis=1).astype(dtype, copy=False) * count.astype(dtype, copy=False)
    else:
        h = np.bincount(unit * nv + cell, minlength=n * nv).reshape(n, nv).astype(np.float32)
        at = np.arange(nv)

        def counts(part: np.ndarray, dtype) -> np.ndarray:
            return part.astype(dtype, copy=False) @ h.astype(dtype, copy=False)
    out = np.empty(w.shape[0])
    step = max(1, CELLS // at.size)
    for a in range(0, w.shape[0], step):
        part = w[a:a + step]
        m = counts(part, np.float32)
        total = m.sum(axis=1)
        if total.max() >= 1 << 24:
            m = counts(part, np.float64)
            total = m.sum(axis=1)
        idx = np.minimum(_passes(m, rank(total.astype(np.int64), q)), at.size - 1)
        out[a:a + step] = np.where(total > 0, points[at[idx]].astype(np.float64), np.nan)
    return out


def interval(boot: np.ndarray) -> list[float] | None:
    """The percentile bootstrap interval at LEVEL of resampled figures: their TAIL and 1 - TAIL
    quantiles, interpolated between neighbours (numpy's default, as recorded measurements took
    them); None when there are no sets or a set had no figure (NaN). An end can be the estimate
    itself (docs/summary.md, "The answer", says why)."""
    if boot.size == 0 or np.isnan(boot).any():
        return None
    return [float(v) for v in np.quantile(boot, [TAIL, 1 - TAIL])]
