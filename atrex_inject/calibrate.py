"""`capture --calibrate CALIBRATOR`: one calibration window before the program runs and one after
it, each the output of a run of the calibrator (runtime/atrex_clockcal.cu, built by the user like
the program), fitted into the capture folder's clock.json (clockalign.py)."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import clockalign
from .errors import CaptureError
from .progress import step

TIMEOUT_S = 120  # a window of a few thousand round trips takes milliseconds; a hung device, not this long


@dataclass(frozen=True)
class Window:
    device: dict
    host_clock: str
    samples: np.ndarray


def window(calibrator: Path, env: dict[str, str], when: str) -> Window:
    """One run of the calibrator; exit 2 (CaptureError) where it fails or prints no window."""
    step(f"calibrating the device's timer against the host clock ({when} the program)")
    argv = [str(calibrator)]
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise CaptureError(f"the calibrator {calibrator} did not run {when} the program: {e}",
                           hint="build it: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o build/clockcal "
                                "$(atrex-inject include-dir)/atrex_clockcal.cu") from None
    if proc.returncode != 0:
        raise CaptureError(f"the calibrator {calibrator} exited with status {proc.returncode} {when} the program: "
                           f"{proc.stderr.strip()[-300:]}", hint="run it alone on the GPU to see why")
    doc, samples = clockalign.window_of(proc.stdout, f"{calibrator} ({when} the program)")
    return Window(doc["device"], doc["host_clock"], samples)


def write(folders: list[Path], start: Window, end: Window) -> clockalign.Alignment:
    """The two windows fitted, written into each capture folder of the run."""
    if start.device.get("uuid") != end.device.get("uuid") or start.host_clock != end.host_clock:
        raise CaptureError("the calibrations before and after the program are of different devices or host clocks "
                           f"({start.device.get('uuid')}, {end.device.get('uuid')})",
                           hint="keep CUDA_VISIBLE_DEVICES the same for the whole capture")
    for f in folders:
        fitted = clockalign.write(f, start.device, start.host_clock, start.samples, end.samples)
    return fitted
