"""Named checks over decoded launches: the validator rejects known factual failures (it does not
judge whether the sites were well chosen). Each check reports a count, the first offenders (launch,
owner by CTA, warp and thread, site) and the next step.

Checks: overflow, truncation, geometry, owner_identity, duplicate_ownership, site_identity,
time_order, interval_pairing, deterministic_counts, stale_provenance, cross_launch_mixing,
timer_resolution, clock_consistency, numeric_claims. A buffer decode refuses (wrong magic/version,
short file, other source) fails the check it belongs to instead of crashing; sidecar fields are read
through the launch's typed view (launchmeta.py), with their types checked. The rules here are the
core's (CORE); a route's rules, notes and artifacts about its own files register with it
(checks.py) and run after them. docs/validate.md describes each rule.
"""
from __future__ import annotations

import json
import tomllib
from dataclasses import asdict
from pathlib import Path

import numpy as np

from .checks import FIRST, Check, Folder, Provenance, Route, Rule, registered
from .decode import PART_EVENTS, WINDOW_NS, Launch, capture_files, decode_parts, site_counts
from .errors import AtrexError, CaptureError
from .fsio import sha256_file
from .launchfile import SIDECAR_FORMAT
from . import causality
from . import manifest as mf
from . import runrecord
from .manifest import Manifest
from .source_id import source_id_of
from .smclock import CHANGE, LAG_NS, RATE_GHZ, READ_TICKS, counter_of, impossible, readings
from .summary import QUANTILES, Summarizer
from .progress import step

CHECKS = ("overflow", "truncation", "geometry", "owner_identity", "duplicate_ownership", "site_identity", "time_order",
          "interval_pairing", "deterministic_counts", "stale_provenance", "cross_launch_mixing", "timer_resolution",
          "clock_consistency", "numeric_claims")
NEXT_STEP = {
    "overflow": "raise [capture] capacity in the spec (or thin the sites with every/ctas), re-apply, rebuild, recapture",
    "truncation": "recapture: the file was cut or altered, or an exit path of the kernel skipped the recorder's finish",
    "geometry": "recapture with the current build: the header does not describe this launch under this manifest",
    "owner_identity": "recapture; if it repeats, the kernel ran with another geometry than its launch header says "
                      "(or, for a moved warp, with compute preemption: another context or a debugger on the GPU)",
    "duplicate_ownership": "each owner's recorder must be constructed once per launch: check the instrumented kernel",
    "site_identity": "decode with the manifest of the build that ran (atrex-inject apply writes it)",
    "time_order": "recapture into an empty folder: one writer's times never go back, so the buffer mixes launches "
                  "or was edited",
    "interval_pairing": "check the sites' positions in the diff: an exit path may skip an interval's end site",
    "deterministic_counts": "check the spec's [expect] against the kernel's control flow (or remove the expectation)",
    "stale_provenance": "rebuild from the current instrumented source and recapture, or pass the provenance that ran",
    "cross_launch_mixing": "capture each run into its own empty folder",
    "timer_resolution": "capture with `packed = false` in [capture]: this timer ticks finer than the site id's bits allow",
    "clock_consistency": "recapture into an empty folder: a correct capture's clock never shows this, so the buffer "
                         "was edited or damaged, or a CTA moved between SMs (compute preemption: another context "
                         "or a debugger on the GPU); the global timer's intervals stay readable without "
                         "[capture] clock",
    "numeric_claims": "correct the claim to the recomputed value, or widen its tolerance if that is what you meant",
    "causality": causality.HINT,
}


CHECKED_BY = {"source file": "--source FILE", "binary": "--binary FILE", "workload": "--workload ID",
              "device": "--device UUID"}  # the validate option that checks each unchecked provenance field


def unchecked_text(unchecked: list[str]) -> str:
    """The unchecked provenance fields, each with the validate option that checks it."""
    return ", ".join(f"{u} ({CHECKED_BY[u]})" for u in unchecked)


def said(v) -> str:
    """A recorded value for a message: quoted, or 'not recorded' when absent."""
    return "not recorded" if v is None else repr(v)


def _owner(launch: Launch, i: int) -> str:
    """An owner by its slot in the launch geometry: CTA (x, y, z), warp and thread."""
    o = launch.owners
    gx, gy = max(launch.meta.grid[0], 1), max(launch.meta.grid[1], 1)
    cta, thread = int(o["exp_cta"][i]), int(o["exp_thread"][i])
    xyz = f"{cta % gx}, {cta // gx % gy}, {cta // (gx * gy)}"
    return f"owner {int(i) + launch.owner_base} (CTA ({xyz}), warp {thread // 32}, thread {thread})"


def _owners_str(launch: Launch, owners: np.ndarray) -> str:
    return ", ".join(_owner(launch, i) for i in owners[:FIRST])


def _site(m: Manifest, sid: int) -> str:
    return f"site {m.sites[sid].name!r}" if 0 <= sid < len(m.sites) else f"unknown site id {sid}"


def _events_str(launch: Launch, m: Manifest, idx: np.ndarray) -> str:
    ev = launch.events
    return "; ".join(f"{_owner(launch, ev['owner'][i])} {_site(m, int(ev['site'][i]))} event {int(ev['seq'][i])}"
                     for i in idx[:FIRST])


def _check_time(launch: Launch, m: Manifest, check: Check) -> None:
    """One writer records an owner's events in program order and %globaltimer never goes back, so
    within an owner times are non-decreasing; every event lies within 2^31 ns of its owner's start
    and of the launch's first start (beyond that the 32-bit timer cannot be unwrapped: an event
    written before its owner started reads as 4.29 s later), and (format 2) no later than its
    owner's end, read at its exit after every event it recorded; that end lies within the same
    2^31 ns and not before the owner's start."""
    ev, t0, t1 = launch.events, launch.owners["t0"], launch.owners["t1"]
    own, t = ev["owner"], ev["t_ns"]
    down = np.flatnonzero(t[1:] < t[:-1])  # few: mostly where one owner's events end and the next's begin
    back = down[own[down] == own[down + 1]] + 1
    check.fail(back.size, f"{launch.name}: {back.size} events earlier than the event before them in their owner: "
                          f"{_events_str(launch, m, back)}")
    claimed = launch.owners["claims"] > 0
    # decode refused a launch whose starts leave its window (decode.STAMP_LIMIT_NS), so no difference
    # here wraps; every event's owner starts no earlier than `start`, so an event past its owner's
    # window is past the launch's too
    start = int(t0[claimed].min()) if claimed.any() else 0
    late = t - start >= WINDOW_NS
    out = np.flatnonzero(late)
    check.fail(out.size, f"{launch.name}: {out.size} events outside their owner's window (before its start, or "
                         f"more than 2.1 s after the launch began): {_events_str(launch, m, out)}")
    # an end of 0: the owner never reached its exit (truncation, where it published a count); an end of
    # 2^63 ns or more reads negative here, so it counts as ending before its start
    ended = claimed & (t1 != 0)
    inverted = np.flatnonzero(ended & (t1 < t0))
    ended[inverted] = False  # one fault, counted once below, not again for each of its events
    after = np.flatnonzero(ended[own] & ~late & (t > t1[own]))
    check.fail(after.size, f"{launch.name}: {after.size} events later than their owner's end (appended from another "
                           f"launch, or written after the owner exited): {_events_str(launch, m, after)}")
    check.fail(inverted.size, f"{launch.name}: {inverted.size} owners ended before they started: "
                              f"{_owners_str(launch, inverted)}")
    ended[own[late]] = False  # an owner with events past the window is counted by them
    overlong = np.flatnonzero(ended & (t1 - start >= WINDOW_NS))
    check.fail(overlong.size, f"{launch.name}: {overlong.size} owners ended 2^31 ns (2.1 s) or more after the launch "
                              f"began: {_owners_str(launch, overlong)}")


def _check_clock(launch: Launch, m: Manifest, check: Check) -> None:
    """What no correct capture shows (smclock.impossible): an owner is one thread on one SM, so its
    %clock is one counter that runs forward, at a rate the SM can run at (smclock.RATE_GHZ), and
    close to the rate of the owner's own readings around each step (the timer's truncation and the
    clock's read after it, plus a speed change of smclock.CHANGE). A clock that changed speed is
    modelled (local rates), never rejected. A jump is named with the SM whose counter the owner
    reads after it, where one matches (its CTA ran on two SMs); a launch whose header says the clock
    was recorded while no owner's clock advanced fails too."""
    clock = launch.meta.clock
    ev, o = launch.events, launch.owners
    if not launch.meta.clock_recorded or not ev["owner"].size:
        return
    if clock is None:
        check.fail(1, f"{launch.name}: the header says %clock was recorded, but no owner's clock advanced with the "
                      "global timer from its start to its last event: no rate can be measured")
        return
    tick = launch.meta.timer_resolution_ns
    r = readings(ev["owner"], ev["t_ns"], ev["cycles"], o["t0"], o["clk0"])
    im = impossible(r, tick)

    def step(i: int, rate: str = "") -> str:
        return f"{int(im.dc[i])} cycles in the timer's {int(im.dt[i])} ns{rate}"

    def owners_of(idx: np.ndarray) -> str:
        who = np.unique(ev["owner"][idx])
        sms = np.unique(o["smid"][who])
        return (f"{who.size} owners on {sms.size} SMs (SM " + ", ".join(map(str, sms[:FIRST].tolist()))
                + (", ..." if sms.size > FIRST else "") + ")")

    back = np.flatnonzero(im.backward)
    check.fail(back.size, f"{launch.name}: {back.size} events whose %clock runs backwards from the reading before "
                          f"them in their owner: {_events_str(launch, m, back)}"
                          + (f" (first: {step(back[0])})" if back.size else ""))
    lo, hi = RATE_GHZ
    out = np.flatnonzero(im.out_of_range)
    check.fail(out.size, f"{launch.name}: {out.size} steps of {owners_of(out)} whose cycles imply a rate outside "
                         f"the {lo}-{hi} GHz an SM clock can run at (an H200's is at most 1.98 GHz), whatever the "
                         f"timer's truncation: {_events_str(launch, m, out)}"
                         + (f" (first: {step(out[0], f', {im.dc[out[0]] / max(im.dt[out[0]], 1):.2f} GHz')})"
                            if out.size else ""))
    jumps = _first_per_owner(ev, np.flatnonzero(im.jump))
    said = [f"{_events_str(launch, m, np.array([i]))} ({step(i)}; its readings around it run at "
            f"{im.neighbours_ghz[i]:.4f} GHz)" for i in jumps[:FIRST].tolist()]
    check.fail(jumps.size, f"{launch.name}: {jumps.size} owners whose %clock jumps against their own timer readings "
                           f"beyond the local model ({READ_TICKS} ticks each, {LAG_NS} ns of the timer's lag "
                           f"+ a {CHANGE:.0%} speed change): "
                           + "; ".join(said))
    moved = []
    for i in _first_per_owner(ev, np.flatnonzero(im.out_of_range | im.jump))[:FIRST].tolist():
        sms = counter_of(r, o["smid"], int(r.point[i]), clock["rate_ghz"], tick)
        if sms:
            moved.append(f"{_events_str(launch, m, np.array([i]))}: from here on it reads the counter of SM "
                         + ", ".join(map(str, sms)) + f" (they count alike), not SM {int(o['smid'][ev['owner'][i]])}'s")
    check.fail(len(moved), f"{launch.name}: {len(moved)} owners whose events come from two SMs (their CTA moved): "
                           + "; ".join(moved))


def _first_per_owner(ev: dict, idx: np.ndarray) -> np.ndarray:
    """Of event indices in owner order, each owner's first."""
    return idx[np.r_[True, ev["owner"][idx][1:] != ev["owner"][idx][:-1]]] if idx.size else idx


def _foreign(launch: Launch, m: Manifest) -> np.ndarray:
    """Events of a known site recorded by an owner of another group than the site's. Groups are
    consecutive owner ranges and events come in owner order, so each group's events are one slice,
    looked at only when another group has sites."""
    ev, g = launch.events, launch.owners["group"]
    site_group = np.array(m.site_group)
    first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if g.size else np.zeros(0, dtype=np.int64)
    lo = np.searchsorted(ev["owner"], first)
    out = []
    for grp, a, b in zip(g[first].tolist(), lo.tolist(), np.r_[lo[1:], ev["owner"].size].tolist()):
        other = np.flatnonzero(site_group != grp)
        if other.size and b > a:
            out.append(a + np.flatnonzero(np.isin(ev["site"][a:b], other)))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def _pairing(launch: Launch, a: int, b: int) -> dict[str, np.ndarray]:
    """Per problem, the events of interval a -> b that break the pairing rule (docs/summary.md):
    within an owner, among the events of its two sites, every start is followed by an end."""
    site, owner = launch.events["site"], launch.events["owner"]
    is_a = site == a
    sel = is_a | (site == b)
    idx = None if sel.all() else np.flatnonzero(sel)  # the two sites are all there is (common): no gathers
    if idx is not None:
        is_a, owner = is_a[idx], owner[idx]
    is_b = is_a if a == b else ~is_a
    same = owner[1:] == owner[:-1]
    after_start = np.r_[False, is_a[:-1] & same]
    masks = {"end without start": is_b & ~after_start, "start after start": is_a & after_start,
             "start never ended": is_a & np.r_[~same, True]}
    return {what: np.flatnonzero(mk) if idx is None else idx[mk] for what, mk in masks.items() if mk.any()}


def _overflow(launch: Launch, m: Manifest, check: Check) -> None:
    o, cap = launch.owners, launch.meta.capacity
    over = np.flatnonzero(o["attempted"] > cap)
    least = "at least " if o["lower_bound"][over].any() else ""  # resident rings count to capacity + 1 only
    check.fail(over.size, f"{launch.name}: {over.size} owners attempted more than the capacity of {cap} events "
                          f"({least}{launch.counts['overflow_events']} events lost): {_owners_str(launch, over)}")


def _truncation(launch: Launch, m: Manifest, check: Check) -> None:
    c, o, name, cap = launch.counts, launch.owners, launch.name, launch.meta.capacity
    claimed = o["claims"] > 0
    if c["torn_events"]:
        written = np.where(claimed, np.minimum(o["attempted"], cap), 0)
        short = np.flatnonzero(np.bincount(launch.events["owner"], minlength=written.size) < written)
        check.fail(c["torn_events"], f"{name}: {c['torn_events']} unwritten slots below owners' "
                                     f"counts: {_owners_str(launch, short)}")
    check.fail(c["stray_events"], f"{name}: {c['stray_events']} events past owners' published counts "
                                  "(an exit path without finish?)")
    unended = np.flatnonzero(claimed & (o["attempted"] > 0) & (o["t1"] == 0))
    check.fail(unended.size, f"{name}: {unended.size} owners published an event count without an "
                             "end time (their writer stores both at exit): "
                             f"{_owners_str(launch, unended)}")
    missing = np.flatnonzero(o["must_claim"] & ~claimed)
    check.fail(missing.size, f"{name}: {missing.size} selected owners never claimed their recorder: "
                             f"{_owners_str(launch, missing)}")


def _owner_identity(launch: Launch, m: Manifest, check: Check) -> None:
    o, name = launch.owners, launch.name
    claimed = o["claims"] > 0
    bad = np.flatnonzero(claimed & (~o["may_claim"] | (o["cta"] != o["exp_cta"]) | (o["thread"] != o["exp_thread"])))
    seen = ", ".join(f"{_owner(launch, i)} recorded CTA {int(o['cta'][i])} thread {int(o['thread'][i])}"
                     for i in bad[:FIRST])
    check.fail(bad.size, f"{name}: {bad.size} owners written by another CTA or thread than their slot's: {seen}")
    moved = np.flatnonzero(claimed & o["moved"])
    check.fail(moved.size, f"{name}: {moved.size} resident owners' warps changed SM warp slot "
                           "during the launch (a preempted CTA restored elsewhere), so their "
                           f"events may be another warp's: {_owners_str(launch, moved)}")


def _duplicates(launch: Launch, m: Manifest, check: Check) -> None:
    o = launch.owners
    dup = np.flatnonzero(o["claims"] > 1)
    check.fail(dup.size, f"{launch.name}: {dup.size} owners claimed more than once: " + ", ".join(
        f"{_owner(launch, i)} {int(o['claims'][i])} times" for i in dup[:FIRST]))


def _site_identity(launch: Launch, m: Manifest, check: Check) -> None:
    name = launch.name
    known = launch.events["site"].view(np.uint32) < len(m.sites)  # a negative id is a large unsigned one
    if not known.all():
        unknown = np.flatnonzero(~known)
        check.fail(unknown.size, f"{name}: {unknown.size} events with site ids the manifest does "
                                 f"not define: {_events_str(launch, m, unknown)}")
    wrong = _foreign(launch, m)
    check.fail(wrong.size, f"{name}: {wrong.size} events recorded by an owner of another group than "
                           f"their site's: {_events_str(launch, m, wrong)}")


def _check_pairing(launch: Launch, m: Manifest, check: Check) -> None:
    for iv in m.intervals:
        for what, idx in _pairing(launch, iv.start_id, iv.end_id).items():
            check.fail(idx.size, f"{launch.name}: {iv.name}: {idx.size} x {what}, "
                                 f"first at {_events_str(launch, m, idx)}")


def _check_counts(launch: Launch, m: Manifest, check: Check) -> None:
    if not m.expect:
        return
    o, name = launch.owners, launch.name
    counts = site_counts(launch, len(m.sites))
    owners = np.flatnonzero(o["claims"] > 0)
    gid = o["group"][owners]
    for site, want in m.expect.items():
        sid = m.site_ids[site]
        mine = gid == m.site_group[sid]
        got = counts[mine, sid]
        off = np.flatnonzero(got != want)
        check.fail(off.size, f"{name}: site {site!r}: {off.size} owners recorded other "
                             f"than {want} events each: " + ", ".join(
            f"{_owner(launch, i)} {int(n)}" for i, n in zip(owners[mine][off][:FIRST], got[off][:FIRST])))


def _read(path: Path, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise AtrexError(f"cannot read the {what}: {e.strerror}", path=str(path),
                         hint=f"pass the {what} that was built and ran") from None


def _source_id(path: Path) -> str:
    """The id a capture of this instrumented source carries; a route registers how to read it for
    the sources of its own kind (a .py file's is its CUDA string's: cuda/python/checks.py)."""
    text = _read(path, "instrumented source").decode(errors="replace")
    return registered().source_ids.get(Path(path).suffix, source_id_of)(text)


def _check_binary(prov: Provenance, run: runrecord.RunRecord | None, check: Check) -> None:
    """--binary has --binary-sha256; with a run record, what they name is a file the run hashed."""
    now = None
    if prov.binary is not None:
        _read(prov.binary, "binary")
        now = sha256_file(prov.binary)
        if prov.binary_sha256 is not None:
            check.fail(now != prov.binary_sha256,
                       f"binary {prov.binary} does not have sha256 {prov.binary_sha256[:16]}…")
    if run is None:
        if now is None or prov.binary_sha256 is None:
            raise AtrexError("--binary and --binary-sha256 go together when the capture has no run record (run.json)",
                             hint="give both, or capture with atrex-inject capture, which records the program")
        return
    sha = now or prov.binary_sha256
    ran = ", ".join(f"{f.path} {f.sha256[:16]}…" for f in (run.program, *run.files))
    check.fail(sha not in run.hashes(), f"{f'binary {prov.binary}' if now else '--binary-sha256'}: sha256 {sha[:16]}… "
                                        f"is not a file the capture ran (run.json hashed {ran})")


def _check_provenance(folder: Folder, check: Check) -> None:
    """The provenance asked for against every launch; what was not asked for is listed unchecked."""
    launches, prov, run, unchecked = folder.launches, folder.provenance, folder.run, folder.unchecked
    if not launches:
        return
    if prov.source is not None:
        sid = _source_id(prov.source)
        for l in launches:
            check.fail(sid != l.meta.source_id, f"{l.name}: built from source id {l.meta.source_id[:16]}…, "
                                                f"{prov.source} now has {sid[:16]}…")
    else:
        unchecked.append("source file")
    if prov.binary is not None or prov.binary_sha256 is not None:
        _check_binary(prov, run, check)
    elif run is None:  # a run record names the binary itself (identity); verdict binds it to the measurement
        unchecked.append("binary")
    for l in launches:
        s = l.meta.sidecar
        if prov.workload is not None:
            check.fail(s.workload != prov.workload,
                       f"{l.name}: the sidecar's workload is {said(s.workload)}, expected {prov.workload!r}")
        if prov.device_uuid is not None:
            check.fail(s.device_uuid != prov.device_uuid,
                       f"{l.name}: the sidecar's device is {said(s.device_uuid)}, expected {prov.device_uuid!r}")
    unchecked += [w for w, v in (("workload", prov.workload), ("device", prov.device_uuid)) if v is None]


def _check_sidecar(l: Launch, m: Manifest, check: Check) -> None:
    """Every sidecar field that restates the buffer must agree with its header, size and name
    (decode read those facts from the header; it already compared the source id, launch number and CRC)."""
    s, b = l.meta.sidecar, l.meta
    check.fail(s.format != SIDECAR_FORMAT, f"{l.name}: the sidecar's format is {s.format!r}, not {SIDECAR_FORMAT!r}")
    # grid and block: decode compares them (header_mismatches)
    for k, v, buffer in (("version", s.version, b.version), ("bytes", s.bytes, b.bytes), ("file", s.file, b.file)):
        # the same type too: JSON's true and 1234.0 are not the integers 1 and 1234
        check.fail(type(v) is not type(buffer) or v != buffer,
                   f"{l.name}: the sidecar's {k} is {v!r}, the buffer's {buffer!r}")
    check.fail(s.kernel != m.kernel, f"{l.name}: the sidecar's kernel is {s.kernel!r}, the manifest's {m.kernel!r}")


def _check_mixing(folder: Folder, check: Check) -> None:
    launches = folder.launches
    seqs = [l.meta.launch_seq for l in launches]
    dups = len(seqs) - len(set(seqs))
    check.fail(dups, f"{dups} launch sequence numbers appear twice: captures of different runs are mixed")
    workloads = {l.meta.sidecar.workload for l in launches}
    check.fail(len(workloads) > 1, f"launches disagree on workload: {sorted(map(repr, workloads))}")
    uuids = {l.meta.sidecar.device_uuid for l in launches}
    check.fail(len(uuids) > 1, f"launches come from different devices: {sorted(map(repr, uuids))}")
    runs = {l.meta.sidecar.run_id for l in launches}
    check.fail(len(runs) > 1, f"files of {len(runs)} runs in one folder (run ids {sorted(map(repr, runs))})")
    if runs == {None} and launches:
        folder.notes.append("the sidecars carry no run_id (written before run identities): the folder is taken as "
                            "one run")
    for l in launches:
        stem_seq = int(l.name.rsplit("launch", 1)[-1]) if l.name.rsplit("launch", 1)[-1].isdigit() else \
            l.meta.launch_seq
        check.fail(stem_seq != l.meta.launch_seq, f"{l.name}: file name says launch {stem_seq}, "
                                                  f"header says {l.meta.launch_seq}")
        _check_sidecar(l, folder.manifest, check)


def _not_captured(folder: Folder) -> list[str]:
    """Launches apply could not wrap ran without probes, so they are not in this folder."""
    m = folder.manifest
    missed = m.not_captured
    if not missed:
        return []
    return [f"{len(missed)} place(s) in the sources launch or may launch {m.kernel} without a capture "
            "session; such launches ran without probes and left no file here: "
            + "; ".join(f"{n['file']}:{n['line']} {n['via']} ({n['reason']})" for n in missed)]


def identity(launches: list[Launch], m: Manifest, run: runrecord.RunRecord | None = None) -> dict:
    """What this capture is evidence of: the build (manifest hashes, and under "run" the run
    record's program and argument files where the folder has one), workload, device and run."""
    def one(values: set):
        return values.pop() if len(values) == 1 else None  # launches that disagree name no single value

    ident = {"instrumented_sha256": m.source.instrumented_sha256, "clean_sha256": m.source.clean_sha256,
             "source_id": m.source.source_id, "workload": one({l.meta.sidecar.workload for l in launches}),
             "device": one({l.meta.sidecar.device_uuid for l in launches}),
             "run_id": one({l.meta.sidecar.run_id for l in launches})}
    return {**ident, "run": run.identity()} if run else ident


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def load_claims(path: Path) -> list[dict]:
    """Claims: TOML `[[claim]]` or JSON list; each {interval, statistic, value, tolerance, launch?}.
    tolerance is relative (0.05 = 5%); values in ns (a count claim counts instances)."""
    usage = "each claim: interval = \"a -> b\", statistic (one of " + ", ".join((*QUANTILES, "count")) + \
            "), value (a number), optional tolerance (a number) and launch (an integer)"
    try:
        text = Path(path).read_text()
        data = tomllib.loads(text).get("claim", []) if str(path).endswith(".toml") else json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as e:  # tomllib's and json's decode errors are ValueErrors
        raise AtrexError(f"cannot read the claims: {getattr(e, 'strerror', None) or e}", path=str(path),
                         hint=usage) from None
    for c in data if isinstance(data, list) else [data]:
        if not (isinstance(c, dict) and isinstance(c.get("interval"), str) and c.get("statistic") in
                (*QUANTILES, "count") and _number(c.get("value")) and _number(c.get("tolerance", 0.0))
                and isinstance(c.get("launch", 0), int)):
            raise AtrexError(f"claim {c!r} is not a claim", path=str(path), hint=usage)
    return data


def _check_claims(folder: Folder, check: Check) -> None:
    """Claims against the summaries (by launch sequence) the report already computed."""
    summaries = {s["launch_seq"]: s for s in folder.summaries}
    for c in folder.claims or ():
        seq = c.get("launch", next(iter(summaries)))
        s = summaries.get(seq)
        iv = next((i for i in (s or {}).get("intervals", []) if i["name"].replace(" ", "") ==
                   c["interval"].replace(" ", "")), None)
        if iv is None:
            check.fail(1, f"claim about {c['interval']!r} (launch {seq}): no such interval in the capture")
            continue
        got, want, tol = iv[c["statistic"]], float(c["value"]), float(c.get("tolerance", 0.0))
        bad = got is None or abs(got - want) > tol * abs(want)
        unit = "" if c["statistic"] == "count" else " ns"
        check.fail(bad, f"launch {seq}: claim {c['interval']} {c['statistic']} = {want:g}{unit} (±{tol:.0%}): "
                        f"recomputed {got}{unit}")


# the core's rules, each under its named check; registered routes' run after them (checks.registered)
CORE = Route(rules=(
    Rule("overflow", "launch", _overflow), Rule("truncation", "launch", _truncation),
    Rule("owner_identity", "launch", _owner_identity), Rule("duplicate_ownership", "launch", _duplicates),
    Rule("site_identity", "launch", _site_identity), Rule("time_order", "launch", _check_time),
    Rule("clock_consistency", "launch", _check_clock), Rule("interval_pairing", "launch", _check_pairing),
    Rule("deterministic_counts", "launch", _check_counts),
    Rule("stale_provenance", "capture", _check_provenance), Rule("cross_launch_mixing", "capture", _check_mixing),
    Rule("numeric_claims", "capture", _check_claims)),
    notes=(_not_captured,))


def validate_capture(capture_dir: Path, manifest: Manifest, prov: Provenance | None = None,
                     claims: list[dict] | None = None, with_summaries: bool = True) -> dict:
    """The report, streaming each file in parts of PART_EVENTS events (memory bounded by a part);
    without summaries (and claims, which need them) the report has no "summaries" and costs the
    checks alone."""
    return validate_dir(capture_dir, manifest, prov, claims, PART_EVENTS, with_summaries)[0]


def validate_dir(capture_dir: Path, manifest: Manifest, prov: Provenance | None = None,
                 claims: list[dict] | None = None, part_events: int | None = None,
                 with_summaries: bool = True) -> tuple[dict, list[Launch]]:
    """The report, and the launches it decoded (for callers that export them: decode once). With
    part_events, each file is decoded, checked and summarized in owner-range parts of that many
    events (decode_parts) and no launches are returned. The core's rules run first, then the
    registered routes'; the report lists the named checks in CHECKS order."""
    m = manifest
    run = runrecord.read(capture_dir)  # a damaged run record is a usage error, before the decode's work
    routes = registered()
    rules = CORE.rules + routes.rules
    per_launch = [r for r in rules if r.scope == "launch"]
    # `causality` is a row only where the spec declares it, so other captures' reports read as before
    checks = {n: Check(n, hint=NEXT_STEP[n]) for n in CHECKS + (("causality",) if m.causality else ())}
    launches, heads, summaries, events = [], [], [], 0
    with_summaries = with_summaries or bool(claims)
    for f in capture_files(capture_dir):
        step(f"decoding and checking {f.name}")
        summary = Summarizer(m) if with_summaries else None
        n = 0
        try:
            for part in decode_parts(f, m, part_events):
                for rule in per_launch:
                    rule.run(part, m, checks[rule.check])
                n += part.n_events
                if summary:
                    summary.add(part)
        except CaptureError as e:
            if e.check is None:  # not about this file's content (decode names the check of every refusal)
                raise
            checks[e.check].fail(1, str(e))
            continue
        heads.append(part)  # any part stands for its launch in the capture-wide checks
        events += n
        if summary:
            summaries.append(summary.result())
        if part_events is None:
            launches.append(part)
    folder = Folder(Path(capture_dir), m, heads, run, prov or Provenance(), claims, summaries)
    for rule in rules:
        if rule.scope == "capture":
            rule.run(folder, checks[rule.check])
    if m.causality:
        causality.check_folder(folder, checks["causality"])
    for note in CORE.notes + routes.notes:
        folder.notes += note(folder)
    valid = all(c.ok for c in checks.values()) and bool(heads)
    report = {"verdict": "valid" if valid else "rejected", "launches": [l.name for l in heads],
              "events": events, "unchecked_provenance": folder.unchecked, "notes": folder.notes,
              "identity": identity(heads, m, run), "checks": [{**asdict(c), "ok": c.ok} for c in checks.values()]}
    return {**report, "summaries": summaries} if with_summaries else report, launches


def validate(capture_dir: Path | None = None, manifest: Path | None = None, prov: Provenance | None = None,
             claims: Path | None = None, artifacts: dict[str, Path | None] | None = None,
             root: Path | None = None) -> dict:
    """`atrex-inject validate`: the capture folder's report (validate_capture, without its
    summaries) read with `manifest` (default CAPTURE_DIR/manifest.json), and/or the recheck of each
    artifact given (name -> path: an artifact a route registered, such as measure's "measurement",
    under its name, relative paths against `root`); the verdict is "rejected" when any is."""
    known = registered().artifacts
    given = {k: v for k, v in (artifacts or {}).items() if v is not None}
    unknown = sorted(set(given) - {a.name for a in known})
    if unknown:
        raise ValueError(f"no route registers the artifacts {unknown}")
    if capture_dir is None and not given:
        raise AtrexError("nothing to validate",
                         hint="give a CAPTURE_DIR" + "".join(f" and/or {a.usage}" for a in known))
    r = {"verdict": "valid"}
    if capture_dir is not None:
        r = validate_capture(capture_dir, mf.for_capture(capture_dir, manifest), prov,
                             load_claims(claims) if claims else None, with_summaries=False)
        r.pop("summaries", None)  # computed for --claims only
    for a in known:
        if a.name in given:
            r[a.name] = a.recheck(given[a.name], root)
            if not r[a.name]["valid"]:
                r["verdict"] = "rejected"
    return r
