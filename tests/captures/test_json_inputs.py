"""Property: no measurement, evaluator record, sidecar or run record JSON, however damaged (keys missing, nulls,
wrong types, NaN and Infinity), makes validate or verdict raise anything but a usage error
(AtrexError: exit 2 with a message). The damaged files are synthetic copies of the real ones."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atrex_inject.cutedsl.normalize import normalize_trace
from atrex_inject.errors import AtrexError, CaptureError
from atrex_inject.grade import grade
from atrex_inject.manifest import load as load_manifest
from atrex_inject.measure import load_measurement, validate_measurement
from atrex_inject.validate import validate_capture

FIX = Path(__file__).parent.parent / "fixtures" / "h200"
M = load_manifest(FIX / "gemm_mma" / "manifest.json")
MEAS = json.loads((FIX / "measure" / "gemm_mma.json").read_text())
SIDECAR = json.loads((FIX / "gemm_mma" / "gemm_bf16-launch3.json").read_text())
RECORD = json.loads((FIX / "measure" / "evaluations.jsonl").read_text().splitlines()[0])
REPORT = validate_capture(FIX / "gemm_mma", M)
RUN = {"format": "atrex-run", "version": 1, "argv": ["gemm_mma.inst", "--iters", "10"],
       "program": MEAS["binaries"][1], "files": []}  # as if the GPU host had captured with atrex-inject capture
RESTATED = ("format", "version", "file", "kernel", "launch_seq", "grid", "block", "bytes", "source_id", "crc32")

JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 2**33) | st.text(max_size=4)
                    | st.sampled_from([float("nan"), float("inf"), float("-inf"), 0.0, -1.5]),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                    max_leaves=5)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def _slots(doc, path=()):
    """Every (container, key) in a JSON document."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        yield path + (k,)
        yield from _slots(v, path + (k,))


@st.composite
def damaged(draw, doc):
    doc = json.loads(json.dumps(doc))
    for _ in range(draw(st.integers(1, 3))):
        slots = list(_slots(doc))
        if not slots:
            break
        path = draw(st.sampled_from(slots))
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(JSON)
    return doc


def _write(p: Path, doc) -> Path:
    p.write_text(json.dumps(doc))  # NaN and Infinity are written as the bare tokens json accepts
    return p


@SETTINGS
@given(doc=damaged(MEAS), record=st.one_of(damaged(RECORD), JSON))
def test_damaged_measurement_and_record(tmp_path_factory, doc, record):
    d = tmp_path_factory.mktemp("synthetic")
    meas, ev = _write(d / "m.json", doc), _write(d / "e.jsonl", record)
    try:
        check = validate_measurement(meas)
        loaded = load_measurement(meas)
    except AtrexError:
        return
    g = grade(REPORT, M, loaded, check, ev)
    assert g["grade"] in ("decision_grade", "diagnostic", "rejected")
    if not check["valid"]:
        assert g["grade"] == "rejected"


@SETTINGS
@given(side=damaged(SIDECAR))
def test_damaged_sidecar(tmp_path_factory, side):
    d = tmp_path_factory.mktemp("synthetic") / "cap"
    shutil.copytree(FIX / "gemm_mma", d)
    _write(d / "gemm_bf16-launch3.json", side)
    r = validate_capture(d, M)
    if any(side.get(k) != SIDECAR[k] for k in RESTATED):
        assert r["verdict"] == "rejected"
    assert grade(r, M, None, None, None)["grade"] in ("diagnostic", "rejected")


@SETTINGS
@given(run=st.one_of(damaged(RUN), JSON))
def test_damaged_run_record(tmp_path_factory, run):
    """A run.json that is read is graded; one that is not is refused (exit 2), never a crash."""
    d = tmp_path_factory.mktemp("synthetic") / "cap"
    shutil.copytree(FIX / "gemm_mma", d)
    _write(d / "run.json", run)
    try:
        r = validate_capture(d, M)
    except AtrexError:
        return
    assert r["identity"]["run"]["program"]["sha256"]
    assert grade(r, M, MEAS, {"valid": True, "problems": []}, None)["grade"] == "diagnostic"


IKET_M = load_manifest(FIX / "cutedsl" / "manifest.json")


def _cta0(trace: dict) -> dict:
    """The real trace cut to CTA 0's whole records (fewer slots: the damage lands on more kinds of field)."""
    keep = {i: n for n, i in enumerate(i for i, l in enumerate(trace["locationTable"]) if l["ctaId"] == [0, 0, 0])}
    launch = trace["launches"][0]
    cut = {**launch, "markers": [{**m, "locIdx": keep[m["locIdx"]]} for m in launch["markers"] if m["locIdx"] in keep],
           "warpLifetimes": [{**w, "locIdx": keep[w["locIdx"]]} for w in launch["warpLifetimes"] if w["locIdx"] in keep],
           "ranges": [{**r, "warpLocIdxs": [keep[i] for i in r["warpLocIdxs"]]} for r in launch["ranges"]
                      if all(i in keep for i in r["warpLocIdxs"])]}
    return {**trace, "locationTable": [trace["locationTable"][i] for i in keep], "launches": [cut]}


IKET_TRACE = _cta0(json.loads((FIX / "cutedsl" / "iket_trace.cta0-7.json").read_text()))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(trace=damaged(IKET_TRACE))
def test_damaged_iket_trace(tmp_path_factory, trace):
    """run-iket's decoded JSON, damaged: normalizing it refuses with a CaptureError or writes files that
    validate without raising."""
    d = tmp_path_factory.mktemp("synthetic")
    try:
        normalize_trace(_write(d / "trace.json", trace), IKET_M, d, "w", {"uuid": "GPU-x"})
    except CaptureError:
        return
    validate_capture(d, IKET_M)
