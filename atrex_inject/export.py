"""Perfetto export: one process per launch, tracks SM -> CTA -> owner, one child track per interval
under each owner holding a slice per instance named `a -> b` (from its start event's time, as long
as its duration at the capture's finest resolution: intervals.drawn_ends), and instants for marks (sites that
end no interval and start none). Payloads (16-byte events) become a `payload` debug annotation.

Only the owners selection.choose() keeps are there in full; the owners it leaves out are summed
into counter tracks per launch (each interval's instances in flight and mean duration, each mark's
events per bin), and a `selection` track's slice says in its annotations which owners were kept,
which were left out and by what rule (the process track's description says it too).

Track descriptors, a few per owner, are built with the perfetto package's TraceProtoBuilder. The
event packets, one or two per event, are the volume: they are encoded straight to the protobuf
wire format with numpy (each field is a fixed tag byte plus a varint, so a packet is a row of
fixed-width segments, masked to their true lengths and flattened in order). A Trace is only
`repeated TracePacket packet = 1`, so the two byte strings concatenate into one valid trace.

Event packets are small because the trace's incremental state carries what repeats: each launch's
events are one packet sequence, in time order, that starts by clearing its incremental state,
interning the event names (interval and site names, `payload`) and making a sequence-scoped
incremental clock its default (TracePacketDefaults.timestamp_clock_id; ClockSnapshot.Clock
is_incremental, equal to the trace clock at the first event), so a packet carries a name id and
the nanoseconds since the packet before it (SEQ_NEEDS_INCREMENTAL_STATE) instead of a name and a
64-bit time: about 20 bytes an event instead of 39. tests/pftrace.py reads it back the way the
trace processor does.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from perfetto.trace_builder.proto_builder import TraceProtoBuilder

from .decode import Launch
from .errors import AtrexError
from .fsio import write_atomic
from .intervals import drawn_ends, durations, pairs
from .smclock import MODEL
from .manifest import Manifest
from .spec import MAX_INTERVALS
from .owners import cta_name, owner_name
from .progress import step
from .selection import DEFAULT_BUDGET, Choice, choose, in_memory, ranges_text

SEQ_ID = 1  # the builder's packets (descriptors, selection, counters), with absolute timestamps
EVENT_SEQ = 2  # + the launch's number: its events' sequence
TRACE_CLOCK, EVENT_CLOCK = 6, 64  # BOOTTIME (packets without a clock id); a sequence-scoped incremental clock
STATE_CLEARED, NEEDS_STATE = 1, 2  # TracePacket.sequence_flags
PAYLOAD_IID = 1  # the interned debug annotation name `payload`
SLICE_BEGIN, SLICE_END, INSTANT = 1, 2, 3
CHUNK = 1 << 18  # rows per encoding pass: 256 Ki keeps the byte matrices in cache (bench: 4.1 s vs 4.8 s per 10M)
KIND_PROCESS, KIND_SM, KIND_CTA, KIND_OWNER, KIND_INTERVAL, KIND_SELECTION, KIND_COUNTER, KIND_GROUP = range(8)
TYPE_COUNTER = 4


@dataclass(frozen=True)
class TrackGroup:
    """A process of a trace of several captures (one per device and kernel: captureset.py); each of
    its launches is a track under it. A trace of one capture has none: each launch is a process."""
    pid: int
    name: str


def track_uuid(launch_no: int, kind: int, ident) -> np.ndarray | int:
    """Deterministic 64-bit uuids: launch + 1 in bits 48+ (0 for a track group), kind in 40..47, id below."""
    return (np.uint64(launch_no + 1) << np.uint64(48)) | (np.uint64(kind) << np.uint64(40)) | np.asarray(
        ident, dtype=np.uint64)


# ---- vectorized protobuf wire encoding -------------------------------------------------------
def _varint(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Base-128 varints as a (rows, width) byte matrix sized to the largest value, plus lengths."""
    v = np.asarray(v, dtype=np.uint64).copy()
    width = max(1, (int(v.max()).bit_length() + 6) // 7) if v.size else 1
    mat = np.empty((v.size, width), dtype=np.uint8)
    lens = np.ones(v.size, dtype=np.int64)
    for i in range(width):
        low = (v & np.uint64(0x7F)).astype(np.uint8)
        v >>= np.uint64(7)
        more = v > 0
        mat[:, i] = low | (more.astype(np.uint8) << 7)
        if i < width - 1:
            lens += more
    return mat, lens


def _const(b: bytes, n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.broadcast_to(np.frombuffer(b, dtype=np.uint8), (n, len(b))), np.full(n, len(b), dtype=np.int64)


def _length(segs) -> np.ndarray:
    return sum(l for _, l in segs)


def _flatten(segs) -> bytes:
    mats = np.hstack([m for m, _ in segs])
    mask = np.hstack([np.arange(m.shape[1])[None, :] < l[:, None] for m, l in segs])
    return mats[mask].tobytes()


def _when(seg, mask):
    """A segment present only on rows where mask holds (length 0 elsewhere)."""
    return seg[0], seg[1] * mask


def encode_events(delta, kinds, uuid, iids, payload, seq: int) -> bytes:
    """TracePackets {timestamp (ns since the previous packet), trusted_packet_sequence_id,
    sequence_flags NEEDS_STATE, track_event {type, track_uuid, name_iid?, debug_annotations
    {name_iid PAYLOAD_IID, uint_value}?}} for arrays of events, in chunks. A name id of 0 omits the
    name; payloads (or None) go on rows that carry a name (slice begins, instants)."""
    out = []
    for a in range(0, len(delta), CHUNK):
        n = min(CHUNK, len(delta) - a)
        sl = slice(a, a + n)
        has = iids[sl] > 0
        te = [_const(b"\x48", n), _varint(kinds[sl]), _const(b"\x58", n), _varint(uuid[sl]),
              _when(_const(b"\x50", n), has), _when(_varint(iids[sl]), has)]
        if payload is not None:
            da = [_const(bytes([0x08, PAYLOAD_IID, 0x18]), n), _varint(payload[sl])]
            te += [_when(_const(b"\x22", n), has), _when(_varint(_length(da)), has)] + [_when(d, has) for d in da]
        head = b"\x50" + bytes(_varint(np.array([seq]))[0][0]) + bytes([0x68, NEEDS_STATE, 0x5A])  # one value: no pad
        body = [_const(b"\x40", n), _varint(delta[sl]), _const(head, n), _varint(_length(te)), *te]
        out.append(_flatten([_const(b"\x0a", n), _varint(_length(body)), *body]))
    return b"".join(out)


def _sequence(b: TraceProtoBuilder, seq: int, t0: int, names: list[str]) -> None:
    """A launch's event sequence starts here: incremental state cleared, the names interned (ids
    from 1 in `names` order), the incremental clock its default, at t0 on the trace clock."""
    p = b.add_packet()
    p.trusted_packet_sequence_id, p.sequence_flags = seq, STATE_CLEARED
    p.trace_packet_defaults.timestamp_clock_id = EVENT_CLOCK
    for iid, name in enumerate(names, 1):
        e = p.interned_data.event_names.add()
        e.iid, e.name = iid, name
    a = p.interned_data.debug_annotation_names.add()
    a.iid, a.name = PAYLOAD_IID, "payload"
    p = b.add_packet()
    p.trusted_packet_sequence_id = seq
    for clock in (TRACE_CLOCK, EVENT_CLOCK):
        c = p.clock_snapshot.clocks.add()
        c.clock_id, c.timestamp = clock, t0
        c.is_incremental = clock == EVENT_CLOCK


def _event_rows(no: int, launch: Launch, manifest: Manifest) -> dict[str, np.ndarray]:
    """Every packet of a launch's events, in time order (stable: a track's equal times keep their
    begin/end order): time, type, track uuid, name id (interval k: k + 1; site s: n_intervals +
    s + 1; 0: none), payload (16-byte events)."""
    n_iv = len(manifest.intervals)
    ev = launch.events
    wide = launch.meta.event_bytes == 16
    parts = []
    for k, iv in enumerate(manifest.intervals):
        p = pairs(launch, iv.start_id, iv.end_id)
        n = p["t0"].size  # begin, end, begin, end...
        uuid = track_uuid(no, KIND_INTERVAL, p["owner"].astype(np.uint64) * np.uint64(MAX_INTERVALS) + np.uint64(k))
        parts.append({"t": np.column_stack([p["t0"], drawn_ends(p, durations(launch, p))]).ravel(),
                      "kind": np.tile(np.array([SLICE_BEGIN, SLICE_END], dtype=np.uint8), n),
                      "uuid": np.repeat(uuid, 2), "iid": np.tile(np.array([k + 1, 0], dtype=np.uint32), n),
                      **({"payload": np.repeat(ev["payload"][p["i0"]], 2)} if wide else {})})
    mark = ~np.isin(ev["site"], list(manifest.endpoint_ids))
    parts.append({"t": ev["t_ns"][mark], "kind": np.full(int(np.count_nonzero(mark)), INSTANT, dtype=np.uint8),
                  "uuid": track_uuid(no, KIND_OWNER, ev["owner"][mark]),
                  "iid": (ev["site"][mark] + n_iv + 1).astype(np.uint32),
                  **({"payload": ev["payload"][mark]} if wide else {})})
    order = None
    rows = {}
    for c in list(parts[0]):  # one column at a time: the unordered copy goes before the next is built
        col = np.concatenate([np.asarray(p.pop(c)) for p in parts])
        order = _by_time(col) if order is None else order
        rows[c] = col[order]
    return rows


def _by_time(t: np.ndarray) -> np.ndarray:
    """A stable order of times: each time made unique by its row (time * n + row, while that fits
    63 bits) and sorted by numpy's fast unstable sort, else a stable argsort."""
    n = t.size
    if not n or (int(t.max()) - int(t.min()) + 1) * n >= 1 << 63:
        return np.argsort(t, kind="stable")
    keys = (t - t.min()) * n + np.arange(n)
    keys.sort()
    return keys % n


# ---- the trace -------------------------------------------------------------------------------
def _group(b: TraceProtoBuilder, group: TrackGroup) -> None:
    p = b.add_packet()
    p.track_descriptor.uuid = int(track_uuid(-1, KIND_GROUP, group.pid))
    p.track_descriptor.process.pid = group.pid
    p.track_descriptor.process.process_name = group.name


def _descriptors(b: TraceProtoBuilder, no: int, ch: Choice, manifest: Manifest, group: TrackGroup | None) -> None:
    """The launch's tracks: a process (or, in a group, a track under the group's process), SM ->
    CTA -> owner -> interval tracks under it."""
    launch, own, kept = ch.launch, ch.launch.owners, ch.keep
    proc = int(track_uuid(no, KIND_PROCESS, 0))
    name = f"{manifest.kernel} launch {launch.meta.launch_seq} grid {launch.meta.grid}"
    p = b.add_packet()
    p.track_descriptor.uuid = proc
    if group is None:
        p.track_descriptor.process.pid = no + 1
        p.track_descriptor.process.process_name = name
    else:
        p.track_descriptor.parent_uuid = int(track_uuid(-1, KIND_GROUP, group.pid))
        p.track_descriptor.name = name
    p.track_descriptor.description = _selection_line(ch)
    for sm in np.unique(own["smid"][kept]):
        p = b.add_packet()
        p.track_descriptor.uuid = int(track_uuid(no, KIND_SM, int(sm)))
        p.track_descriptor.parent_uuid = proc
        p.track_descriptor.name = f"SM {int(sm)}"
    cta_sm = dict(zip(own["cta"][kept].tolist(), own["smid"][kept].tolist()))
    for c in np.unique(own["cta"][kept]).tolist():
        p = b.add_packet()
        p.track_descriptor.uuid = int(track_uuid(no, KIND_CTA, c))
        p.track_descriptor.parent_uuid = int(track_uuid(no, KIND_SM, cta_sm[c]))
        p.track_descriptor.name = cta_name(c, launch.meta.grid)
    for o in kept.tolist():
        p = b.add_packet()
        p.track_descriptor.uuid = int(track_uuid(no, KIND_OWNER, o))
        p.track_descriptor.parent_uuid = int(track_uuid(no, KIND_CTA, int(own["cta"][o])))
        p.track_descriptor.name = owner_name(manifest.role_of_group(int(own["group"][o])), int(own["thread"][o]))
        for k, iv in enumerate(manifest.intervals):
            p = b.add_packet()
            p.track_descriptor.uuid = int(track_uuid(no, KIND_INTERVAL, o * MAX_INTERVALS + k))
            p.track_descriptor.parent_uuid = int(track_uuid(no, KIND_OWNER, o))
            p.track_descriptor.name = iv.name


def _selection_line(ch: Choice) -> str:
    n = ch.keep.size + ch.left_out.size
    return f"{ch.keep.size} of {n} owners in full, {ch.left_out.size} left out ({ch.rule})"


def _event(b: TraceProtoBuilder, ts: int, kind: int, uuid: int, name: str | None = None):
    p = b.add_packet()
    p.timestamp, p.trusted_packet_sequence_id = ts, SEQ_ID
    p.track_event.type, p.track_event.track_uuid = kind, uuid
    if name is not None:
        p.track_event.name = name
    return p.track_event


def _selection(b: TraceProtoBuilder, no: int, ch: Choice) -> None:
    """The launch's `selection` track: one slice over the launch naming what the trace leaves out."""
    uuid = int(track_uuid(no, KIND_SELECTION, 0))
    p = b.add_packet()
    p.track_descriptor.uuid, p.track_descriptor.parent_uuid = uuid, int(track_uuid(no, KIND_PROCESS, 0))
    p.track_descriptor.name = "selection"
    te = _event(b, ch.span[0], SLICE_BEGIN, uuid, _selection_line(ch))
    facts = {"rule": ch.rule, "kept_owners": ranges_text(ch.keep), "left_out_owners": ranges_text(ch.left_out),
             "events_in_full": ch.launch.n_events, "events_left_out": ch.events - ch.launch.n_events,
             "why_kept": "; ".join(f"owner {o}: {', '.join(r)}" for o, r in sorted(ch.reasons.items()))}
    for k, v in facts.items():
        a = te.debug_annotations.add()
        a.name = k
        if isinstance(v, int):
            a.int_value = v
        else:
            a.string_value = v
    _event(b, ch.span[1], SLICE_END, uuid)


def _counters(b: TraceProtoBuilder, no: int, ch: Choice) -> None:
    for i, (name, (ts, values)) in enumerate(ch.counters.items()):
        uuid = int(track_uuid(no, KIND_COUNTER, i))
        p = b.add_packet()
        p.track_descriptor.uuid, p.track_descriptor.parent_uuid = uuid, int(track_uuid(no, KIND_PROCESS, 0))
        p.track_descriptor.name = name
        p.track_descriptor.counter.SetInParent()
        for t, v in zip(ts.tolist(), values.tolist()):
            _event(b, t, TYPE_COUNTER, uuid).double_counter_value = v


def trace_bytes(choices: list[Choice], manifest: Manifest | list[Manifest],
                groups: list[TrackGroup] | None = None) -> bytes:
    """The trace of selection.choose's choices: kept owners in full, counters for the rest.
    `manifest` reads every choice, or is one per choice, and `groups` (one per choice) puts each
    launch under its group's process (several captures on one axis). A manifest holds at most
    MAX_INTERVALS intervals (manifest.py refuses more), so an owner's interval tracks fit its
    track ids."""
    b = TraceProtoBuilder()
    chunks = []
    manifests = manifest if isinstance(manifest, list) else [manifest] * len(choices)
    seen: set[int] = set()
    for no, (ch, manifest, group) in enumerate(zip(choices, manifests, groups or [None] * len(choices))):
        if group is not None and group.pid not in seen:
            seen.add(group.pid)
            _group(b, group)
        names = [iv.name for iv in manifest.intervals] + [s.name for s in manifest.sites]
        _descriptors(b, no, ch, manifest, group)
        rows = _event_rows(no, ch.launch, manifest)
        if rows["t"].size:
            seq = EVENT_SEQ + no
            _sequence(b, seq, int(rows["t"][0]), names)
            chunks.append(encode_events(np.diff(rows["t"], prepend=rows["t"][:1]), rows["kind"], rows["uuid"],
                                        rows["iid"], rows.get("payload"), seq))
        if ch.span:
            _selection(b, no, ch)
        _counters(b, no, ch)
    return b"".join([b.serialize(), *chunks])


def write_trace(choices: list[Choice], manifest: Manifest | list[Manifest], out: str | Path,
                groups: list[TrackGroup] | None = None) -> Path:
    out = Path(out)
    write_atomic(out, trace_bytes(choices, manifest, groups))
    return out


def export_perfetto(launches: list[Launch], manifest: Manifest, out: str | Path) -> Path:
    """Decoded launches to a trace by the default selection rule."""
    return write_trace(choose([in_memory(l) for l in launches], manifest), manifest, out)


def export_capture(capture_dir: str | Path, manifest: Manifest, perfetto: str | Path | None = None,
                   png: str | Path | None = None, png_window: str = "auto", rows: int = 8, owners: str | None = None,
                   ctas: str | None = None, trace_window: str | None = None, everything: bool = False,
                   budget: int = DEFAULT_BUDGET) -> dict:
    """`atrex-inject export`: the Perfetto trace of every launch of the folder, owners chosen by
    selection.choose (streamed part by part), and/or the picture of its first launch
    (timeline.render_png). Returns what was written: {"perfetto", "selection"} and/or {"png", "panels"}."""
    from .decode import PART_EVENTS, capture_files, decode_file, decode_parts, open_capture
    from .timeline import parse_window, render_png

    w = parse_window(png_window)
    files = capture_files(capture_dir)
    r: dict = {}
    if perfetto:
        parts = [lambda c=open_capture(f, manifest): decode_parts(c, manifest, PART_EVENTS)  # checked once
                 for f in files]
        step("choosing the owners the trace holds (reading every launch)")
        choices = choose(parts, manifest, owners, ctas, trace_window, everything, budget)
        step(f"writing the Perfetto trace {perfetto}")
        r["perfetto"] = str(write_trace(choices, manifest, perfetto))
        r["selection"] = [c.to_json() for c in choices]
        if manifest.capture.clock:
            r["slice_durations"] = (f"each slice lasts its cycles at its owner's rate ({MODEL}) where the SM clock "
                                    "times it, else the global timer's ns (summary says which)")
    if png:
        step(f"drawing the picture {png}")
        path, panels = render_png(decode_file(files[0], manifest), manifest, png, w, rows)
        r["png"], r["panels"] = str(path), panels
    if not r:
        raise AtrexError("nothing to export", hint="give --perfetto FILE and/or --png FILE")
    return r
