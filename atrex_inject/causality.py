"""The `causality` check and the handoffs it measures (docs/validate.md, "Causality").

A spec's `[[causality]]` (causal_spec.py) says a consumer site's events observe a producer site's:
a consumer event comes after the producer events of its key on any correct timeline, since it saw
what they published. On the axis of a timeline (captureset.py) each consumer event is compared with
the latest producer event of its key; one that precedes it by more than the error bound fails the
check, with the launch, owner, key and by how much, never a silently negative interval. The bound is
a timer tick (the two reads come from one counter, but may be taken on SMs that see its update a
tick apart) plus, for captures of two devices, both calibrations' errors at those times. Consumer
events whose key no producer event has (the producer's owner was not recorded: a CTA density) are
counted as unmatched, not failed.

What passes is measured too: per declaration, the handoff from the latest producer event to each
consumer event that observed it (count, min, median, p90, max, in ns, and the bound): how long the
consumer waited past the write, as the timeline can tell it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .captureset import GLOBALTIMER, Member, Timeline, member
from .causal_spec import Causality
from .checks import Check, Folder
from .decode import Launch, capture_files, decode_parts
from .launchfile import FILE_NAME as CAPTURE_NAME
from .owners import cta_name
from .stats import quantiles

HINT = ("check where the sites stand: the producer site before the write that publishes (the flag store, the barrier "
        "arrival), the consumer site after the wait that observes it; if they do, the capture's times are wrong: "
        "recapture (across devices: calibrate again)")


@dataclass(frozen=True)
class SiteEvents:
    """One site's events of one launch: times on the axis, key, and who recorded each."""
    launch: Launch  # the launch's last part: its name, meta and grid
    t: np.ndarray  # int64 ns on the axis
    key: np.ndarray  # int64
    cta: np.ndarray  # linear CTA index
    thread: np.ndarray  # the writer's linear thread index in its CTA


def _site_events(tl: Timeline, m: Member, path: Path, site: int, key: str) -> SiteEvents:
    cols: dict[str, list] = {"t": [], "key": [], "cta": [], "thread": []}
    part = None
    for part in decode_parts(path, m.manifest):
        part = tl.on_axis(m, part)
        ev = part.events
        pick = np.flatnonzero(ev["site"] == site)
        owner = ev["owner"][pick]
        cta = part.owners["cta"][owner].astype(np.int64)
        if key == "cta":  # (CTA, this owner's occurrence of the site): events are in owner-then-sequence order
            first = np.r_[0, np.flatnonzero(np.diff(owner)) + 1]
            k = np.arange(owner.size) - np.repeat(first, np.diff(np.r_[first, owner.size]))
            keys = cta << np.int64(32) | k
        else:
            keys = ev["payload"][pick].astype(np.int64) if "payload" in ev else np.zeros(pick.size, np.int64)
        cols["t"].append(ev["t_ns"][pick])
        cols["key"].append(keys)
        cols["cta"].append(cta)
        cols["thread"].append(part.owners["thread"][owner].astype(np.int64))
    return SiteEvents(part, *(np.concatenate(cols[c]) if cols[c] else np.zeros(0, np.int64)
                              for c in ("t", "key", "cta", "thread")))


def _latest(key: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys, sorted, and the latest time of each."""
    if key.size == 0:
        return key, t
    order = np.lexsort((t, key))
    k, t = key[order], t[order]
    last = np.r_[np.flatnonzero(np.diff(k)), k.size - 1]
    return k[last], t[last]


def _pairs(c: Causality, cons: Member, prod: Member) -> list[tuple[Path, Path]]:
    """(consumer file, producer file) pairs: one launch for a producer of the consumer's own
    capture and key "cta"; otherwise the launches of the same launch number."""
    if prod is cons and c.key == "cta":
        return [(f, f) for f in cons.files]
    seq = {CAPTURE_NAME.match(f.name)["seq"]: f for f in prod.files}
    return [(f, seq[n]) for f in cons.files if (n := CAPTURE_NAME.match(f.name)["seq"]) in seq]


def _one(tl: Timeline, c: Causality, cons: Member, prod: Member, check: Check) -> dict:
    handoffs, unmatched, bounds, failed = [], 0, [], 0
    pairs = _pairs(c, cons, prod)
    for cf, pf in pairs:
        ce = _site_events(tl, cons, cf, cons.manifest.site_ids[c.consumer], c.key)
        pe = _site_events(tl, prod, pf, prod.manifest.site_ids[c.producer], c.key)
        uk, lt = _latest(pe.key, pe.t)
        at = np.minimum(np.searchsorted(uk, ce.key), max(uk.size - 1, 0))
        hit = uk[at] == ce.key if uk.size else np.zeros(ce.key.size, dtype=bool)
        latest = lt[at[hit]]
        bound = (max(ce.launch.meta.timer_resolution_ns, pe.launch.meta.timer_resolution_ns)
                 + tl.error_ns(cons, ce.t) + tl.error_ns(prod, pe.t))
        gap = ce.t[hit] - latest
        bad = np.flatnonzero(gap < -bound)
        unmatched += int((~hit).sum())
        handoffs.append(gap)
        bounds.append(bound)
        failed += bad.size
        if bad.size:
            i = bad[np.argmin(gap[bad])]
            j = np.flatnonzero(hit)[i]
            what = (f"{cta_name(int(ce.cta[j]), ce.launch.meta.grid)}, occurrence {int(ce.key[j] & 0xFFFFFFFF) + 1}"
                    if c.key == "cta" else f"payload {int(ce.key[j])}")
            check.fail(bad.size, f"{cons.label} {ce.launch.name}: {bad.size} event(s) of consumer {c.consumer!r} "
                                 f"precede the {prod.label} {c.producer!r} event(s) they observe by more than the "
                                 f"bound of {bound:.0f} ns; the earliest: {what}, thread {int(ce.thread[j])}, "
                                 f"{-int(gap[i])} ns before")
    gaps = np.concatenate(handoffs) if handoffs else np.zeros(0, np.int64)
    q = quantiles(gaps, (0.5, 0.9))
    return {"causality": c.name, "key": c.key, "consumer": cons.label, "producer": prod.label,
            "launches": len(pairs), "matched": int(gaps.size), "unmatched": unmatched, "violations": failed,
            "bound_ns": max(bounds, default=None),
            "handoff_ns": {"count": int(gaps.size), "min": int(gaps.min()) if gaps.size else None,
                           "median": q[0], "p90": q[1], "max": int(gaps.max()) if gaps.size else None}}


def check_timeline(tl: Timeline, check: Check, own: bool) -> tuple[list[dict], list[str]]:
    """The declarations of every member whose producer is in its own capture (own) or another
    spec's (not own): failures counted under `check`; returns the handoffs and notes (what could
    not be checked, and why)."""
    handoffs, notes = [], []
    for m in tl.members:
        for c in m.manifest.causality:
            if (c.producer_spec is None) != own:
                continue
            if own:
                handoffs.append(_one(tl, c, m, m, check))
                continue
            prods = [p for p in tl.by_spec(c.producer_spec) if p.device_uuid == m.device_uuid] or \
                tl.by_spec(c.producer_spec)
            site = prods[0].manifest.site_ids.get(c.producer) if len(prods) == 1 else None
            if site is None or prods[0].manifest.sites[site].payload is None:
                why = (f"no capture of spec {c.producer_spec!r} is among the folders" if not prods else
                       f"{len(prods)} captures of spec {c.producer_spec!r} are (give one)" if len(prods) > 1 else
                       f"spec {c.producer_spec!r} has no site {c.producer!r}" if site is None else
                       f"site {c.producer!r} of spec {c.producer_spec!r} records no payload to match")
                notes.append(f"causality {c.name} of {m.label}: not checked: {why}")
                continue
            handoffs.append(_one(tl, c, m, prods[0], check))
    return handoffs, notes


def check_folder(folder: Folder, check: Check) -> None:
    """validate's rule for one capture: its declarations whose producer is its own; those whose
    producer is another spec's are checked when the captures are validated together."""
    if len(folder.launches) != len(capture_files(folder.path)):
        folder.notes.append("causality: not checked, a launch file was refused (see its check)")
        return
    _, notes = check_timeline(Timeline((member(folder.path, folder.manifest),), GLOBALTIMER), check, own=True)
    folder.notes += notes + [f"causality {c.name}: its producer is spec {c.producer_spec!r}'s, checked when this "
                             "capture is validated with that spec's (validate FOLDER FOLDER..., or their parent folder)"
                             for c in folder.manifest.causality if c.producer_spec]
