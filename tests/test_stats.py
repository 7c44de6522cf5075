"""stats.py, the one home of the statistics: the quantile rule and the midpoint median on known
answers, per key as on the whole."""
from __future__ import annotations

import numpy as np

from atrex_inject.stats import grouped_quantile, median, middle, quantiles, rank, run_medians


def test_the_quantile_rule_is_the_ceil_qn_th_smallest():
    x = np.array([70, 10, 30, 90, 50, 20, 80, 40, 60, 100])
    assert quantiles(x, (0.0, 0.1, 0.15, 0.5, 0.9, 1.0)) == [10.0, 10.0, 20.0, 50.0, 90.0, 100.0]
    assert quantiles(x[:0]) == [None, None, None]
    assert rank(np.array([1, 2, 3, 4, 5]), 0.5).tolist() == [0, 0, 1, 1, 2]  # counts, one rank each
    for n in (1, 2, 3, 10, 99, 1000, 4097):
        v = np.random.default_rng(n).integers(0, 40, n) * 32
        assert quantiles(v, (0.1, 0.5, 0.9)) == np.quantile(v, [0.1, 0.5, 0.9], method="inverted_cdf").tolist()


def test_the_midpoint_median_is_the_mean_of_the_two_middle_values():
    assert middle(4) == (1, 2) and middle(5) == (2, 2)
    assert median(np.array([4, 1, 3, 2])) == 2.5 and quantiles(np.array([4, 1, 3, 2]), (0.5,)) == [2.0]
    assert median(np.array([[1, 2, 9], [3, 3, 4]]), axis=1).tolist() == [2.0, 3.0]


def test_grouped_quantile_is_the_quantile_of_each_key():
    rng = np.random.default_rng(3)
    keys, values = rng.integers(0, 20, 3000), rng.integers(0, 500, 3000)
    for q in (0.1, 0.5, 0.9, 1.0):
        k, n, v = grouped_quantile(keys, values, q)
        assert k.tolist() == sorted(set(keys.tolist())) and n.tolist() == [int((keys == x).sum()) for x in k]
        assert v.tolist() == [quantiles(values[keys == x], (q,))[0] for x in k]


def test_run_medians_equal_numpy_medians():
    rng = np.random.default_rng(5)
    keys = np.repeat(np.arange(300), rng.integers(1, 40, 300))  # runs of many lengths
    values = rng.integers(0, 1 << 33, keys.size)
    want = [{"key": int(k), "count": int((keys == k).sum()), "median": float(np.median(values[keys == k]))}
            for k in np.unique(keys)]
    assert run_medians(keys, values) == want
    assert run_medians(keys, values << 19)[7]["median"] == want[7]["median"] * 2 ** 19
