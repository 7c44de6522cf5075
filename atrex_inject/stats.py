"""The quantile rule and the midpoint median, in one place: the summary, its tally, compare, the
pictures and the report call these, so a median means the same wherever it is printed.

Two medians, each named where it is used. A capture's figures (the summary's quantiles, the
answer's and compare's medians) take `rank`: the ceil(q n)-th smallest value, a duration that
occurred. measure's medians of process latencies and the summary's per-owner and per-SM medians
take `middle`: the mean of the two middle values (recorded measurements are recomputed bit for bit
by validation, so their rule stays).
"""
from __future__ import annotations

import numpy as np


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
