"""The Perfetto export of a real capture: the trace parses back with the perfetto package's
protobuf classes and its slices, instants, names and timestamps equal the canonical events."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

from atrex_inject.decode import decode_dir
from atrex_inject.export import export_perfetto
from atrex_inject.intervals import pairs
from atrex_inject.manifest import load as load_manifest

FIX = Path(__file__).parent / "fixtures" / "h200"


def test_pftrace_round_trip(tmp_path):
    m = load_manifest(FIX / "gemm_mma" / "manifest.json")
    (launch,) = decode_dir(FIX / "gemm_mma", m)
    tr = Trace()
    tr.ParseFromString(export_perfetto([launch], m, tmp_path / "t.pftrace").read_bytes())
    tracks = {p.track_descriptor.uuid: p.track_descriptor for p in tr.packet if p.HasField("track_descriptor")}
    events = [p for p in tr.packet if p.HasField("track_event")]
    procs = [t for t in tracks.values() if t.HasField("process")]
    assert len(procs) == 1 and "gemm_bf16 launch 3" in procs[0].process.process_name
    claimed = int((launch.owners["claims"] > 0).sum())
    owners = [t for t in tracks.values() if t.name.endswith(("(lane0)", "(cta)"))]
    assert len(owners) == claimed
    assert {t.name for t in tracks.values() if t.name.startswith("SM ")} == \
        {f"SM {s}" for s in np.unique(launch.column("sm"))}
    begins = Counter(p.track_event.name for p in events if p.track_event.type == TrackEvent.TYPE_SLICE_BEGIN)
    ends = sum(p.track_event.type == TrackEvent.TYPE_SLICE_END for p in events)
    for iv in m.intervals:
        pr = pairs(launch, iv.start_id, iv.end_id)
        assert begins[iv.name] == pr["t0"].size
        got = sorted(p.timestamp for p in events if p.track_event.name == iv.name)
        assert got == sorted(pr["t0"].tolist())
    assert ends == sum(begins.values())
    endpoints = {i for iv in m.intervals for i in (iv.start_id, iv.end_id)}
    marks = [s for s in m.sites if s.id not in endpoints]
    inst = Counter(p.track_event.name for p in events if p.track_event.type == TrackEvent.TYPE_INSTANT)
    for s in marks:
        assert inst[s.name] == int((launch.events["site"] == s.id).sum())
    for p in events:  # every event sits on a declared track
        assert p.track_event.track_uuid in tracks

