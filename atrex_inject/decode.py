"""Raw capture files → canonical events, one launch at a time (never merged).

A capture folder holds `<kernel>-launch<N>.atrex` (the device buffer, docs/format.md) and its
`.json` sidecar. Decoding checks the buffer's identity against the manifest (magic, format
version, source id, sizes) and refuses a foreign, stale or short buffer with a CaptureError.
What it cannot judge alone (overflow, duplicate claims, unwritten slots, owners outside the
geometry) it counts and hands to the validator.

Everything per event is numpy: the event block is viewed as an (owners, capacity, words) array,
masked by each owner's written count, and flattened in owner-then-sequence order. decode_parts
does this for consecutive owner ranges, reading only their slots, so a capture larger than memory
streams; decode_file is the one-part case. save()/load() keep canonical events as .npy columns.
"""
from __future__ import annotations

import json
import math
import mmap
import os
import shutil
import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import registry
from . import crc
from .errors import CaptureError
from .launchfile import FILE_NAME as CAPTURE_NAME
from .launchfile import OPTIONAL_TYPES as SIDECAR_TYPES
from .launchfile import TYPE_NAMES as SIDECAR_TYPE_NAMES
from .launchmeta import LaunchMeta
from .layout import (EVENT_BYTES, FLAG_CLOCK, FORMAT_VERSION, HEADER_BYTES, HEADER_DTYPE, MAGIC, MAX_GROUPS, OWNER_BYTES,
                     OWNER_DTYPE, PACKED_SITE_BITS, PACKED_SITES, TAG_VALID, U32, Role, build_header, clock8, full_time,
                     group_owners, slot_owners, stamp_resolution_ns)
from .manifest import Manifest
from .owners import cta_name
from .plan import Group
from .smclock import calibrate, unwrap

WINDOW_NS = 1 << 31  # %globaltimer_lo unwraps unambiguously only within 2^31 ns of the owner's full start time
# %globaltimer counts ns since the epoch (2^62 ns is the year 2116): below it, a start plus the under
# 2^32 ns its events unwrap to, and the difference of any two such times, stay inside int64
STAMP_LIMIT_NS = 1 << 62
EVENT_COLUMNS = ("owner", "site", "seq", "t_ns", "cycles", "payload")  # stored per event
OWNER_COLUMNS = ("group", "cta_x", "cta_y", "cta_z", "warp", "lane", "sm")  # per owner, gathered on demand


@dataclass
class Launch:
    """One launch's canonical events (columnar) plus what decode saw about its owners.

    `events` holds the per-event columns, in owner-then-sequence order; columns that are the same
    for all of an owner's events (its CTA, warp, lane, SM, group) live once per owner and are
    gathered by column(), which keeps decode at memory speed."""
    name: str
    meta: LaunchMeta  # header facts and the sidecar, typed (launchmeta.py)
    events: dict[str, np.ndarray]
    owners: dict[str, np.ndarray]  # per owner: group, claims, attempted, expected, cta, thread, smid, exp_cta, ...
    counts: dict[str, int] = field(default_factory=dict)
    owner_base: int = 0  # launch-wide index of owner 0 here (a part of decode_parts starts past 0)

    @property
    def n_events(self) -> int:
        return int(self.events["site"].size)

    def column(self, name: str) -> np.ndarray:
        """Any canonical column by name: EVENT_COLUMNS directly, OWNER_COLUMNS gathered per event."""
        if name in self.events:
            return self.events[name]
        return self.owner_column(name)[self.events["owner"]]

    def owner_column(self, name: str) -> np.ndarray:
        """An OWNER_COLUMNS column per owner (not gathered per event)."""
        return self.owners["col_" + name]


def _expected_owners(g: Group, n: int, grid, block) -> dict[str, np.ndarray]:
    """Who owns each of a group's `n` slots, from the launch geometry (layout.slot_owners)."""
    n_threads, n_ctas = math.prod(map(int, block)), math.prod(map(int, grid))  # exact: u32 products pass 64 bits
    cta, thread = slot_owners(g, n, grid, block)
    must = (thread < n_threads) & (cta < n_ctas)
    if g.role is Role.PREDICATE:
        must = np.zeros(n, dtype=bool)  # an explicit predicate may leave any owner unclaimed
    return {"exp_cta": cta, "exp_thread": thread, "must_claim": must, "may_claim": (thread < n_threads) & (cta < n_ctas)}


def read_header(raw: bytes, where: str, size: int | None = None) -> np.void:
    """The launch header at the start of `raw`, checked against the file's `size` (default len(raw))."""
    size = len(raw) if size is None else size
    if len(raw) < HEADER_BYTES:
        raise CaptureError(f"truncated: {size} bytes, shorter than the {HEADER_BYTES}-byte launch header", path=where,
                           check="truncation")
    h = np.frombuffer(raw[:HEADER_BYTES], dtype=HEADER_DTYPE)[0]
    if int(h["magic"]) != MAGIC:
        raise CaptureError(f"not an atrex capture (magic 0x{int(h['magic']):016x})", path=where, check="truncation")
    if int(h["version"]) != FORMAT_VERSION:
        old = int(h["version"]) < FORMAT_VERSION
        raise CaptureError(f"format version {int(h['version'])}; this decoder reads version {FORMAT_VERSION}"
                           + (" (version 1 owner headers have no end time, so events appended from another launch "
                              "could not be detected)" if old else ""), path=where,
                           hint=("capture again: rebuild the program against this version's recorder header "
                                 "(atrex-inject include-dir) and run it with ATREX_TIMELINE_OUT set" if old else
                                 "decode with the atrex-inject version that wrote it"), check="truncation")
    if size != int(h["total_bytes"]):
        raise CaptureError(f"truncated: {size} bytes, the header says {int(h['total_bytes'])}", path=where,
                           check="truncation")
    n_groups = int(h["n_groups"])
    ev_bytes = int(h["event_bytes"])
    sizes_ok = (1 <= n_groups <= MAX_GROUPS and ev_bytes in EVENT_BYTES and int(h["owner_bytes"]) == OWNER_BYTES
                and int(h["owners_offset"]) == HEADER_BYTES
                and int(h["events_offset"]) == HEADER_BYTES + OWNER_BYTES * int(h["n_owners"])
                and int(h["total_bytes"]) == int(h["events_offset"]) + int(h["n_owners"]) * int(h["capacity"]) * ev_bytes
                and int(h["groups"]["n_owners"][:n_groups].sum()) == int(h["n_owners"]))
    if not sizes_ok:
        raise CaptureError("inconsistent launch header (group/owner/event sizes do not add up)", path=where,
                           check="truncation")
    return h


DECODERS = min(4, os.cpu_count() or 1)  # threads decoding the parts ahead of their consumer
AHEAD = DECODERS + 1  # parts decoded or decoding ahead of the one the consumer has
PART_EVENTS = 1 << 18  # validate and summary stream captures in owner-range parts of this many events


def header_mismatches(h: np.void, meta: dict, manifest: Manifest) -> list[str]:
    """Header fields that differ from the header a recorder of this manifest writes for the
    sidecar's launch geometry (layout.build_header), so that a buffer edited with its CRC
    recomputed (grid, flags, header size, a group's limit or owner base, capacity) is refused."""
    cap = manifest.capture
    # some backends size a capture to its fullest owner (IKeT: cutedsl/normalize.py), not to the spec's capacity
    capacity = int(h["capacity"]) if registry.info(manifest.backend).capacity_from_header else cap.capacity
    try:
        want = build_header(manifest.groups, meta["grid"], meta["block"], capacity, cap.event_bytes, cap.clock,
                            bytes(h["source_id"]).hex(), int(h["launch_seq"]))[0]
    except OverflowError:  # the geometry needs more owners than a u32 counts: no recorder wrote this header
        return [f for f in ("grid", "block") if meta[f] != h[f].tolist()] + ["n_owners", "groups"]
    return [f for f in HEADER_DTYPE.names if f != "tail" and not np.array_equal(h[f], want[f])]


def _explain(h: np.void, meta: dict, manifest: Manifest) -> list[str]:
    """What header_mismatches found, in the launch's terms: the sidecar's grid and block against the
    header's, or (where they agree) each group's owner count, owner range and CTA limit against
    those recomputed from that grid and block with the manifest's density."""
    out = [f"the sidecar's {k} is {meta[k]!r}, the buffer's {h[k].tolist()!r}"
           for k in ("grid", "block") if meta[k] != h[k].tolist()]
    if out:
        return out  # the groups below are recomputed from a geometry the sidecar and header agree on
    groups, base = h["groups"][: int(h["n_groups"])], 0
    for i, (g, mg, n) in enumerate(zip(groups, manifest.groups, group_owners(manifest.groups, meta["grid"],
                                                                             meta["block"]))):
        if int(g["n_owners"]) != n or int(g["owner_base"]) != base:
            out.append(f"group {i} ({mg.role}) has {int(g['n_owners'])} owners from {int(g['owner_base'])} "
                       f"in the header; grid {h['grid'].tolist()} x block {h['block'].tolist()} with the manifest's density "
                       f"gives {n} from {base}")
        if int(g["cta_limit"]) != mg.cta_limit:
            out.append(f"group {i} selects at most {int(g['cta_limit'])} CTAs in the header, {mg.cta_limit} in the "
                       "manifest")
        base += n
    return out


def _map(path: Path) -> mmap.mmap | bytes:
    """The file, memory-mapped read-only (an empty file as b"": mmap refuses those)."""
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(f.fileno()).st_size else b""


def _release(buf: mmap.mmap | bytes, start: int, end: int) -> None:
    """Unmap the pages of buf[start:end] from this process (they stay in the page cache), so what a
    pass has read does not add up in resident memory: a capture larger than memory streams."""
    lo, hi = start - start % mmap.PAGESIZE, end - end % mmap.PAGESIZE
    if isinstance(buf, mmap.mmap) and hi > lo:
        buf.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


def _crc(buf: mmap.mmap | bytes) -> int:
    with memoryview(buf) as whole:
        return crc.crc32(whole, lambda start, end: _release(buf, start, end))


def _open(path: Path, buf: mmap.mmap | bytes, manifest: Manifest) -> tuple[np.void, LaunchMeta, dict, np.ndarray]:
    """Check the buffer's identity (header, sidecar and its field types, checksum, groups, every
    header field against the manifest's plan) and read its owner table: (header, meta, per-owner
    arrays of the whole launch, raw owner rows). Events are not read."""
    where = str(path)
    size = len(buf)
    h = read_header(bytes(buf[:HEADER_BYTES]), where, size)
    checksum = _crc(buf)
    own = np.frombuffer(buf, dtype=OWNER_DTYPE, count=int(h["n_owners"]), offset=HEADER_BYTES).copy()
    source_id = bytes(h["source_id"]).hex()
    if source_id != manifest.source.source_id:
        raise CaptureError(f"source id {source_id[:16]}… is not the manifest's {manifest.source.source_id[:16]}…: "
                           "the buffer comes from another instrumented source", path=where,
                           hint="capture again after `atrex-inject apply`, or decode with that build's manifest",
                           check="stale_provenance")
    side_path = path.with_suffix(".json")
    try:
        meta = json.loads(side_path.read_text())
    except (OSError, ValueError):
        raise CaptureError(f"no readable sidecar {side_path.name}: the capture did not finish", path=where,
                           check="truncation") from None
    if not isinstance(meta, dict) or meta.get("source_id") != source_id or meta.get("launch_seq") != int(h["launch_seq"]):
        raise CaptureError("sidecar does not describe this buffer (source id or launch sequence differ)", path=where,
                           check="cross_launch_mixing")
    for k, kind in SIDECAR_TYPES.items():  # parents before children, so each parent is an object here
        *parents, leaf = k.split(".")
        obj = meta
        for p in parents:
            obj = obj.get(p, {})
        v = obj.get(leaf, kind())
        if not isinstance(v, kind) or isinstance(v, bool) or (kind is int and v < 0):
            said = repr(v) if kind is int and isinstance(v, int) else type(v).__name__  # a bool, a negative count
            raise CaptureError(f"sidecar field {k!r} must be a {SIDECAR_TYPE_NAMES[kind]}, not {said}",
                               path=str(side_path),
                               hint="the sidecar was edited or written by another tool; capture again",
                               check="cross_launch_mixing")
    if meta.get("crc32") != checksum:
        raise CaptureError("checksum mismatch: the file was altered or torn after it was written", path=where,
                           check="truncation")
    dims = [meta.get("grid"), meta.get("block")]
    if not all(isinstance(d, list) and len(d) == 3 and all(
            isinstance(v, int) and not isinstance(v, bool) and 1 <= v < 1 << 32 for v in d) for d in dims):
        raise CaptureError("sidecar grid and block must each be three integers >= 1", path=str(side_path),
                           check="cross_launch_mixing")
    cap = int(h["capacity"])
    grid, block = h["grid"].astype(np.int64), h["block"].astype(np.int64)
    groups = h["groups"][: int(h["n_groups"])]
    if len(groups) != len(manifest.groups) or any(
            int(g["role"]) != mg.role.code or int(g["cta_stride"]) != mg.cta_stride
            or int(g["warp_mask"]) != mg.warp_mask for g, mg in zip(groups, manifest.groups)):
        raise CaptureError("owner groups in the buffer differ from the manifest's", path=where,
                           check="stale_provenance")
    wrong = header_mismatches(h, meta, manifest)
    if wrong:
        # the sidecar disagreeing with the header is a mixing fault; any other field, the header's geometry
        raise CaptureError(f"launch header fields {', '.join(wrong)} differ from the manifest's plan for the launch "
                           "geometry in the sidecar" + "".join(f"; {d}" for d in _explain(h, meta, manifest)),
                           path=where, hint="the buffer was edited, or comes from another build; capture again",
                           check="cross_launch_mixing" if {"grid", "block"} & set(wrong) else "geometry")

    gid = np.repeat(np.arange(len(groups)), groups["n_owners"].astype(np.int64))
    exp = [_expected_owners(mg, int(g["n_owners"]), grid, block) for g, mg in zip(groups, manifest.groups)]
    cat = {k: np.concatenate([e[k] for e in exp]) if exp else np.zeros(0) for k in exp[0]}
    _check_starts(own, cat, grid, where)
    owners = {"group": gid, "claims": own["claims"].astype(np.int64), "attempted": own["attempted"].astype(np.int64),
              "smid": own["smid"].astype(np.int64), "cta": own["cta"].astype(np.int64),
              "thread": own["thread"].astype(np.int64), **cat,
              # validation bounds each owner's events by its start and end (time_order); an end of 0 is an
              # owner that never reached its exit
              "t0": full_time(own, "t0"), "t1": full_time(own, "t1"),
              # the owner's %clock when it started, read with t0 (16-byte events with the clock)
              "clk0": own["clk0"].astype(np.int64),
              # a resident ring counts no further than capacity + 1: its attempted count is a lower bound
              "lower_bound": (own["flags"] & 1).astype(bool),
              # a resident owner whose warp changed SM warp slot (%warpid) during the launch: its events
              # may have gone to another warp's ring, so it copied none out
              "moved": (own["flags"] & 2).astype(bool)}
    gx, gy = int(grid[0]), int(grid[1])
    owners.update(col_group=gid.astype(np.int16), col_cta_x=(owners["cta"] % gx).astype(np.int32),
                  col_cta_y=(owners["cta"] // gx % gy).astype(np.int32),
                  col_cta_z=(owners["cta"] // (gx * gy)).astype(np.int32),
                  col_warp=(owners["thread"] // 32).astype(np.int16), col_lane=(owners["thread"] % 32).astype(np.int16),
                  col_sm=owners["smid"].astype(np.int16))
    resolution = stamp_resolution_ns(own)
    said = meta.get("timer_resolution_ns")
    if said is not None and said != resolution:
        raise CaptureError(f"the sidecar says timer_resolution_ns {said}; the owners' stamps in the buffer give "
                           f"{resolution}", path=str(side_path),
                           hint="the sidecar was edited or belongs to another buffer; capture again",
                           check="timer_resolution")
    clock = bool(int(h["flags"]) & FLAG_CLOCK)
    if (int(h["event_bytes"]) == 4 or clock8(clock, int(h["event_bytes"]))) and 0 < resolution < PACKED_SITES + 1:
        what, hint = (("packed events", "capture again with `packed = false` in [capture] (8-byte events)")
                      if int(h["event_bytes"]) == 4 else
                      ("8-byte events with the clock", "capture again with [capture] wide = true (16-byte events)"))
        raise CaptureError(f"{what} keep the site id in the timer's low {PACKED_SITE_BITS} bits, but this "
                           f"launch's owner stamps are multiples of {resolution} ns only: the timer ticks finer than "
                           f"{PACKED_SITES + 1} ns here, so its events' site ids and times cannot be told apart",
                           path=where, hint=hint, check="timer_resolution")
    # the header's facts override the sidecar's; the sidecar as written stays for validation to compare
    meta = {**meta, "sidecar": meta, "file": path.name, "bytes": size, "version": int(h["version"]),
            "launch_seq": int(h["launch_seq"]), "grid": grid.tolist(), "block": block.tolist(), "capacity": cap, "event_bytes": int(h["event_bytes"]), "source_id": source_id,
            "timer_resolution_ns": resolution,
            "flags": int(h["flags"]), "groups": [{k: int(g[k]) for k in groups.dtype.names} for g in groups]}
    if clock and int(h["event_bytes"]) in (8, 16):
        meta["clock"] = _clock(buf, h, own, owners, resolution)
    return h, LaunchMeta.of(meta), owners, own


def _check_starts(own: np.ndarray, expected: dict, grid: np.ndarray, where: str) -> None:
    """Refuse a launch whose owners' start stamps leave its plausible window: each claimed owner's
    start lies below STAMP_LIMIT_NS and within WINDOW_NS of the median start of the launch's claimed
    owners. Every time decode derives (the events' unwrapped times) and every difference validation
    takes between them then stays inside int64: no arithmetic on a launch's times wraps."""
    claimed = np.flatnonzero(own["claims"] > 0)
    if not claimed.size:
        return
    t0 = full_time(own, "t0")[claimed].view(np.uint64)
    mid = np.partition(t0, t0.size // 2)[t0.size // 2]
    away = np.where(t0 >= mid, t0 - mid, mid - t0)  # unsigned: exact, however far apart
    bad = np.flatnonzero((t0 >= np.uint64(STAMP_LIMIT_NS)) | (away >= np.uint64(WINDOW_NS)))
    if bad.size:
        o = int(claimed[bad[0]])
        cta = cta_name(expected["exp_cta"][o], grid)
        raise CaptureError(f"{bad.size} owners start outside the launch's window (within 2^31 ns, 2.1 s, of the median "
                           f"start of its owners, and below 2^62 ns): owner {o} ({cta}, "
                           f"thread {int(expected['exp_thread'][o])}) starts at {int(t0[bad[0]])} ns, the median owner "
                           f"at {int(mid)} ns; no event time of such an owner can be computed",
                           path=where, hint="the buffer was edited or damaged after it was written; capture again",
                           check="time_order")


def _clock(buf: mmap.mmap | bytes, h: np.void, own: np.ndarray, owners: dict, tick: int) -> dict | None:
    """The launch's SM clock over the owners' spans (smclock.calibrate), from each owner's start stamp
    (t0, clk0) and its last written event, read alone from the buffer (one slot per owner),
    so every part of the launch has the same scale for pictures and resampling grids (intervals are
    converted at local rates: intervals.durations). Owners that were not
    claimed, wrote nothing, moved (their warp's ring may hold another's events) or whose last slot
    is torn give no span."""
    cap, words = int(h["capacity"]), int(h["event_bytes"]) // 4
    written = np.where(owners["claims"] > 0, np.minimum(owners["attempted"], cap), 0)
    o = np.flatnonzero((written > 0) & ~owners["moved"])
    if not o.size:
        return None
    slots = np.frombuffer(buf, dtype="<u4", count=own.size * cap * words, offset=int(h["events_offset"]))
    last = slots.reshape(own.size, cap, words)[o, written[o] - 1]  # reads one slot per owner
    valid, t_lo, _, clock = _fields(last, words, True)
    # each span as decode unwraps it: a uint32 difference from the owner's start
    o, t_lo, clock = o[valid], t_lo[valid], clock[valid]
    ns = np.subtract(t_lo, own["t0_lo"][o]).astype(np.int64)
    cycles = unwrap(clock, own["clk0"][o]) - own["clk0"][o].astype(np.int64)
    return calibrate(cycles, ns, owners["smid"][o], tick)


def _fields(rows: np.ndarray, words: int,
            clock: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Slots' (one row of `words` each) written mask, %globaltimer_lo, site id and %clock word (None
    without the clock), by layout (docs/format.md): packed (one word) and 8-byte clock events
    {clock, t | (site id + 1)} keep the site in the timer's low bits, their last word never zero;
    plain {t, tag} and wide {t, clock, payload, tag} events set the tag's valid bit."""
    tag = rows[:, words - 1]
    if words == 1 or clock8(clock, words * 4):
        site = (tag & np.uint32(PACKED_SITES)).astype(np.int32) - 1
        return tag != 0, tag & np.uint32(~PACKED_SITES & U32), site, rows[:, 0] if words == 2 else None
    return tag >= TAG_VALID, rows[:, 0], (tag & ~TAG_VALID).view(np.int32), rows[:, 1] if words == 4 else None


def _unpack(ev: np.ndarray, own: np.ndarray, written: np.ndarray, cap: int, words: int,
            clock: bool) -> tuple[dict, int, int]:
    """Events of consecutive owners from their slots `ev` (one row of `words` per slot; owner
    indices local to these owners; `clock`: the launch recorded it): (event columns, each a copy,
    torn events, stray events)."""
    n_owners = own.size
    # Each owner's written events are a prefix of its slots: a boolean prefix mask compresses the
    # event block in one pass, and repeats build the per-event owner, sequence and time base, with
    # no per-owner or per-event loop.
    total = int(written.sum())
    full = total == n_owners * cap  # every slot written (common): nothing to compress, nothing stray
    live = None if full else (np.arange(cap, dtype=np.int64)[None, :] < written[:, None]).ravel()
    # compress whole rows as one 8- or 16-byte scalar each (a bit-exact view): numpy's 1-D boolean
    # compress is ~10x faster than the same selection on a 2-D array
    row = {1: np.uint32, 2: np.uint64, 4: np.complex128}[words]
    rows = ev if full else ev.view(row).ravel()[live].view("<u4").reshape(-1, words)
    tag = rows[:, words - 1]
    valid, t_lo, site, clock_word = _fields(rows, words, clock)
    torn = total - int(np.count_nonzero(valid))
    stray = 0 if full else int(np.count_nonzero(ev[:, words - 1])) - int(np.count_nonzero(tag))
    t0 = full_time(own, "t0").view(np.uint64)
    # %globaltimer_lo wraps every 4.3 s: unwrap each event against its owner's full start time
    # (uint32 difference, then one add onto the 64-bit start); a full part is an (owners, capacity)
    # grid, so its per-event owner, sequence and start broadcast instead of being repeated
    if full:
        o_idx = np.repeat(np.arange(n_owners, dtype=np.int32), cap)
        s_idx = np.tile(np.arange(cap, dtype=np.int32), n_owners)
        t_ns = np.add(t0[:, None], np.subtract(t_lo.reshape(n_owners, cap), own["t0_lo"][:, None]),
                      dtype=np.uint64).ravel()
    else:
        o_idx = np.repeat(np.arange(n_owners, dtype=np.int32), written)
        s_idx = np.arange(total, dtype=np.int32) - np.repeat((np.cumsum(written) - written).astype(np.int32), written)
        t_ns = np.repeat(t0, written)
        np.add(t_ns, np.subtract(t_lo, np.repeat(own["t0_lo"], written)), out=t_ns, casting="unsafe")
    t_ns = t_ns.view(np.int64)
    if torn:
        o_idx, s_idx, rows, site, t_ns = o_idx[valid], s_idx[valid], rows[valid], site[valid], t_ns[valid]
        clock_word = None if clock_word is None else clock_word[valid]
    events = {"owner": o_idx, "site": site, "seq": s_idx, "t_ns": t_ns}
    if clock_word is not None:
        # %clock reads unwrapped against the owner's clk0 (smclock.unwrap): zero without the clock
        events["cycles"] = unwrap(clock_word, own["clk0"][o_idx])
    if words == 4:
        events["payload"] = rows[:, 2].copy()
    return events, torn, stray


def _counts(owners: dict, cap: int, torn: int, stray: int, n_events: int) -> dict[str, int]:
    claimed = owners["claims"] > 0
    return {
        "owners": int(claimed.size), "owners_claimed": int(claimed.sum()),
        "owners_missing": int((owners["must_claim"] & ~claimed).sum()),
        "owners_unexpected": int((claimed & ~owners["may_claim"]).sum()),
        "owners_misplaced": int((claimed & ((owners["cta"] != owners["exp_cta"])
                                            | (owners["thread"] != owners["exp_thread"]))).sum()),
        "duplicate_claims": int((owners["claims"] > 1).sum()),
        "overflow_owners": int((owners["attempted"] > cap).sum()),
        "overflow_events": int(np.maximum(owners["attempted"] - cap, 0).sum()),
        "torn_events": torn, "stray_events": stray, "events": n_events,
    }


@dataclass
class Capture:
    """A raw capture file mapped and checked (_open: identity, checksum, owner table), its events
    not read yet: decode_parts reads them as often as a caller needs (export surveys, then
    gathers) without checking the file again."""
    path: Path
    buf: mmap.mmap | bytes
    header: np.void
    meta: LaunchMeta
    owners: dict[str, np.ndarray]
    own: np.ndarray


def open_capture(path: str | Path, manifest: Manifest) -> Capture:
    path = Path(path)
    buf = _map(path)
    return Capture(path, buf, *_open(path, buf, manifest))


def decode_parts(path: str | Path | Capture, manifest: Manifest, max_events: int | None = None) -> Iterator[Launch]:
    """The launch in consecutive owner ranges of at most `max_events` written events each (an owner
    with more is a range of its own; None: one range, the whole launch), reading only each range's
    slots, so a capture larger than memory streams. Each part's owner arrays, events and counts
    cover its range alone, owner indices counted from `owner_base`; summed over the parts, the
    counts are the whole launch's. A path is opened and checked first; a Capture already was."""
    c = path if isinstance(path, Capture) else open_capture(path, manifest)
    path, buf, h, meta, owners, own = c.path, c.buf, c.header, c.meta, c.owners, c.own
    n_owners, cap, words = int(h["n_owners"]), int(h["capacity"]), int(h["event_bytes"]) // 4
    written = np.where(owners["claims"] > 0, np.minimum(owners["attempted"], cap), 0)
    first = np.zeros(1, dtype=np.int64)
    if max_events and n_owners:
        bucket = (np.cumsum(written) - written) // max_events
        first = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    slot_bytes = cap * words * 4

    def one(lo: int, hi: int) -> Launch:
        at = int(h["events_offset"]) + lo * slot_bytes
        slots = np.frombuffer(buf, dtype="<u4", count=(hi - lo) * cap * words, offset=at).reshape(-1, words)
        events, torn, stray = _unpack(slots, own[lo:hi], written[lo:hi], cap, words, bool(int(h["flags"]) & FLAG_CLOCK))
        del slots  # events are copies: nothing of the mapping outlives the part
        _release(buf, at, at + (hi - lo) * slot_bytes)
        part = {k: v[lo:hi] for k, v in owners.items()}
        return Launch(path.stem, meta, events, part, _counts(part, cap, torn, stray, int(events["site"].size)), lo)

    ranges = list(zip(first.tolist(), np.r_[first[1:], n_owners].tolist()))
    if len(ranges) == 1:
        yield one(*ranges[0])
        return
    # the next parts decode on other cores (numpy lets go of the GIL) while the caller works on
    # this one; at most AHEAD parts wait, so memory stays bounded by a few parts
    with ThreadPoolExecutor(DECODERS) as pool:
        ahead = deque(pool.submit(one, *r) for r in ranges[:AHEAD])
        for r in ranges[AHEAD:] + [None] * AHEAD:
            part = ahead.popleft().result()
            if r is not None:
                ahead.append(pool.submit(one, *r))
            yield part


def decode_file(path: str | Path, manifest: Manifest) -> Launch:
    return next(decode_parts(path, manifest))


def capture_files(capture_dir: str | Path) -> list[Path]:
    """The folder's `<kernel>-launch<N>.atrex` files by kernel and launch number; a `.atrex` file
    named otherwise is refused rather than guessed at."""
    files = list(Path(capture_dir).glob("*.atrex"))
    for p in files:
        if not CAPTURE_NAME.match(p.name):
            raise CaptureError(f"capture file {p.name!r} is not named <kernel>-launch<N>.atrex", path=str(p),
                               hint="the recorder names its files so; rename the file or move it out of the folder")
    files.sort(key=lambda p: (CAPTURE_NAME.match(p.name)["kernel"], int(CAPTURE_NAME.match(p.name)["seq"])))
    if not files:
        raise CaptureError(f"no *.atrex capture files in {capture_dir}",
                           hint="run the instrumented program with ATREX_TIMELINE_OUT set to this folder")
    return files


def decode_dir(capture_dir: str | Path, manifest: Manifest) -> list[Launch]:
    return [decode_file(p, manifest) for p in capture_files(capture_dir)]


def decode_capture(capture_dir: str | Path, manifest: Manifest, out_dir: str | Path | None = None) -> dict:
    """`atrex-inject decode`: save every launch of the folder (save(), streamed part by part, so
    memory stays bounded by a part) under `out_dir` (default CAPTURE_DIR.decoded beside the folder,
    which is left as the program wrote it), and report per launch what decode saw: counts, and per
    site its events in total and per owner (min, max)."""
    cap = Path(capture_dir).resolve()
    out_dir = Path(out_dir) if out_dir is not None else cap.with_name(cap.name + ".decoded")
    names = [s.name for s in manifest.sites]
    rows = []
    for f in capture_files(capture_dir):
        seen: list = []  # per part (not kept: memory stays bounded by a part): meta, counts, site counts
        saved = save(decode_parts(f, manifest, PART_EVENTS), out_dir,
                     lambda p: seen.append((p.meta, p.counts, site_counts(p, len(names)))))
        meta, per = seen[-1][0], np.concatenate([c for _, _, c in seen])
        counts = {k: sum(c[k] for _, c, _ in seen) for k in seen[0][1]}
        sites = {n: {"min": int(per[:, i].min()) if per.size else 0, "max": int(per[:, i].max()) if per.size else 0,
                     "total": int(per[:, i].sum())} for i, n in enumerate(names)}
        rows.append({"launch": saved.name, "saved": str(saved), "counts": counts, "sites": sites,
                     "launch_seq": meta.launch_seq, "device": meta.sidecar.device or {}})
    return {"manifest_source_id": manifest.source.source_id, "launches": rows}


OWNER_FACTS = ("claims", "attempted", "smid", "cta", "thread", "exp_cta", "exp_thread", "must_claim", "may_claim")


class _Column:
    """One .npy column written piece by piece: its header, sized for any length, is rewritten with
    the final length at close (padded to the same size, as the format allows)."""

    def __init__(self, path: Path, dtype):
        self.f, self.dtype, self.n = open(path, "wb"), np.dtype(dtype), 0
        self.size = len(self._header(10 ** 19))
        self.f.write(self._header(10 ** 19))

    def _header(self, n: int, size: int | None = None) -> bytes:
        d = repr({"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": (n,)})
        size = size or -(-(11 + len(d)) // 64) * 64  # magic 6 + version 2 + length 2 + dict + "\n", 64-aligned
        return np.lib.format.magic(1, 0) + struct.pack("<H", size - 10) + (d.ljust(size - 11) + "\n").encode("latin1")

    def write(self, a: np.ndarray) -> None:
        np.asarray(a, dtype=self.dtype).tofile(self.f)
        self.n += a.size

    def close(self) -> None:
        self.f.seek(0)
        self.f.write(self._header(self.n, self.size))
        self.f.close()


def save(parts: Launch | Iterable[Launch], out_dir: str | Path, each: Callable[[Launch], None] | None = None) -> Path:
    """Canonical events of one launch (or its decode_parts, written as they come: memory bounded by
    a part) as a folder `<launch>/` of uncompressed .npy columns (docs/format.md):
    `events/<column>.npy`, `owners/<column>.npy` and `launch.json`. Every column memory-maps on load;
    the folder appears whole or not at all (renamed into place). `each` sees every part."""
    out_dir = Path(out_dir)
    parts = [parts] if isinstance(parts, Launch) else parts
    cols: dict[str, _Column] = {}
    counts: dict[str, int] = {}
    tmp = final = head = None
    try:
        for part in parts:
            if head is None:
                head, final, tmp = part, out_dir / part.name, out_dir / f".{part.name}.tmp-{os.getpid()}"
                shutil.rmtree(tmp, ignore_errors=True)
                (tmp / "events").mkdir(parents=True)
                (tmp / "owners").mkdir()
                cols = {**{f"events/{c}": _Column(tmp / "events" / f"{c}.npy", v.dtype) for c, v in part.events.items()},
                        **{f"owners/{c}": _Column(tmp / "owners" / f"{c}.npy", part.owners["col_" + c].dtype)
                           for c in OWNER_COLUMNS},
                        **{f"owners/{c}": _Column(tmp / "owners" / f"{c}.npy", part.owners[c].dtype) for c in OWNER_FACTS}}
            for c, v in part.events.items():
                cols[f"events/{c}"].write(v + part.owner_base if c == "owner" else v)
            for c in OWNER_COLUMNS:
                cols[f"owners/{c}"].write(part.owners["col_" + c])
            for c in OWNER_FACTS:
                cols[f"owners/{c}"].write(part.owners[c])
            counts = {k: counts.get(k, 0) + v for k, v in part.counts.items()}
            if each:
                each(part)
    finally:
        for c in cols.values():
            c.close()
    (tmp / "launch.json").write_text(json.dumps({"name": head.name, "meta": head.meta.saved, "counts": counts},
                                                indent=2))
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return final


def load(saved: str | Path, mmap: bool = True) -> Launch:
    """A launch saved by save(); columns are memory-mapped (read-only) unless mmap is False."""
    saved = Path(saved)
    try:
        info = json.loads((saved / "launch.json").read_text())
        name, meta, counts = info["name"], LaunchMeta.of(info["meta"]), info["counts"]
        mode = "r" if mmap else None
        events = {p.stem: np.load(p, mmap_mode=mode) for p in sorted((saved / "events").glob("*.npy"))}
        cols = {p.stem: np.load(p, mmap_mode=mode) for p in sorted((saved / "owners").glob("*.npy"))}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CaptureError(f"not a saved launch ({e})", path=str(saved),
                           hint="point at a folder `atrex-inject decode` wrote, e.g. CAPTURE_DIR/decoded/<launch>")
    missing = sorted({"owner", "site", "seq", "t_ns"} - set(events) | {*OWNER_COLUMNS, *OWNER_FACTS} - set(cols))
    if missing:
        raise CaptureError(f"saved launch lacks columns {missing}", path=str(saved), hint="decode the capture again")
    owners = {k: cols[k] for k in OWNER_FACTS}
    owners.update({"col_" + c: cols[c] for c in OWNER_COLUMNS}, group=cols["group"].astype(np.int64))
    return Launch(name, meta, events, owners, counts)


def site_counts(launch: Launch, n_sites: int) -> np.ndarray:
    """(claimed owners, sites) matrix of events per owner per site."""
    claimed = np.nonzero(launch.owners["claims"] > 0)[0]
    n_owners = launch.owners["claims"].size
    site = launch.events["site"]
    known = (site >= 0) & (site < n_sites)  # unknown ids: site_identity's job
    cell = launch.events["owner"][known].astype(np.int64) * n_sites + site[known]
    return np.bincount(cell, minlength=n_owners * n_sites).reshape(n_owners, n_sites)[claimed]
