"""Evidence grades, case by case, on the real H200 measurement and capture."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from atrex_inject.grade import grade
from atrex_inject.manifest import load as load_manifest
from atrex_inject.validate import validate_capture

FIX = Path(__file__).parent / "fixtures" / "h200"
M = load_manifest(FIX / "gemm_mma" / "manifest.json")
MEAS = json.loads((FIX / "measure" / "gemm_mma.json").read_text())
OK_CHECK = {"valid": True, "problems": []}  # the artifact's binaries live on the GPU host; validated there
MEASURED_WORKLOAD = MEAS["samples"][0]["sample"]["workload_identity"]


def _relabelled(workload: str) -> dict:
    """The real gemm_mma capture with its sidecar's workload label replaced (synthetic)."""
    d = Path(tempfile.mkdtemp()) / "synthetic_gemm_mma"
    shutil.copytree(FIX / "gemm_mma", d)
    side = next(d.glob("*-launch*.json"))
    side.write_text(json.dumps({**json.loads(side.read_text()), "workload": workload}))
    r = validate_capture(d, M)
    shutil.rmtree(d.parent)
    return r


GOOD_REPORT = validate_capture(FIX / "gemm_mma", M)  # capture, measurement and record of one build


def evidence(tmp_path, **override) -> Path:
    rec = {"sources": [{"path": "gemm_mma.cu", "sha256": M.source.instrumented_sha256}],
           "workload_identity": MEASURED_WORKLOAD, "correctness": "passed"}
    rec.update(override)
    p = tmp_path / "evaluations.jsonl"
    p.write_text("not json\n" + json.dumps(rec) + "\n")
    return p


def test_decision_grade(tmp_path):
    g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, evidence(tmp_path))
    assert g["grade"] == "decision_grade" and not g["missing"] and not g["failures"]


def test_a_workload_label_that_differs_is_named():
    """A capture labelled with another workload than the measured program printed is not bound to
    the measurement: the grade names the field (synthetic relabel of the real capture)."""
    g = grade(_relabelled("gemm_mma:seed=1"), M, MEAS, OK_CHECK, FIX / "measure" / "evaluations.jsonl")
    assert g["grade"] == "diagnostic" and not g["missing"] and not g["failures"]
    assert [d.split(":")[0] for d in g["disagreements"]] == ["workload"]
    assert "'gemm_mma:seed=1'" in g["disagreements"][0] and MEASURED_WORKLOAD in g["disagreements"][0]


def test_the_committed_evidence_is_decision_grade():
    """The suite's real capture, measurement and evaluator record of one build grade decision_grade."""
    g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, FIX / "measure" / "evaluations.jsonl")
    assert g["grade"] == "decision_grade" and not g["disagreements"], g


def test_self_declared_correctness_is_only_a_note(tmp_path):
    g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, None, self_declared="passed")
    assert g["grade"] == "diagnostic" and any("correctness record" in x for x in g["missing"])
    assert [n for n in g["notes"] if "exploration note" in n] == [
        "self-declared correctness 'passed' is an exploration note, not evidence"]


def test_record_must_match_source_and_workload(tmp_path):
    g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, evidence(tmp_path, workload_identity="other"))
    assert g["grade"] == "diagnostic"
    g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, evidence(tmp_path, sources=[{"sha256": "0" * 64}]))
    assert g["grade"] == "diagnostic"
    g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, evidence(tmp_path, correctness="failed"))
    assert g["grade"] == "diagnostic"


def test_overhead_above_target(tmp_path):
    target = 0.002  # under the fixture's measured overhead
    assert MEAS["overhead"] > target
    g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, evidence(tmp_path), target=target)
    assert g["grade"] == "diagnostic" and any("above the 0.2% target" in x for x in g["missing"])
    g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, evidence(tmp_path), target=target, hard_threshold=True)
    assert g["grade"] == "rejected"


def test_missing_measurement_or_capture(tmp_path):
    assert grade(GOOD_REPORT, M, None, None, evidence(tmp_path))["grade"] == "diagnostic"
    assert grade(None, M, MEAS, OK_CHECK, evidence(tmp_path))["grade"] == "diagnostic"


def test_factual_failures_reject(tmp_path):
    bad = {**GOOD_REPORT, "verdict": "rejected",
           "checks": [{"name": "overflow", "ok": False, "count": 1, "details": ["owner 3"]}]}
    assert grade(bad, M, MEAS, OK_CHECK, evidence(tmp_path))["grade"] == "rejected"
    g = grade(GOOD_REPORT, M, MEAS, {"valid": False, "problems": ["binary changed"]}, evidence(tmp_path))
    assert g["grade"] == "rejected" and "binary changed" in g["failures"][0]
