"""The answer line: what a spec's intervals say about its question, for one launch, computed from
its canonical events and its summary (docs/summary.md, "The answer").

Which intervals answer. Where the spec names a `pair` (the two intervals its question weighs
against each other), the line is about those two. Otherwise: some intervals enclose others (a whole
tile around its k-tiles): an interval encloses another when at least half of the other's instances
lie inside its instances on the same owner. The intervals that enclose no other are the phases
compared; the enclosing ones are context, not rivals. The phase with the largest median takes
longest when the 95% interval of its median's ratio to the next largest median lies above 1;
otherwise neither does, and the line says so.

The ratio's interval is a cluster bootstrap (stats.py): the launch's CTAs (which share barriers
and an SM, so their instances are not independent) are drawn with replacement RESAMPLES times, the
same draws for every phase, and each draw's medians (the summary's rule) divide. The seed is fixed:
the same capture always gives the same interval. An end of it can be the estimate itself
(docs/summary.md, "The answer", says why): the line says so where it happens.

What the line also says. A mark (a site that starts or ends no interval) inside most instances of
a compared phase means that phase spans more than one step of the code; two phases that overlap
share time; a median under FEW_TICKS timer ticks is mostly quantization: record the SM clock, or,
where the caller has the same question answered on a valid capture of the same kernel recorded with
it (the demo's bundled `clock = true` GEMM), read that answer, which the line points at and the
answer carries (`at_clock`; `clock_answer_line` prints it). When the intervals cannot answer (a
rejected capture, fewer than two phases, a phase without instances) the line says why and what to
change, and names no winner.
"""
from __future__ import annotations

import numpy as np

from .decode import Launch
from .intervals import CYCLES, Durations, durations, pairs
from .manifest import Manifest
from .stats import LEVEL, RESAMPLES, cluster_counts, interval, weighted_quantile
from .summary import FEW_TICKS, quantized
from .timeline import _unit as unit_of

METHOD = "CTA-bootstrap"  # how the interval is drawn, as the line names it
SEED = 0
MAJORITY = 0.5  # an interval encloses another, a mark sits inside a phase, when it does in at least this share


def fmt(ns: float, unit: tuple[str, float]) -> str:
    """A duration in the given unit (timeline's choice for the largest value on an axis)."""
    name, scale = unit
    v = ns / scale
    return f"{v:.0f} {name}" if name == "ns" else f"{v:.3g} {name}"


def _inside(outer: dict, inner: dict) -> np.ndarray:
    """Per instance of `inner`: whether an instance of `outer` holds it (same owner, by event
    order: an owner's events are contiguous, in sequence)."""
    if outer["i0"].size == 0 or inner["i0"].size == 0:
        return np.zeros(inner["i0"].size, dtype=bool)
    j = np.searchsorted(outer["i0"], inner["i0"], side="right") - 1
    jj = np.maximum(j, 0)
    return (j >= 0) & (outer["i1"][jj] >= inner["i1"]) & (outer["owner"][jj] == inner["owner"])


def _holds(p: dict, idx: np.ndarray) -> np.ndarray:
    """Per instance of p: whether one of the events `idx` (sorted) lies strictly inside it."""
    return np.searchsorted(idx, p["i0"], side="right") < np.searchsorted(idx, p["i1"], side="left")


def _median(row: dict, unit: tuple[str, float]) -> str:
    """An interval's median as the line prints it: in the unit, and in the SM's cycles where the
    clock timed every instance (what the hardware counted, beside its ns at the local rate)."""
    cycles = row.get("cycles") if row.get("resolution") == CYCLES else None
    return fmt(row["median"], unit) + (f" / {cycles['median']:.0f} cycles" if cycles else "")


def _ns(d: Durations) -> np.ndarray:
    """The durations in ns exactly as the summary tallies them (Durations.grid)."""
    grid, per_ns = d.grid()
    return grid / per_ns if per_ns != 1.0 else grid


def _no(launch: str, text: str, reason: str, **rest) -> dict:
    return {"launch": launch, "status": "none", "reason": reason, "text": "No answer: " + text,
            "compared": [], "enclosing": [], "leader": None, "runner_up": None, "ratio": None, "caveats": [],
            "pair": [], "reference": None, "quantized": [], "at_clock": None, **rest}


def answer(launch: Launch | None, manifest: Manifest, summary: dict | None, verdict: str,
           failed: list[str] = (), clocked: dict | None = None) -> dict:
    """The answer for one launch: {"launch", "status" (leader | even | none), "text" (the line),
    "compared" (per phase: name, count, owners, median/p10/p90 in ns, ratio of the leader's median
    to it with its interval), "enclosing", "leader", "runner_up", "ratio", "caveats", "reason",
    "quantized" (the compared phases whose median is under FEW_TICKS timer ticks), "at_clock"}.

    clocked: the same question answered on a valid capture of the same kernel recorded with the SM
    clock ({"capture": where it is, "text": its answer line, ...}: the demo's). Where a phase is
    quantized, the caveat points at it instead of advising to record the clock, and "at_clock" is it
    (else None)."""
    name = summary["launch"] if summary else (launch.name if launch else "")
    if verdict != "valid":
        return _no(name, f"the capture is {verdict} (failed: {', '.join(failed) or 'see the validation'}); "
                         "a rejected capture's intervals are not evidence.", "rejected")
    if not manifest.intervals:
        return _no(name, "the spec names no intervals; name at least two that split the time the question is "
                         "about (`intervals = [\"a -> b\", \"b -> c\"]`).", "no_intervals")
    stats = {r["name"]: r for r in summary["intervals"]}
    p = {iv.name: pairs(launch, iv.start_id, iv.end_id) for iv in manifest.intervals}
    names = [iv.name for iv in manifest.intervals]
    enclosing = [a for a in names if any(
        b != a and p[b]["i0"].size and _inside(p[a], p[b]).mean() >= MAJORITY for b in names)]
    phases = [n for n in names if n not in enclosing]
    if len(phases) < 2:
        why = (f"the spec names one interval, `{names[0]}`: nothing to compare it with" if len(names) == 1 else
               f"only `{phases[0]}` encloses no other interval" if phases else "every interval encloses another")
        return _no(name, f"the spec's intervals cannot answer: {why}; name at least two intervals that do not "
                         "enclose each other (the wait and the work, say).", "one_phase", enclosing=enclosing)
    pair = [n for n in manifest.pair if n in names]
    phases += [n for n in pair if n not in phases]  # the pair is compared even where it encloses another
    empty = [n for n in phases if not stats[n]["count"]]
    if empty:
        return _no(name, f"{', '.join(f'`{n}`' for n in empty)} {'has' if len(empty) == 1 else 'have'} no complete "
                         "instance in this launch; check the sites' placement and density.", "no_instances",
                   enclosing=enclosing)

    cta = launch.owners["cta"]
    ctas, cl = np.unique(np.concatenate([cta[p[n]["owner"]] for n in phases]), return_inverse=True)
    bounds = np.cumsum([0] + [p[n]["owner"].size for n in phases])
    weights = cluster_counts(np.random.default_rng(SEED), RESAMPLES, ctas.size)
    # resampled at the resolution the summary's medians were taken at: cycles at the local rate where
    # the capture carries the SM clock, else the timer's ns
    timed = {n: _ns(durations(launch, p[n])) for n in phases}
    boot = {n: weighted_quantile(timed[n], cl[bounds[k]:bounds[k + 1]], weights, 0.5, np.unique(timed[n]))
            for k, n in enumerate(phases)}
    ranked = sorted(pair or phases, key=lambda n: (-stats[n]["median"], names.index(n)))
    leader, runner = ranked[0], ranked[1]
    compared = []
    for n in phases:
        r = stats[n]
        row = {"name": n, "count": r["count"], "owners": int(np.unique(p[n]["owner"]).size),
               **{k: r[k] for k in ("min", "p10", "median", "p90", "max")}, "median_ticks": r.get("median_ticks"),
               "ratio": None}
        if n != leader and r["median"] > 0:
            q = boot[leader] / boot[n]
            lo, hi = interval(q[np.isfinite(q)]) or (None, None)
            value = stats[leader]["median"] / r["median"]
            row["ratio"] = {"value": value, "lo": lo, "hi": hi,
                            "end_on_estimate": _end_on_estimate(value, lo, hi, stats[leader], r)}
        compared.append(row)
    by = {r["name"]: r for r in compared}
    ratio = by[runner]["ratio"]

    caveats = []
    marks = [s for s in manifest.sites if s.id not in manifest.endpoint_ids]
    site = launch.events["site"]
    for n in phases:
        if not p[n]["i0"].size:
            continue
        for s in marks:
            share = _holds(p[n], np.flatnonzero(site == s.id)).mean()
            if share >= MAJORITY:
                caveats.append(f"`{n}` holds the mark `{s.name}` in {100 * share:.0f}% of its instances: it times more "
                               f"than one step (split it at `{s.name}` to time them apart).")
    for k, a in enumerate(phases):
        for b in phases[k + 1:]:
            share = max(_overlap(p[a], p[b]), _overlap(p[b], p[a]))
            if share >= MAJORITY:
                caveats.append(f"`{a}` and `{b}` overlap in {100 * share:.0f}% of instances: they share time.")
    if max(stats[leader]["count"], stats[runner]["count"]) > 1.5 * min(stats[leader]["count"], stats[runner]["count"]):
        caveats.append(f"`{leader}` has {stats[leader]['count']} instances and `{runner}` {stats[runner]['count']}: "
                       "the ratio compares one instance of each, not their total time.")
    tick = summary.get("timer_tick_ns")
    few = [(n, stats[n]["median_ticks"]) for n in phases if quantized(stats[n])]
    at_clock = clocked if few else None
    if few:
        hint = (f"; the same question in SM cycles, on the `clock = true` capture {clocked['capture']}, is below"
                if clocked else "; record the clock (`[capture] clock = true`)" if manifest.backend == "cuda"
                and not manifest.capture.clock else "")
        caveats.append(f"{', '.join(f'`{n}` ({t:.0f} {_ticks(t)})' for n, t in few)}: a median under {FEW_TICKS} "
                       f"timer ticks of {tick} ns is mostly quantization{hint}.")

    unit = unit_of(max(stats[n]["median"] for n in phases))
    others = [n for n in phases if n not in (leader, runner)]
    rest = ("; " + ("the other phases: " if pair else "") + ", ".join(
        f"`{n}` {_median(stats[n], unit)}" for n in others)) if others else ""
    if ratio is None:  # the runner-up's median is 0: below the timer's resolution
        ratio = {"value": None, "lo": None, "hi": None, "end_on_estimate": None}
        ends = f"`{runner}`'s median is 0: below the timer's resolution"
    elif ratio["lo"] is None:
        ends = "no interval: no draw holds both"
    else:
        ends = interval_text(ratio)
    asked = " (the pair the question weighs)" if pair else ""
    if ratio["value"] is None or (ratio["lo"] is not None and ratio["lo"] > 1):
        status = "leader"
        times = "" if ratio["value"] is None else f"{ratio['value']:.2f}× "
        text = (f"`{leader}` takes longer than `{runner}`{asked}: median {_median(stats[leader], unit)} "
                f"against {_median(stats[runner], unit)} per instance, {times}({ends}){rest}." if pair else
                f"`{leader}` takes longest: median {_median(stats[leader], unit)} per instance, "
                f"{times}({ends}) the next, `{runner}` ({_median(stats[runner], unit)}){rest}.")
    else:
        status = "even"
        text = (f"Neither takes clearly longer{asked}: `{leader}` ({_median(stats[leader], unit)}) and "
                f"`{runner}` ({_median(stats[runner], unit)}), ratio {ratio['value']:.2f}× ({ends}) "
                f"includes 1{rest}.")
    if caveats:
        text += (" Caveat: " if len(caveats) == 1 else " Caveats: ") + " ".join(caveats)
    return {"launch": name, "status": status, "reason": None, "text": text, "compared": compared,
            "enclosing": enclosing, "leader": leader if status == "leader" else None, "runner_up": runner,
            "ratio": {**ratio, "level": LEVEL, "resamples": RESAMPLES, "cluster": "cta", "method": METHOD,
                      "of": f"{leader} / {runner}"}, "caveats": caveats, "unit": unit[0], "pair": list(pair),
            "reference": leader, "quantized": [n for n, _ in few], "at_clock": at_clock}


def clock_answer_line(clocked: dict) -> str:
    """An answer's `at_clock` (answer's `clocked`) as the demo and the report print it, under the
    answer: where it was recorded, then its answer line."""
    return f"At the SM clock's resolution ({clocked['source']}): {clocked['text']}"


def _end_on_estimate(value: float, lo: float | None, hi: float | None, a: dict, b: dict) -> str | None:
    """"upper" or "lower" where that end of the interval, as printed, is the estimate and the two
    medians are whole timer ticks (the draws' ratios take few values); else None."""
    if lo is None or all(r.get("resolution") == CYCLES or r.get("median_ticks") is None for r in (a, b)):
        return None
    est = f"{value:.2f}"
    return "upper" if f"{hi:.2f}" == est else "lower" if f"{lo:.2f}" == est else None


def interval_text(ratio: dict) -> str:
    """A ratio's interval as the answer and the report print it: the method named, and an end that
    is the estimate itself said to be so."""
    text = f"{LEVEL:.0%} {METHOD} interval {ratio['lo']:.2f}–{ratio['hi']:.2f}×"
    end = ratio.get("end_on_estimate")
    return text + (f"; its {end} end is the estimate: the medians are whole timer ticks, so the resampled ratios "
                   "take few values" if end else "")


def _ticks(t: float) -> str:
    return "tick" if round(t) == 1 else "ticks"


def _overlap(a: dict, b: dict) -> float:
    """Share of b's instances that start inside an instance of a (same owner) and end after it."""
    if a["i0"].size == 0 or b["i0"].size == 0:
        return 0.0
    j = np.searchsorted(a["i0"], b["i0"], side="right") - 1
    jj = np.maximum(j, 0)
    part = (j >= 0) & (a["owner"][jj] == b["owner"]) & (b["i0"] < a["i1"][jj]) & (b["i1"] > a["i1"][jj])
    return float(part.mean())


def answers(capture: dict, launches: list[Launch], manifest: Manifest, clocked: dict | None = None) -> list[dict]:
    """One answer per launch of a validation report (evidence.gather's capture and launches);
    `clocked`: answer's."""
    failed = [c["name"] for c in capture["checks"] if not c["ok"]]
    if not launches:
        return [_no("", "no launch decoded"
                    + (f" (failed: {', '.join(failed)})." if failed else "."), "no_launch")]
    return [answer(l, manifest, s, capture["verdict"], failed, clocked)
            for l, s in zip(launches, capture["summaries"])]
