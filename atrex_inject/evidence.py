"""The evidence a reviewer judges, gathered once: the capture's validation (and the launches it
decoded), the measurement's recheck, and the grade. `verdict` grades it; `report` renders it."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import manifest as mf
from .decode import PART_EVENTS, Launch
from .errors import AtrexError
from .grade import DEFAULT_TARGET, check_target, grade, read_records
from .manifest import Manifest
from .measure import load_measurement, validate_measurement
from .validate import Provenance, validate_dir


@dataclass
class Evidence:
    manifest: Manifest
    capture: dict | None  # the validation report, summaries included
    launches: list[Launch]
    measurement: dict | None  # the artifact as written by `measure`
    measurement_check: dict | None
    grade: dict


def gather(capture_dir: Path | None, manifest: Manifest, measurement: Path | None = None, evidence: Path | None = None,
           correctness: str | None = None, target: float = DEFAULT_TARGET, hard_threshold: bool = False,
           source: Path | None = None, root: Path | None = None, keep_launches: bool = True) -> Evidence:
    """`root`: what the measurement's relative paths resolve against (validate_measurement).
    keep_launches=False validates the capture part by part (memory bounded by a part, for captures
    larger than memory) and returns no launches: enough for a grade, not for a picture or trace."""
    # the options are checked and the files read (a missing or unreadable one is a usage error) before the
    # capture is validated
    check_target(target)
    art = load_measurement(measurement) if measurement else None
    if evidence is not None:
        read_records(evidence)
    capture, launches = (validate_dir(capture_dir, manifest, Provenance(source=source), None,
                                      None if keep_launches else PART_EVENTS) if capture_dir else (None, []))
    check = validate_measurement(measurement, root) if measurement else None
    g = grade(capture, manifest, art, check, evidence, correctness, target, hard_threshold)
    return Evidence(manifest, capture, launches, art, check, g)


def verdict(capture_dir: Path | None, manifest: Path | None = None, measurement: Path | None = None,
            evidence: Path | None = None, correctness: str | None = None, target: float = DEFAULT_TARGET,
            hard_threshold: bool = False, source: Path | None = None, root: Path | None = None) -> dict:
    """`atrex-inject verdict`: the grade (grade.grade's dict) of a capture folder, or of the manifest
    alone when there is no capture. The capture is validated part by part (memory bounded)."""
    if capture_dir is None and manifest is None:
        raise AtrexError("verdict needs a CAPTURE_DIR (with its manifest) or --manifest")
    m = mf.for_capture(capture_dir or manifest.parent, manifest)
    return gather(capture_dir, m, measurement, evidence, correctness, target, hard_threshold, source, root,
                  keep_launches=False).grade
