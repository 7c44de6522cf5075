"""The typed view of one decoded launch's metadata (`Launch.meta`): the facts decode read from
the buffer's header and checked, and the sidecar as written.

decode's reader builds it once (`LaunchMeta.of`) from the dict it also saves (`launch.json`,
docs/format.md), and is the one place that reads that dict by key: every other reader takes
attributes here, so a field renamed or retyped is one edit, and a misspelt one fails where it is
read instead of reading as absent.
"""
from __future__ import annotations

from dataclasses import dataclass, field


def _typed(v, kind: type):
    """v if it is of the JSON type `kind` (a bool is no number), else None: a sidecar is JSON anyone
    could have edited."""
    return v if isinstance(v, kind) and not isinstance(v, bool) else None


@dataclass(frozen=True)
class Sidecar:
    """The sidecar as written. The fields that restate the buffer keep the value and JSON type the
    file gave them (None where absent), for validation to compare with the header's; the optional
    fields the checks read are None where absent or not of their type."""
    format: object
    version: object
    bytes: object
    file: object
    kernel: object
    workload: str | None
    device: dict | None
    run_id: str | None
    iket_log: dict | None  # what run-iket's log said about the run (cutedsl/normalize.py writes it)

    @property
    def device_uuid(self) -> str | None:
        return _typed(self.device.get("uuid"), str) if self.device else None

    @classmethod
    def of(cls, sidecar: dict) -> Sidecar:
        if not isinstance(sidecar, dict):
            raise TypeError("the sidecar is not a JSON object")
        s = sidecar
        return cls(s.get("format"), s.get("version"), s.get("bytes"), s.get("file"), s.get("kernel"),
                   _typed(s.get("workload"), str), _typed(s.get("device"), dict), _typed(s.get("run_id"), str),
                   _typed(s.get("iket_log"), dict))


@dataclass(frozen=True)
class LaunchMeta:
    """One launch's header facts (they override the sidecar's) and its sidecar. `clock` is the SM
    clock's calibration (smclock.calibrate) where the header says %clock was recorded
    (`clock_recorded`); None there when no owner's clock advanced with the timer."""
    file: str
    bytes: int
    version: int
    launch_seq: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    capacity: int
    event_bytes: int
    source_id: str
    timer_resolution_ns: int
    flags: int
    clock_recorded: bool
    clock: dict | None
    sidecar: Sidecar
    saved: dict = field(compare=False, repr=False)  # the dict it was built from, as save() writes it

    @classmethod
    def of(cls, meta: dict) -> LaunchMeta:
        """The view of decode's metadata dict (decode._open, or a saved launch.json); KeyError or
        TypeError where the dict lacks a field (a damaged saved launch)."""
        return cls(meta["file"], meta["bytes"], meta["version"], meta["launch_seq"], tuple(meta["grid"]),
                   tuple(meta["block"]), meta["capacity"], meta["event_bytes"], meta["source_id"],
                   meta["timer_resolution_ns"], meta["flags"], "clock" in meta, meta.get("clock"),
                   Sidecar.of(meta["sidecar"]), meta)
