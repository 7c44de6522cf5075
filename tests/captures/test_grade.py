"""Evidence grades, case by case, on the real H200 measurement and capture."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from atrex_inject.cli import app
from atrex_inject.errors import AtrexError
from atrex_inject.grade import grade
from atrex_inject.manifest import load as load_manifest
from atrex_inject.measure import summarize
from atrex_inject.report import write_report
from atrex_inject.validate import validate_capture

FIX = Path(__file__).parent.parent / "fixtures" / "h200"
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


# ---- strict readings: a failed record outweighs passed ones; the target is two-sided ----

def records(tmp_path, *overrides: dict) -> Path:
    """An evaluator file of several records of the measured build and workload (synthetic)."""
    base = {"sources": [{"path": "gemm_mma.cu", "sha256": M.source.instrumented_sha256}],
            "workload_identity": MEASURED_WORKLOAD, "correctness": "passed"}
    p = tmp_path / "evaluations.jsonl"
    p.write_text("".join(json.dumps({**base, **o}) + "\n" for o in overrides))
    return p


def test_a_failed_record_of_the_measured_build_and_workload_outweighs_passed_ones(tmp_path):
    """Both a passed and a failed record of the build and workload: the failed one is a correctness
    failure, in either order (the passed one used to be taken: decision_grade)."""
    for order in ([{}, {"correctness": "failed"}], [{"correctness": "failed"}, {}]):
        g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, records(tmp_path, *order))
        assert g["grade"] == "diagnostic" and not g["missing"] and not g["failures"], g
        assert g["disagreements"] == [
            f"correctness: 1 of the 2 records in {tmp_path / 'evaluations.jsonl'} of this build and workload say "
            "correctness 'failed', not 'passed': the kernel gave a wrong result at least once, whatever the passed "
            "records say (fix it, which gives a new build to evaluate; if the evaluator was wrong, remove its failed "
            "record)"]


def test_a_record_without_a_passed_verdict_counts_as_failed_and_other_workloads_do_not(tmp_path):
    """Any correctness other than 'passed' (here none at all) of this build and workload is a failure;
    a failed record of another workload says nothing about the measured one."""
    g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, records(tmp_path, {}, {"correctness": None}))
    assert g["grade"] == "diagnostic" and "say correctness not recorded, not 'passed'" in g["disagreements"][0]
    other_workload = {"correctness": "failed", "workload_identity": "x"}
    g = grade(GOOD_REPORT, M, MEAS, OK_CHECK, records(tmp_path, {}, other_workload))
    assert g["grade"] == "decision_grade", g


def planted_overhead(overhead: float) -> dict:
    """The real gemm_mma measurement with every instrumented latency scaled to give `overhead`, its
    raw lines and summary re-signed so that it validates (synthetic)."""
    factor = (1 + overhead) * MEAS["median_ms"]["baseline"] / MEAS["median_ms"]["instrumented"]
    doc = json.loads(json.dumps(MEAS))
    for s in doc["samples"]:
        if s["arm"] == "B":
            old = s["sample"]["latency_ms"]
            s["sample"]["latency_ms"] = round(old * factor, 6)
            s["line"] = s["line"].replace(f'"latency_ms":{old}', f'"latency_ms":{s["sample"]["latency_ms"]}')
    doc.update(summarize(doc["samples"]))
    return doc


def test_a_recording_much_faster_than_the_clean_build_is_another_kernel(tmp_path):
    """-14% against the default 10% target: at most diagnostic, naming the cause; rejected with
    --hard-threshold. It used to grade decision_grade, even with --hard-threshold."""
    meas = planted_overhead(-0.14)
    assert f"{meas['overhead']:+.2%}" == "-14.00%"
    g = grade(GOOD_REPORT, M, meas, OK_CHECK, evidence(tmp_path))
    assert g["grade"] == "diagnostic" and not g["disagreements"] and not g["failures"]
    assert g["missing"] == [
        f"overhead {meas['overhead']:+.2%}: the instrumented build runs faster than the clean one by more than the 10% "
        "target, so the recording run is another kernel (other registers, instruction schedule or occupancy than the "
        "clean build) and its timeline does not describe the clean kernel; run `atrex-inject check-sass SPEC` to see "
        "what the probes changed, then pick another recorder or density"]
    g = grade(GOOD_REPORT, M, meas, OK_CHECK, evidence(tmp_path), hard_threshold=True)
    assert g["grade"] == "rejected" and "the recording run is another kernel" in g["failures"][0]


def test_the_target_is_two_sided_and_within_it_either_way_passes(tmp_path):
    """+14% is above the target; -9% and +9% are within it."""
    slow = planted_overhead(0.14)
    g = grade(GOOD_REPORT, M, slow, OK_CHECK, evidence(tmp_path))
    assert g["grade"] == "diagnostic" and g["missing"] == [f"overhead {slow['overhead']:+.2%} is above the 10% target"]
    assert grade(GOOD_REPORT, M, slow, OK_CHECK, evidence(tmp_path), hard_threshold=True)["grade"] == "rejected"
    for overhead in (-0.09, 0.09):
        assert grade(GOOD_REPORT, M, planted_overhead(overhead), OK_CHECK, evidence(tmp_path))["grade"] == \
            "decision_grade"


def test_a_target_that_would_pass_everything_is_refused(tmp_path):
    for target in (float("nan"), 0.0, -0.1, float("inf")):
        with pytest.raises(AtrexError, match="must be a positive fraction"):
            grade(GOOD_REPORT, M, MEAS, OK_CHECK, evidence(tmp_path), target=target)


def test_verdict_and_report_say_a_much_faster_recording_is_another_kernel(tmp_path):
    """The planted -14% measurement through the commands: verdict grades it diagnostic and, with
    --hard-threshold, rejects it (exit 1); the report's grade names the cause."""
    meas = tmp_path / "synthetic_measurement.json"
    meas.write_text(json.dumps(planted_overhead(-0.14)))
    args = ["verdict", str(FIX / "gemm_mma"), "--measurement", str(meas), "--correctness-evidence",
            str(evidence(tmp_path)), "--root", str(tmp_path)]
    r = CliRunner().invoke(app, args + ["--json"], catch_exceptions=False)
    g = json.loads(r.output)
    assert r.exit_code == 0 and g["grade"] == "diagnostic" and "the recording run is another kernel" in g["missing"][0]
    r = CliRunner().invoke(app, args + ["--hard-threshold"], catch_exceptions=False)
    assert r.exit_code == 1 and "grade: rejected" in r.output and "failure: overhead -14.00%: the instrumented build " \
                                                                     "runs faster" in r.output.replace("\n", " ")
    out = write_report(FIX / "gemm_mma", tmp_path / "report.html", None, meas, evidence(tmp_path), root=tmp_path)
    assert out["grade"] == "diagnostic"
    assert "the recording run is another kernel" in (tmp_path / "report.html").read_text()
