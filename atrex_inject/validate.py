"""Named checks over decoded launches: the validator rejects known factual failures (it does not
judge whether the sites were well chosen). Each check reports a count and the first offenders.

Checks: overflow, truncation, owner_identity, duplicate_ownership, site_identity,
interval_pairing, deterministic_counts, stale_provenance, cross_launch_mixing, numeric_claims.
A buffer decode refuses (wrong magic/version, short file, other source) fails the check it
belongs to instead of crashing. docs/validate.md describes each rule.
"""
from __future__ import annotations

import json
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .cuda.rewrite import source_id_of
from .decode import PART_EVENTS, Launch, capture_files, decode_parts, site_counts
from .errors import AtrexError, CaptureError
from .fsio import sha256_file
from .summary import QUANTILES, Summarizer, pairs, site_ids

CHECKS = ("overflow", "truncation", "owner_identity", "duplicate_ownership", "site_identity", "interval_pairing",
          "deterministic_counts", "stale_provenance", "cross_launch_mixing", "numeric_claims")
FIRST = 5


@dataclass
class Check:
    name: str
    count: int = 0
    details: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.count == 0

    def fail(self, n: int, detail: str) -> None:
        if n:
            self.count += int(n)
            if len(self.details) < FIRST:
                self.details.append(detail)


@dataclass
class Provenance:
    """What the capture must match; unset fields are not checked (and listed as unchecked)."""
    source: Path | None = None  # the instrumented source file (its source id is recomputed)
    binary: Path | None = None  # the binary that ran, with its sha256 in binary_sha256
    binary_sha256: str | None = None
    workload: str | None = None
    device_uuid: str | None = None


def _owners_str(launch: Launch, owners: np.ndarray) -> str:
    o = launch.owners
    return ", ".join(f"owner {int(i) + launch.owner_base} (CTA {int(o['cta'][i])}, thread {int(o['thread'][i])})"
                     for i in owners[:FIRST])


def _check_launch(launch: Launch, m: dict, checks: dict[str, Check]) -> None:
    c, o, ev, name = launch.counts, launch.owners, launch.events, launch.name
    cap = launch.meta["capacity"]
    over = np.flatnonzero(o["attempted"] > cap)
    checks["overflow"].fail(over.size, f"{name}: {over.size} owners attempted more than {cap} events "
                                       f"({c['overflow_events']} events lost): {_owners_str(launch, over)}")
    checks["truncation"].fail(c["torn_events"], f"{name}: {c['torn_events']} unwritten slots below owners' counts")
    checks["truncation"].fail(c["stray_events"], f"{name}: {c['stray_events']} events past owners' published counts "
                                                 "(an exit path without finish?)")
    missing = np.flatnonzero(o["must_claim"] & (o["claims"] == 0))
    checks["truncation"].fail(missing.size, f"{name}: {missing.size} selected owners never claimed their recorder: "
                                            f"{_owners_str(launch, missing)}")
    bad = np.flatnonzero((o["claims"] > 0) & (~o["may_claim"] | (o["cta"] != o["exp_cta"])
                                              | (o["thread"] != o["exp_thread"])))
    checks["owner_identity"].fail(bad.size, f"{name}: {bad.size} owners outside their slot in the launch geometry: "
                                            f"{_owners_str(launch, bad)}")
    dup = np.flatnonzero(o["claims"] > 1)
    checks["duplicate_ownership"].fail(dup.size, f"{name}: {dup.size} owners claimed more than once: "
                                                 f"{_owners_str(launch, dup)}")
    site_group = np.array([s["group"] for s in m["sites"]])
    known = (ev["site"] >= 0) & (ev["site"] < len(m["sites"]))
    checks["site_identity"].fail(int((~known).sum()), f"{name}: {int((~known).sum())} events with unknown site ids "
                                                      f"{sorted(set(ev['site'][~known].tolist()))[:FIRST]}")
    wrong = known & (site_group[np.where(known, ev["site"], 0)] != o["group"][ev["owner"]])
    checks["site_identity"].fail(int(wrong.sum()), f"{name}: {int(wrong.sum())} events recorded by an owner of "
                                                   "another group than their site's")
    ids = site_ids(m)
    for iv in m["intervals"]:
        a, b = ids[iv["start"]], ids[iv["end"]]
        idx = np.flatnonzero((ev["site"] == a) | (ev["site"] == b))
        s, own = ev["site"][idx], ev["owner"][idx]
        new = np.r_[True, own[1:] != own[:-1]]
        last = np.r_[own[1:] != own[:-1], True]
        prev_start = np.r_[False, s[:-1] == a] & ~new
        problems = {"end without start": (s == b) & (new | ~prev_start),
                    "start after start": (s == a) & prev_start,
                    "start never ended": (s == a) & last}
        for what, mask in problems.items():
            checks["interval_pairing"].fail(int(mask.sum()), f"{name}: {iv['name']}: {int(mask.sum())} x {what}, "
                                                             f"first at {_owners_str(launch, own[mask])}")
        p = pairs(launch, a, b)
        neg = int((p["dur"] < 0).sum())
        checks["interval_pairing"].fail(neg, f"{name}: {iv['name']}: {neg} instances end before they start")
    if m.get("expect"):
        counts = site_counts(launch, len(m["sites"]))
        gid = o["group"][o["claims"] > 0]
        for site, want in m["expect"].items():
            sid = ids[site]
            got = counts[gid == m["sites"][sid]["group"], sid]
            off = int((got != want).sum())
            checks["deterministic_counts"].fail(off, f"{name}: {site}: {off} owners recorded "
                                                     f"{sorted(set(got[got != want].tolist()))[:FIRST]} events, "
                                                     f"expected {want} each")


def _check_provenance(launches: list[Launch], m: dict, prov: Provenance, check: Check) -> list[str]:
    unchecked = []
    if prov.source is not None:
        sid = source_id_of(Path(prov.source).read_bytes().decode())
        for l in launches:
            check.fail(sid != l.meta["source_id"], f"{l.name}: built from source id {l.meta['source_id'][:16]}…, "
                                                   f"{prov.source} now has {sid[:16]}…")
    else:
        unchecked.append("source file")
    if prov.binary is not None:
        check.fail(sha256_file(prov.binary) != prov.binary_sha256,
                   f"binary {prov.binary} does not have sha256 {str(prov.binary_sha256)[:16]}…")
    else:
        unchecked.append("binary")
    for l in launches:
        if prov.workload is not None:
            check.fail(l.meta.get("workload") != prov.workload,
                       f"{l.name}: workload {l.meta.get('workload')!r}, expected {prov.workload!r}")
        if prov.device_uuid is not None:
            got = l.meta.get("device", {}).get("uuid")
            check.fail(got != prov.device_uuid, f"{l.name}: device {got}, expected {prov.device_uuid}")
    unchecked += [w for w, v in (("workload", prov.workload), ("device", prov.device_uuid)) if v is None]
    return unchecked


def _check_mixing(launches: list[Launch], check: Check) -> None:
    seqs = [l.meta["launch_seq"] for l in launches]
    dups = len(seqs) - len(set(seqs))
    check.fail(dups, f"{dups} launch sequence numbers appear twice: captures of different runs are mixed")
    workloads = {l.meta.get("workload") for l in launches}
    check.fail(len(workloads) > 1, f"launches disagree on workload: {sorted(map(str, workloads))}")
    uuids = {l.meta.get("device", {}).get("uuid") for l in launches}
    check.fail(len(uuids) > 1, f"launches come from different devices: {sorted(map(str, uuids))}")
    for l in launches:
        stem_seq = int(l.name.rsplit("launch", 1)[-1]) if "launch" in l.name else l.meta["launch_seq"]
        check.fail(stem_seq != l.meta["launch_seq"], f"{l.name}: file name says launch {stem_seq}, "
                                                     f"header says {l.meta['launch_seq']}")


def load_claims(path: Path) -> list[dict]:
    """Claims: TOML `[[claim]]` or JSON list; each {interval, statistic, value, tolerance, launch?}.
    tolerance is relative (0.05 = 5%); values in ns."""
    text = Path(path).read_text()
    data = tomllib.loads(text).get("claim", []) if str(path).endswith(".toml") else json.loads(text)
    for c in data:
        if not {"interval", "statistic", "value"} <= set(c) or c["statistic"] not in (*QUANTILES, "count"):
            raise AtrexError(f"claim {c} needs interval, statistic (one of {', '.join((*QUANTILES, 'count'))}) "
                             "and value", path=str(path))
    return data


def _check_claims(summaries: dict[int, dict], claims: list[dict], check: Check) -> None:
    """Claims against the summaries (by launch sequence) the report already computed."""
    for c in claims:
        seq = c.get("launch", next(iter(summaries)))
        s = summaries.get(seq)
        iv = next((i for i in (s or {}).get("intervals", []) if i["name"].replace(" ", "") ==
                   c["interval"].replace(" ", "")), None)
        if iv is None:
            check.fail(1, f"claim about {c['interval']!r} (launch {seq}): no such interval in the capture")
            continue
        got, want, tol = iv[c["statistic"]], float(c["value"]), float(c.get("tolerance", 0.0))
        bad = got is None or abs(got - want) > tol * abs(want)
        check.fail(bad, f"claim {c['interval']} {c['statistic']} = {want:g} ns (±{tol:.0%}): recomputed {got} ns")


def validate_capture(capture_dir: Path, m: dict, prov: Provenance | None = None,
                     claims: list[dict] | None = None) -> dict:
    """The report, streaming each file in parts of PART_EVENTS events (memory bounded by a part)."""
    return validate_dir(capture_dir, m, prov, claims, PART_EVENTS)[0]


def validate_dir(capture_dir: Path, m: dict, prov: Provenance | None = None, claims: list[dict] | None = None,
                 part_events: int | None = None) -> tuple[dict, list[Launch]]:
    """The report, and the launches it decoded (for callers that export them: decode once). With
    part_events, each file is decoded, checked and summarized in owner-range parts of that many
    events (decode_parts) and no launches are returned."""
    checks = {n: Check(n) for n in CHECKS}
    launches, heads, summaries = [], [], []
    for f in capture_files(capture_dir):
        summary = Summarizer(m)
        try:
            for part in decode_parts(f, m, part_events):
                _check_launch(part, m, checks)
                summary.add(part)
        except CaptureError as e:
            msg = str(e)
            target = ("stale_provenance" if "source id" in msg or "groups" in msg else
                      "cross_launch_mixing" if "sidecar" in msg else "truncation")
            checks[target].fail(1, msg)
            continue
        heads.append(part)  # any part stands for its launch in the provenance and mixing checks
        summaries.append(summary.result())
        if part_events is None:
            launches.append(part)
    unchecked = _check_provenance(heads, m, prov or Provenance(), checks["stale_provenance"]) if heads else []
    _check_mixing(heads, checks["cross_launch_mixing"])
    if claims:
        _check_claims({s["launch_seq"]: s for s in summaries}, claims, checks["numeric_claims"])
    valid = all(c.ok for c in checks.values()) and bool(heads)
    return {"verdict": "valid" if valid else "rejected", "launches": [l.name for l in heads],
            "events": sum(s["events"] for s in summaries), "unchecked_provenance": unchecked,
            "checks": [{**asdict(c), "ok": c.ok} for c in checks.values()], "summaries": summaries}, launches
