"""Evidence grade: decision_grade / diagnostic / rejected (DESIGN.md, "Evidence grade").

decision_grade needs all three: a valid capture, a valid measurement whose overhead is within
the target, and a correctness record from the user's evaluator (JSONL) that matches the
instrumented or clean source hash and the measured workload. A self-declared "correctness
passed" is kept as a note and never counts. A missing piece makes the grade diagnostic (with the
reasons); any factual failure makes it rejected.
"""
from __future__ import annotations

import json
from pathlib import Path

DEFAULT_TARGET = 0.10


def matching_records(evidence: Path, hashes: set[str], workload: str | None) -> list[dict]:
    out = []
    for line in Path(evidence).read_text().splitlines():
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except ValueError:
            continue
        shas = {s.get("sha256") for s in r.get("sources", []) if isinstance(s, dict)}
        if r.get("correctness") == "passed" and shas & hashes and workload is not None \
                and r.get("workload_identity") == workload:
            out.append(r)
    return out


def grade(capture_report: dict | None, manifest: dict, measurement: dict | None, measurement_check: dict | None,
          evidence: Path | None, self_declared: str | None = None, target: float = DEFAULT_TARGET,
          hard_threshold: bool = False) -> dict:
    failures, missing, notes = [], [], []
    if capture_report is None:
        missing.append("no capture validation")
    elif capture_report["verdict"] != "valid":
        failures += [f"capture check {c['name']} failed: {c['details'][0] if c['details'] else c['count']}"
                     for c in capture_report["checks"] if not c["ok"]]
    workload = None
    if measurement is None:
        missing.append("no perturbation measurement")
    elif not measurement_check or not measurement_check["valid"]:
        failures += [f"measurement: {p}" for p in (measurement_check or {}).get("problems", ["not validated"])]
    else:
        workload = next(s["sample"]["workload_identity"] for s in measurement["samples"] if s["sample"])
        if measurement["overhead"] > target:
            msg = f"overhead {measurement['overhead']:+.2%} is above the {target:.0%} target"
            (failures if hard_threshold else missing).append(msg)
    hashes = {manifest["source"]["instrumented_sha256"], manifest["source"]["clean_sha256"]}
    if evidence is None:
        missing.append("no correctness record from the evaluator (--correctness-evidence)")
    elif not matching_records(evidence, hashes, workload):
        missing.append(f"no passed record in {evidence} matches the source hashes and workload {workload!r}")
    if self_declared:
        notes.append(f"self-declared correctness {self_declared!r} is an exploration note, not evidence")
    g = "rejected" if failures else "diagnostic" if missing else "decision_grade"
    return {"grade": g, "failures": failures, "missing": missing, "notes": notes, "target": target,
            "overhead": measurement.get("overhead") if measurement else None,
            "overhead_ci95": measurement.get("overhead_ci95") if measurement else None}
