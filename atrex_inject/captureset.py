"""Several capture folders read as one timeline (docs/summary.md, "Several captures on one axis").

A program whose kernels talk to each other is captured into several folders: one per applied spec
(a `capture` run with several specs writes one per kernel) and one per device or process. Each is a
capture as `validate`, `summary` and `export` read it alone; what they have in common is time.
Captures of one device share its `%globaltimer`, so their times are on one axis as they are (the
true offset between them is zero). Captures of different devices count from different origins: they
share an axis only through their calibrations (clockalign.py: each folder's `clock.json` relates its
device's timer to the host clock), and without one they are refused, since any picture of them
together would draw an offset nobody measured. This module decides which, and says where each
capture's times land on the axis and with what error.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from . import clockalign
from . import manifest as mf
from .clockalign import Alignment
from .decode import Launch, capture_files, open_capture
from .errors import AtrexError
from .manifest import Manifest

GLOBALTIMER, HOST = "globaltimer", "host"  # the axis: one device's timer as recorded, or the host clock


@dataclass(frozen=True)
class Member:
    """One capture folder of the timeline: its manifest, launch files and device."""
    folder: Path
    manifest: Manifest
    files: tuple[Path, ...]
    device_uuid: str
    device_name: str
    alignment: Alignment | None
    workload: str  # the sidecars' workloads ("" none), one as a run writes them

    @property
    def label(self) -> str:
        return f"{self.manifest.kernel} ({self.folder.name})"


@dataclass(frozen=True)
class Timeline:
    """The members on one axis: `axis` GLOBALTIMER (one device: times as recorded) or HOST (each
    device's times moved onto the host clock by its alignment)."""
    members: tuple[Member, ...]
    axis: str

    def on_axis_times(self, m: Member, t: np.ndarray) -> np.ndarray:
        """The member's device times (ns) on the axis (unchanged on one device's timer)."""
        return t if self.axis == GLOBALTIMER else m.alignment.host_ns(t)

    def on_axis(self, m: Member, launch: Launch) -> Launch:
        """The launch with its event times on the axis."""
        if self.axis == GLOBALTIMER:
            return launch
        return replace(launch, events={**launch.events, "t_ns": self.on_axis_times(m, launch.events["t_ns"])})

    def error_ns(self, m: Member, t: np.ndarray) -> float:
        """How far the member's times t may be from where the axis puts them, against another
        device's (0 on one device's timer)."""
        return 0.0 if self.axis == GLOBALTIMER else m.alignment.error_ns(t)

    def by_spec(self, name: str) -> list[Member]:
        return [m for m in self.members if m.manifest.name == name]

    def to_json(self) -> dict:
        return {"axis": self.axis,
                "devices": sorted({m.device_uuid for m in self.members}),
                "captures": [{"folder": str(m.folder), "spec": m.manifest.name, "kernel": m.manifest.kernel,
                              "device": m.device_uuid, "device_name": m.device_name,
                              "alignment": m.alignment and {"host_clock": m.alignment.host_clock,
                                                            **m.alignment.to_json()}}
                             for m in self.members]}


def folders(dirs: list[Path]) -> list[Path]:
    """The capture folders the arguments name: each folder holding a manifest, or each capture
    folder (holding one) directly inside a folder that holds none; in the order given, a parent's
    captures by name."""
    out: list[Path] = []
    for d in dirs:
        d = Path(d)
        if (d / mf.FILE_NAME).exists():
            out.append(d)
            continue
        inner = sorted(p.parent for p in d.glob(f"*/{mf.FILE_NAME}")) if d.is_dir() else []
        if not inner:
            mf.for_capture(d)  # refuses the folder as one capture would be refused: says why it holds none
        out += inner
    if len(set(map(Path.resolve, out))) != len(out):
        raise AtrexError("a capture folder is named twice: " + ", ".join(map(str, out)),
                         hint="name each capture folder once (a parent folder names those inside it)")
    return out


def is_single(dirs: list[Path], manifest: Path | None) -> bool:
    """One capture read alone (the commands' single-capture path): one folder with a manifest, or
    any one folder read with --manifest; several folders refuse --manifest."""
    if len(dirs) == 1 and (manifest is not None or (Path(dirs[0]) / mf.FILE_NAME).exists()
                           or not Path(dirs[0]).is_dir()):
        return True
    if manifest is not None:
        raise AtrexError("--manifest applies to one capture folder", hint="give several captures without --manifest: "
                                                                         "each is read with its own manifest.json")
    return False


def member(folder: Path, manifest: Manifest | None = None) -> Member:
    """The capture folder read with `manifest` (default its own); its device "" where its sidecars
    name none (a capture alone needs none)."""
    manifest = manifest or mf.for_capture(folder)
    files = tuple(capture_files(folder))
    devices, workloads = {}, set()
    for f in files:
        side = open_capture(f, manifest).meta.sidecar
        devices.setdefault(side.device_uuid, (side.device or {}).get("name") or "")
        workloads.add(side.workload or "")
    if len(devices) > 1:
        raise AtrexError(f"{folder}: its launches ran on {len(devices)} devices ({', '.join(sorted(devices))})",
                         hint="capture each device into its own folder")
    (uuid, name), = devices.items()
    alignment = clockalign.read(folder)
    if alignment is not None and alignment.device_uuid != uuid:
        raise AtrexError(f"{folder / clockalign.FILE_NAME}: calibrates device {alignment.device_uuid}, but the "
                         f"capture ran on {uuid}", hint="calibrate the device the capture ran on")
    return Member(folder, manifest, files, uuid or "", name, alignment, " | ".join(sorted(workloads)))


def open_timeline(dirs: list[Path]) -> Timeline:
    """The captures of `dirs` (folders()) on one axis; exit 2 where there is none: captures of
    several devices without a calibration of each on one host clock."""
    members = tuple(member(f) for f in folders(dirs))
    unknown = [str(m.folder) for m in members if not m.device_uuid]
    if unknown and len(members) > 1:
        raise AtrexError(f"{', '.join(unknown)}: a launch's sidecar names no device uuid, so the capture cannot be "
                         "placed on a device's time axis", hint="capture it again with this version of atrex-inject")
    devices = sorted({m.device_uuid for m in members})
    if len(devices) == 1:
        return Timeline(members, GLOBALTIMER)
    missing = [m for m in members if m.alignment is None]
    clocks = {m.alignment.host_clock for m in members if m.alignment}
    if missing or len(clocks) > 1:
        by_dev = "; ".join(f"{d}: " + ", ".join(str(m.folder) for m in members if m.device_uuid == d) for d in devices)
        why = (f"{', '.join(str(m.folder) for m in missing)} hold{'s' if len(missing) == 1 else ''} no "
               f"{clockalign.FILE_NAME}" if missing else f"their calibrations read different host clocks ({', '.join(sorted(clocks))})")
        raise AtrexError(f"the captures ran on {len(devices)} devices ({by_dev}), whose %globaltimer counts from "
                         f"different origins, and there is no alignment: {why}",
                         hint="capture each device with `atrex-inject capture --calibrate CALIBRATOR` (docs/summary.md, "
                              "\"Several captures on one axis\"), or give captures of one device")
    return Timeline(members, HOST)
