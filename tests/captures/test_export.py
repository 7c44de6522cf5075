"""The Perfetto export of a real capture: the trace parses back with the perfetto package's
protobuf classes (names and times resolved as the trace processor does, tests/pftrace.py) and its
slices, instants, names and timestamps equal the canonical events."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TracePacket, TrackEvent

from atrex_inject.decode import decode_dir
from atrex_inject.export import export_perfetto
from atrex_inject.intervals import pairs
from atrex_inject.manifest import load as load_manifest
from pftrace import read

FIX = Path(__file__).parent.parent / "fixtures" / "h200"


def test_pftrace_round_trip(tmp_path):
    m = load_manifest(FIX / "gemm_mma" / "manifest.json")
    (launch,) = decode_dir(FIX / "gemm_mma", m)
    tracks, events = read(export_perfetto([launch], m, tmp_path / "t.pftrace"))
    procs = [t for t in tracks.values() if t.HasField("process")]
    assert len(procs) == 1 and "gemm_bf16 launch 3" in procs[0].process.process_name
    claimed = int((launch.owners["claims"] > 0).sum())
    owners = [t for t in tracks.values() if t.name.endswith(("(lane0)", "(cta)"))]
    assert len(owners) == claimed
    assert {t.name for t in tracks.values() if t.name.startswith("SM ")} == \
        {f"SM {s}" for s in np.unique(launch.column("sm"))}
    begins = Counter(e.name for e in events if e.type == TrackEvent.TYPE_SLICE_BEGIN)
    ends = sum(e.type == TrackEvent.TYPE_SLICE_END for e in events)
    for iv in m.intervals:
        pr = pairs(launch, iv.start_id, iv.end_id)
        assert begins[iv.name] == pr["t0"].size
        got = sorted(e.ts for e in events if e.name == iv.name)
        assert got == sorted(pr["t0"].tolist())
    assert ends == sum(begins.values())
    marks = [s for s in m.sites if s.id not in m.endpoint_ids]
    inst = Counter(e.name for e in events if e.type == TrackEvent.TYPE_INSTANT)
    for s in marks:
        assert inst[s.name] == int((launch.events["site"] == s.id).sum())
    for e in events:  # every event sits on a declared track
        assert e.track in tracks


def test_event_packets_are_interned_and_delta_timed(tmp_path):
    """The events of a launch are one packet sequence in time order: names by interned id, times
    as deltas of a sequence-scoped incremental clock that starts at the first event."""
    m = load_manifest(FIX / "gemm_mma" / "manifest.json")
    (launch,) = decode_dir(FIX / "gemm_mma", m)
    tr = Trace()
    tr.ParseFromString(export_perfetto([launch], m, tmp_path / "t.pftrace").read_bytes())
    seqs = {p.trusted_packet_sequence_id for p in tr.packet if p.HasField("track_event") and p.timestamp_clock_id == 0
            and p.sequence_flags == TracePacket.SEQ_NEEDS_INCREMENTAL_STATE}
    (state,) = [p for p in tr.packet if p.sequence_flags & TracePacket.SEQ_INCREMENTAL_STATE_CLEARED]
    (snapshot,) = [p for p in tr.packet if p.HasField("clock_snapshot")]
    assert seqs == {state.trusted_packet_sequence_id} == {snapshot.trusted_packet_sequence_id}
    events = [p for p in tr.packet if p.trusted_packet_sequence_id in seqs and p.HasField("track_event")]
    assert events and all(not p.track_event.HasField("name") for p in events)
    assert {p.track_event.name_iid for p in events} - {0} <= {n.iid for n in state.interned_data.event_names}
    clocks = {c.clock_id: c for c in snapshot.clock_snapshot.clocks}
    assert clocks[64].is_incremental and clocks[64].timestamp == clocks[6].timestamp == int(launch.events["t_ns"].min())
    assert state.trace_packet_defaults.timestamp_clock_id == 64
    assert max(p.timestamp for p in events) < 1 << 32  # deltas, not %globaltimer's 61-bit times
