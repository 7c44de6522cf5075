"""What the benchmarks that time a clean build against an instrumented one share: one
`atrex-inject measure` of a pair (fresh processes, ABBA then BAAB) as a result row, the first capture
of its recording arm validated, the device's identity, and how a row reads against its target.
bench/perturbation/run.py and bench/realkernels/run.py import it (their folder's parent on sys.path)."""
from __future__ import annotations

import subprocess
from pathlib import Path

from atrex_inject import measure as ms
from atrex_inject.errors import AtrexError
from atrex_inject.manifest import load as load_manifest
from atrex_inject.validate import validate_dir

OFF_TARGET = 0.005  # probes compiled in and off: within ±0.5%


def measure_pair(clean: list[str], instrumented: list[str], warmup: int, iterations: int, samples: int, out: Path,
                 capture: Path | None = None, manifest: Path | None = None, timeout_s: float = 300.0) -> dict:
    """Clean (A) against instrumented (B), `samples` fresh processes a side; B records into `capture`
    when given (else its probes stay off), and the first capture is validated against `manifest`.
    The row: overhead, its 95% interval, sample counts, medians, valid, reasons[, capture]."""
    req = ms.Request(clean, instrumented, warmup, iterations, "ABBA,BAAB", max(1, samples // 4), timeout_s,
                     capture_dir=str(capture) if capture else None)
    art = ms.measure(req, out)
    row = {"overhead": art.get("overhead"), "ci95": art.get("overhead_ci95"),
           "samples": {"A": sum(s["arm"] == "A" for s in art["samples"]),
                       "B": sum(s["arm"] == "B" for s in art["samples"])},
           "median_ms": art.get("median_ms"), "valid": art["valid"], "reasons": art["reasons"]}
    if capture and manifest and art["valid"]:
        row["capture"] = validate_capture(sorted(capture.iterdir())[0], manifest)
    return row


def validate_capture(folder: Path, manifest: Path) -> dict:
    """validate's verdict on one capture folder: verdict, events, the checks that failed and what
    each said (its first details: a rejection must be diagnosable from the results file alone)."""
    try:
        report, launches = validate_dir(folder, load_manifest(manifest))
        failed = [c for c in report["checks"] if not c["ok"]]
        return {"verdict": report["verdict"], "events": sum(l.n_events for l in launches),
                "failed": [c["name"] for c in failed],
                "details": {c["name"]: [d[:600] for d in c.get("details", [])[:3]] for c in failed}}
    except AtrexError as e:
        return {"verdict": "rejected", "events": 0, "failed": [str(e)]}


def device() -> str:
    """nvidia-smi's name, UUID and driver of the GPU, or "unknown"."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,uuid,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        return out or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def pct(v) -> str:
    return "-" if v is None else f"{100 * v:+.2f}%"


def ci(c) -> str:
    return "-" if not c else f"[{100 * c[0]:+.2f}, {100 * c[1]:+.2f}]"


def met(r: dict) -> str:
    """Whether a row meets its target, two-sided, interval included."""
    if r.get("overhead") is None or not r.get("valid"):
        return "not measured"
    if abs(r["overhead"]) > r["target"]:
        return "NOT met"
    return "met" if r["ci95"] and max(abs(r["ci95"][0]), abs(r["ci95"][1])) <= r["target"] else "met (point)"
