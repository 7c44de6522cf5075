"""`validate` of several captures on one axis (docs/validate.md, "Several captures"): each capture
as `validate` checks it alone, and the checks only their union can fail:

- `one_run`: the captures are of one program's run: one workload (the sidecars' ATREX_WORKLOAD);
  captures of one spec (ranks of one program) of one instrumented source;
- `alignment`: two calibrations of one device agree within their bounds (one device's timer has
  one offset to the host clock: a disagreement is the calibration's error, not the device's);
- `causality`: the declarations whose producer is another spec's capture (causality.py); each
  capture's own are checked in its own report.
"""
from __future__ import annotations

from dataclasses import asdict
from itertools import combinations

import numpy as np

from . import causality
from .captureset import Timeline
from .checks import Check
from .progress import step
from .validate import validate_capture

TIMELINE_CHECKS = ("one_run", "alignment", "causality")
NEXT_STEP = {
    "one_run": "validate captures of one run together: capture every kernel, rank and device of the program in one "
               "run, with one ATREX_WORKLOAD and one build",
    "alignment": "calibrate again (atrex-inject capture --calibrate): the bound each calibration states does not "
                 "hold between them",
    "causality": causality.HINT,
}


def _one_run(tl: Timeline, check: Check) -> None:
    workloads = sorted({m.workload for m in tl.members})
    check.fail(len(workloads) > 1, "the captures ran different workloads: " + "; ".join(
        f"{w or '(none)'}: " + ", ".join(str(m.folder) for m in tl.members if m.workload == w) for w in workloads))
    for name in sorted({m.manifest.name for m in tl.members}):
        ids = {m.manifest.source.source_id for m in tl.by_spec(name)}
        check.fail(len(ids) > 1, f"the captures of spec {name!r} are of {len(ids)} instrumented sources (source "
                                 f"ids {', '.join(sorted(i[:12] for i in ids))})")


def _alignment(tl: Timeline, check: Check) -> None:
    """Each pair of calibrations of one device, compared at the middle of the first one's span."""
    aligned = [m for m in tl.members if m.alignment]
    for a, b in combinations(aligned, 2):
        if a.device_uuid != b.device_uuid:
            continue
        t = np.array([(a.alignment.start.gpu_ns + a.alignment.end.gpu_ns) // 2])
        gap = abs(int(a.alignment.shift_ns(t)[0]) - int(b.alignment.shift_ns(t)[0]))
        bound = a.alignment.error_ns(t) + b.alignment.error_ns(t)
        check.fail(gap > bound, f"{a.folder} and {b.folder} calibrate device {a.device_uuid} {gap:.0f} ns apart, "
                                f"beyond their bounds' sum of {bound:.0f} ns")


def validate_timeline(tl: Timeline) -> dict:
    """{"verdict", "axis", "captures": [each capture's validate report, with its folder],
    "checks": the timeline's named checks, "handoffs", "notes"}; valid only if every capture is
    and every timeline check passes."""
    reports = []
    for m, about in zip(tl.members, tl.to_json()["captures"]):
        step(f"validating {m.folder}")
        reports.append({**about, **validate_capture(m.folder, m.manifest, with_summaries=False)})
    checks = {n: Check(n, hint=NEXT_STEP[n]) for n in TIMELINE_CHECKS}
    _one_run(tl, checks["one_run"])
    _alignment(tl, checks["alignment"])
    handoffs, notes = causality.check_timeline(tl, checks["causality"], own=False)
    valid = all(r["verdict"] == "valid" for r in reports) and all(c.ok for c in checks.values())
    return {"verdict": "valid" if valid else "rejected", **tl.to_json(), "captures": reports,
            "checks": [{**asdict(c), "ok": c.ok} for c in checks.values()], "handoffs": handoffs, "notes": notes}
