"""Several captures on one time axis: `summary` and `export` of several capture folders, or of a
folder holding them, on the real H200 fixtures. reduce_sumsq/ and layernorm/ ran on one device
(their sidecars name GPU-5cf0de81-…, ten seconds apart): their %globaltimer is one axis.
layernorm_clock/ ran on another H200 (GPU-70077900-…), so it shares no axis with them without a
calibration."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from conftest import cli
from pftrace import read

H200 = Path(__file__).parent.parent / "fixtures" / "h200"
SUMSQ, LAYERNORM, OTHER_DEVICE = H200 / "reduce_sumsq", H200 / "layernorm", H200 / "layernorm_clock"


def _json(*args) -> dict:
    code, out = cli(*args, "--json")
    assert code == 0, out
    return json.loads(out)


def _utc(folder: Path) -> float:
    side = json.loads(next(folder.glob("*-launch*.json")).read_text())
    return datetime.strptime(side["time_utc"], "%Y-%m-%dT%H:%M:%SZ").timestamp()


def test_two_captures_of_one_device_share_its_timer():
    r = _json("summary", SUMSQ, LAYERNORM)
    assert r["axis"] == "globaltimer"
    assert r["devices"] == ["GPU-5cf0de81-6cd4-af7a-82e5-3fa8661e8542"]
    (a,), (b,) = (c["launches"] for c in r["captures"])
    # each launch's summary is what summary says of its capture alone, placed on the axis
    for launch, folder in ((a, SUMSQ), (b, LAYERNORM)):
        alone = _json("summary", folder)["launches"][0]
        assert {k: v for k, v in launch.items() if not k.startswith("axis_")} == alone
        assert launch["axis_error_ns"] == 0
    assert a["axis_start_ns"] == 0
    assert b["axis_start_ns"] == b["t_first_ns"] - a["t_first_ns"] == 9363418080
    # the timer counts ns since the epoch: the offset is what the sidecars' wall-clock times say, to their second
    assert abs(b["axis_start_ns"] / 1e9 - (_utc(LAYERNORM) - _utc(SUMSQ))) < 1.5


def test_the_text_says_where_each_launch_starts():
    code, out = cli("summary", SUMSQ, LAYERNORM)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == ("2 captures on one axis: one device's %globaltimer (GPU-5cf0de81-6cd4-af7a-82e5-3fa8661e8542): "
                        "the captures' times as recorded")
    assert "  reduce_sumsq-launch2 starts 0.0 us after the first launch" in lines
    assert "  layernorm_fwd-launch3 starts 9363418.1 us after the first launch" in lines


def test_a_parent_folder_is_its_captures(tmp_path):
    for f in (SUMSQ, LAYERNORM):
        shutil.copytree(f, tmp_path / f.name)
    given = _json("summary", SUMSQ, LAYERNORM)
    parent = _json("summary", tmp_path)
    assert [c["spec"] for c in parent["captures"]] == ["layernorm", "reduce_sumsq"]  # by folder name
    assert {c["spec"]: c["launches"] for c in parent["captures"]} == {c["spec"]: c["launches"] for c in given["captures"]}


def test_captures_of_two_devices_without_an_alignment_are_refused():
    code, out = cli("summary", SUMSQ, OTHER_DEVICE)
    assert code == 2
    assert out.startswith(
        f"error: the captures ran on 2 devices (GPU-5cf0de81-6cd4-af7a-82e5-3fa8661e8542: {SUMSQ}; "
        f"GPU-70077900-c984-a3b8-ba74-1c8f3bc40447: {OTHER_DEVICE}), whose %globaltimer counts from different "
        f"origins, and there is no alignment: {SUMSQ}, {OTHER_DEVICE} hold no clock.json"), out
    assert "Traceback" not in out
    code, out = cli("export", SUMSQ, OTHER_DEVICE, "--perfetto", "/nonexistent/t.pftrace")
    assert code == 2 and "whose %globaltimer counts from different origins" in out


def test_one_capture_options_are_refused_with_several():
    code, out = cli("summary", SUMSQ, LAYERNORM, "--manifest", SUMSQ / "manifest.json")
    assert code == 2 and "--manifest applies to one capture folder" in out
    code, out = cli("export", SUMSQ, LAYERNORM, "--png", "/nonexistent/t.png")
    assert code == 2 and "--png draws one launch of one capture" in out
    code, out = cli("summary", SUMSQ, SUMSQ)
    assert code == 2 and "a capture folder is named twice" in out


def _events(trace: Path, tracks: dict | None = None) -> Counter:
    _, events = read(trace)
    return Counter((e.ts, e.type, e.name) for e in events if e.counter is None)


def test_one_trace_a_process_per_device_and_kernel_on_one_axis(tmp_path):
    both = tmp_path / "both.pftrace"
    r = _json("export", SUMSQ, LAYERNORM, "--perfetto", both)
    assert r["axis"] == "globaltimer" and len(r["selection"]) == 2
    tracks, _ = read(both)
    processes = {t.process.pid: t.process.process_name for t in tracks.values() if t.HasField("process")}
    dev = "NVIDIA H200 GPU-5cf0de81-6cd4-af7a-82e5-3fa8661e8542"
    assert processes == {1: f"{dev} · reduce_sumsq", 2: f"{dev} · layernorm_fwd"}
    launches = {t.name: t.parent_uuid for t in tracks.values() if " launch " in t.name}
    group = {t.process.pid: u for u, t in tracks.items() if t.HasField("process")}
    assert launches == {"reduce_sumsq launch 2 grid (528, 1, 1)": group[1],
                        "layernorm_fwd launch 3 grid (8192, 1, 1)": group[2]}
    # every event at the time the capture's own trace gives it: one axis, nothing moved
    alone = Counter()
    for f in (SUMSQ, LAYERNORM):
        out = tmp_path / f"{f.name}.pftrace"
        _json("export", f, "--perfetto", out)
        alone += _events(out)
    assert _events(both) == alone


@pytest.mark.parametrize("folder", [SUMSQ, LAYERNORM])
def test_one_capture_writes_the_trace_it_wrote_before(folder, tmp_path):
    """A capture alone is still one process per launch, no group (test_golden pins the bytes)."""
    out = tmp_path / "t.pftrace"
    _json("export", folder, "--perfetto", out)
    tracks, _ = read(out)
    procs = [t for t in tracks.values() if t.HasField("process")]
    assert [p.process.pid for p in procs] == [1] and " launch " in procs[0].process.process_name
