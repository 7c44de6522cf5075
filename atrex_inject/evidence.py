"""The evidence a reviewer judges, gathered once: the capture's validation (and the launches it
decoded), the measurement's recheck, and the grade. `verdict` prints it; `report` renders it."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .decode import Launch
from .errors import AtrexError
from .grade import DEFAULT_TARGET, grade
from .measure import validate_measurement
from .validate import Provenance, validate_dir


@dataclass
class Evidence:
    manifest: dict
    capture: dict | None  # the validation report, summaries included
    launches: list[Launch]
    measurement: dict | None  # the artifact as written by `measure`
    measurement_check: dict | None
    grade: dict


def gather(capture_dir: Path | None, manifest: dict, measurement: Path | None = None, evidence: Path | None = None,
           correctness: str | None = None, target: float = DEFAULT_TARGET, hard_threshold: bool = False,
           source: Path | None = None) -> Evidence:
    for path, what in ((measurement, "measurement artifact"), (evidence, "correctness records")):
        if path is not None and not Path(path).is_file():
            raise AtrexError(f"{what} {path} does not exist",
                             hint="give the file `atrex-inject measure --out` or the evaluator wrote")
    capture, launches = validate_dir(capture_dir, manifest, Provenance(source=source)) if capture_dir else (None, [])
    check = validate_measurement(measurement) if measurement else None
    art = json.loads(Path(measurement).read_text()) if measurement else None
    g = grade(capture, manifest, art, check, evidence, correctness, target, hard_threshold)
    return Evidence(manifest, capture, launches, art, check, g)
