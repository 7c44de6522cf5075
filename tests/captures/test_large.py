"""Large captures: decode saves memory-mappable columns that load back equal; the default Perfetto
export keeps every event of a small real capture and bounds a SYNTHETIC large one (built here with
the real layout code) to its event budget, keeping whole owners and naming the ones left out."""
from __future__ import annotations

import dataclasses
import json
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent
from typer.testing import CliRunner

from atrex_inject.cli import app
from atrex_inject.decode import OWNER_COLUMNS, decode_dir, decode_file, decode_parts, load, save
from atrex_inject.errors import CaptureError
from atrex_inject.export import KIND_INTERVAL, KIND_OWNER, export_perfetto, trace_bytes
from atrex_inject.intervals import pairs
from atrex_inject.layout import HEADER_BYTES, OWNER_DTYPE
from atrex_inject.manifest import load as load_manifest
from atrex_inject.selection import DEFAULT_BUDGET, choose, in_memory, parse_ranges, ranges_text, windowed
from atrex_inject.summary import summarize_file, summarize_launch
from atrex_inject.synthetic import write_capture
from atrex_inject.stats import run_medians
from atrex_inject.validate import validate_dir
from pftrace import read

FIX = Path(__file__).parent.parent / "fixtures" / "h200"


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def real(name: str):
    m = load_manifest(FIX / name / "manifest.json")
    (launch,) = decode_dir(FIX / name, m)
    return m, launch


@pytest.mark.parametrize("name", ["gemm_mma", "reduce_sumsq"])
def test_saved_columns_load_back_equal_and_memory_mapped(tmp_path, name):
    _, launch = real(name)
    folder = save(launch, tmp_path)
    assert folder == tmp_path / launch.name and not list(tmp_path.glob(".*"))  # no temp folder left
    back = load(folder)
    assert isinstance(back.events["t_ns"], np.memmap)
    assert back.events.keys() == launch.events.keys() and back.counts == launch.counts
    for c in (*launch.events, *OWNER_COLUMNS):
        assert np.array_equal(back.column(c), launch.column(c)), c
    assert back.meta.saved == json.loads(json.dumps(launch.meta.saved))  # launch.json keeps what decode read
    assert back.meta.grid == launch.meta.grid and back.meta.sidecar == launch.meta.sidecar
    save(launch, tmp_path)  # decoding again replaces the folder
    assert sorted(p.name for p in tmp_path.iterdir()) == [launch.name]


def test_saving_part_by_part_writes_the_same_files(tmp_path):
    m = load_manifest(FIX / "gemm_mma" / "manifest.json")
    (f,) = (FIX / "gemm_mma").glob("*.atrex")
    seen = []
    whole, streamed = save(decode_file(f, m), tmp_path / "a"), save(decode_parts(f, m, 1000), tmp_path / "b", seen.append)
    assert len(seen) > 2
    files = sorted(p.relative_to(whole) for p in whole.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(streamed) for p in streamed.rglob("*") if p.is_file())
    assert all((whole / p).read_bytes() == (streamed / p).read_bytes() for p in files)


def test_load_refuses_a_folder_missing_a_column(tmp_path):
    _, launch = real("reduce_sumsq")
    folder = save(launch, tmp_path)
    (folder / "events" / "t_ns.npy").unlink()  # the one planted fault
    with pytest.raises(CaptureError, match=r"lacks columns \['t_ns'\]"):
        load(folder)


# ---- Perfetto export: which owners are in full --------------------------------------------------
def parse_trace(path: Path) -> dict:
    """Per owner (from the track uuid scheme: kind in bits 40..47, id below), the timestamps of its
    slice begins/ends and instants; the counter track names; the selection slice's annotations."""
    tracks, events = read(path)
    names = {u: t.name for u, t in tracks.items()}
    per_owner: dict[int, list[int]] = {}
    selection = {}
    for e in events:
        kind, ident = e.track >> 40 & 0xFF, e.track & (1 << 40) - 1
        if kind in (KIND_OWNER, KIND_INTERVAL):
            per_owner.setdefault(ident if kind == KIND_OWNER else ident // 16, []).append(e.ts)
        if names.get(e.track) == "selection" and e.type == TrackEvent.TYPE_SLICE_BEGIN:
            selection = {**dict(e.annotations), "title": e.name}
    counters = [n for n in names.values() if "owners not shown" in n]
    return {"owners": {o: sorted(t) for o, t in per_owner.items()}, "selection": selection, "counters": counters}


def owner_times(launch, owner: int) -> list[int]:
    return sorted(launch.events["t_ns"][launch.events["owner"] == owner].tolist())


def traced_times(launch, m, owner: int) -> list[int]:
    """What the export documents for one owner: both ends of each interval instance (an event that
    ends one interval and starts the next is in both) and every mark."""
    out = []
    for iv in m.intervals:
        p = pairs(launch, iv.start_id, iv.end_id)
        out += p["t0"][p["owner"] == owner].tolist() + p["t1"][p["owner"] == owner].tolist()
    ends = [i for iv in m.intervals for i in (iv.start_id, iv.end_id)]
    mine = launch.events["owner"] == owner
    return sorted(out + launch.events["t_ns"][mine & ~np.isin(launch.events["site"], ends)].tolist())


@pytest.mark.parametrize("name", ["gemm_mma", "reduce_sumsq"])
def test_default_export_of_a_small_real_capture_holds_every_event(tmp_path, name):
    m, launch = real(name)
    t = parse_trace(export_perfetto([launch], m, tmp_path / "t.pftrace"))
    claimed = np.flatnonzero(launch.owners["claims"] > 0)
    assert sorted(t["owners"]) == claimed.tolist()
    for o in claimed.tolist():  # every event, each in every slice it bounds
        assert t["owners"][o] == traced_times(launch, m, o)
        assert set(t["owners"][o]) == set(owner_times(launch, o))
    assert t["selection"]["left_out_owners"] == "" and parse_ranges(t["selection"]["kept_owners"],
                                                                     "x").tolist() == claimed.tolist()
    assert t["counters"] == []


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """A SYNTHETIC capture half again as large as the default budget (written by the real layout code)."""
    d = tmp_path_factory.mktemp("synthetic_large")
    m = write_capture(d, DEFAULT_BUDGET * 3 // 2, per_owner=1024)
    (launch,) = decode_dir(d, m)
    return d, m, launch


def test_default_export_of_a_synthetic_large_capture_stays_within_budget(large, tmp_path):
    d, m, launch = large
    r = invoke("export", d, "--perfetto", tmp_path / "t.pftrace", "--json")
    assert r.exit_code == 0, r.output
    t = parse_trace(tmp_path / "t.pftrace")
    kept = sorted(t["owners"])
    assert launch.n_events > DEFAULT_BUDGET >= sum(map(len, t["owners"].values())) > DEFAULT_BUDGET * 0.9
    for o in kept:  # every event of a kept owner
        assert t["owners"][o] == owner_times(launch, o), o
    claimed = np.flatnonzero(launch.owners["claims"] > 0)
    left_out = np.setdiff1d(claimed, kept)
    assert left_out.size and parse_ranges(t["selection"]["left_out_owners"], "x").tolist() == left_out.tolist()
    assert parse_ranges(t["selection"]["kept_owners"], "x").tolist() == kept
    assert t["selection"]["title"].startswith(f"{len(kept)} of {claimed.size} owners in full, {left_out.size} left out")
    assert t["selection"]["events_left_out"] == launch.n_events - sum(map(len, t["owners"].values()))
    p = pairs(launch, 0, 1)
    slowest = int(p["owner"][np.argmax(p["dur"])])
    assert f"owner {slowest}: iter_begin -> iter_end: slowest" in t["selection"]["why_kept"]
    assert sorted(t["counters"]) == sorted(f"iter_begin -> iter_end {k} ({left_out.size} owners not shown)"
                                           for k in ("in flight", "mean ns"))
    out = json.loads(r.output)["selection"][0]
    assert out["n_kept"] == len(kept) and out["left_out_owners"] == t["selection"]["left_out_owners"]


def test_owners_ctas_window_and_all_override_the_default(large, tmp_path):
    d, m, launch = large
    f = tmp_path / "t.pftrace"
    assert invoke("export", d, "--perfetto", f, "--owners", "3,5-6").exit_code == 0
    t = parse_trace(f)
    assert sorted(t["owners"]) == [3, 5, 6] and all(t["owners"][o] == owner_times(launch, o) for o in (3, 5, 6))
    assert invoke("export", d, "--perfetto", f, "--ctas", "2").exit_code == 0
    assert sorted(parse_trace(f)["owners"]) == list(range(16, 24))  # 8 warps of CTA 2
    t_first = int(launch.events["t_ns"].min())
    assert invoke("export", d, "--perfetto", f, "--owners", "7", "--trace-window", "100000:200000").exit_code == 0
    inside = [x for x in owner_times(launch, 7) if t_first + 100_000 <= x < t_first + 200_000]
    traced = traced_times(windowed(launch, 100_000, 200_000, t_first), m, 7)  # instances with both ends inside
    assert parse_trace(f)["owners"] == {7: traced} and set(traced) <= set(inside) and len(traced) >= len(inside) - 2
    assert invoke("export", d, "--perfetto", f, "--all").exit_code == 0
    t = parse_trace(f)
    assert sum(map(len, t["owners"].values())) == launch.n_events and t["selection"]["left_out_owners"] == ""


@pytest.mark.parametrize("args, message", [
    (["--all", "--owners", "1"], "--all keeps every owner; it cannot be combined with --owners or --ctas"),
    (["--owners", "2-1"], "--owners '2-1': '2-1' is not an index or a range LO-HI"),
    (["--ctas", "100000"], "--ctas: 100000 is out of range: the capture has"),
    (["--trace-window", "9:9"], "--trace-window '9:9': expected START:END"),
    (["--budget", "0"], "--budget 0: the event budget must be at least 1"),
])
def test_bad_selection_options_exit_2_and_write_nothing(tmp_path, args, message):
    d = tmp_path / "cap"
    shutil.copytree(FIX / "reduce_sumsq", d)
    r = invoke("export", d, "--perfetto", tmp_path / "t.pftrace", "--json", *args)
    assert r.exit_code == 2 and json.loads(r.output)["error"].startswith(message)
    assert not (tmp_path / "t.pftrace").exists()


def test_owner_ranges_round_trip():
    ids = np.array([0, 1, 2, 3, 17, 19, 20])
    assert ranges_text(ids) == "0-3,17,19-20" and parse_ranges("0-3,17,19-20", "--owners").tolist() == ids.tolist()


def test_per_owner_medians_equal_numpy_medians():
    m, launch = real("reduce_sumsq")
    p = pairs(launch, 1, 2)  # iter_begin -> iter_end
    want = {int(o): float(np.median(p["dur"][p["owner"] == o])) for o in np.unique(p["owner"])}
    assert {r["key"]: r["median"] for r in run_medians(p["owner"], p["dur"])} == want


# ---- streaming: owner-range parts ----------------------------------------------------------------
@pytest.mark.parametrize("name", ["gemm_mma", "reduce_sumsq", "pycapture"])
def test_parts_add_up_to_the_whole_launch(name):
    m = load_manifest(FIX / name / "manifest.json")
    (f,) = (FIX / name).glob("*.atrex")
    whole = decode_file(f, m)
    parts = list(decode_parts(f, m, 1000))
    assert len(parts) > 2 and [p.owner_base for p in parts] == sorted({p.owner_base for p in parts})
    for c in whole.events:
        got = np.concatenate([p.events[c] + (p.owner_base if c == "owner" else 0) for p in parts])
        assert np.array_equal(got, whole.events[c]), c
    assert {k: sum(p.counts[k] for p in parts) for k in whole.counts} == whole.counts
    assert summarize_file(f, m, 1000) == summarize_launch(whole, m)
    assert validate_dir(FIX / name, m, part_events=1000)[0] == validate_dir(FIX / name, m)[0]


def test_a_fault_in_a_later_part_is_counted_once_under_its_launch_wide_owner(tmp_path):
    m = write_capture(tmp_path, 40_000, per_owner=100)  # SYNTHETIC: 50 owners of 100 events
    f = tmp_path / "synthetic_fma-launch0.atrex"
    raw = np.frombuffer(f.read_bytes(), dtype=np.uint8).copy()
    own = raw[HEADER_BYTES:HEADER_BYTES + 50 * OWNER_DTYPE.itemsize].view(OWNER_DTYPE)
    own["attempted"][37] = 101  # the one planted fault: owner 37 overflowed by one event
    f.write_bytes(raw.tobytes())
    side = json.loads(f.with_suffix(".json").read_text())
    (tmp_path / f.with_suffix(".json").name).write_text(json.dumps({**side, "crc32": zlib.crc32(raw.tobytes())}))
    streamed = validate_dir(tmp_path, m, part_events=1000)[0]
    assert streamed == validate_dir(tmp_path, m)[0]
    (overflow,) = [c for c in streamed["checks"] if not c["ok"]]
    assert overflow["name"] == "overflow" and overflow["count"] == 1 and "owner 37 (CTA (4, 0, 0), warp 5, thread 160)" in \
        overflow["details"][0]


def test_export_streamed_in_parts_equals_export_in_memory(large):
    d, m, launch = large
    f = d / "synthetic_fma-launch0.atrex"
    for opts in ({"budget": 50_000}, {"owners": "40-47", "window": "20000:90000"}):
        streamed = choose([lambda: decode_parts(f, m, 100_000)], m, **opts)
        assert trace_bytes(streamed, m) == trace_bytes(choose([in_memory(launch)], m, **opts), m)


def test_without_intervals_owner_spans_rank_the_owners_and_marks_are_counted(tmp_path):
    m = write_capture(tmp_path, 100_000, per_owner=250)  # SYNTHETIC; its two sites become plain marks
    m = dataclasses.replace(m, intervals=())
    (launch,) = decode_dir(tmp_path, m)
    (ch,) = choose([in_memory(launch)], m, budget=5_000)
    assert ch.launch.n_events <= 5_000 and ch.keep.size == 20 and "owner spans (no intervals)" in ch.rule
    t = launch.events["t_ns"]
    own = launch.events["owner"]
    span = np.array([t[own == o].max() - t[own == o].min() for o in range(own.max() + 1)])
    assert int(np.argmax(span)) in ch.keep and "owner span: slowest" in ch.reasons[int(np.argmax(span))]
    (times, per_bin), = [v for k, v in ch.counters.items() if k.startswith("iter_end events per")]
    assert per_bin.sum() == int((launch.events["site"][~np.isin(own, ch.keep)] == 1).sum())
