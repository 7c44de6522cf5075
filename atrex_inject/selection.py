"""Which owners a Perfetto trace holds in full (docs/format.md, "Owner selection").

A capture where every warp records repeats the same interval thousands of times; a trace of all of
it is too big for the Perfetto UI and no easier to read. By default the trace keeps every event of
a bounded set of owners: all of them when the capture fits the event budget; otherwise, per
interval, the owners whose typical (mean) duration is closest to the launch's median, p10 and p90
and the owners with the slowest instances, taken in that priority order while the events fit.
Without intervals the owner's span (first to last event) stands in for a duration. `--owners`,
`--ctas` and `--all` replace the rule; `--window` first keeps only events inside a time window.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import numpy as np

from .decode import Launch
from .errors import AtrexError
from .summary import pairs, site_ids

DEFAULT_BUDGET = 1_000_000
TARGETS = (("median", 0.5), ("p10", 0.1), ("p90", 0.9))


@dataclass
class Choice:
    """One launch's selection: `launch` is windowed when a window was given."""
    launch: Launch
    keep: np.ndarray  # owner indices whose every (windowed) event is in the trace, sorted
    left_out: np.ndarray  # owners with events that are not
    rule: str
    reasons: dict[int, list[str]] = field(default_factory=dict)  # kept owner -> why (default rule)

    def to_json(self) -> dict:
        return {"launch": self.launch.name, "rule": self.rule, "kept_owners": ranges_text(self.keep),
                "n_kept": int(self.keep.size), "left_out_owners": ranges_text(self.left_out),
                "n_left_out": int(self.left_out.size)}


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


def parse_window(text: str) -> tuple[int | None, int | None]:
    """`START:END` in ns after the launch's first event; either side may be empty."""
    m = re.fullmatch(r"\s*(\d*)\s*:\s*(\d*)\s*", text)
    lo, hi = (int(m[1]) if m[1] else None, int(m[2]) if m[2] else None) if m else (None, None)
    if not m or (lo is not None and hi is not None and hi <= lo):
        raise AtrexError(f"--window {text!r}: expected START:END, whole ns after the launch's first event, "
                         "START < END", hint="write e.g. --window 100000:250000 (or 100000: to the end)")
    return lo, hi


def ranges_text(ids: np.ndarray) -> str:
    """[0, 1, 2, 3, 17] -> `0-3,17` (the inverse of parse_ranges)."""
    if ids.size == 0:
        return ""
    ids = np.asarray(ids, dtype=np.int64)
    cut = np.flatnonzero(np.diff(ids) != 1)
    lo, hi = ids[np.r_[0, cut + 1]], ids[np.r_[cut, ids.size - 1]]
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in zip(lo.tolist(), hi.tolist()))


def windowed(launch: Launch, lo: int | None, hi: int | None) -> Launch:
    """The launch with only events at t_first + lo <= t_ns < t_first + hi (t_first: its first event)."""
    t = launch.events["t_ns"]
    if t.size == 0:
        return launch
    t_first = int(t.min())
    keep = np.ones(t.size, dtype=bool)
    if lo is not None:
        keep &= t >= t_first + lo
    if hi is not None:
        keep &= t < t_first + hi
    return replace(launch, events={k: v[keep] for k, v in launch.events.items()})


def _per_owner_values(launch: Launch, manifest: dict) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(label, owner, value) per instance of each interval; without any instance, each owner's span.
    Owners come in runs (events are in owner order), which the reductions below rely on."""
    ids = site_ids(manifest)
    out = []
    for iv in manifest["intervals"]:
        p = pairs(launch, ids[iv["start"]], ids[iv["end"]])
        if p["dur"].size:
            out.append((iv["name"], p["owner"], p["dur"]))
    own = launch.events["owner"]
    if not out and own.size:
        first = np.flatnonzero(np.r_[True, own[1:] != own[:-1]])
        last = np.r_[first[1:], own.size] - 1
        t = launch.events["t_ns"]
        out.append(("owner span", own[first], t[last] - t[first]))
    return out


def ranked(launch: Launch, manifest: dict) -> tuple[np.ndarray, dict[int, list[str]]]:
    """Owner indices in priority order (round-robin over the lists: closest to each interval's
    median, p10, p90, then slowest), owners in no list last; and why the head of each list is there."""
    lists: list[tuple[str, np.ndarray]] = []
    for label, owner, val in _per_owner_values(launch, manifest):
        start = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
        who = owner[start].astype(np.int64)
        typical = np.add.reduceat(val, start) / np.diff(np.r_[start, owner.size])
        for name, q in TARGETS:
            target = np.quantile(val, q, method="inverted_cdf")
            lists.append((f"{label}: closest to {name}", who[np.argsort(np.abs(typical - target), kind="stable")]))
        lists.append((f"{label}: slowest", who[np.argsort(-np.maximum.reduceat(val, start), kind="stable")]))
    n = launch.owners["claims"].size
    rank = np.full(n, np.iinfo(np.int64).max)
    reasons: dict[int, list[str]] = {}
    for j, (label, order) in enumerate(lists):
        rank[order] = np.minimum(rank[order], np.arange(order.size) * len(lists) + j)
        reasons.setdefault(int(order[0]), []).append(label)
    return np.argsort(rank, kind="stable"), reasons


def choose(launches: list[Launch], manifest: dict, owners: str | None = None, ctas: str | None = None,
           window: str | None = None, everything: bool = False, budget: int = DEFAULT_BUDGET) -> list[Choice]:
    """Apply the window, then the rule: --all, --owners/--ctas (union), or the default budget."""
    if everything and (owners or ctas):
        raise AtrexError("--all keeps every owner; it cannot be combined with --owners or --ctas")
    if budget < 1:
        raise AtrexError(f"--budget {budget}: the event budget must be at least 1")
    if window is not None:
        launches = [windowed(l, *parse_window(window)) for l in launches]
    counts = [np.bincount(l.events["owner"], minlength=l.owners["claims"].size) for l in launches]
    has = [l.owners["claims"] > 0 for l in launches]  # claimed owners: a kept one gets its tracks
    if owners or ctas:
        want_o = parse_ranges(owners, "--owners") if owners else np.zeros(0, dtype=np.int64)
        want_c = parse_ranges(ctas, "--ctas") if ctas else np.zeros(0, dtype=np.int64)
        n_own = max(l.owners["claims"].size for l in launches)
        n_cta = max(int(np.prod(l.meta["grid"])) for l in launches)
        for what, want, n in (("--owners", want_o, n_own), ("--ctas", want_c, n_cta)):
            if want.size and want[-1] >= n:
                raise AtrexError(f"{what}: {int(want[-1])} is out of range: the capture has {n} "
                                 f"({'owner slots' if what == '--owners' else 'CTAs'} 0-{n - 1})")
        rule = " and ".join(f"{o} {t}" for o, t in (("--owners", owners), ("--ctas", ctas)) if t)
        picks = [h & (np.isin(np.arange(h.size), want_o) | np.isin(l.owners["cta"], want_c))
                 for l, h in zip(launches, has)]
        return [Choice(l, np.flatnonzero(p), np.flatnonzero(h & ~p), rule) for l, p, h in zip(launches, picks, has)]
    if everything or sum(int(c.sum()) for c in counts) <= budget:
        rule = "--all" if everything else f"every owner (the capture fits the budget of {budget} events)"
        return [Choice(l, np.flatnonzero(h), np.zeros(0, dtype=np.int64), rule) for l, h in zip(launches, has)]
    orders, why = zip(*(ranked(l, manifest) for l in launches))
    orders = [o[h[o]] for o, h in zip(orders, has)]
    launch_no = np.concatenate([np.full(o.size, i) for i, o in enumerate(orders)])
    position = np.concatenate([np.arange(o.size) for o in orders])
    owner = np.concatenate(orders)
    size = np.concatenate([c[o] for c, o in zip(counts, orders)])
    by_priority = np.lexsort((launch_no, position))
    taken = by_priority[np.cumsum(size[by_priority]) <= budget]  # a prefix: the sum only grows
    rule = (f"budget {budget} events: owners closest to each interval's median, p10 and p90 and the slowest, "
            "in that order while their events fit")
    out = []
    for i, (l, h) in enumerate(zip(launches, has)):
        keep = np.zeros(h.size, dtype=bool)
        keep[owner[taken[launch_no[taken] == i]]] = True
        out.append(Choice(l, np.flatnonzero(keep), np.flatnonzero(h & ~keep), rule,
                          {o: r for o, r in why[i].items() if keep[o]}))
    return out
