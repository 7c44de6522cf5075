"""Tally (the summary's exact multisets) against plain numpy on the same values: quantiles by the
inverted CDF, medians per key, whether it stays a grid, refines it, or spills into the values."""
from __future__ import annotations

import numpy as np
import pytest

from atrex_inject import tally
from atrex_inject.tally import QUANTILES, Tally, step_of


def quantiles(x: np.ndarray) -> dict:
    x = np.sort(x)
    at = [max(int(np.ceil(q * x.size)) - 1, 0) for q in QUANTILES.values()]
    return {"count": int(x.size), **{q: float(x[i]) for q, i in zip(QUANTILES, at)}}


def expected(values: np.ndarray, keys: np.ndarray, shift: int) -> tuple[dict, dict]:
    v = values + shift
    return quantiles(v), {int(k): {**quantiles(v[keys == k]), "middle": float(np.median(v[keys == k]))}
                          for k in np.unique(keys)}


def filled(parts) -> Tally:
    t = Tally()
    for v, k in parts:
        t.add(v, k)
    return t


SHAPES = {
    "ticks": lambda rng: (rng.integers(10, 400, 30_000) * 32, rng.integers(0, 132, 30_000)),  # a grid of 32
    "ns": lambda rng: (rng.gamma(8.0, 40.0, 30_000).astype(np.int64) + 32, rng.integers(0, 7, 30_000)),
    "wide": lambda rng: (rng.integers(0, 1 << 40, 5_000), rng.integers(0, 3, 5_000)),  # spills at once
    "negative": lambda rng: (rng.integers(-5_000, 5_000, 20_000) * 3, rng.integers(0, 2, 20_000)),
    "one value": lambda rng: (np.full(1000, 7), np.zeros(1000, dtype=np.int64)),
}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("n_parts", [1, 5])
def test_tally_equals_numpy(shape, n_parts):
    rng = np.random.default_rng(17)
    values, keys = SHAPES[shape](rng)
    parts = list(zip(np.array_split(values, n_parts), np.array_split(keys, n_parts)))
    t = filled(parts)
    assert (t.chunks is not None) == (shape == "wide")
    assert t.result(shift=-11) == expected(values, keys, -11)


def test_a_late_outlier_spills_exactly_and_a_finer_step_refines_the_grid(monkeypatch):
    monkeypatch.setattr(tally, "DENSE_BINS", 1 << 12)
    rng = np.random.default_rng(3)
    parts = [(rng.integers(0, 50, 3000) * 64, rng.integers(0, 4, 3000)),  # step 64
             (rng.integers(0, 50, 3000) * 32 + 16, rng.integers(0, 4, 3000))]  # refines the grid to 16
    t = filled(parts)
    assert t.chunks is None and t.step == 16
    values, keys = (np.concatenate(x) for x in zip(*parts))
    assert t.result() == expected(values, keys, 0)
    parts.append((np.array([1 << 30]), np.array([2])))  # one far value: too wide a grid
    t = filled(parts)
    assert t.chunks is not None
    values, keys = (np.concatenate(x) for x in zip(*parts))
    assert t.result() == expected(values, keys, 0)


def test_empty_and_without_keys():
    assert Tally().result() == ({"count": 0, **{q: None for q in QUANTILES}}, {})
    t = filled([(np.array([5, 1, 9]), None)])
    assert t.result(3) == expected(np.array([5, 1, 9]), np.zeros(3), 3)


@pytest.mark.parametrize("d, g", [(np.arange(0, 10 ** 6, 96), 96), (np.r_[np.arange(0, 10 ** 5, 64), 32], 32),
                                  (np.r_[np.arange(0, 10 ** 5, 64), 12], 4), (np.zeros(5000, dtype=np.int64), 0),
                                  (np.r_[np.zeros(5000, dtype=np.int64), 6], 6)])
def test_step_of_is_the_gcd(d, g):
    assert step_of(d) == g == int(np.gcd.reduce(d))
