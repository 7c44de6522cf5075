"""Exact multisets of integers for the summary's statistics (docs/format.md, "Summary rules"):
count and quantiles (`stats.rank`), overall and per key (an SM, a site), and a midpoint median per
key (`stats.middle`).

A launch's interval durations and event times are millions of integers on few distinct values:
multiples of the timer tick (32 ns on an H200) within a span of milliseconds. A Tally counts them
on that grid (the common step of the values seen so far, refined exactly when a later part needs a
finer one), so it costs the span's memory rather than the events', and a quantile is a cumulative
sum rather than a sort. A grid wider than max(DENSE_BINS, values seen) cells spills into the values
themselves, exactly; the statistics are the same either way.
"""
from __future__ import annotations

import math

import numpy as np

from .stats import middle, rank

QUANTILES = {"min": 0.0, "p10": 0.10, "median": 0.50, "p90": 0.90, "max": 1.0}
DENSE_BINS = 1 << 22  # a grid of at most this many (key, value) cells (16 MB), unless more values were seen
SAMPLE = 4096


def ranks(n: int) -> list[int]:
    """rank(n, q) of each of QUANTILES."""
    return [rank(n, q) for q in QUANTILES.values()]


def step_of(d: np.ndarray) -> int:
    """The gcd of the integers d (0 when all are 0), exactly, for the price of one remainder pass
    when a sample's gcd already divides the rest (a timer's tick does): gcd(g, x) = gcd(g, x mod g)."""
    g = int(np.gcd.reduce(d[:SAMPLE]))
    if g == 1 or d.size <= SAMPLE:
        return g
    rest = d[SAMPLE:] if g == 0 else d[SAMPLE:] & (g - 1) if g & (g - 1) == 0 else d[SAMPLE:] % g
    return math.gcd(g, int(np.gcd.reduce(rest))) if rest.any() else g


def _stats(n: int, at_rank) -> dict:
    """Count and QUANTILES of n values, the r-th smallest value given by at_rank(ranks)."""
    if n == 0:
        return {"count": 0, **{k: None for k in QUANTILES}}
    return {"count": n, **{k: float(v) for k, v in zip(QUANTILES, at_rank(ranks(n)))}}


class Tally:
    """An exact multiset of integers, each under a small non-negative key (or all under key 0),
    filled part by part (module docstring). `counts[k, i]` counts key k's values equal to
    lo + i * step; once spilled, `chunks[k]` holds key k's values as (base, offsets) pieces."""

    def __init__(self):
        self.n = 0
        self.lo, self.step = 0, 0  # step 0: at most one distinct value so far
        self.counts = np.zeros((0, 0), dtype=np.uint32)  # 4 bytes a cell: no bigger than the values spilled
        self.chunks: dict[int, list[tuple[int, np.ndarray]]] | None = None

    def add(self, values: np.ndarray, keys: np.ndarray | None = None) -> None:
        if values.size == 0:
            return
        values = values.astype(np.int64, copy=False)
        self.n += values.size
        if self.chunks is None and not self._count(values, keys):
            self._spill()
        if self.chunks is not None:
            self._keep(values, keys)

    def _count(self, values: np.ndarray, keys: np.ndarray | None) -> bool:
        """Add to the grid, widening or refining it; False (nothing added) if it would grow too big.
        A grid that must reach further up grows by half its width again, so parts that come in
        time order rebuild it a few times, not once each."""
        lo, hi = int(values.min()), int(values.max())
        idx = values - lo
        n_keys, width = self.counts.shape
        k_new = max(n_keys, 1 if keys is None else int(keys.max()) + 1)
        if width:
            top = self.lo + self.step * (width - 1)
            step = math.gcd(self.step, step_of(idx), lo - self.lo)
            new_lo, new_hi = min(self.lo, lo), max(top, hi)
        else:
            step, new_lo, new_hi = step_of(idx), lo, hi
        need = (new_hi - new_lo) // step + 1 if step else 1
        if k_new * need > max(DENSE_BINS, self.n):
            return False
        if self.n >= 1 << 32:  # a cell could now pass uint32
            self.counts = self.counts.astype(np.int64)
        if (new_lo, step, k_new) != (self.lo, self.step, n_keys) or need > width:
            if width and new_hi > top:
                need = min(need + (need - 1) // 2, max(DENSE_BINS, self.n) // k_new)
            grid = np.zeros((k_new, need), dtype=self.counts.dtype)
            if width:
                at, every = (self.lo - new_lo) // (step or 1), self.step // step if self.step else 1
                grid[:n_keys, at:at + every * (width - 1) + 1:every] = self.counts
            self.lo, self.step, self.counts = new_lo, step, grid
        width = self.counts.shape[1]
        first = (lo - self.lo) // (self.step or 1)  # the part's own range of the grid
        if self.step > 1:
            idx //= self.step
        span = int(idx.max()) + 1
        if keys is not None:
            idx += keys.astype(np.int64) * span
        cells = self.counts[:, first:first + span] if keys is not None else self.counts[:1, first:first + span]
        np.add(cells, np.bincount(idx, minlength=cells.size).reshape(cells.shape), out=cells, casting="unsafe")
        return True

    def _spill(self) -> None:
        self.chunks = {}
        for k in np.flatnonzero(self.counts.sum(axis=1)).tolist():
            i = np.flatnonzero(self.counts[k])
            self._piece(k, np.repeat(self.lo + self.step * i, self.counts[k, i]))
        self.counts = np.zeros((0, 0), dtype=np.uint32)

    def _keep(self, values: np.ndarray, keys: np.ndarray | None) -> None:
        if keys is None:
            self._piece(0, values)
            return
        order = np.argsort(keys, kind="stable")
        k, v = keys[order], values[order]
        first = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
        for key, a, b in zip(k[first].tolist(), first.tolist(), np.r_[first[1:], k.size].tolist()):
            self._piece(key, v[a:b])

    def _piece(self, key: int, v: np.ndarray) -> None:
        base = int(v.min())
        off = v - base
        self.chunks.setdefault(key, []).append((base, off.astype(np.uint32) if int(off.max()) < 1 << 32 else off))

    def result(self, shift: int = 0) -> tuple[dict, dict[int, dict]]:
        """Of the values + shift: (count and QUANTILES of all, per key {count, QUANTILES..., and
        "middle": the mean of the two middle values}). Once only: a spilled tally is consumed."""
        if self.chunks is not None:
            return self._spilled(shift)
        per_key = {}
        for k in np.flatnonzero(self.counts.sum(axis=1)).tolist():
            cum = np.cumsum(self.counts[k])
            n = int(cum[-1])
            at = self._at(cum, shift)
            per_key[k] = {**_stats(n, at), "middle": sum(at(middle(n))) / 2}
        return _stats(self.n, self._at(np.cumsum(self.counts.sum(axis=0)), shift)), per_key

    def _at(self, cum: np.ndarray, shift: int):
        """r-th smallest values (as ints) from a cumulative count on the grid."""
        return lambda r: (self.lo + shift + self.step * np.searchsorted(cum, r, side="right")).tolist()

    def _spilled(self, shift: int) -> tuple[dict, dict[int, dict]]:
        """Every piece copied into one array, key by key (each piece dropped once copied, so the
        pieces and the whole never both exist in full), as uint32 offsets from the smallest base
        while they fit; each key's statistics from its segment, then the whole's."""
        base = min(b for pieces in self.chunks.values() for b, _ in pieces)
        fits = all(b - base + int(off.max()) < 1 << 32 for pieces in self.chunks.values() for b, off in pieces)
        out = np.empty(self.n, dtype=np.uint32 if fits else np.int64)
        at, per_key = 0, {}
        for key in sorted(self.chunks):
            start, pieces = at, self.chunks.pop(key)
            while pieces:
                b, off = pieces.pop(0)
                seg = out[at:at + off.size]
                seg[...] = off
                seg += np.asarray(b - base).astype(out.dtype)
                at += off.size
            per_key[key] = _partitioned(out[start:at], base + shift)
        self.chunks = None
        whole = _partitioned(out, base + shift)
        whole.pop("middle")
        return whole, per_key


def _partitioned(x: np.ndarray, shift: int) -> dict:
    """Count, QUANTILES and "middle" of x + shift, partitioning x in place."""
    n = x.size
    if n == 0:
        return {**_stats(0, None), "middle": None}
    want = sorted({*ranks(n), *middle(n)})
    x.partition(want)

    def at(r):
        return [int(x[i]) + shift for i in r]
    return {**_stats(n, at), "middle": sum(at(middle(n))) / 2}
