"""Evidence grades, case by case, on the real H200 measurement and capture."""
from __future__ import annotations

import json
from pathlib import Path

from atrex_inject.grade import grade
from atrex_inject.validate import validate_capture

FIX = Path(__file__).parent / "fixtures" / "h200"
M = json.loads((FIX / "gemm_mma" / "manifest.json").read_text())
MEAS = json.loads((FIX / "measure" / "gemm_mma.json").read_text())
OK_CHECK = {"valid": True, "problems": []}  # the artifact's binaries live on the GPU host; validated there
GOOD_REPORT = validate_capture(FIX / "gemm_mma", M)


def evidence(tmp_path, **override) -> Path:
    rec = {"sources": [{"path": "gemm_mma.cu", "sha256": M["source"]["instrumented_sha256"]}],
           "workload_identity": MEAS["samples"][0]["sample"]["workload_identity"], "correctness": "passed"}
    rec.update(override)
    p = tmp_path / "evaluations.jsonl"
    p.write_text("not json\n" + json.dumps(rec) + "\n")
    return p


def test_decision_grade(tmp_path):
    g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, evidence(tmp_path))
    assert g["grade"] == "decision_grade" and not g["missing"] and not g["failures"]


def test_self_declared_correctness_is_only_a_note(tmp_path):
    g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, None, self_declared="passed")
    assert g["grade"] == "diagnostic" and any("correctness record" in x for x in g["missing"])
    assert g["notes"] and "exploration note" in g["notes"][0]


def test_record_must_match_source_and_workload(tmp_path):
    g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, evidence(tmp_path, workload_identity="other"))
    assert g["grade"] == "diagnostic"
    g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, evidence(tmp_path, sources=[{"sha256": "0" * 64}]))
    assert g["grade"] == "diagnostic"
    g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, evidence(tmp_path, correctness="failed"))
    assert g["grade"] == "diagnostic"


def test_overhead_above_target(tmp_path):
    g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, evidence(tmp_path), target=0.01)
    assert g["grade"] == "diagnostic" and any("above the 1% target" in x for x in g["missing"])
    g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, evidence(tmp_path), target=0.01, hard_threshold=True)
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
