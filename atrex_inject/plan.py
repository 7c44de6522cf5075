"""The probe plan: the spec's sites with stable ids, their owner groups, and the recorder mode,
checked against the backend that will rewrite them.

Site ids are the sites' order in the spec; group ids the order in which a (role, density,
predicate) combination first appears. The recorder mode (RecorderMode) is decided here, once:
every later stage (the rewriters, the manifest, decode, the SASS check, the CLI) reads it from the
plan or from the manifest that records it, and none decides it again. apply builds the plan once
and hands it to the backend's rewriter and to the manifest.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from . import registry
from .errors import SpecError
from .layout import PACKED_SITES, Role, clock8, staging_bytes
from .spec import ProbeSpec, Site, every_trip

MAX_STATIC_SHARED = 48 * 1024  # bytes of static __shared__ a CTA may declare: the staging rings must fit


class BufferPath(StrEnum):
    """Where a probe's event goes first (docs/guide.md, "Recorder modes")."""
    GLOBAL = "global"  # straight to the owner's slot range in the capture buffer
    STAGED = "staged"  # to a per-warp ring in shared memory, copied out (coalesced) when it fills
    RESIDENT = "resident"  # to a per-warp ring that holds every event until the owner's exit


@dataclass(frozen=True)
class RecorderMode:
    """How the device recorder buffers events: the buffer path, the event's width, and the rings'
    size. One object, so the rewriter's code, the launch header, the manifest and the SASS check
    cannot disagree about it."""
    path: BufferPath = BufferPath.GLOBAL
    # 4 packed (the site id in the timer's low bits), 8 ({clock, timer | site} with the clock), or 16
    # (a payload, or the clock where the site ids do not fit the timer's low bits)
    event_bytes: int = 8
    ring: int = 0  # events a warp's ring holds: staged, up to 32; resident, the capacity; global, 0
    warps: int = 0  # warps per CTA the rings are sized for (launches with more are refused); global, 0
    # the instrumented copy's registers held to the clean kernel's (choice.py, rule 3): at most this
    # many, through `__maxnreg__` on the copy's head (cuda/clone.held); 0: not held
    max_registers: int = 0
    # a template kernel compiled in several instantiations: each one's own clean allocation, by its
    # template arguments (an integer or bool argument's value, None for any other: sass.template_args),
    # which the copy's `__maxnreg__` tests (cuda/clone.held)
    held: tuple[tuple[tuple[str | None, ...], int], ...] = ()
    clock: bool = False  # events carry %clock (8-byte events: {clock, timer | site}, layout.clock8)

    def to_json(self) -> dict:
        return {"path": self.path.value, "event_bytes": self.event_bytes, "ring": self.ring, "warps": self.warps,
                "max_registers": self.max_registers, **({"held": [[list(a), r] for a, r in self.held]} if self.held else {}),
                **({"clock": True} if self.clock else {})}

    @classmethod
    def of_json(cls, obj: dict) -> "RecorderMode":
        held = tuple((tuple(args), r) for args, r in obj.get("held", ()))
        # the arguments are written into the copy's source: integers, or nothing else
        if not all(type(r) is int and 0 < r <= 255 and all(a is None or (type(a) is str and re.fullmatch(r"-?\d+", a))
                                                            for a in args) for args, r in held):
            raise ValueError(f"held registers {obj.get('held')!r} are not integer arguments and register counts")
        return cls(BufferPath(obj["path"]), obj["event_bytes"], obj["ring"], obj["warps"], obj["max_registers"], held,
                   obj.get("clock", False) is True)

    @property
    def packed(self) -> bool:
        return self.event_bytes == 4

    @property
    def wide(self) -> bool:
        return self.event_bytes == 16

    @property
    def slot_bytes(self) -> int:
        """A ring's slot in shared memory: an event as wide as in the buffer (the recorder's kSlotBytes)."""
        return self.event_bytes

    @property
    def start_slots(self) -> int:
        """A resident ring's slots for its owner's start {t0, clk0}: one 16-byte slot, or two 8-byte
        ones where the clock goes in 8-byte events, or two 4-byte ones (packed)."""
        return 2 if clock8(self.clock, self.event_bytes) or self.packed else 1

    @property
    def staged(self) -> bool:
        return self.path == BufferPath.STAGED

    @property
    def resident(self) -> bool:
        return self.path == BufferPath.RESIDENT

    def staging(self, groups) -> "Staging | None":
        """The rings' record for the manifest: per group, warps + 1 rings of `ring` slots (staged) or
        one ring per warp that can own the group's recorder (resident); footprint per CTA."""
        if self.path == BufferPath.GLOBAL:
            return None
        return Staging(self.ring, self.warps, staging_bytes(self.ring, self.warps, self.slot_bytes, groups,
                                                            self.resident, self.start_slots), self.resident)

    @classmethod
    def of_record(cls, event_bytes: int, staging: "Staging | None", clock: bool = False) -> "RecorderMode":
        """The mode a manifest's capture record describes."""
        if staging is None:
            return cls(BufferPath.GLOBAL, event_bytes, clock=clock)
        return cls(BufferPath.RESIDENT if staging.resident else BufferPath.STAGED, event_bytes, staging.events,
                   staging.warps, clock=clock)


@dataclass(frozen=True)
class Staging:
    """The shared-memory rings as the manifest records them."""
    events: int
    warps: int
    shared_bytes_per_cta: int
    resident: bool = False  # the rings hold the whole capacity until exit (events = capacity)


@dataclass(frozen=True)
class CaptureSettings:
    """What a capture of this plan holds: the spec's capture settings resolved into a recorder mode
    (the manifest's `capture` record, docs/format.md)."""
    capacity: int  # events per owner
    event_bytes: int  # 8 (with the clock or not); 16 with a payload or wide; 4 packed
    clock: bool = False
    skip: int = 0  # launches before the first one written
    count: int = 1  # launches written; 0 = all
    staging: Staging | None = None

    @property
    def mode(self) -> RecorderMode:
        return RecorderMode.of_record(self.event_bytes, self.staging, self.clock)


@dataclass(frozen=True)
class Group:
    """An owner group: sites that share a role, density and predicate share one recorder per owner."""
    id: int
    role: Role
    cta_stride: int
    cta_limit: int
    warp_mask: int
    predicate: str | None = None

    @classmethod
    def of_key(cls, id: int, key: tuple) -> "Group":
        """The group of the sites whose `Site.group_key` is `key` (role word, stride, limit, mask, predicate)."""
        role, stride, limit, mask, pred = key
        return cls(id, Role(role), stride, limit, mask, pred)


@dataclass(frozen=True)
class Plan:
    spec: ProbeSpec
    groups: tuple[Group, ...]
    site_group: tuple[int, ...]  # site id -> group id
    mode: RecorderMode

    @property
    def capture(self) -> CaptureSettings:
        c = self.spec.capture
        return CaptureSettings(c.capacity, self.mode.event_bytes, c.clock, c.skip, c.count,
                               self.mode.staging(self.groups))

    def group_of(self, site: Site) -> Group:
        return self.groups[self.site_group[self.spec.site_id(site.name)]]


DEFAULT_PATH = BufferPath.GLOBAL  # the recorder of "auto" when nothing is compiled to choose one (choice.py)
STAGED_RING = 32  # events a staged ring holds before it is copied out: one per lane, a coalesced copy


def packs(spec: ProbeSpec) -> bool:
    """Whether the spec's events are 4 bytes, packed: as `[capture] packed` says; where it says
    nothing, where a site records every trip of a loop (the per-event cost decides there: a barrier
    loop's event cost half as much stored in one word as in two, docs/design.md) and one word holds
    what the spec records (no clock, payload or wide event, at most PACKED_SITES sites, the
    recorder's own buffers)."""
    c = spec.capture
    if c.packed is not None:
        return c.packed
    return (bool(every_trip(spec.sites)) and not (c.clock or c.wide or any(s.payload for s in spec.sites))
            and len(spec.sites) <= PACKED_SITES and registry.info(spec.backend).own_buffers_refused is None)


def requested_mode(spec: ProbeSpec, path: BufferPath | None = None, warps: int = 0) -> RecorderMode:
    """The spec's recorder mode on buffer path `path` (default: the one it names; "auto" is the
    default path), with events as wide as its payloads and clock need, packed where `packs` says, and
    rings sized for `warps` warps per CTA (default: the spec's `warps`). The clock goes in 8-byte
    events, the site id in the timer's low bits, unless the spec asks for `wide` events or has more
    sites than those bits hold."""
    c = spec.capture
    wide = c.wide or any(s.payload for s in spec.sites) or (c.clock and len(spec.sites) > PACKED_SITES)
    event_bytes = 16 if wide else 4 if packs(spec) else 8
    path = path or (DEFAULT_PATH if c.recorder == "auto" else BufferPath(c.recorder))
    if path == BufferPath.GLOBAL:
        return RecorderMode(path, event_bytes, clock=c.clock)
    ring = c.capacity if path == BufferPath.RESIDENT else c.ring or STAGED_RING
    return RecorderMode(path, event_bytes, ring, warps or c.warps, clock=c.clock)


def make_plan(spec: ProbeSpec, mode: RecorderMode | None = None) -> Plan:
    """The plan of a parsed spec: its backend's own rules checked (SpecError naming the spec's line),
    owner groups numbered, and the recorder mode (`mode`, else the spec's) checked to fit."""
    registry.get(spec.backend).check(spec)
    keys: list[tuple] = []
    site_group = []
    for s in spec.sites:
        if s.group_key not in keys:
            keys.append(s.group_key)
        site_group.append(keys.index(s.group_key))
    groups = tuple(Group.of_key(i, k) for i, k in enumerate(keys))
    mode = mode or requested_mode(spec)
    _check_mode(spec, groups, mode)
    return Plan(spec, groups, tuple(site_group), mode)


def _check_mode(spec: ProbeSpec, groups: tuple[Group, ...], mode: RecorderMode) -> None:
    """Rings stage per warp, so per-thread roles cannot use them; and they must fit a CTA's static
    shared memory."""
    if mode.path == BufferPath.GLOBAL:
        return
    where = str(spec.path)
    if not mode.warps:
        raise SpecError(f"the {mode.path.value} recorder sizes its rings for the block, and the block size is not "
                        "known", path=where, line=spec.line_of("capture"),
                        hint="add `warps = W` to [capture] (W: the largest block of the kernel's launches, in warps), "
                             "or give the kernel __launch_bounds__ and put nvcc on PATH")
    for i, st in enumerate(spec.sites):
        if st.role.per_thread:
            raise SpecError(f"site {st.name!r}: role {st.role.value!r} records per thread; the {mode.path.value} "
                            "recorder's rings stage per warp", path=where, line=spec.line_of("site", i, "role"),
                            hint='use a warp-level role (lane0, warpgroup, cta), or recorder = "global" or "auto"')
    staging = mode.staging(groups)
    if staging.shared_bytes_per_cta > MAX_STATIC_SHARED:
        rings = (f"one ring per warp that can own it (at most {mode.warps}) x {mode.ring} "
                 f"+ {1 + mode.start_slots} slots (the capacity, an overflow slot and the start time) + 1 sink slot, "
                 "and a 512-byte table of the warps' next slots"
                 if mode.resident else f"{mode.warps} + 1 rings x {mode.ring} events")
        raise SpecError(f"the {mode.path.value} recorder's rings need {staging.shared_bytes_per_cta} bytes of static shared memory per CTA "
                        f"({len(groups)} owner groups x {rings}, {mode.slot_bytes}-byte slots, each array in whole "
                        f"128-byte lines); a CTA declares at "
                        f"most {MAX_STATIC_SHARED}", path=where, line=spec.line_of("capture", "recorder"),
                        hint=("lower capacity or warps, or let sites share owner groups" if mode.resident
                              else "lower ring or warps, or let sites share owner groups"))
