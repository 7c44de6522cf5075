"""stats.py, the one home of the statistics: the quantile rule and the midpoint median on known
answers, the bootstrap draws seeded and reproducible, the weighted quantile equal to the quantile of
the drawn values, the percentile interval around its estimate, and measure, the answer and compare
giving the intervals they gave before their statistics moved here."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from atrex_inject import stats
from atrex_inject.answer import answers
from atrex_inject.compare import SPEED, figure
from atrex_inject.evidence import gather
from atrex_inject.manifest import load as load_manifest
from atrex_inject.measure import summarize
from atrex_inject.stats import (Design, cluster_counts, grouped_quantile, interval, median, middle, quantiles, rank,
                                resample, run_medians, weighted_quantile)

FIX = Path(__file__).parent.parent / "fixtures" / "h200"


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


def test_draws_are_seeded_and_reproducible():
    x = np.arange(9) * 1.5
    one = resample(x, np.random.default_rng(1), 50)
    assert (one == np.random.default_rng(1).choice(x, (50, 9))).all()  # measure's draws as they were
    assert (one == resample(x, np.random.default_rng(1), 50)).all()
    assert not (one == resample(x, np.random.default_rng(2), 50)).all()
    c = cluster_counts(np.random.default_rng(1), 400, 7)
    assert c.shape == (400, 7) and (c.sum(axis=1) == 7).all()
    assert (c == cluster_counts(np.random.default_rng(1), 400, 7)).all()
    assert (cluster_counts(np.random.default_rng(1), 3, 5, 12).sum(axis=1) == 12).all()
    w, launches = Design.of(np.repeat(np.arange(3), [5, 7, 9])).draw(np.random.default_rng(4), 300)
    again = Design.of(np.repeat(np.arange(3), [5, 7, 9])).draw(np.random.default_rng(4), 300)
    assert (w == again[0]).all() and (launches == again[1]).all()


# the product path, the gathered one; values on fewer points than a block (stats.BLOCK), and on many
@pytest.mark.parametrize("units, each, ticks", [(12, 40, 40), (400, 2, 40), (12, 400, 400), (400, 4, 400)])
def test_weighted_quantile_is_the_quantile_of_the_drawn_values(units, each, ticks, monkeypatch):
    """Each set's figure equals the quantile of the values repeated as often as their unit was
    drawn (0: left out; NaN where nothing was), whether the sets go in one chunk or in many."""
    rng = np.random.default_rng(7)
    dur = rng.integers(1, ticks, units * each) * 32
    unit = rng.integers(0, units, dur.size)
    w = np.vstack([np.ones(units), rng.integers(0, 4, (30, units)), np.zeros(units)])
    points = np.unique(dur)
    for q in (0.1, 0.5, 0.9):
        got = weighted_quantile(dur, unit, w, q, points)
        for row, g in zip(w, got):
            drawn = np.repeat(dur, row[unit].astype(int))
            assert np.isnan(g) if drawn.size == 0 else g == quantiles(drawn, (q,))[0]
        monkeypatch.setattr(stats, "CELLS", 50)
        assert np.array_equal(weighted_quantile(dur, unit, w, q, points), got, equal_nan=True)
        monkeypatch.undo()


def test_weighted_quantile_counts_exactly_past_float32():
    """A set whose total passes 2^24 is counted again in float64: in float32 the running count
    2^24 + 1 would read 2^24 and the figure would be the next value."""
    v = np.array([10, 20, 30])
    q = 1 - 1e-7  # rank 2^24 of 2^24 + 2 values: the 2^24 + 1-th smallest, the single 20
    assert weighted_quantile(v, np.arange(3), np.array([[2 ** 24, 1, 1]]), q, v).tolist() == [20.0]


def test_the_interval_holds_its_estimate_and_can_end_on_it():
    """A percentile interval, known on evenly spaced values; around the median it resamples; and,
    the values being whole ticks, with the median itself as an end (docs/summary.md says why)."""
    assert interval(np.arange(2001.0)) == [50.0, 1950.0]
    assert interval(np.array([1.0, np.nan])) is None and interval(np.zeros(0)) is None
    rng = np.random.default_rng(9)
    x = rng.normal(100, 10, 41)
    lo, hi = interval(median(resample(x, rng), axis=1))
    assert lo < median(x) < hi
    ticks = np.r_[np.full(30, 3), np.full(11, 4)] * 32
    est = quantiles(ticks, (0.5,))[0]
    boot = weighted_quantile(ticks, np.arange(ticks.size), cluster_counts(rng, stats.RESAMPLES, ticks.size), 0.5,
                             np.unique(ticks))
    lo, hi = interval(boot)
    assert lo <= est <= hi and est in (lo, hi)


def test_measure_answer_and_compare_give_the_intervals_they_gave_before():
    """Fixed inputs, the figures computed before the statistics moved to stats.py: measure's plain
    bootstrap, the answer's CTA bootstrap on the GEMM (the "1.78–2.29×" that ends on its estimate)
    and compare's two-level bootstrap, to the last bit; and every recorded measurement recomputes."""
    rng = np.random.default_rng(3)
    lat = {"A": 1 + rng.random(10) / 10, "B": 1.05 + rng.random(10) / 10}
    m = summarize([{"arm": arm, "sample": {"latency_ms": float(v)}} for arm in "AB" for v in lat[arm]])
    assert m["overhead_ci95"] == [0.03611581463207014, 0.10033477419205994]
    for path in sorted(FIX.rglob("*.json")):
        art = json.loads(path.read_text())
        if art.get("format") == "atrex-measurement" and art.get("valid"):
            assert summarize(art["samples"])["overhead_ci95"] == art["overhead_ci95"], path

    manifest = load_manifest(FIX / "gemm_mma" / "manifest.json")
    ev = gather(FIX / "gemm_mma", manifest)
    (a,) = answers(ev.capture, ev.launches, manifest)
    assert {k: a["ratio"][k] for k in ("value", "lo", "hi", "end_on_estimate")} == \
        {"value": 16 / 7, "lo": 16 / 9, "hi": 16 / 7, "end_on_estimate": "upper"}
    assert [(r["name"], r["ratio"] and (r["ratio"]["lo"], r["ratio"]["hi"])) for r in a["compared"]] == [
        ("iter -> copies_issued", (16 / 9, 16 / 7)), ("copies_issued -> stage_ready", (3.2, 4.0)),
        ("stage_ready -> mma_done", None), ("mma_done -> synced", (7.5, 16.0))]

    rng = np.random.default_rng(11)
    launch = np.repeat(np.arange(4), 50)
    vb = ((60_000 + rng.normal(0, 600, 200)) // 32 * 32).astype(np.int64)
    va = ((58_000 + rng.normal(0, 600, 200)) // 32 * 32).astype(np.int64)
    d = Design.of(launch)
    r = figure(vb, np.arange(200), d.draw(np.random.default_rng(1))[0], va, np.arange(200),
               d.draw(np.random.default_rng(2))[0], 32, SPEED, launch, launch)
    assert r["ci95_ns"] == [-2144.0, -1728.0] and r["ci95"] == [-0.0356004250797024, -0.02886157135221812]
    assert r["verdict"] == "faster"
