"""A device's `%globaltimer` related to the host clock, with a stated error bound (docs/format.md,
"Clock alignment `clock.json`").

Two GPUs' timers count from different origins and drift apart by parts per million, so their
events can share an axis only through a clock both can be related to: the host's. A calibration
window is a run of samples (h0, g, h1): the host clock read, the device's %globaltimer read by a
kernel the host is waiting on, the host clock read again (runtime/atrex_clockcal.cu). The timer was
read between the two host reads and truncated to its tick, so at that moment the offset host -
device lay in [h0 - g - tick, h1 - g]. Over a window of a few milliseconds the offset moves by
nanoseconds, so the window's offset lies in the intersection of its tightest samples' ranges
(KEEP of them: a sample delayed by a preemption only widens its own range); that intersection's
middle is the window's offset and its half-width the window's error. A window at the start and one
at the end of the capture give the offset at both ends; between them it is the line through the
two, its error at a time no more than the two windows' errors weighted by distance (outside the
calibrated span the error grows with the distance: `error_ns` says so for the times it is asked).
An empty intersection (the host clock was stepped during the window, or the samples are not of one
device) is refused: the window gives no offset.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import AtrexError
from .fsio import write_atomic
from .tally import step_of

FILE_NAME = "clock.json"
FORMAT, VERSION = "atrex-clock", 1
WINDOW_FORMAT = "atrex-clock-window"  # one calibration run's output (runtime/atrex_clockcal.cu)
KEEP = 16  # tightest brackets a window's offset is taken from


@dataclass(frozen=True)
class Window:
    """One calibration window's fit: at device time `gpu_ns` (the kept samples' mean timer read),
    host - device = offset_ns ± half_ns, from `kept` of its `samples` samples. The offset is a
    whole ns (the range's middle, rounded down; half_ns covers the rounding): host clocks that
    count from boot put it near 2^60, past a float's ns."""
    gpu_ns: int
    offset_ns: int
    half_ns: float
    kept: int
    samples: int

    def to_json(self) -> dict:
        return {"gpu_ns": self.gpu_ns, "offset_ns": self.offset_ns, "half_ns": self.half_ns, "kept": self.kept,
                "samples": self.samples}


def fit_window(samples: np.ndarray, tick_ns: int, where: str = "calibration window") -> Window:
    """The offset of one window of (h0, g, h1) rows (ns), read on a timer of `tick_ns`."""
    s = np.asarray(samples, dtype=np.int64).reshape(-1, 3)
    width = s[:, 2] - s[:, 0]
    if s.shape[0] == 0 or (width < 0).any():
        raise AtrexError(f"{where}: {'no samples' if not s.shape[0] else 'a sample whose second host read precedes its first'}",
                         hint="run the calibration again (atrex-inject capture --calibrate)")
    kept = s[np.argsort(width, kind="stable")[:KEEP]]
    lo = int((kept[:, 0] - kept[:, 1]).max()) - tick_ns
    hi = int((kept[:, 2] - kept[:, 1]).min())
    if hi < lo:
        raise AtrexError(f"{where}: its tightest samples disagree on the offset by {lo - hi} ns: the host clock "
                         "moved during the window, or the samples are not of one device",
                         hint="calibrate again, with the host clock not being stepped (NTP slews; a step shows here)")
    return Window(int(kept[:, 1].mean().round()), (lo + hi) // 2, (hi - lo + (lo + hi) % 2) / 2, int(kept.shape[0]),
                  int(s.shape[0]))


def tick_of(*windows: np.ndarray) -> int:
    """The timer's tick as the samples show it: the gcd of their timer reads' offsets."""
    g = np.concatenate([np.asarray(w, dtype=np.int64).reshape(-1, 3)[:, 1] for w in windows])
    return step_of(g - g.min()) or 1


@dataclass(frozen=True)
class Alignment:
    """One device's timer on the host clock: host = t + offset(t), the offset the line through the
    start and end windows' offsets."""
    device_uuid: str
    host_clock: str
    tick_ns: int
    start: Window
    end: Window

    @property
    def drift_ppm(self) -> float:
        return (self.end.offset_ns - self.start.offset_ns) / (self.end.gpu_ns - self.start.gpu_ns) * 1e6

    def _where(self, t: np.ndarray) -> np.ndarray:
        return (np.asarray(t, dtype=np.float64) - self.start.gpu_ns) / (self.end.gpu_ns - self.start.gpu_ns)

    def shift_ns(self, t: np.ndarray) -> np.ndarray:
        """host - device at the device times t, to the nearest ns (int64: the start's whole offset
        plus the drift's small change, so no precision is lost to a float)."""
        step = np.rint(self._where(t) * (self.end.offset_ns - self.start.offset_ns)).astype(np.int64)
        return np.int64(self.start.offset_ns) + step

    def host_ns(self, t: np.ndarray) -> np.ndarray:
        """Device times (int64 ns) on the host clock."""
        return np.asarray(t, dtype=np.int64) + self.shift_ns(t)

    def error_ns(self, t: np.ndarray) -> float:
        """The largest error of host_ns over the times t: |1 - λ|·start + |λ|·end, λ a time's place
        between the windows (at most the larger window error inside, growing outside)."""
        lam = self._where(t)
        if lam.size == 0:
            return max(self.start.half_ns, self.end.half_ns)
        return float((np.abs(1 - lam) * self.start.half_ns + np.abs(lam) * self.end.half_ns).max())

    def to_json(self) -> dict:
        return {"tick_ns": self.tick_ns, "start": self.start.to_json(), "end": self.end.to_json(),
                "drift_ppm": round(self.drift_ppm, 6), "error_ns": max(self.start.half_ns, self.end.half_ns)}


def fit(start: np.ndarray, end: np.ndarray, device_uuid: str, host_clock: str, where: str = "calibration") -> Alignment:
    """The alignment from a window of samples taken before the capture and one after it."""
    tick = tick_of(start, end)
    a = fit_window(start, tick, f"{where}: start window")
    b = fit_window(end, tick, f"{where}: end window")
    if b.gpu_ns <= a.gpu_ns:
        raise AtrexError(f"{where}: the end window's timer reads do not come after the start window's",
                         hint="calibrate before the program runs and again after it, on the same device")
    return Alignment(device_uuid, host_clock, tick, a, b)


def window_of(text: str, where: str) -> tuple[dict, np.ndarray]:
    """One calibration run's output (a JSON object, WINDOW_FORMAT): its device and samples."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise AtrexError(f"{where}: the calibration printed no JSON ({e})",
                         hint="run the calibrator built from runtime/atrex_clockcal.cu") from None
    dev = doc.get("device") if isinstance(doc, dict) else None
    rows = doc.get("samples") if isinstance(doc, dict) else None
    if (not isinstance(doc, dict) or doc.get("format") != WINDOW_FORMAT or not isinstance(dev, dict)
            or not isinstance(dev.get("uuid"), str) or not isinstance(doc.get("host_clock"), str)
            or not _rows(rows)):
        raise AtrexError(f"{where}: not a calibration window (format {WINDOW_FORMAT!r} with device.uuid, host_clock "
                         "and samples [[h0, g, h1], ...] of non-negative integers)",
                         hint="run the calibrator built from runtime/atrex_clockcal.cu")
    return doc, np.array(rows, dtype=np.int64)


def _rows(rows) -> bool:
    return (isinstance(rows, list) and bool(rows) and all(
        isinstance(r, list) and len(r) == 3 and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 63
                                                    for v in r) for r in rows))


def write(folder: str | Path, device: dict, host_clock: str, start: np.ndarray, end: np.ndarray) -> Alignment:
    """Fit the two windows and write FILE_NAME into the capture folder: the samples and their fit."""
    a = fit(start, end, device["uuid"], host_clock)
    doc = {"format": FORMAT, "version": VERSION, "device": device, "host_clock": host_clock,
           "windows": [np.asarray(start).tolist(), np.asarray(end).tolist()], "fit": a.to_json()}
    write_atomic(Path(folder) / FILE_NAME, json.dumps(doc) + "\n")
    return a


def read(folder: str | Path) -> Alignment | None:
    """The capture folder's alignment, None without FILE_NAME; the fit is recomputed from the
    samples and a file whose stored fit differs in any field is refused (exit 2, naming it)."""
    path = Path(folder) / FILE_NAME
    if not path.exists():
        return None
    where = str(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise AtrexError(f"{where}: not readable JSON ({e})", hint="calibrate again, or move the file out") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise AtrexError(f"{where}: format is not {FORMAT!r} version {VERSION}", hint="calibrate again")
    dev, windows = doc.get("device"), doc.get("windows")
    if not isinstance(dev, dict) or not isinstance(dev.get("uuid"), str):
        raise AtrexError(f"{where}: field device.uuid is missing or not a string", hint="calibrate again")
    if not isinstance(doc.get("host_clock"), str):
        raise AtrexError(f"{where}: field host_clock is missing or not a string", hint="calibrate again")
    if not isinstance(windows, list) or len(windows) != 2 or not all(_rows(w) for w in windows):
        raise AtrexError(f"{where}: field windows must be two lists of [h0, g, h1] samples (non-negative integers)",
                         hint="calibrate again")
    a = fit(np.array(windows[0]), np.array(windows[1]), dev["uuid"], doc["host_clock"], where)
    stored = doc.get("fit")
    for key, value in _flat(a.to_json()).items():
        got = _flat(stored).get(key) if isinstance(stored, dict) else None
        if got != value or isinstance(got, bool):
            raise AtrexError(f"{where}: field fit.{key} = {got!r} is not what its samples give ({value})",
                             hint="the file was edited: calibrate again")
    return a


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out
