"""Evidence integrity (issue 14): one planted fault per class, in copies of the real H200 fixtures
re-signed so that CRC, sizes and hashes pass (as a buggy recorder or a hand edit would leave them),
each rejected by exactly the check or field it belongs to. Everything planted is synthetic."""
from __future__ import annotations

import json
import re
import shutil
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from atrex_inject.cli import app
from atrex_inject.cutedsl.normalize import normalize_trace
from atrex_inject.errors import CaptureError
from atrex_inject.grade import grade
from atrex_inject.errors import SnapshotError
from atrex_inject.layout import HEADER_BYTES, HEADER_DTYPE, OWNER_DTYPE
from atrex_inject.manifest import Manifest
from atrex_inject.manifest import load as load_manifest
from atrex_inject.measure import summarize, validate_measurement
from atrex_inject.validate import validate_capture
from test_grade import GOOD_REPORT, M as GEMM_M, MEASURED_WORKLOAD
from test_validate import FIX, Synthetic, failing

CTA_GROUP = 1  # reduce_sumsq: the cta-role group of site `publish` (in no interval, no expectation)
MOD = 1 << 32


# ---- time: one writer per owner, %globaltimer never goes back ----

def _last(s: Synthetic, o: int) -> int:
    return int(s.owners["attempted"][o]) - 1


FORMAT_2 = ("gemm_mma", "gemm_mma_staged", "reduce_sumsq", "layernorm", "pycapture", "rowscale_split",
            "kernelpy/softmax_inline", "kernelpy/rmsnorm_nvrtc", "reduce_sumsq_resident")


def test_real_fixtures_keep_time_order():
    """The rule holds on every real capture: no owner's time goes back, none leaves its window
    (format 2: none is later than its owner's end, which every claimed owner recorded)."""
    for name in (*FORMAT_2, "cutedsl", "cutedsl_gemm"):
        m = load_manifest(FIX / name / "manifest.json")
        r = validate_capture(FIX / name, m)
        assert r["verdict"] == "valid" and failing(r) == {}, name
    for name in FORMAT_2:
        s = Synthetic(Path(tempfile.mkdtemp()), name)
        claimed = s.owners["claims"] > 0
        assert s.version == 2 and claimed.any() and (s.owners["t1_lo"][claimed] | s.owners["t1_hi"][claimed]).all(), name


def test_event_earlier_than_the_one_before(tmp_path):
    s = Synthetic(tmp_path)
    o = s.owner_of_group(0, 3)
    k = _last(s, o)
    s.events[o, k, 0] = (int(s.events[o, k - 1, 0]) - 32) % MOD
    r = s.save().validate()
    assert failing(r) == {"time_order": 1}
    detail = next(c for c in r["checks"] if c["name"] == "time_order")["details"][0]
    assert "owner 3 (CTA (0, 0, 0), warp 3, thread 96) site 'finish'" in detail


def test_event_before_its_owner_started(tmp_path):
    """Written before the owner's start, the 32-bit time unwraps to 4.29 s later: outside the window."""
    s = Synthetic(tmp_path)
    o = s.owner_of_group(0, 5)
    s.events[o, _last(s, o), 0] = (int(s.owners["t0_lo"][o]) - 32) % MOD
    assert failing(s.save().validate()) == {"time_order": 1}


@pytest.mark.parametrize("shift_ns", [-2_000_000, 2_000_000])
def test_events_of_another_launch_appended(tmp_path, shift_ns):
    """An owner's event from a launch 2 ms earlier or later, appended after its own (count made
    consistent): earlier is before the owner started (its 32-bit time unwraps to 4.29 s later),
    later is past the owner's end."""
    s = Synthetic(tmp_path)
    o = s.owner_of_group(CTA_GROUP, 2)
    s.events[o, 1] = s.events[o, 0]
    s.events[o, 1, 0] = (int(s.events[o, 0, 0]) + shift_ns) % MOD
    s.owners["attempted"][o] = 2
    r = s.save().validate()
    assert failing(r) == {"time_order": 1}
    detail = next(c for c in r["checks"] if c["name"] == "time_order")["details"][0]
    assert ("outside their owner's window" if shift_ns < 0 else "later than their owner's end") in detail


def test_owner_that_ends_before_it_starts(tmp_path):
    """An owner whose end time precedes its start (its events moved along, so only the end is wrong)."""
    s = Synthetic(tmp_path)
    o = s.owner_of_group(CTA_GROUP, 1)
    t0 = (int(s.owners["t0_hi"][o]) << 32) | int(s.owners["t0_lo"][o])
    s.owners["t1_lo"][o], s.owners["t1_hi"][o] = (t0 - 32) & 0xFFFFFFFF, (t0 - 32) >> 32
    s.events[o, : _last(s, o) + 1, 0] = s.owners["t0_lo"][o]  # so no event is past the end either
    r = s.save().validate()
    assert failing(r) == {"time_order": 1}
    assert "1 owners ended before they started" in next(c for c in r["checks"] if c["name"] == "time_order")[
        "details"][0]


def _set_end(s: Synthetic, o: int, t1: int) -> None:
    s.owners["t1_lo"][o], s.owners["t1_hi"][o] = t1 & 0xFFFFFFFF, t1 >> 32 & 0xFFFFFFFF


def _start(s: Synthetic, o: int) -> int:
    return (int(s.owners["t0_hi"][o]) << 32) | int(s.owners["t0_lo"][o])


def _detail(r: dict, check: str) -> str:
    return next(c for c in r["checks"] if c["name"] == check)["details"][0]


def test_owner_end_of_2_63_ns_or_more(tmp_path):
    """An end time with its top bit set (here all ones) is no end later than every event: it
    reads as ending before the start, where it used to be taken for format 1's missing end."""
    s = Synthetic(tmp_path)
    _set_end(s, s.owner_of_group(CTA_GROUP), (1 << 64) - 1)
    r = s.save().validate()
    assert failing(r) == {"time_order": 1}
    assert _detail(r, "time_order") == ("reduce_sumsq-launch2: 1 owners ended before they started: owner 528 "
                                         "(CTA (0, 0, 0), warp 0, thread 0)")


def test_owner_that_ends_after_the_window(tmp_path):
    """An end 2^32 ns after the owner's start (its events unchanged): a launch longer than 2.1 s."""
    s = Synthetic(tmp_path)
    o = s.owner_of_group(CTA_GROUP)
    _set_end(s, o, _start(s, o) + (1 << 32))
    r = s.save().validate()
    assert failing(r) == {"time_order": 1}
    assert _detail(r, "time_order") == ("reduce_sumsq-launch2: 1 owners ended 2^31 ns (2.1 s) or more after the "
                                         "launch began: owner 528 (CTA (0, 0, 0), warp 0, thread 0)")


@pytest.mark.parametrize("name,o,t0_hi", [("gemm_mma", 0, lambda hi: hi | 0x8000_0000),
                                          ("reduce_sumsq", 528, lambda hi: 0)], ids=["top_bit", "high_word_cleared"])
def test_owner_start_outside_the_launch_window(tmp_path, name, o, t0_hi):
    """An owner's start stamp with its top bit set, or with its high word cleared (its events unwrap
    from it, so they move along; CRC re-signed). The top bit on the GEMM's first owner made the
    window arithmetic wrap int64: the capture was valid and summary showed a span of 9.2e15 µs; a
    start 57 years early made every other owner's events look late. Decode refuses the launch, naming
    the owner: validate counts it once under time_order, and summary exits 2 with the same words."""
    s = Synthetic(tmp_path, name)
    s.owners["t0_hi"][o] = t0_hi(int(s.owners["t0_hi"][o]))
    claimed = np.flatnonzero(s.owners["claims"] > 0)
    mid = sorted(_start(s, i) for i in claimed)[claimed.size // 2]
    r = s.save().validate()
    assert failing(r) == {"time_order": 1}
    assert _detail(r, "time_order") == (
        f"{s.raw_path}: 1 owners start outside the launch's window (within 2^31 ns, 2.1 s, of the median start of its "
        f"owners, and below 2^62 ns): owner {o} (CTA (0, 0, 0), thread 0) starts at {_start(s, o)} ns, the median "
        f"owner at {mid} ns; no event time of such an owner can be computed\n"
        "  hint: the buffer was edited or damaged after it was written; capture again")
    out = runner.invoke(app, ["summary", str(s.dir)])
    assert out.exit_code == 2 and "1 owners start outside the launch's window" in out.output


def test_owner_count_published_without_an_end(tmp_path):
    """End time 0 (never reached its exit) beside a published count, which is written with it."""
    s = Synthetic(tmp_path)
    _set_end(s, s.owner_of_group(CTA_GROUP), 0)
    r = s.save().validate()
    assert failing(r) == {"truncation": 1}
    assert _detail(r, "truncation") == ("reduce_sumsq-launch2: 1 owners published an event count without an end time "
                                        "(their writer stores both at exit): owner 528 (CTA (0, 0, 0), warp 0, "
                                        "thread 0)")


# ---- geometry and the sidecar ----

def test_owner_table_cut_at_an_owner_boundary(tmp_path):
    """The last owner of the cta group removed; header, group count, offsets, size and CRC consistent."""
    s = Synthetic(tmp_path)
    h = s.raw[:HEADER_BYTES].view(HEADER_DTYPE).copy()
    ev_bytes = s.words * 4
    h["n_owners"] -= 1
    h["groups"][0, CTA_GROUP]["n_owners"] -= 1
    owner_bytes = s.owners.dtype.itemsize
    h["events_offset"] -= owner_bytes
    h["total_bytes"] -= owner_bytes + s.cap * ev_bytes
    owners = s.raw[HEADER_BYTES:s.ev_off][: -owner_bytes]
    events = s.raw[s.ev_off:][: -s.cap * ev_bytes]
    s.raw = np.concatenate([h.view(np.uint8), owners, events])
    r = s.save().validate()
    assert failing(r) == {"geometry": 1}
    assert "group 1 (cta) has 65 owners from 528" in next(c for c in r["checks"] if c["name"] == "geometry")["details"][0]


def test_sidecar_grid_with_more_owners_than_a_header_counts(tmp_path):
    """A sidecar grid of 2^32 CTAs (the buffer's header untouched): the plan for it cannot be
    written in a header (its owner count passes u32; this raised OverflowError)."""
    r = Synthetic(tmp_path).save(grid=[65536, 65536, 1]).validate()
    assert failing(r) == {"cross_launch_mixing": 1}
    assert _detail(r, "cross_launch_mixing").endswith(
        "reduce_sumsq-launch2.atrex: launch header fields grid, n_owners, groups differ from the manifest's plan for the "
        "launch geometry in the sidecar; the sidecar's grid is [65536, 65536, 1], the buffer's [528, 1, 1]\n"
        "  hint: the buffer was edited, or comes from another build; capture again")


def test_header_grid_with_more_owners_than_a_header_counts(tmp_path):
    """The same grid in the header and the sidecar (CRC re-signed): the recomputed owner count is
    exact, 2^32, not wrapped."""
    s = Synthetic(tmp_path)
    s.raw[:HEADER_BYTES].view(HEADER_DTYPE)["grid"] = [65536, 65536, 1]
    r = s.save(grid=[65536, 65536, 1]).validate()
    assert failing(r) == {"geometry": 1}
    assert ("group 0 (lane0) has 528 owners from 0 in the header; grid [65536, 65536, 1] x block [256, 1, 1] with "
            "the manifest's density gives 4294967296 from 0") in _detail(r, "geometry")


def test_sidecar_field_of_another_type_with_an_equal_value(tmp_path):
    """JSON's 1234.0 is not the integer 1234: a sidecar restating the size as a float was written by
    something else than the recorder."""
    s = Synthetic(tmp_path)
    r = s.save(bytes=float(s.raw.size)).validate()
    assert failing(r) == {"cross_launch_mixing": 1}
    assert f"the sidecar's bytes is {float(s.raw.size)!r}, the buffer's {s.raw.size}" in next(
        c for c in r["checks"] if c["name"] == "cross_launch_mixing")["details"][0]


@pytest.mark.parametrize("field,value", [("grid", [529, 1, 1]), ("block", [128, 1, 1]), ("bytes", 12),
                                         ("kernel", "other_kernel"), ("file", "other-launch2.atrex"),
                                         ("version", 1), ("format", "other-format")])
def test_sidecar_field_differs_from_the_buffer(tmp_path, field, value):
    r = Synthetic(tmp_path).save(**{field: value}).validate()
    assert failing(r) == {"cross_launch_mixing": 1}
    assert f"the sidecar's {field} is {value!r}" in next(c for c in r["checks"]
                                                         if c["name"] == "cross_launch_mixing")["details"][0]


def _second_launch(s: Synthetic, **sidecar) -> None:
    """The same buffer again as launch 7 of a run, re-signed (header launch number, CRC, sidecar)."""
    raw = s.raw.copy()
    raw[:HEADER_BYTES].view(HEADER_DTYPE)["launch_seq"] = 7
    path = s.dir / "reduce_sumsq-launch7.atrex"
    path.write_bytes(raw.tobytes())
    meta = json.loads(s.raw_path.with_suffix(".json").read_text())
    meta.update(crc32=zlib.crc32(raw.tobytes()), launch_seq=7, file=path.name, **sidecar)
    path.with_suffix(".json").write_text(json.dumps(meta))


def test_two_runs_in_one_folder(tmp_path):
    s = Synthetic(tmp_path).save(run_id="run-a")
    _second_launch(s, run_id="run-b")
    r = s.validate()
    assert failing(r) == {"cross_launch_mixing": 1}
    assert "files of 2 runs in one folder" in next(c for c in r["checks"] if c["name"] == "cross_launch_mixing")[
        "details"][0]


def test_format_1_is_refused(tmp_path):
    """Launch 7 rewritten in format 1 (owner end times dropped; header, offsets, CRC and sidecar
    consistent): its events could escape the end-time check, so decode refuses the file, naming the
    version and how to capture again, and the folder is rejected."""
    s = Synthetic(tmp_path).save(run_id="run-a")
    v1 = np.zeros(s.n_owners, dtype=[(f, "<u4") for f in OWNER_DTYPE.names[:8]])
    for f in v1.dtype.names:
        v1[f] = s.owners[f]
    h = s.raw[:HEADER_BYTES].view(HEADER_DTYPE).copy()
    h["version"], h["owner_bytes"], h["launch_seq"] = 1, v1.itemsize, 7
    h["events_offset"] = HEADER_BYTES + v1.nbytes
    h["total_bytes"] = int(h["events_offset"][0]) + s.raw[s.ev_off:].size
    raw = h.tobytes() + v1.tobytes() + s.raw[s.ev_off:].tobytes()
    path = s.dir / "reduce_sumsq-launch7.atrex"
    path.write_bytes(raw)
    meta = json.loads(s.raw_path.with_suffix(".json").read_text())
    meta.update(crc32=zlib.crc32(raw), bytes=len(raw), launch_seq=7, file=path.name, version=1)
    path.with_suffix(".json").write_text(json.dumps(meta))
    r = s.validate()
    assert r["verdict"] == "rejected" and failing(r) == {"truncation": 1}
    assert _detail(r, "truncation") == (
        f"{path}: format version 1; this decoder reads version 2 (version 1 owner headers have no end time, so "
        "events appended from another launch could not be detected)\n  hint: capture again: rebuild the program "
        "against this version's recorder header (atrex-inject include-dir) and run it with ATREX_TIMELINE_OUT set")


def test_one_run_or_legacy_sidecars(tmp_path):
    """Two launches of one run pass; sidecars written before run ids are one legacy run, with a note."""
    s = Synthetic(tmp_path).save(run_id="run-a")
    _second_launch(s, run_id="run-a")
    r = s.validate()
    assert failing(r) == {} and r["notes"] == [] and r["identity"]["run_id"] == "run-a"
    old = tmp_path / "legacy"
    shutil.copytree(FIX / "reduce_sumsq", old)
    for side in old.glob("*-launch*.json"):  # as the recorder wrote them before run ids
        meta = json.loads(side.read_text())
        del meta["run_id"]
        side.write_text(json.dumps(meta))
    legacy = validate_capture(old, Manifest.from_json(s.m, "test"))
    assert legacy["verdict"] == "valid" and "no run_id" in legacy["notes"][0]


def test_expect_naming_an_unknown_site(tmp_path):
    """A manifest whose [expect] names a site it does not define is refused when read (exit 2),
    before any check runs."""
    s = Synthetic(tmp_path).save()
    s.m["expect"]["no_such_site"] = 1
    with pytest.raises(SnapshotError, match="expect names unknown site 'no_such_site'"):
        s.validate()


# ---- IKeT: warp lifetimes are what IKeT says ----

IKET = FIX / "cutedsl"


def _normalize(tmp_path: Path, edit) -> dict:
    m = load_manifest(IKET / "manifest.json")
    trace = json.loads((IKET / "iket_trace.cta0-7.json").read_text())
    edit(trace["launches"][0], trace)
    src = tmp_path / "synthetic_trace.json"
    src.write_text(json.dumps(trace))
    normalize_trace(src, m, tmp_path, "w", {"uuid": "GPU-x"})
    return validate_capture(tmp_path, m)


def test_iket_subset_normalizes_as_one_run(tmp_path):
    r = _normalize(tmp_path, lambda launch, trace: None)
    assert failing(r) == {"truncation": 520 * 8}  # only CTAs 0-7 of 528 are in the subset: the rest never claimed
    assert r["identity"]["run_id"]  # the normalized sidecars carry one run id


def test_iket_duplicated_warp_lifetime(tmp_path):
    r = _normalize(tmp_path, lambda launch, trace: launch["warpLifetimes"].append(dict(launch["warpLifetimes"][0])))
    assert failing(r) == {"truncation": 520 * 8, "duplicate_ownership": 1}


def _after_end(launch, trace):
    mk = launch["markers"][0]
    end = max(w["endTs"] for w in launch["warpLifetimes"] if w["locIdx"] == mk["locIdx"])
    mk["timestamp"] = end + 32


def _merged(launch, trace):
    loc = launch["markers"][0]["locIdx"]
    launch["markers"] += [{**mk, "timestamp": mk["timestamp"] + 2_000_000} for mk in launch["markers"]
                          if mk["locIdx"] == loc]


def test_iket_location_outside_the_grid(tmp_path):
    """A location naming a CTA past the launch's grid (found by tests/captures/test_json_inputs.py: numpy then
    tried to allocate 24 GiB for the owner counts) is refused by name, before anything is allocated."""
    def edit(launch, trace):
        trace["locationTable"][launch["markers"][0]["locIdx"]]["ctaId"] = [0, 0, 3_259_728_391]
    with pytest.raises(CaptureError) as e:
        _normalize(tmp_path, edit)
    assert "names CTA (0, 0, 3259728391) warp 0, outside grid [528, 1, 1] x block [256, 1, 1] (8 warps)" in str(e.value)


def test_iket_grid_too_large_for_a_buffer(tmp_path):
    """A damaged grid that would need a buffer over the recorder's 4 GiB is refused before any allocation."""
    with pytest.raises(CaptureError) as e:
        _normalize(tmp_path, lambda launch, trace: launch.update(gridDimX=2**31 - 1))
    assert "launch 0: grid [2147483647, 1, 1] x block [256, 1, 1] gives" in str(e.value)
    assert "over the recorder's 4 GiB" in str(e.value)


@pytest.mark.parametrize("edit,n", [(_after_end, 1), (_merged, 2)], ids=["marker_after_end", "merged_launch"])
def test_iket_events_outside_their_warp_lifetime(tmp_path, edit, n):
    with pytest.raises(CaptureError) as e:
        _normalize(tmp_path, edit)
    assert f"IKeT recorded {n} events outside their warp's lifetime; first: CTA (" in str(e.value)
    assert "site 'start'" in str(e.value) and "capture again" in str(e.value)


# ---- measurement ----

def _meas(tmp_path: Path, edit=None, resign=True) -> Path:
    doc = json.loads((FIX / "measure" / "gemm_mma.json").read_text())
    if edit:
        edit(doc)
    if resign:
        doc.update(summarize(doc["samples"]))
    p = tmp_path / "synthetic_measure.json"
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("rel", ["measure/gemm_mma.json", "gemm_mma_staged/measure.json", "cutedsl/measure.json",
                                 "cutedsl_gemm/measure.json"])
def test_real_measurements_recheck_here(rel):
    """Every committed artifact still validates; the GPU host's temporary paths are listed, not rehashed."""
    v = validate_measurement(FIX / rel, FIX.parent.parent.parent)  # relative paths: this checkout
    assert v["valid"], v["problems"]
    assert v["unchecked"] and all(u.endswith("not rehashed") for u in v["unchecked"])


def _set_latency(doc, i, value: str):
    s = doc["samples"][i]
    s["line"] = re.sub(r'"latency_ms":[^,]+', f'"latency_ms":{value}', s["line"], count=1)
    s["sample"]["latency_ms"] = float(value)


@pytest.mark.parametrize("edit,problem", [
    (lambda d: d["n"].update(baseline=9), "n {'baseline': 9, 'instrumented': 8} does not recompute"),
    (lambda d: d["samples"][1].update(argv=d["samples"][0]["argv"]), "sample 1: ran ['/tmp/"),
    (lambda d: [d["commands"].update(B=d["commands"]["A"])] + [s.update(argv=d["samples"][0]["argv"])
                                                              for s in d["samples"]],
     "the baseline and instrumented commands are the same"),
    (lambda d: _set_latency(d, 2, "Infinity"), "sample 2: latency_ms inf is not a finite positive number"),
], ids=["n", "b_ran_baseline", "a_equals_b", "infinite_latency"])
def test_measurement_field_faults(tmp_path, edit, problem):
    v = validate_measurement(_meas(tmp_path, edit, resign=False))
    assert not v["valid"] and len(v["problems"]) == 1 and v["problems"][0].startswith(problem), v["problems"]


def _blocked(doc) -> None:
    """The same samples run AAAABBBB twice instead of ABBA BAAB twice."""
    a, b = ([s for s in doc["samples"] if s["arm"] == arm] for arm in "AB")
    doc["samples"] = [{**s, "index": i} for i, s in enumerate(a[:4] + b[:4] + a[4:] + b[4:])]
    doc.update(schedule="AAAABBBB" * 2, requested={**doc["requested"], "pattern": "AAAABBBB"})


def _respelled(doc) -> None:
    """Arm B runs arm A's program, its path spelled with a `/./`."""
    prog = doc["commands"]["A"][0]
    other = prog.replace("/gemm_mma.clean", "/./gemm_mma.clean")
    doc["commands"]["B"] = [other, *doc["commands"]["A"][1:]]
    for s in doc["samples"]:
        s["argv"] = [other if s["arm"] == "B" else prog, *s["argv"][1:]]


@pytest.mark.parametrize("edit,problem", [
    (_blocked, "pattern 'AAAABBBB' gives the schedule AAAABBBBAAAABBBB: every block of four samples must be ABBA or "
               "BAAB, so that drift (clocks, temperature, other work on the machine) falls on both arms alike; a "
               "blocked schedule such as AAAABBBB lets drift pass for overhead"),
    (_respelled, "the baseline and instrumented commands run the same program (/tmp/tmp.WUicS4SaWm/gemm_mma.clean "
                 "and /tmp/tmp.WUicS4SaWm/./gemm_mma.clean are one path): that measures nothing"),
    (lambda d: d["binaries"][1].update(sha256=d["binaries"][0]["sha256"]),
     "binaries gemm_mma.clean and gemm_mma.inst have one sha256: the clean and the instrumented build are one program "
     "(rebuild the instrumented one after apply)"),
    (lambda d: _set_latency(d, 0, "1e-320"), "sample 0: latency_ms 1e-320 is below 1e-06 ms (1 ns): no launch is "
                                             "that short, so the sample's timer or unit is wrong"),
], ids=["blocked_schedule", "one_program_two_spellings", "one_build_two_binaries", "subnormal_latency"])
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # re-signed as measure used to
def test_measurement_that_measures_nothing_trustworthy(tmp_path, edit, problem):
    """Planted in the real artifact and re-signed (medians, overhead and interval recomputed, as measure
    wrote them: a subnormal baseline gives an overhead of +inf): each used to validate, and is now
    rejected by exactly one named problem."""
    v = validate_measurement(_meas(tmp_path, edit))
    assert not v["valid"] and v["problems"] == [problem], v["problems"]


def test_verdict_rejects_a_blocked_measurement(tmp_path):
    """The blocked schedule through verdict: the capture and record are of the build, the measurement
    is not evidence (it graded decision_grade)."""
    r = runner.invoke(app, ["verdict", str(FIX / "gemm_mma"), "--measurement", str(_meas(tmp_path, _blocked)),
                            "--correctness-evidence", str(_record(tmp_path)), "--root", str(tmp_path), "--json"],
                      catch_exceptions=False)
    g = json.loads(r.output)
    assert r.exit_code == 1 and g["grade"] == "rejected"
    assert g["failures"] == ["measurement: pattern 'AAAABBBB' gives the schedule AAAABBBBAAAABBBB: every block of four "
                             "samples must be ABBA or BAAB, so that drift (clocks, temperature, other work on the "
                             "machine) falls on both arms alike; a blocked schedule such as AAAABBBB lets drift pass "
                             "for overhead"]


@pytest.mark.parametrize("edit,problem", [
    (lambda d: d["samples"][3].update(line=None), "sample 3: needs arm A or B"),
    (lambda d: d.pop("requested"), "field 'requested' needs"),
], ids=["null_line", "no_requested"])
def test_malformed_measurement_is_rejected_not_crashed(tmp_path, edit, problem):
    v = validate_measurement(_meas(tmp_path, edit, resign=False))
    assert not v["valid"] and [p[:len(problem)] for p in v["problems"]] == [problem]


# ---- verdict: one build, one workload, one device ----

OK = {"valid": True, "problems": []}


def _record(tmp_path, workload=MEASURED_WORKLOAD) -> Path:
    p = tmp_path / "evaluations.jsonl"
    p.write_text(json.dumps({"sources": [{"sha256": GEMM_M.source.instrumented_sha256}],
                             "workload_identity": workload, "correctness": "passed"}) + "\n")
    return p


def _fields(g) -> list[str]:
    return [d.split(":")[0] for d in g["disagreements"]]


def test_consistent_evidence_is_decision_grade(tmp_path):
    meas = json.loads((FIX / "measure" / "gemm_mma.json").read_text())
    g = grade(GOOD_REPORT, GEMM_M, meas, OK, _record(tmp_path))
    assert g["grade"] == "decision_grade" and g["disagreements"] == []


def test_measurement_of_another_instrumented_build(tmp_path):
    """The capture of gemm_mma graded with the staged build's (real, same run) measurement: another
    instrumented source, and another binary than the one the capture's run record names."""
    meas = json.loads((FIX / "gemm_mma_staged" / "measure.json").read_text())
    g = grade(GOOD_REPORT, GEMM_M, meas, OK, _record(tmp_path))
    assert g["grade"] == "diagnostic" and _fields(g) == ["instrumented source", "binary"]


def test_measurement_of_another_workload_and_device(tmp_path):
    def unrelated(doc):
        for s in doc["samples"]:
            s["line"] = s["line"].replace(MEASURED_WORKLOAD, "other:seed=2").replace(
                s["sample"]["device_identity"]["uuid"], "GPU-other")
            s["sample"].update(workload_identity="other:seed=2", device_identity={"uuid": "GPU-other"})
    p = _meas(tmp_path, unrelated)
    v = validate_measurement(p)
    assert v["valid"]
    g = grade(GOOD_REPORT, GEMM_M, json.loads(p.read_text()), v, _record(tmp_path, "other:seed=2"))
    assert g["grade"] == "diagnostic" and _fields(g) == ["workload", "device"]


def test_measurement_without_sources(tmp_path):
    p = _meas(tmp_path, lambda d: d.update(sources=[], binaries=[]))
    v = validate_measurement(p)
    assert v["valid"]
    g = grade(GOOD_REPORT, GEMM_M, json.loads(p.read_text()), v, _record(tmp_path))
    assert g["grade"] == "diagnostic" and _fields(g) == ["instrumented source", "clean source"]


def test_record_for_another_workload(tmp_path):
    meas = json.loads((FIX / "measure" / "gemm_mma.json").read_text())
    g = grade(GOOD_REPORT, GEMM_M, meas, OK, _record(tmp_path, "gemm_bf16:M=1024:seed=1"))
    assert g["grade"] == "diagnostic" and _fields(g) == ["workload"]


def test_committed_cutedsl_pair_is_downgraded():
    """Captured at the small size on one H200, measured at n=16777216 on another: not one piece of evidence."""
    m = load_manifest(FIX / "cutedsl" / "manifest.json")
    meas_path = FIX / "cutedsl" / "measure.json"
    g = grade(validate_capture(FIX / "cutedsl", m), m, json.loads(meas_path.read_text()),
              validate_measurement(meas_path), None)
    assert g["grade"] == "diagnostic" and _fields(g) == ["workload", "device"]
    assert "'scale_add:small:seed=1'" in g["disagreements"][0] and "n=16777216" in g["disagreements"][0]


# ---- measurements re-check on another machine ----

def test_relative_paths_recheck_under_root(tmp_path):
    """measure stores paths relative to its root; validate --root finds them in another checkout."""
    from atrex_inject.measure import Request, measure
    from test_measure import cmd
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "src").mkdir(parents=True)
    (a / "src" / "k.cu").write_text("// kernel\n")
    art = measure(Request(cmd("good", 1.0), cmd("good", 1.05), 3, 7, sources=(str(a / "src" / "k.cu"),),
                          root=str(a)), tmp_path / "m.json")
    assert art["sources"][0]["path"] == "src/k.cu"
    shutil.copytree(a, b)
    v = validate_measurement(tmp_path / "m.json", b)
    assert v["valid"] and v["unchecked"] == []
    (b / "src" / "k.cu").write_text("// edited\n")
    v = validate_measurement(tmp_path / "m.json", b)
    assert not v["valid"] and "changed since the measurement" in v["problems"][0]


# ---- no tracebacks: exit 2 with a message ----

runner = CliRunner()


def test_bad_inputs_exit_2(tmp_path):
    cap = tmp_path / "cap"
    shutil.copytree(FIX / "gemm_mma", cap)
    (tmp_path / "bad.json").write_text("{not json")
    cases = [(["validate", "--measurement", tmp_path / "bad.json"], "not JSON"),
             (["verdict", cap, "--correctness-evidence", tmp_path / "nope.jsonl"],
              "cannot read the correctness evidence"),
             (["validate", cap, "--source", tmp_path / "nope.cu"], "cannot read the instrumented source")]
    for args, msg in cases:
        r = runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
        assert r.exit_code == 2 and msg in r.output, r.output
        r = runner.invoke(app, [str(a) for a in args] + ["--json"], catch_exceptions=False)
        assert r.exit_code == 2 and msg in json.loads(r.output)["error"]


def test_verdict_root_rechecks_committed_measurement(tmp_path):
    r = runner.invoke(app, ["verdict", str(FIX / "cutedsl"), "--measurement",
                            str(FIX / "cutedsl" / "measure.json"), "--root", str(tmp_path), "--json"],
                      catch_exceptions=False)
    out = json.loads(r.output)
    assert r.exit_code == 0 and out["grade"] == "diagnostic"
    assert [d.split(":")[0] for d in out["disagreements"]] == ["workload", "device"]



def test_oddly_named_capture_file_is_refused_not_crashed(tmp_path):
    """A .atrex file the recorder cannot have written (no launch number) is refused by name (exit 2,
    tests/captures/test_capture_inputs.py), not sorted in and guessed at."""
    s = Synthetic(tmp_path).save()
    (s.dir / "synthetic-launchX.atrex").write_bytes(b"")
    with pytest.raises(CaptureError, match=r"capture file 'synthetic-launchX.atrex' is not named"):
        s.validate()
