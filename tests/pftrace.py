"""Reads a .pftrace back the way the trace processor resolves what atrex-inject writes (no trace
processor binary runs offline): per packet sequence, interned event names (reset by
SEQ_INCREMENTAL_STATE_CLEARED), the sequence's default clock (trace_packet_defaults) and its
sequence-scoped clocks from clock snapshots, an incremental clock's timestamps summed as deltas and
mapped onto the trace clock through the snapshot."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TracePacket

TRACE_CLOCK = 6  # BOOTTIME: what a packet without a clock id is in


@dataclass(frozen=True)
class Event:
    ts: int  # on the trace clock, ns
    track: int
    type: int
    name: str | None
    annotations: tuple = ()  # (name, value) in order
    counter: float | None = None


@dataclass
class _Sequence:
    names: dict[int, str] = field(default_factory=dict)
    clock: int = 0  # the default timestamp_clock_id
    clocks: dict[int, tuple[int, int, bool]] = field(default_factory=dict)  # id -> (its value, trace value, incr.)
    last: dict[int, int] = field(default_factory=dict)  # incremental clock -> its last value


def read(path: Path | bytes) -> tuple[dict, list[Event]]:
    """(track descriptors by uuid, track events in packet order with resolved names and times)."""
    tr = Trace()
    tr.ParseFromString(path if isinstance(path, bytes) else Path(path).read_bytes())
    tracks, events, seqs = {}, [], {}
    cleared = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    for p in tr.packet:
        s = seqs.get(p.trusted_packet_sequence_id)
        if s is None or p.sequence_flags & cleared:
            seqs[p.trusted_packet_sequence_id] = s = _Sequence()
        if p.HasField("trace_packet_defaults"):
            s.clock = p.trace_packet_defaults.timestamp_clock_id
        if p.HasField("interned_data"):
            for n in p.interned_data.event_names:
                s.names[n.iid] = n.name
        if p.HasField("clock_snapshot"):
            trace = next(c.timestamp for c in p.clock_snapshot.clocks if c.clock_id == TRACE_CLOCK)
            for c in p.clock_snapshot.clocks:
                s.clocks[c.clock_id] = (c.timestamp, trace, c.is_incremental)
                s.last.pop(c.clock_id, None)
        if p.HasField("track_descriptor"):
            tracks[p.track_descriptor.uuid] = p.track_descriptor
        if not p.HasField("track_event"):
            continue
        te = p.track_event
        clock = p.timestamp_clock_id or s.clock
        ts = p.timestamp
        if clock and clock != TRACE_CLOCK:
            base, trace, incremental = s.clocks[clock]
            if incremental:
                ts = s.last[clock] = s.last.get(clock, base) + ts
            ts = trace + ts - base
        name = te.name if te.HasField("name") else s.names[te.name_iid] if te.HasField("name_iid") else None
        notes = tuple((a.name, getattr(a, a.WhichOneof("value"))) for a in te.debug_annotations)
        events.append(Event(ts, te.track_uuid, te.type, name, notes,
                            te.double_counter_value if te.HasField("double_counter_value") else None))
    return tracks, events


def by_track(events: list[Event]) -> dict[int, list[Event]]:
    """Each track's events in trace order (what the UI shows on it)."""
    out: dict[int, list[Event]] = {}
    for e in events:
        out.setdefault(e.track, []).append(e)
    return out
