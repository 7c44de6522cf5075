"""`atrex-inject compare BEFORE AFTER`: which intervals moved between two captures, by how much,
with what confidence (docs/compare.md).

Each side is a capture folder, validated first (a rejected one is refused, naming its failed
checks), read with its own manifest; its launches are repeated observations of one build. Sites
are matched by name (`mapping` renames BEFORE's); the kernels may differ, the workload and the
device model may not unless allowed. Per interval, per site offset and for the launch's span, the
figures on each side, their change, a bootstrap interval that resamples owners (launches first when
a side holds several), a rank test and a verdict come from twosample.py and stats.py; per SM, per
warp and per CTA (p90 and max: the stragglers) says where it moved. With a measurement of each
side, the end-to-end change of the clean builds is given next to them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import manifest as mf
from .decode import Launch
from .errors import AtrexError
from .grade import source_disagreements
from .intervals import durations as interval_durations
from .smclock import MODEL
from .intervals import pairs
from .manifest import Manifest
from .measure import SEED, load_measurement, summarize, validate_measurement
from .summary import timer_tick_ns
from .stats import LEVEL, RESAMPLES, Design, grouped_quantile, median, quantiles, weighted_quantile
from .twosample import grid_of, judge, mann_whitney, seed_of
from .validate import validate_dir

MEASUREMENT_NAME = "measure.json"  # a capture folder's own measurement (`measure --out DIR/measure.json`)
SPEED = ("faster", "slower")  # an interval's or the span's verdict words: smaller, larger
WHEN = ("earlier", "later")  # a site's offset from the launch's first event
QS = (0.10, 0.50, 0.90)


def durations(launch: Launch, start: int, end: int) -> tuple[dict, float | None, dict | None]:
    """An interval's instances in one launch (intervals.pairs: owner, SM, dur in ns, each timed as
    the summary times it: intervals.durations, in SM cycles at the owner's local rate where the
    capture can), the resolution of their durations in ns (a cycle where the clock times them all,
    else the timer's tick) and, with the SM clock, how they were timed (resolution, rate model,
    instances inside which the clock changed speed). Compare reads every duration through this one
    call."""
    p = pairs(launch, start, end)
    d = interval_durations(launch, p)
    timed = None if d.rates is None else {"resolution": d.resolution, "rate_model": MODEL,
                                          "varied": int(np.count_nonzero(d.varied))}
    if d.rate_ghz and d.by_cycles.size and d.by_cycles.all():
        return {**p, "dur": d.ns}, 1.0 / d.rate_ghz, timed
    return {**p, "dur": d.ns}, timer_tick_ns(launch.events["t_ns"]), timed


@dataclass
class Side:
    """One capture folder, validated, with its owners laid out as resampling units: owner u of the
    side is owner u - offset[l] of launch l; CTA units are (launch, CTA) pairs."""
    label: str
    path: Path
    manifest: Manifest
    report: dict
    launches: list[Launch]
    measurement: Path | None
    offset: np.ndarray = field(init=False)  # first side-wide owner of each launch
    sm: np.ndarray = field(init=False)  # per side-wide owner
    warp: np.ndarray = field(init=False)
    cta_unit: np.ndarray = field(init=False)  # per owner, its CTA unit
    owners: Design = field(init=False)
    ctas: Design = field(init=False)

    def __post_init__(self):
        n = [int(l.owners["claims"].size) for l in self.launches]
        self.offset = np.r_[0, np.cumsum(n)[:-1]].astype(np.int64)
        cat = lambda get: np.concatenate([np.asarray(get(l)) for l in self.launches]).astype(np.int64)
        self.sm, self.warp = cat(lambda l: l.owner_column("sm")), cat(lambda l: l.owner_column("warp"))
        launch = np.repeat(np.arange(len(n)), n)
        key = launch * (1 << 40) + cat(lambda l: l.owners["cta"])
        uniq, self.cta_unit = np.unique(key, return_inverse=True)
        self.owners, self.ctas = Design.of(launch), Design.of(uniq >> 40)


def _read_side(label: str, path: Path, measurement: Path | None) -> Side:
    try:
        m = mf.for_capture(path)
        report, launches = validate_dir(path, m, with_summaries=False)
    except AtrexError as e:
        raise AtrexError(f"{label}: {e.message}", path=e.path, hint=e.hint) from None
    if report["verdict"] != "valid":
        failed = [f"{c['name']} ({c['count']}: {c['details'][0] if c['details'] else ''})"
                  for c in report["checks"] if not c["ok"]] or ["no launch could be read"]
        raise AtrexError(f"{label} {path} is rejected by validation; failed checks: " + "; ".join(failed),
                         path=str(path), hint=f"`atrex-inject validate {path}` says why and what to do; compare "
                                              "needs two valid captures")
    if not sum(l.n_events for l in launches):
        raise AtrexError(f"{label} {path} holds no events: its launches recorded nothing", path=str(path),
                         hint="capture again with sites the kernel reaches (atrex-inject summary shows what a "
                              "capture holds)")
    own = Path(path) / MEASUREMENT_NAME
    return Side(label, Path(path), m, report, launches, measurement or (own if own.is_file() else None))


def parse_map(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`--map old=new` entries: BEFORE's site name -> AFTER's."""
    out: dict[str, str] = {}
    for it in items:
        old, eq, new = it.partition("=")
        old, new = old.strip(), new.strip()
        if not eq or not old or not new:
            raise AtrexError(f"--map {it!r} is not OLD=NEW", hint="--map OLD=NEW renames BEFORE's site OLD to AFTER's "
                                                                   "NEW, e.g. --map wait=stage_wait")
        if old in out:
            raise AtrexError(f"--map names site {old!r} twice", hint="give each renamed site once")
        out[old] = new
    return out


def _match(before: Side, after: Side, mapping: dict[str, str]) -> dict[str, str]:
    """AFTER's site name for each of BEFORE's; the two site sets must be the same after renaming."""
    b = [s.name for s in before.manifest.sites]
    a = {s.name for s in after.manifest.sites}
    for old, new in mapping.items():
        if old not in b:
            raise AtrexError(f"--map {old}={new}: BEFORE has no site {old!r} (its sites: {', '.join(b)})",
                             path=str(before.path / mf.FILE_NAME))
        if new not in a:
            raise AtrexError(f"--map {old}={new}: AFTER has no site {new!r} (its sites: {', '.join(sorted(a))})",
                             path=str(after.path / mf.FILE_NAME))
    renamed = {n: mapping.get(n, n) for n in b}
    if len(set(renamed.values())) < len(renamed):
        raise AtrexError("--map gives two of BEFORE's sites one name in AFTER", hint="map each site to its own name")
    only_b = [n for n in b if renamed[n] not in a]
    only_a = sorted(a - set(renamed.values()))
    if only_b or only_a:
        raise AtrexError("the two captures have different sites: "
                         + "; ".join(f"only in {w}: {', '.join(ns)}" for w, ns in (("BEFORE", only_b), ("AFTER", only_a))
                                     if ns),
                         hint="a site renamed in AFTER: --map OLD=NEW (BEFORE's name = AFTER's); sites added or "
                              "removed: capture both builds with one spec")
    return renamed


def _device(s: Side) -> dict:
    sidecar = s.launches[0].meta.sidecar
    d = sidecar.device or {}
    return {"name": d.get("name"), "sm_count": d.get("sm_count"), "cc": d.get("cc"), "uuid": sidecar.device_uuid}


def _identities(before: Side, after: Side, allow_workload: bool, allow_device: bool) -> tuple[dict, dict]:
    wb, wa = before.report["identity"]["workload"], after.report["identity"]["workload"]
    if wb != wa and not allow_workload:
        raise AtrexError(f"the workloads differ: BEFORE ran {wb!r}, AFTER {wa!r}",
                         hint="capture both builds on one workload, or pass --allow-workload-change to compare anyway "
                              "(the output then says the workload changed)")
    db, da = _device(before), _device(after)
    model = lambda d: {k: d[k] for k in ("name", "sm_count", "cc")}
    if model(db) != model(da) and not allow_device:
        raise AtrexError(f"the device models differ: BEFORE ran on {_model(db)}, AFTER on {_model(da)}",
                         hint="capture both builds on one GPU model, or pass --allow-device-change to compare anyway "
                              "(the output then says the device changed)")
    return ({"before": wb, "after": wa, "same": wb == wa},
            {"before": db, "after": da, "same_model": model(db) == model(da), "same_gpu": db["uuid"] == da["uuid"]})


def _model(d: dict) -> str:
    return f"{d['name'] or 'an unrecorded device'} ({d['sm_count'] or '?'} SMs, cc {d['cc'] or '?'})"


@dataclass
class Draws:
    """A side's bootstrap sets, drawn once for all its figures: owner and CTA weights (b, units)
    and how often each launch was drawn (b, K)."""
    owners: np.ndarray
    ctas: np.ndarray
    launches: np.ndarray

    @classmethod
    def of(cls, s: Side, b: int = RESAMPLES) -> "Draws":
        w, c = s.owners.draw(seed_of(s.label, "owners"), b)
        return cls(w, s.ctas.draw(seed_of(s.label, "ctas"), b)[0], c)


def _stats(values: np.ndarray) -> dict:
    return {"count": int(values.size), **dict(zip(("p10", "median", "p90"), quantiles(values, QS)))}


def figure(vb: np.ndarray, ub: np.ndarray, wb: np.ndarray, va: np.ndarray, ua: np.ndarray, wa: np.ndarray,
           resolution: int, words: tuple[str, str], kb: np.ndarray | None = None,
           ka: np.ndarray | None = None) -> dict:
    """One figure compared: each side's values (ns), their units (ub, ua: indices into the side's
    bootstrap weights wb, wa), and the independent unit of each value for the rank test (kb, ka: its
    launch when both sides hold several; default its unit). Quantiles of each side, the median's
    change, its interval, the rank test on per-unit medians, and the verdict (twosample.judge)."""
    kb, ka = ub if kb is None else kb, ua if ka is None else ka
    points, coarse = grid_of([vb, va], max(wb.shape[1], wa.shape[1]))
    sb, sa = _stats(vb), _stats(va)
    bb, ba = weighted_quantile(vb, ub, wb, 0.5, points), weighted_quantile(va, ua, wa, 0.5, points)
    test = mann_whitney(grouped_quantile(kb, vb, 0.5)[2], grouped_quantile(ka, va, 0.5)[2])
    out = {"before": sb, "after": sa, **judge(sb["median"], sa["median"], bb, ba, resolution, words, test),
           "rank_test": test, "resolution_ns": resolution}
    if coarse:
        out["bootstrap_bins"] = int(points.size)
    return out


def _by(keys_b: np.ndarray, vb: np.ndarray, keys_a: np.ndarray, va: np.ndarray, key: str) -> list[dict]:
    """Per key (an SM, a warp): count and median on each side, and the median's change."""
    kb, nb, mb = grouped_quantile(keys_b, vb, 0.5)
    ka, na, ma = grouped_quantile(keys_a, va, 0.5)
    b = {int(k): (int(n), float(m)) for k, n, m in zip(kb, nb, mb)}
    a = {int(k): (int(n), float(m)) for k, n, m in zip(ka, na, ma)}
    rows = []
    for k in sorted(b.keys() | a.keys()):
        (cb, xb), (ca, xa) = b.get(k, (0, None)), a.get(k, (0, None))
        rows.append({key: k, "before": {"count": cb, "median": xb}, "after": {"count": ca, "median": xa},
                     "change": xa / xb - 1 if xa is not None and xb else None})
    return rows


@dataclass
class _Instances:
    """One side's instances of a figure, side-wide: values (ns) and their owners."""
    values: np.ndarray
    owner: np.ndarray
    resolution: int
    timed: dict | None = None  # with the SM clock: how the side's durations were timed (durations)

    @classmethod
    def join(cls, parts: list[tuple[np.ndarray, np.ndarray, int | None]], timed: list[dict] = ()) -> "_Instances":
        both = {"resolution": timed[0]["resolution"] if len({t["resolution"] for t in timed}) == 1 else "mixed",
                "rate_model": MODEL, "varied": sum(t["varied"] for t in timed)} if timed else None
        return cls(np.concatenate([p[0] for p in parts]).astype(np.int64),
                   np.concatenate([p[1] for p in parts]).astype(np.int64), max((p[2] or 1) for p in parts), both)


def _interval_instances(s: Side, start: int, end: int) -> _Instances:
    parts, timed = [], []
    for l, launch in enumerate(s.launches):
        p, res, how = durations(launch, start, end)
        parts.append((p["dur"], p["owner"].astype(np.int64) + s.offset[l], res))
        timed += [how] if how else []
    return _Instances.join(parts, timed)


def _mark_instances(s: Side, site: int) -> _Instances:
    parts = []
    for l, launch in enumerate(s.launches):
        ev = launch.events
        sel = ev["site"] == site
        t_first = int(ev["t_ns"].min()) if ev["t_ns"].size else 0
        parts.append((ev["t_ns"][sel] - t_first, ev["owner"][sel].astype(np.int64) + s.offset[l],
                      timer_tick_ns(ev["t_ns"])))
    return _Instances.join(parts)


@dataclass
class _Pair:
    """The two sides and their bootstrap sets. `by_launch`: both hold several launches, so the
    rank test's independent units are launches (else owners, or CTAs for the CTA figures)."""
    b: Side
    a: Side
    db: Draws
    da: Draws

    @property
    def by_launch(self) -> bool:
        return len(self.b.launches) > 1 and len(self.a.launches) > 1

    def owners(self, ib: _Instances, ia: _Instances, words: tuple[str, str]) -> dict:
        """A figure of instances whose units are owners."""
        k = (self.b.owners.launch[ib.owner], self.a.owners.launch[ia.owner]) if self.by_launch else (None, None)
        return figure(ib.values, ib.owner, self.db.owners, ia.values, ia.owner, self.da.owners,
                      max(ib.resolution, ia.resolution), words, *k)

    def ctas(self, cb: np.ndarray, vb: np.ndarray, ca: np.ndarray, va: np.ndarray, resolution: int) -> dict:
        """A figure of one value per CTA (cb, ca: CTA units)."""
        k = (self.b.ctas.launch[cb], self.a.ctas.launch[ca]) if self.by_launch else (None, None)
        return figure(vb, cb, self.db.ctas, va, ca, self.da.ctas, resolution, SPEED, *k)


def _interval(p: _Pair, name: str, b_ids: tuple[int, int], a_ids: tuple[int, int]) -> tuple[dict, dict]:
    """One interval's figures, and the arrays its picture draws."""
    ib, ia = _interval_instances(p.b, *b_ids), _interval_instances(p.a, *a_ids)
    row = {"name": name, **p.owners(ib, ia, SPEED)}
    if ib.timed or ia.timed:
        row["timed"] = {"before": ib.timed, "after": ia.timed}
    row["launch_medians"] = {k: [float(m) for m in grouped_quantile(s.owners.launch[i.owner], i.values, 0.5)[2]]
                             for k, s, i in (("before", p.b, ib), ("after", p.a, ia))}
    row["per_cta"] = {}
    for q, key in ((0.9, "cta_p90"), (1.0, "cta_max")):
        cb, _, vb = grouped_quantile(p.b.cta_unit[ib.owner], ib.values, q)
        ca, _, va = grouped_quantile(p.a.cta_unit[ia.owner], ia.values, q)
        row["per_cta"][key] = p.ctas(cb, vb, ca, va, row["resolution_ns"])
    row["per_sm"] = _by(p.b.sm[ib.owner], ib.values, p.a.sm[ia.owner], ia.values, "sm")
    row["per_warp"] = _by(p.b.warp[ib.owner], ib.values, p.a.warp[ia.owner], ia.values, "warp")
    return row, {"name": name, "before": ib.values, "after": ia.values, "per_sm": row["per_sm"],
                 "verdict": row["verdict"], "change": row["change"], "ci95": row["ci95"]}


def _spans(s: Side) -> tuple[np.ndarray, int]:
    """Each launch's span (its last event's time less its first's) and the coarsest timer tick."""
    t = [l.events["t_ns"] for l in s.launches]
    return (np.array([int(x.max() - x.min()) if x.size else 0 for x in t], dtype=np.int64),
            max(timer_tick_ns(x) or 1 for x in t))


def _span(p: _Pair) -> dict:
    """The launch's span: one value per launch, so its units are launches (the bootstrap draws
    launches; the rank test compares the launches' spans). One launch on a side gives no interval."""
    (sb, tb), (sa, ta) = _spans(p.b), _spans(p.a)
    out = figure(sb, np.arange(sb.size), p.db.launches.astype(np.float32), sa, np.arange(sa.size),
                 p.da.launches.astype(np.float32), max(tb, ta), SPEED)
    if sb.size < 2 or sa.size < 2:
        out.update(ci95=None, ci95_ns=None, rank_test=mann_whitney(sb[:0], sa[:0]), verdict="not compared",
                   why="a span is one value per launch: an interval needs several launches on each side "
                       "([capture] count in the spec)")
    return out


def _foreign(s: Side, other: Side, art: dict) -> str | None:
    """Why a valid measurement does not belong to side s's capture, or None: it ran another workload,
    or it did not hash the capture's clean and instrumented sources (grade's binding; when it
    hashed the other side's, the two were given the wrong way round)."""
    wl = art["samples"][0]["sample"]["workload_identity"]  # a valid one: every sample is
    if wl != s.report["identity"]["workload"]:
        return f"{s.label}'s measurement ran workload {wl!r}, its capture {s.report['identity']['workload']!r}"
    hashed = [h["sha256"] for h in art.get("sources", [])]
    lacks = source_disagreements(s.report["identity"], hashed)
    if not lacks:
        return None
    swapped = not source_disagreements(other.report["identity"], hashed)
    return (f"{s.label}'s measurement is not of its capture's build: " + "; ".join(lacks)
            + (f"; it hashed {other.label}'s build: the two measurements are given the wrong way round" if swapped
               else ""))


def _end_to_end(before: Side, after: Side, explicit: bool, notes: list[str]) -> dict | None:
    """The clean builds' change end to end (each side's measurement, arm A): median of AFTER's
    processes over BEFORE's, with measure's seeded bootstrap. A measurement named on the command line
    must be valid, of its capture's workload and build (it hashed the capture's clean and instrumented
    sources), else exit 2; a folder's own measure.json that is not is left out, with a note."""
    if before.measurement is None or after.measurement is None:
        return None
    arts = []
    for s, other in ((before, after), (after, before)):
        try:
            check = validate_measurement(s.measurement)  # a file that is no measurement: exit 2
        except AtrexError as e:
            if explicit:
                raise
            check = {"valid": False, "problems": [e.message]}
        art = load_measurement(s.measurement) if check["valid"] else None
        why = (f"{s.label}'s measurement is rejected: " + "; ".join(check["problems"]) if art is None else
               _foreign(s, other, art))
        if why and explicit:
            raise AtrexError(why, path=str(s.measurement), hint=check.get("next_step") or "measure the build that was "
                                                                                         "captured, on its workload")
        if why:
            notes.append(f"no end-to-end change: {why} ({s.measurement})")
            return None
        arts.append(art)
    out = {}
    for arm, what in (("A", "clean"), ("B", "instrumented")):
        samples = [{"arm": "A" if i == 0 else "B", "sample": x["sample"]} for i, art in enumerate(arts)
                   for x in art["samples"] if x["arm"] == arm]
        r = summarize(samples)
        out[what] = {"before_ms": r["median_ms"]["baseline"], "after_ms": r["median_ms"]["instrumented"],
                     "change": r["overhead"], "ci95": r["overhead_ci95"],
                     "processes": [r["n"]["baseline"], r["n"]["instrumented"]]}
    return {"measurements": [str(before.measurement), str(after.measurement)], **out}


def _about(s: Side) -> dict:
    m = s.manifest
    return {"path": str(s.path), "spec": m.name, "kernel": m.kernel, "source_id": m.source.source_id,
            "clean_sha256": m.source.clean_sha256, "launches": [l.name for l in s.launches],
            "owners": int(sum(int(np.count_nonzero(l.owners["claims"] > 0)) for l in s.launches)), "events": int(sum(l.n_events for l in s.launches)),
            "measurement": str(s.measurement) if s.measurement else None}


@dataclass
class Comparison:
    """The result (`compare --json`) and, per interval, the arrays its picture draws."""
    result: dict
    pictures: list[dict]


def compare_dirs(before: str | Path, after: str | Path, mapping: dict[str, str] | None = None,
                 allow_workload_change: bool = False, allow_device_change: bool = False,
                 measurement_before: str | Path | None = None,
                 measurement_after: str | Path | None = None) -> Comparison:
    """Both folders read and checked, then every figure compared (module docstring)."""
    if (measurement_before is None) != (measurement_after is None):
        raise AtrexError("--measurement-before and --measurement-after go together",
                         hint="give both (each side's `atrex-inject measure` artifact), or neither: a folder's own "
                              f"{MEASUREMENT_NAME} is used when both folders carry one")
    mb_path = Path(measurement_before) if measurement_before else None
    ma_path = Path(measurement_after) if measurement_after else None
    b = _read_side("BEFORE", Path(before), mb_path)
    a = _read_side("AFTER", Path(after), ma_path)
    renamed = _match(b, a, mapping or {})
    workload, device = _identities(b, a, allow_workload_change, allow_device_change)
    p = _Pair(b, a, Draws.of(b), Draws.of(a))
    back = {v: k for k, v in renamed.items()}  # AFTER's site name -> BEFORE's
    names = [(iv.start, iv.end) for iv in a.manifest.intervals]
    names += [(renamed[iv.start], renamed[iv.end]) for iv in b.manifest.intervals
              if (renamed[iv.start], renamed[iv.end]) not in names]
    rows, pictures = [], []
    for start, end in names:
        ids_b = (b.manifest.site_ids[back[start]], b.manifest.site_ids[back[end]])
        ids_a = (a.manifest.site_ids[start], a.manifest.site_ids[end])
        row, pic = _interval(p, f"{start} -> {end}", ids_b, ids_a)
        if back[start] != start or back[end] != end:
            row["before_name"] = f"{back[start]} -> {back[end]}"
        rows.append(row)
        pictures.append(pic)
    marks = []
    for s in a.manifest.sites:
        mark = {"site": s.name, **p.owners(_mark_instances(b, b.manifest.site_ids[back[s.name]]),
                                            _mark_instances(a, s.id), WHEN)}
        if back[s.name] != s.name:
            mark["before_site"] = back[s.name]
        marks.append(mark)
    several = [len(s.launches) > 1 for s in (b, a)]
    result = {
        "before": _about(b), "after": _about(a),
        "same_kernel_source": b.manifest.source.clean_sha256 == a.manifest.source.clean_sha256,
        "workload": {**workload, "change_allowed": allow_workload_change},
        "device": {**device, "change_allowed": allow_device_change},
        "map": dict(mapping or {}),
        "statistics": {
            "median": "the ceil(n/2)-th smallest value (the summary's rule), over all instances of a side",
            "bootstrap": {"sets": RESAMPLES, "seed": SEED, "level": LEVEL,
                          "resamples": "launches, then owners within each drawn launch" if all(several) else
                                       "owners (launches first on the side holding several)" if any(several) else
                                       "owners",
                          "owners_per_block": max(b.owners.block, a.owners.block)},
            "launch_to_launch": p.by_launch,
            "rank_test": "Mann-Whitney U, two-sided, on one value per independent unit (its median): "
                         + ("launches (both sides hold several; a launch's owners share it)" if p.by_launch else
                            "owners (CTAs for the CTA figures): an owner's instances are not independent, owners "
                            "are"),
            "verdict": "faster/slower (earlier/later for a site's offset) when the 95% interval of the change "
                       "excludes 0, the rank test agrees (p < 0.05) and the medians differ by more than the "
                       "timer's tick; else no change detected"},
        "intervals": rows, "span": _span(p), "marks": marks,
    }
    notes: list[str] = []
    result["end_to_end"] = _end_to_end(b, a, measurement_before is not None, notes)
    result["notes"] = notes
    result["moved"] = _moved(result)
    return Comparison(result, pictures)


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


ON_ESTIMATE = ("† an end of the interval is the estimate itself: the values are whole timer ticks, so the "
               "resampled medians, and their changes, take few values")


def _ends(r: dict) -> tuple[str, str, str] | None:
    """A figure's change and its interval's ends as printed: relative, or in ns where BEFORE's value is 0."""
    if r["change"] is not None and r["ci95"] is not None:
        return pct(r["change"]), pct(r["ci95"][0]), pct(r["ci95"][1])
    if r["change_ns"] is not None and r["ci95_ns"] is not None:
        lo, hi = r["ci95_ns"]
        return f"{r['change_ns']:+.0f} ns", f"{lo:+.0f}", f"{hi:+.0f}"
    return None


def on_estimate(r: dict) -> bool:
    """Whether an end of the figure's interval prints as its estimate (the medians are whole ticks)."""
    e = _ends(r)
    return e is not None and e[0].removesuffix(" ns") in e[1:]


def change_text(r: dict) -> str:
    """A figure's change and its 95% interval, marked † where an end is the estimate (ON_ESTIMATE)."""
    e = _ends(r)
    if e is None:
        return pct(r["change"])
    return f"{e[0]} [{e[1]}, {e[2]}]{'†' if on_estimate(r) else ''}"


def p_text(r: dict) -> str:
    p = r["rank_test"]["p"]
    return "-" if p is None else "<1e-6" if p < 1e-6 else f"{p:.2g}"


def verdict_text(r: dict) -> str:
    """The verdict, with why when nothing was detected or compared."""
    if r["verdict"] == "no change detected":
        why = r["why"]
        return r["verdict"] + (" (interval includes 0)" if "includes 0" in why else
                               " (rank test disagrees)" if "rank test" in why else
                               " (not more than a tick)" if "tick" in why else " (too few units)")
    if r["verdict"] == "not compared":
        return r["verdict"] + (" (one launch a side)" if "launch" in r["why"] else f" ({r['why']})")
    return r["verdict"]


def about_lines(r: dict) -> list[str]:
    """Who is compared (each side, the kernel, workload and device) and how (the statistics)."""
    lines = [f"{key.upper():<6} {s['path']}: {s['kernel']}, {len(s['launches'])} launch(es), {s['owners']} owners, "
             f"{s['events']} events (source id {s['source_id'][:12]}…)" for key, s in (("before", r["before"]),
                                                                                     ("after", r["after"]))]
    lines.append("kernel source: " + ("the same clean source (another instrumentation or build)"
                                      if r["same_kernel_source"] else "changed"))
    w, d = r["workload"], r["device"]
    lines.append(f"workload: {w['before']} on both" if w["same"] else
                 f"workload CHANGED (allowed): {w['before']} -> {w['after']}")
    lines.append((f"device: {_model(d['before'])} on both" + (" (the same GPU)" if d["same_gpu"] else
                                                             " (two GPUs of that model)")) if d["same_model"] else
                 f"device CHANGED (allowed): {_model(d['before'])} -> {_model(d['after'])}")
    st = r["statistics"]
    lines.append(f"statistics: medians of all instances; 95% intervals from {st['bootstrap']['sets']} bootstrap sets "
                 f"resampling {st['bootstrap']['resamples']} (seeded); rank test: Mann-Whitney U on per-"
                 f"{'launch' if st['launch_to_launch'] else 'owner'} medians; a verdict needs the interval to exclude "
                 "0, the rank test to agree and a move of more than the timer's tick"
                 + ("" if st["launch_to_launch"] else "; not several launches a side: the intervals hold "
                    "owner-to-owner variation, not launch-to-launch (capture several: [capture] count)"))
    return lines


def straggler_rows(iv: dict) -> list[tuple[str, str]]:
    """An interval's per-CTA figures worth a row, as (key, label): the p90 and the max, or the max
    alone where both sides' p90s are their maxes (a CTA with fewer than 10 instances has its max
    for p90), so no row repeats another."""
    c = iv["per_cta"]
    if all(c["cta_p90"][s] == c["cta_max"][s] for s in ("before", "after")):
        return [("cta_max", "per CTA: max (p90 the same)")]
    return [("cta_p90", "per CTA: p90"), ("cta_max", "per CTA: max")]


def rows(r: dict) -> list[tuple[int, str, dict | None]]:
    """The table's rows in order: (depth, label, figure), or a line of text with no figure."""
    out = []
    for iv in r["intervals"]:
        out.append((0, iv["name"] + (f" (was {iv['before_name']})" if "before_name" in iv else ""), iv))
        out += [(1, label, iv["per_cta"][key]) for key, label in straggler_rows(iv)]
        moved = [x["change"] for x in iv["per_sm"] if x["change"] is not None]
        if moved:
            out.append((1, f"per SM: the median moved {pct(min(moved))} to {pct(max(moved))} (middle SM "
                           f"{pct(float(median(moved)))}) on the {len(moved)} SMs with instances on both sides",
                        None))
    out.append((0, "launch span (per launch)", r["span"]))
    out.append((0, "site offsets from the launch's first event", None))
    out += [(0, mk["site"] + (f" (was {mk['before_site']})" if "before_site" in mk else ""), mk) for mk in r["marks"]]
    return out


def end_to_end_line(r: dict) -> str | None:
    c = (r["end_to_end"] or {}).get("clean")
    return c and (f"end to end (clean builds, each side's measurement): {c['before_ms']:.4f} -> {c['after_ms']:.4f} "
                  f"ms, {pct(c['change'])} [95% bootstrap interval {pct(c['ci95'][0])}, {pct(c['ci95'][1])}] "
                  f"({c['processes'][0]} + {c['processes'][1]} processes)")


def _moved(r: dict) -> list[str]:
    """What moved: each interval whose median did, else its stragglers (per CTA p90, max) where they
    did, and the span."""
    def said(name: str, f: dict) -> str:
        return f"{name} {f['verdict']} {pct(f['change']) if f['change'] is not None else ''}".rstrip()
    out = []
    for iv in r["intervals"]:
        if iv["verdict"] in SPEED:
            out.append(said(iv["name"], iv))
        else:
            out += [said(f"{iv['name']} ({label})", iv["per_cta"][key]) for key, label in straggler_rows(iv)
                    if iv["per_cta"][key]["verdict"] in SPEED]
    if r["span"]["verdict"] in SPEED:
        out.append(said("launch span", r["span"]))
    return out


def answer_line(r: dict) -> str:
    """The before/after answer, first where a comparison is shown: each interval whose median moved,
    from what to what, by how much with its interval (the method named); the intervals where no
    change was detected; the launch's span and the clean builds' end-to-end time when they moved."""
    def us(ns: float) -> str:
        return f"{ns / 1e3:.3g}"

    def said(name: str, f: dict) -> str:
        e = _ends(f)
        where = (f", 95% bootstrap interval {e[1]} to {e[2]}" + ("; an end is the estimate: the values are whole "
                                                                   "timer ticks" if on_estimate(f) else "")) if e else ""
        return (f"`{name}` {f['verdict']}, median {us(f['before']['median'])} → {us(f['after']['median'])} µs "
                f"({pct(f['change'])}{where})")
    moved = [said(iv["name"], iv) for iv in r["intervals"] if iv["verdict"] in SPEED]
    moved += [said(f"{iv['name']}, {label}", iv["per_cta"][key]) for iv in r["intervals"] if iv["verdict"] not in SPEED
              for key, label in straggler_rows(iv) if iv["per_cta"][key]["verdict"] in SPEED]
    still = [f"`{iv['name']}`" for iv in r["intervals"] if iv["verdict"] not in SPEED]
    text = "Before → after: " + ("; ".join(moved) if moved else "no interval moved")
    if still and moved:
        text += f"; no change detected in {', '.join(still)}"
    if r["span"]["verdict"] in SPEED:
        text += f"; the launch's span {r['span']['verdict']} {pct(r['span']['change'])}"
    c = (r["end_to_end"] or {}).get("clean")
    return text + (f"; end to end (clean builds) {pct(c['change'])}" if c else "") + "."


def moved_line(r: dict) -> str:
    """What moved, in one line, next to the end-to-end change when there is one."""
    e = r["end_to_end"]
    return ("moved: " + ("; ".join(r["moved"]) if r["moved"] else "nothing")
            + (f" | end to end (clean builds) {pct(e['clean']['change'])}" if e else ""))


def render_text(result: dict) -> str:
    """The comparison as a person reads it: who is compared, how, and per figure the two sides."""
    def side(s: dict) -> str:
        us = lambda k: "-" if s.get(k) is None else f"{s[k] / 1e3:.3f}"
        return f"{s['count']:>7} {us('median'):>10} {us('p10') + '-' + us('p90'):>17}"

    r = result
    lines = about_lines(r) + [
        f"  {'':<32}{'BEFORE (us)':^36}   {'AFTER (us)':^36}",
        f"  {'':<32}{'count':>7} {'median':>10} {'p10-p90':>17}   {'count':>7} {'median':>10} {'p10-p90':>17}   "
        f"{'change [95% interval]':<27}{'rank p':>7}  verdict"]
    for depth, label, f in rows(r):
        label = "  " * depth + label
        lines.append(f"  {label}" if f is None else f"  {label:<32}{side(f['before'])}   {side(f['after'])}   "
                                                    f"{change_text(f):<27}{p_text(f):>7}  {verdict_text(f)}")
    e = end_to_end_line(r)
    marked = any(f is not None and on_estimate(f) for _, _, f in rows(r))
    return "\n".join(lines + ([e] if e else []) + [f"note: {n}" for n in r["notes"]]
                     + ([f"note: {ON_ESTIMATE}"] if marked else []) + clock_lines(r) + [moved_line(r)])


def clock_lines(result: dict) -> list[str]:
    """How the intervals of a side with the SM clock were timed: the rate model once, then per
    interval each side's resolution and the instances inside which the clock changed speed."""
    rows = [row for row in result["intervals"] if row.get("timed")]
    if not rows:
        return []
    word = lambda t: "-" if t is None else t["resolution"] + (f" ({t['varied']} with a speed change inside)"
                                                             if t["varied"] else "")
    return [f"clock: durations by SM cycles are at the owner's local rate ({MODEL})"] + [
        f"clock: {row['name']}: BEFORE {word(row['timed']['before'])}, AFTER {word(row['timed']['after'])}"
        for row in rows]
