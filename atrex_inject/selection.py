"""Which owners a Perfetto trace holds in full (docs/format.md, "Owner selection"), chosen and
gathered in two passes over a launch's owner-range parts, so a capture larger than memory exports.

A capture where every warp records repeats the same interval thousands of times; a trace of all of
it is too big for the Perfetto UI and no easier to read. By default the trace keeps every event of
a bounded set of owners: all of them when the capture fits the event budget; otherwise, per
interval, the owners whose typical (mean) duration is closest to the launch's median, p10 and p90
and the owners with the slowest instances, taken in that priority order while the events fit.
Without intervals the owner's span (first to last event) stands in for a duration. `--owners`,
`--ctas` and `--all` replace the rule; `--trace-window` first keeps only events inside a time window.
The first pass (survey) reads what the rule needs; the second (gather) keeps the chosen owners'
events and sums the others into time bins for counter tracks.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from .decode import Launch
from .errors import AtrexError
from .intervals import durations, pairs
from .manifest import Manifest
from .tally import Tally

DEFAULT_BUDGET = 1_000_000
TARGETS = ("median", "p10", "p90")  # quantiles of tally.QUANTILES
COUNTER_BINS = 1000  # time bins of the left-out owners' counter tracks

Parts = Callable[[], Iterator[Launch]]  # one launch's owner-range parts, re-readable (decode_parts)


@dataclass
class Choice:
    """One launch in the trace: `launch` holds the kept owners' (windowed) events, launch-wide owner
    arrays; `counters` the left-out owners' sums per time bin (name -> (bin times, values))."""
    launch: Launch
    keep: np.ndarray  # owner indices whose every (windowed) event is in the trace, sorted
    left_out: np.ndarray  # claimed owners that are not
    rule: str
    events: int  # (windowed) events of the launch, kept or not
    span: tuple[int, int] | None  # first and last (windowed) event time
    reasons: dict[int, list[str]] = field(default_factory=dict)  # kept owner -> why (default rule)
    counters: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"launch": self.launch.name, "rule": self.rule, "kept_owners": ranges_text(self.keep),
                "n_kept": int(self.keep.size), "left_out_owners": ranges_text(self.left_out),
                "n_left_out": int(self.left_out.size), "events_in_full": self.launch.n_events,
                "events": self.events}


def parse_ranges(text: str, option: str) -> np.ndarray:
    """`0-3,17` -> [0, 1, 2, 3, 17]."""
    out = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m or (m[2] and int(m[2]) < int(m[1])):
            raise AtrexError(f"{option} {text!r}: {part!r} is not an index or a range LO-HI",
                             hint=f"write e.g. {option} 0-3,17")
        out.extend(range(int(m[1]), int(m[2] or m[1]) + 1))
    return np.unique(np.array(out, dtype=np.int64))


def parse_window(text: str, option: str = "--trace-window", unit: str = "ns",
                 open_ends: bool = True) -> tuple[int | None, int | None]:
    """`START:END` after the launch's first event, in ns (`unit` "ns": whole numbers) or µs ("us":
    decimals allowed), returned in whole ns; with open_ends either side may be empty (to the
    launch's start or end). The one parser of the trace's window (`export --trace-window`, ns) and
    the picture's (`--png-window`, µs, timeline.parse_window)."""
    num = r"\d+" if unit == "ns" else r"\d+(?:\.\d*)?|\.\d+"
    m = re.fullmatch(rf"\s*({num})?\s*:\s*({num})?\s*", text)
    scale = 1 if unit == "ns" else 1000
    lo, hi = (round(float(m[1]) * scale) if m[1] else None, round(float(m[2]) * scale) if m[2] else None) \
        if m else (None, None)
    if (not m or (lo is not None and hi is not None and hi <= lo)
            or (not open_ends and (lo is None or hi is None))):
        what = "whole ns" if unit == "ns" else "µs"
        example = "100000:250000 (or 100000: to the end)" if open_ends else "250:262"
        raise AtrexError(f"{option} {text!r}: expected START:END, {what} after the launch's first event, "
                         "START < END", hint=f"write e.g. {option} {example}")
    return lo, hi


def ranges_text(ids: np.ndarray) -> str:
    """[0, 1, 2, 3, 17] -> `0-3,17` (the inverse of parse_ranges)."""
    if ids.size == 0:
        return ""
    ids = np.asarray(ids, dtype=np.int64)
    cut = np.flatnonzero(np.diff(ids) != 1)
    lo, hi = ids[np.r_[0, cut + 1]], ids[np.r_[cut, ids.size - 1]]
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in zip(lo.tolist(), hi.tolist()))


def windowed(launch: Launch, lo: int | None, hi: int | None, t_first: int) -> Launch:
    """The launch (or part) with only events at t_first + lo <= t_ns < t_first + hi."""
    t = launch.events["t_ns"]
    keep = np.ones(t.size, dtype=bool)
    if lo is not None:
        keep &= t >= t_first + lo
    if hi is not None:
        keep &= t < t_first + hi
    return replace(launch, events={k: v[keep] for k, v in launch.events.items()})


def restricted(launch: Launch, member: np.ndarray) -> Launch:
    """The part with only the events of owners where `member` (launch-wide, bool) holds. Events
    come in owner order, so each owner's are one run, found by binary search: the cost is the kept
    events', not the part's."""
    own = launch.events["owner"]
    mine = np.flatnonzero(member[launch.owner_base:launch.owner_base + launch.owners["claims"].size])
    lo, hi = np.searchsorted(own, mine), np.searchsorted(own, mine, side="right")
    n = hi - lo
    idx = np.arange(int(n.sum())) + np.repeat(lo - (np.cumsum(n) - n), n)
    return replace(launch, events={k: v[idx] for k, v in launch.events.items()})


def whole_ns(part: Launch, p: dict[str, np.ndarray]) -> np.ndarray:
    """The instances' durations (intervals.durations) to the whole ns: integers, for the survey's
    Tally and exact sums."""
    ns = durations(part, p).ns
    return ns if ns.dtype.kind == "i" else np.rint(ns).astype(np.int64)


def _values(part: Launch, manifest: Manifest) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(label, owner, value) per instance of each interval of a part; without intervals, each
    owner's span. Owners come in runs (events are in owner order), which survey's reductions use."""
    if manifest.intervals:
        out = []
        for iv in manifest.intervals:
            p = pairs(part, iv.start_id, iv.end_id)
            out.append((iv.name, p["owner"], whole_ns(part, p)))
        return out
    own, t = part.events["owner"], part.events["t_ns"]
    first = np.flatnonzero(np.r_[True, own[1:] != own[:-1]]) if own.size else np.zeros(0, dtype=np.int64)
    last = np.r_[first[1:], own.size] - 1
    return [("owner span", own[first], t[last] - t[first])]


@dataclass
class Survey:
    """Pass one over a launch: launch-wide owner arrays, (windowed) events per owner and time span,
    and per label each owner's mean and largest value plus the distribution of all values (a
    Tally: the quantile targets without keeping the values)."""
    head: Launch
    owners: dict[str, np.ndarray]
    counts: np.ndarray
    span: tuple[int, int] | None
    labels: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, Tally]]  # owner, mean, max, all values


def survey(parts: Parts, manifest: Manifest, window: tuple[int | None, int | None] | None, t_first: int | None,
           with_values: bool) -> Survey:
    owners, counts, span, acc, head = [], [], None, {}, None
    for part in parts():
        head = part
        if window:
            part = windowed(part, *window, t_first)
        owners.append(part.owners)
        counts.append(np.bincount(part.events["owner"], minlength=part.owners["claims"].size))
        t = part.events["t_ns"]
        if t.size:
            lo, hi = int(t.min()), int(t.max())
            span = (lo, hi) if span is None else (min(span[0], lo), max(span[1], hi))
        for label, owner, val in (_values(part, manifest) if with_values else []):
            start = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]) if owner.size else owner
            a = acc.setdefault(label, ([], [], [], Tally()))
            if owner.size:
                a[0].append(owner[start].astype(np.int64) + part.owner_base)
                a[1].append(np.add.reduceat(val, start) / np.diff(np.r_[start, owner.size]))
                a[2].append(np.maximum.reduceat(val, start))
                a[3].add(val)
    whole = {k: np.concatenate([o[k] for o in owners]) for k in owners[0]}
    labels = {k: (*(np.concatenate(x) if x else np.zeros(0) for x in a[:3]), a[3]) for k, a in acc.items()}
    return Survey(replace(head, owners=whole, owner_base=0), whole, np.concatenate(counts), span, labels)


def ranked(s: Survey) -> tuple[np.ndarray, dict[int, list[str]]]:
    """Owner indices in priority order (round-robin over the lists: closest to each label's median,
    p10, p90, then slowest), owners in no list last; and why the head of each list is there."""
    lists: list[tuple[str, np.ndarray]] = []
    for label, (who, typical, worst, values) in s.labels.items():
        if not who.size:
            continue
        dist = values.result()[0]  # quantiles by stats.rank, the summary's rule
        targets = np.array([dist[name] for name in TARGETS])
        for name, target in zip(TARGETS, targets):
            lists.append((f"{label}: closest to {name}", who[np.argsort(np.abs(typical - target), kind="stable")]))
        lists.append((f"{label}: slowest", who[np.argsort(-worst, kind="stable")]))
    rank = np.full(s.counts.size, np.iinfo(np.int64).max)
    reasons: dict[int, list[str]] = {}
    for j, (label, order) in enumerate(lists):
        rank[order] = np.minimum(rank[order], np.arange(order.size) * len(lists) + j)
        reasons.setdefault(int(order[0]), []).append(label)
    return np.argsort(rank, kind="stable"), reasons


class _Bins:
    """Left-out owners summed per time bin over the launch's span."""

    def __init__(self, span: tuple[int, int]):
        self.t0 = span[0]
        self.width = max(1, -(-(span[1] - span[0] + 1) // COUNTER_BINS))
        self.n = -(-(span[1] - span[0] + 1) // self.width)
        self.sums: dict[str, np.ndarray] = {}

    def add(self, part: Launch, manifest: Manifest, sign: int) -> None:
        """Add (sign 1) or take away (-1) a part's instances and marks. Every sum is of integers
        (counts, ns), exact in float64, so taking away the kept owners leaves exactly the others'.
        Each event's bin is computed once; the sites are counted in one keyed pass."""
        b = (part.events["t_ns"] - self.t0) // self.width
        for iv in manifest.intervals:
            p = pairs(part, iv.start_id, iv.end_id)
            self._sum(iv.name + "/t0", np.bincount(b[p["i0"]], minlength=self.n), sign)
            self._sum(iv.name + "/t1", np.bincount(b[p["i1"]], minlength=self.n), sign)
            self._sum(iv.name + "/dur", np.bincount(b[p["i0"]], whole_ns(part, p).astype(np.float64), self.n), sign)
        site = part.events["site"]
        known = site.view(np.uint32) < len(manifest.sites)  # events of unknown sites are no mark's
        cell = b + site.astype(np.int64) * self.n if known.all() else b[known] + site[known].astype(np.int64) * self.n
        per_site = np.bincount(cell, minlength=len(manifest.sites) * self.n).reshape(-1, self.n)
        for s in manifest.sites:
            self._sum("site/" + s.name, per_site[s.id], sign)

    def _sum(self, key: str, b: np.ndarray, sign: int) -> None:
        self.sums[key] = self.sums.get(key, 0) + sign * b.astype(np.float64)

    def counters(self, manifest: Manifest, n_rest: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Each interval's instances in flight (at each bin's end) and mean duration (of instances
        starting in the bin), each mark's events per bin."""
        starts = self.t0 + self.width * np.arange(self.n)
        tag, out = f"({n_rest} owners not shown)", {}
        zero = np.zeros(self.n)
        for iv in manifest.intervals:
            begun, ended = self.sums.get(iv.name + "/t0", zero), self.sums.get(iv.name + "/t1", zero)
            out[f"{iv.name} in flight {tag}"] = (starts + self.width, np.cumsum(begun) - np.cumsum(ended))
            has = begun > 0
            out[f"{iv.name} mean ns {tag}"] = (starts[has], self.sums.get(iv.name + "/dur", zero)[has] / begun[has])
        for s in manifest.sites:
            if s.name not in manifest.endpoint_names:
                out[f"{s.name} events per {self.width} ns {tag}"] = (starts, self.sums.get("site/" + s.name, zero))
        return out


def gather(parts: Parts, manifest: Manifest, s: Survey, keep: np.ndarray, window, t_first: int | None) -> tuple:
    """Pass two: the kept owners' events as one Launch (launch-wide owner indices), and the others'
    counter tracks."""
    member = np.zeros(s.counts.size, dtype=bool)
    member[keep] = True
    rest = (s.owners["claims"] > 0) & ~member
    bins = _Bins(s.span) if s.span and rest.any() else None
    kept = []
    for part in parts():
        if window:
            part = windowed(part, *window, t_first)
        mine = restricted(part, member)
        kept.append({**mine.events, "owner": mine.events["owner"] + part.owner_base})
        if bins is not None:  # the others' sums: the whole part's less the kept owners' (all are claimed)
            bins.add(part, manifest, 1)
            bins.add(mine, manifest, -1)
    events = {k: np.concatenate([e[k] for e in kept]) for k in kept[0]}
    return replace(s.head, events=events, counts={}), bins.counters(manifest, int(rest.sum())) if bins else {}


def choose(sources: list[Parts], manifest: Manifest | list[Manifest], owners: str | None = None,
           ctas: str | None = None, window: str | None = None, everything: bool = False,
           budget: int = DEFAULT_BUDGET) -> list[Choice]:
    """Apply the window, then the rule: --all, --owners/--ctas (union), or the default budget, over
    every launch of `sources` together. `manifest` reads every source, or is one per source (the
    launches of several captures on one timeline: captureset.py)."""
    manifests = manifest if isinstance(manifest, list) else [manifest] * len(sources)
    if everything and (owners or ctas):
        raise AtrexError("--all keeps every owner; it cannot be combined with --owners or --ctas")
    if budget < 1:
        raise AtrexError(f"--budget {budget}: the event budget must be at least 1")
    win = parse_window(window) if window is not None else None
    firsts = [_first_time(p) if win else None for p in sources]
    explicit = bool(owners or ctas)
    surveys = [survey(p, m, win, t, not (everything or explicit)) for p, m, t in zip(sources, manifests, firsts)]
    claimed = [s.owners["claims"] > 0 for s in surveys]
    reasons: list[dict] = [{} for _ in surveys]
    if explicit:
        want_o = parse_ranges(owners, "--owners") if owners else np.zeros(0, dtype=np.int64)
        want_c = parse_ranges(ctas, "--ctas") if ctas else np.zeros(0, dtype=np.int64)
        n_own = max(s.counts.size for s in surveys)
        n_cta = max(int(np.prod(s.head.meta.grid)) for s in surveys)
        for what, want, n in (("--owners", want_o, n_own), ("--ctas", want_c, n_cta)):
            if want.size and want[-1] >= n:
                raise AtrexError(f"{what}: {int(want[-1])} is out of range: the capture has {n} "
                                 f"({'owner slots' if what == '--owners' else 'CTAs'} 0-{n - 1})")
        rule = " and ".join(f"{o} {t}" for o, t in (("--owners", owners), ("--ctas", ctas)) if t)
        keeps = [c & (np.isin(np.arange(c.size), want_o) | np.isin(s.owners["cta"], want_c))
                 for s, c in zip(surveys, claimed)]
    elif everything or sum(int(s.counts.sum()) for s in surveys) <= budget:
        rule = "--all" if everything else f"every owner (the capture fits the budget of {budget} events)"
        keeps = claimed
    else:
        orders, why = zip(*(ranked(s) for s in surveys))
        orders = [o[c[o]] for o, c in zip(orders, claimed)]
        launch_no = np.concatenate([np.full(o.size, i) for i, o in enumerate(orders)])
        position = np.concatenate([np.arange(o.size) for o in orders])
        owner = np.concatenate(orders)
        size = np.concatenate([s.counts[o] for s, o in zip(surveys, orders)])
        by_priority = np.lexsort((launch_no, position))
        taken = by_priority[np.cumsum(size[by_priority]) <= budget]  # a prefix: the sum only grows
        of = "each interval's instances" if any(m.intervals for m in manifests) else "owner spans (no intervals)"
        rule = (f"budget {budget} events: owners closest to the median, p10 and p90 of {of} and the slowest, "
                "in that order while their events fit")
        keeps = []
        for i, c in enumerate(claimed):
            k = np.zeros(c.size, dtype=bool)
            k[owner[taken[launch_no[taken] == i]]] = True
            keeps.append(k)
            reasons[i] = {o: r for o, r in why[i].items() if k[o]}
    out = []
    for p, m, s, k, c, r, t in zip(sources, manifests, surveys, keeps, claimed, reasons, firsts):
        launch, counters = gather(p, m, s, np.flatnonzero(k), win, t)
        out.append(Choice(launch, np.flatnonzero(k), np.flatnonzero(c & ~k), rule, int(s.counts.sum()), s.span, r,
                          counters))
    return out


def in_memory(launch: Launch) -> Parts:
    """A decoded launch as its own single part."""
    return lambda: iter([launch])


def _first_time(parts: Parts) -> int:
    """The launch's first event time (--trace-window is counted from it)."""
    return min((int(p.events["t_ns"].min()) for p in parts() if p.events["t_ns"].size), default=0)
