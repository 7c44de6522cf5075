"""Clock alignment: the fit of calibration windows (clockalign.py), its file (clock.json), the
calibrator's CUDA source compiled for sm_90a, and captures of two devices placed on the host
clock by their calibrations.

The windows here are generated, shaped as the calibrator's output on an H200 host: a host clock
(CLOCK_MONOTONIC, ~1.2e14 ns after boot), a %globaltimer in 32 ns ticks counting from the epoch
(~1.8e18 ns, as the committed captures' stamps do), round trips of 1.2 to 4 µs with a few delayed
by tens of µs, and the device drifting by a few ppm. They are synthetic, named so: the real
calibration runs in scripts/gpu-multikernel.sh."""
from __future__ import annotations

import json
import shutil
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

from atrex_inject import clockalign
from atrex_inject.errors import AtrexError
from atrex_inject.assets import asset_dir
from conftest import cli, nvcc_compile
from pftrace import read

H200 = Path(__file__).parent.parent / "fixtures" / "h200"
TICK = 32
HOST0, GPU0 = 120_000_000_000_000, 1_796_186_265_712_041_856  # host boot-time ns, device epoch ns
OFFSET0, DRIFT = HOST0 - GPU0 + 12_345, 3.0e-6  # host - device at GPU0, and its change per device ns


def true_offset(g):
    return OFFSET0 + np.rint(DRIFT * (np.asarray(g, dtype=np.float64) - GPU0)).astype(np.int64)


def synthetic_window(g_start: int, n: int = 2000, seed: int = 0) -> np.ndarray:
    """n (h0, g, h1) samples from device time g_start on: the timer read somewhere inside each
    round trip, truncated to its tick; one sample in 50 delayed by 20-80 µs (a preempted host
    thread)."""
    rng = np.random.default_rng(seed)
    width = rng.uniform(1200, 4000, n).astype(np.int64)
    width[rng.random(n) < 0.02] += rng.integers(20_000, 80_000)
    g_true = g_start + np.cumsum(width + 300)
    h_read = g_true + true_offset(g_true)
    h0 = h_read - (rng.random(n) * width).astype(np.int64)
    return np.column_stack([h0, g_true - g_true % TICK, h0 + width])


START, END = synthetic_window(GPU0), synthetic_window(GPU0 + 30_000_000_000, seed=1)  # a 30 s capture between


def test_the_fit_holds_the_true_offset_within_its_bound():
    a = clockalign.fit(START, END, "GPU-x", "CLOCK_MONOTONIC")
    assert a.tick_ns == TICK and a.start.kept == clockalign.KEEP and a.start.samples == 2000
    t = np.linspace(a.start.gpu_ns, a.end.gpu_ns, 101).astype(np.int64)
    err = np.abs(a.shift_ns(t) - true_offset(t))
    assert (err <= a.error_ns(t) + 1).all()  # +1: the shift is rounded to the ns
    assert a.error_ns(t) < 1000  # tight brackets of a microsecond or two bound it well under a µs
    assert abs(a.drift_ppm - DRIFT * 1e6) < 0.05
    # outside the calibrated span the bound grows with the distance, and still holds
    far = np.array([a.end.gpu_ns + 30_000_000_000])
    assert abs(int(a.shift_ns(far)[0] - true_offset(far)[0])) <= a.error_ns(far) + 1
    assert a.error_ns(far) > a.error_ns(t)


def test_a_host_clock_step_inside_a_window_is_refused():
    stepped = START.copy()
    stepped[1000:, [0, 2]] += 50_000  # synthetic: the host clock jumps 50 µs halfway through the window
    with pytest.raises(AtrexError, match=r"start window: its tightest samples disagree on the offset by \d+ ns: "
                                         r"the host clock moved during the window"):
        clockalign.fit(stepped, END, "GPU-x", "CLOCK_MONOTONIC")


def test_clock_json_round_trips_and_an_edited_fit_is_refused(tmp_path):
    dev = {"uuid": "GPU-x", "pci_bus_id": "00000000:19:00.0", "name": "NVIDIA H200"}
    a = clockalign.write(tmp_path, dev, "CLOCK_MONOTONIC", START, END)
    assert clockalign.read(tmp_path) == a
    doc = json.loads((tmp_path / clockalign.FILE_NAME).read_text())
    assert doc["fit"]["start"]["offset_ns"] == a.start.offset_ns and doc["host_clock"] == "CLOCK_MONOTONIC"
    doc["fit"]["start"]["offset_ns"] += 100
    (tmp_path / clockalign.FILE_NAME).write_text(json.dumps(doc))
    with pytest.raises(AtrexError, match=r"field fit\.start\.offset_ns = -?\d+ is not what its samples give"):
        clockalign.read(tmp_path)


def test_the_calibrator_compiles_for_sm_90a(tmp_path):
    src = asset_dir("runtime") / "atrex_clockcal.cu"
    r = nvcc_compile(src, tmp_path / "clockcal.cubin", ["-cubin"])
    assert r.returncode == 0, r.stdout + r.stderr


def _calibrated(src: Path, dst: Path, uuid: str, seed: int) -> Path:
    """A copy of a real capture with a synthetic calibration of its device (clock.json)."""
    shutil.copytree(src, dst)
    side = json.loads(next(dst.glob("*-launch*.json")).read_text())
    assert side["device"]["uuid"] == uuid
    t = json.loads(cli("summary", dst, "--json")[1])["launches"][0]["t_first_ns"]  # calibrated 1 s before and after
    clockalign.write(dst, side["device"], "CLOCK_MONOTONIC", synthetic_window(t - 1_000_000_000, seed=seed),
                     synthetic_window(t + 1_000_000_000, seed=seed + 1))
    return dst


def test_two_devices_share_the_host_clock_through_their_calibrations(tmp_path):
    a = _calibrated(H200 / "reduce_sumsq", tmp_path / "a", "GPU-5cf0de81-6cd4-af7a-82e5-3fa8661e8542", 2)
    b = _calibrated(H200 / "layernorm_clock", tmp_path / "b", "GPU-70077900-c984-a3b8-ba74-1c8f3bc40447", 4)
    code, out = cli("summary", a, b, "--json")
    assert code == 0, out
    r = json.loads(out)
    assert r["axis"] == "host" and len(r["devices"]) == 2
    (la,), (lb,) = (c["launches"] for c in r["captures"])
    shift = [clockalign.read(f).shift_ns(np.array([l["t_first_ns"]]))[0] for f, l in ((a, la), (b, lb))]
    assert lb["axis_start_ns"] - la["axis_start_ns"] == (lb["t_first_ns"] + shift[1]) - (la["t_first_ns"] + shift[0])
    assert 0 < la["axis_error_ns"] < 1000 and 0 < lb["axis_error_ns"] < 1000
    code, out = cli("validate", a, b, "--json")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert checks["alignment"]["ok"]  # two devices: nothing to compare
    # the trace: a process per device, each launch's first event at its time on the host clock
    code, out = cli("export", a, b, "--perfetto", tmp_path / "t.pftrace", "--json")
    assert code == 0, out
    tracks, events = read(tmp_path / "t.pftrace")
    names = sorted(t.process.process_name for t in tracks.values() if t.HasField("process"))
    assert names == ["NVIDIA H200 GPU-5cf0de81-6cd4-af7a-82e5-3fa8661e8542 · reduce_sumsq",
                     "NVIDIA H200 GPU-70077900-c984-a3b8-ba74-1c8f3bc40447 · layernorm_fwd"]
    starts = sorted(e.ts for e in events if e.name and " owners in full" in e.name)  # each launch's selection slice
    assert starts == sorted(int(l["t_first_ns"] + s) for l, s in zip((la, lb), shift))


def test_two_calibrations_of_one_device_that_disagree_fail_alignment(tmp_path):
    a = _calibrated(H200 / "reduce_sumsq", tmp_path / "a", "GPU-5cf0de81-6cd4-af7a-82e5-3fa8661e8542", 2)
    b = tmp_path / "b"
    shutil.copytree(H200 / "layernorm", b)
    dev = json.loads(next(b.glob("*-launch*.json")).read_text())["device"]
    windows = json.loads((a / clockalign.FILE_NAME).read_text())["windows"]
    shifted = [np.array(w) + np.array([5_000, 0, 5_000]) for w in windows]
    clockalign.write(b, dev, "CLOCK_MONOTONIC", *shifted)  # synthetic: a's calibration with the host 5 µs off
    code, out = cli("validate", a, b, "--json")
    r = json.loads(out)
    (fail,) = [c for c in r["checks"] if c["name"] == "alignment"]
    assert fail["count"] == 1 and fail["details"][0].startswith(
        f"{a} and {b} calibrate device GPU-5cf0de81-6cd4-af7a-82e5-3fa8661e8542 5000 ns apart, beyond their bounds' sum")


def test_capture_calibrates_before_and_after_the_program(project, tmp_path):
    """capture --calibrate runs the calibrator around the program and writes clock.json; here a
    stand-in calibrator prints the generated windows and the program replays a real capture's files."""
    code, out = cli("apply", project / "examples/specs/reduce_sumsq.toml", "--recorder", "global", "--json")
    assert code == 0, out
    windows = tmp_path / "windows"
    windows.mkdir()
    for i, w in enumerate((START, END)):
        (windows / f"{i}.json").write_text(json.dumps({
            "format": "atrex-clock-window", "version": 1, "host_clock": "CLOCK_MONOTONIC",
            "device": {"uuid": "GPU-x", "name": "NVIDIA H200"}, "samples": w.tolist()}))
    calib = tmp_path / "calib.py"
    calib.write_text(f"#!{sys.executable}\nimport pathlib\nw = sorted(pathlib.Path({str(windows)!r}).glob('*.json'))\n"
                     "print(w[0].read_text()); w[0].unlink()\n")
    calib.chmod(calib.stat().st_mode | stat.S_IEXEC)
    prog = tmp_path / "replay.py"
    prog.write_text("import os, shutil, pathlib\nsrc = pathlib.Path(%r)\n"
                    "for f in src.glob('reduce_sumsq-launch*'): shutil.copy(f, os.environ['ATREX_TIMELINE_OUT'])\n"
                    % str(H200 / "reduce_sumsq"))
    code, out = cli("capture", "--spec", project / "examples/specs/reduce_sumsq.toml", "--out", tmp_path / "cap",
                    "--calibrate", calib, "--json", "--", sys.executable, prog)
    assert code == 0, out
    r = json.loads(out)
    assert r["clock"] == clockalign.fit(START, END, "GPU-x", "CLOCK_MONOTONIC").to_json()
    assert clockalign.read(tmp_path / "cap").device_uuid == "GPU-x"
