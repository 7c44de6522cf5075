"""Evidence grade: decision_grade / diagnostic / rejected (docs/measure.md says when each is given).

decision_grade needs all three, and all three about one build: a valid capture, a valid
measurement whose overhead is within the target, and a correctness record from the user's
evaluator (JSONL). The capture's manifest and sidecars name the instrumented and clean source
hashes, the workload and the device; the measurement must have hashed both sources (arm A the
clean one, arm B the instrumented one) and sampled that workload on that device; the record must
name the instrumented source and that workload. When the capture recorded its program (run.json)
and the measurement hashed binaries, arm B must have run that program; where either side has no
binary hash the binary is not bound, which is a note, not a downgrade (evidence recorded before run
records grades as it did). Any field that disagrees is named and makes the grade diagnostic. A
self-declared "correctness passed" is kept as a note and never counts. A missing piece makes the
grade diagnostic (with the reasons); any factual failure makes it rejected.

Two rules are strict by choice: the target is two-sided (a recording more than the target faster
than the clean build is another kernel, not a cheap probe), and one record of the measured build and
workload whose correctness is not "passed" outweighs any number of passed ones.
"""
from __future__ import annotations

import json
from pathlib import Path

from .errors import AtrexError
from .manifest import Manifest
from .validate import said

DEFAULT_TARGET = 0.10


def _short(h) -> str:
    return f"{h[:16]}…" if isinstance(h, str) else repr(h)


def read_records(evidence: Path) -> tuple[list[dict], int]:
    """The evaluator's JSON object lines, and how many lines were not one."""
    try:
        lines = Path(evidence).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise AtrexError(f"cannot read the correctness evidence: {getattr(e, 'strerror', None) or e}",
                         path=str(evidence), hint="pass the JSONL file your evaluator appends its records to") from None
    records, bad = [], 0
    for line in filter(str.strip, lines):
        try:
            r = json.loads(line)
        except ValueError:
            r = None
        if isinstance(r, dict):
            records.append(r)
        else:
            bad += 1
    return records, bad


def record_shas(r: dict) -> set[str]:
    src = r.get("sources")
    return {s["sha256"] for s in src if isinstance(s, dict) and isinstance(s.get("sha256"), str)} \
        if isinstance(src, list) else set()


def measurement_identity(measurement: dict) -> dict:
    """Workload and device of a validated measurement (every sample agrees: measure checks drift)."""
    s = next(s["sample"] for s in measurement["samples"] if s["sample"])
    return {"workload": s["workload_identity"], "device": s["device_identity"]["uuid"],
            "sources": [h["sha256"] for h in measurement.get("sources", [])],
            "binaries": [h["sha256"] for h in measurement.get("binaries", [])]}


def source_disagreements(capture: dict, sources: list[str]) -> list[str]:
    """Which of the capture's two sources (its clean and instrumented sha256) the measurement's
    hashed sources lack: a measurement belongs to a capture only when it hashed both."""
    return [f"{what} source: the capture's build has sha256 {_short(capture[key])}, the measurement hashed "
            f"{', '.join(map(_short, sources)) or 'no sources'} (arm {arm} must be this build: measure with "
            "--source CLEAN --source INSTRUMENTED)"
            for arm, key, what in (("B", "instrumented_sha256", "instrumented"), ("A", "clean_sha256", "clean"))
            if capture[key] not in sources]


def _disagreements(capture: dict, meas: dict | None) -> list[str]:
    """Which field of the measurement names another build, workload or device than the capture."""
    if meas is None:
        return []
    out = source_disagreements(capture, meas["sources"])
    for key, how in (("workload", "ATREX_WORKLOAD set to the workload identity the program prints"),
                     ("device", "both on the same GPU")):
        if capture.get(key) != meas[key]:
            out.append(f"{key}: the capture says {said(capture.get(key))}, the measurement {meas[key]!r} (capture and "
                       f"measure the same build, with {how})")
    return out


def _binary(capture: dict, meas: dict) -> tuple[list[str], list[str]]:
    """(disagreements, notes) about the program: arm B must have run the one the capture ran."""
    ran = (capture.get("run") or {}).get("program")
    if ran is None or not meas["binaries"]:
        why = ("the capture has no run record (run.json: capture with atrex-inject capture)" if ran is None
               else "the measurement hashed no binaries (measure --binary)")
        return [], [f"binary not bound: {why}, so nothing shows that arm B ran the captured program"]
    if ran["sha256"] in meas["binaries"]:
        return [], []
    return [f"binary: the capture ran {ran['path']} with sha256 {_short(ran['sha256'])}, the measurement hashed "
            f"{', '.join(map(_short, meas['binaries']))} (arm B must run the captured program: measure with "
            f"--binary {ran['path']}, or capture the binary that was measured)"], []


def _record_problem(records: list[dict], capture: dict, workload, evidence: Path) -> tuple[str, str] | None:
    """(the grade's list it goes in, the reason) when the evaluator's records do not show this build
    correct on this workload. A record of this build and workload whose correctness is not "passed"
    is a correctness failure whatever the other records say (the strict ranking)."""
    sha = capture["instrumented_sha256"]
    mine = [r for r in records if sha in record_shas(r)]
    same = [r for r in mine if workload is not None and r.get("workload_identity") == workload]
    failed = [r for r in same if r.get("correctness") != "passed"]
    if failed:
        values = ", ".join(sorted({said(r.get("correctness")) for r in failed}))
        return "disagreements", (f"correctness: {len(failed)} of the {len(same)} records in {evidence} of this build "
                                 f"and workload say correctness {values}, not 'passed': the kernel gave a wrong result "
                                 "at least once, whatever the passed records say (fix it, which gives a new build to "
                                 "evaluate; if the evaluator was wrong, remove its failed record)")
    if not any(r.get("correctness") == "passed" for r in records):
        return "missing", f"no passed record in {evidence}"
    passed = [r for r in mine if r.get("correctness") == "passed"]
    if not passed:
        return "missing", (f"no passed record in {evidence} names the instrumented source {_short(sha)} (run the "
                           "evaluator on the instrumented build)")
    if not same:  # none failed, so none of this build and workload passed either: there is none
        seen = sorted({repr(r.get("workload_identity")) for r in passed})
        return "disagreements", (f"workload: the evaluator's records say {', '.join(seen)}, the evidence is about "
                                 f"{workload!r}")
    return None


def check_target(target: float) -> None:
    """The overhead target is a positive fraction (0.10 = 10%); nan or 0 would pass every overhead."""
    if not (isinstance(target, (int, float)) and 0 < target < float("inf")):
        raise AtrexError(f"--target {target} must be a positive fraction (0.10 = 10%)",
                         hint="the overhead may lie within that fraction of the clean build's time, either way")


def overhead_problem(overhead: float, target: float) -> str | None:
    """Why an overhead is beyond the target, either way, or None. Faster by more than the target is
    not a cheap probe: the instrumented build compiled into another kernel."""
    if overhead > target:
        return f"overhead {overhead:+.2%} is above the {target * 100:g}% target"
    if overhead < -target:
        return (f"overhead {overhead:+.2%}: the instrumented build runs faster than the clean one by more than the "
                f"{target * 100:g}% target, so the recording run is another kernel (other registers, instruction "
                "schedule or occupancy than the clean build) and its timeline does not describe the clean kernel; "
                "run `atrex-inject check-sass SPEC` to see what the probes changed, then pick another recorder or "
                "density")
    return None


def grade(capture_report: dict | None, manifest: Manifest, measurement: dict | None, measurement_check: dict | None,
          evidence: Path | None, self_declared: str | None = None, target: float = DEFAULT_TARGET,
          hard_threshold: bool = False) -> dict:
    check_target(target)
    failures, missing, notes = [], [], []
    capture = (capture_report or {}).get("identity") or {
        "instrumented_sha256": manifest.source.instrumented_sha256, "clean_sha256": manifest.source.clean_sha256}
    if capture_report is None:
        missing.append("no capture validation")
    elif capture_report["verdict"] != "valid":
        failures += [f"capture check {c['name']} failed: {c['details'][0] if c['details'] else c['count']}"
                     for c in capture_report["checks"] if not c["ok"]]
    meas = None
    if measurement is None:
        missing.append("no perturbation measurement")
    elif not measurement_check or not measurement_check["valid"]:
        failures += [f"measurement: {p}" for p in (measurement_check or {}).get("problems", ["not validated"])]
    else:
        meas = measurement_identity(measurement)
        notes += [f"measurement {u}" for u in measurement_check.get("unchecked", [])]
        beyond = overhead_problem(measurement["overhead"], target)
        if beyond:
            (failures if hard_threshold else missing).append(beyond)
    disagree = _disagreements(capture, meas) if capture_report is not None else []
    if capture_report is not None and meas is not None:
        wrong, unbound = _binary(capture, meas)
        disagree += wrong
        notes += unbound
    workload = meas["workload"] if meas else capture.get("workload")
    if evidence is None:
        missing.append("no correctness record from the evaluator (--correctness-evidence)")
    else:
        records, bad = read_records(evidence)
        if bad:
            notes.append(f"{bad} lines of {evidence} are not JSON records (skipped)")
        why = _record_problem(records, capture, workload, evidence)
        if why:
            {"missing": missing, "disagreements": disagree}[why[0]].append(why[1])
    if self_declared:
        notes.append(f"self-declared correctness {self_declared!r} is an exploration note, not evidence")
    g = "rejected" if failures else "diagnostic" if missing or disagree else "decision_grade"
    return {"grade": g, "failures": failures, "missing": missing, "disagreements": disagree, "notes": notes,
            "target": target, "identity": {"capture": capture, "measurement": meas},
            "overhead": measurement.get("overhead") if isinstance(measurement, dict) else None,
            "overhead_ci95": measurement.get("overhead_ci95") if isinstance(measurement, dict) else None}
