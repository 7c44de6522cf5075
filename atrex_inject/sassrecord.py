"""What sass.compare reads off a clean and an instrumented build, as frozen records that check
their own fields: the judgment (choice.judge), check-sass and the recorder choice's evidence read
attributes, so a renamed figure breaks at its reader, not in a string key that is silently absent.
`to_json` writes check-sass's documented keys (docs/design.md, "The SASS check"), in its order;
the figures the recorder choice keeps (registers, spills, CTAs per SM) read back with `from_json`
from the choice cache and the manifest."""
from __future__ import annotations

from dataclasses import dataclass, fields


def _counts(record, what: str) -> None:
    """Each field of `record` an integer or None (bool is not a count): ValueError naming it."""
    for f in fields(record):
        v = getattr(record, f.name)
        if not (v is None or type(v) is int):
            raise ValueError(f"{what} {f.name} {v!r} is not a count")


def _texts(values, what: str) -> tuple[str, ...]:
    if not all(isinstance(v, str) for v in values):
        raise ValueError(f"{what} {list(values)!r} are not text")
    return tuple(values)


@dataclass(frozen=True)
class Figures:
    """One figure of the kernel in each build: the clean build's, the instrumented build's with
    probes off, the instrumented copy's (registers, static shared memory, spilled bytes)."""
    clean: int | None
    off: int | None
    copy: int | None

    def __post_init__(self):
        _counts(self, "figure")

    def to_json(self) -> dict:
        return {"clean": self.clean, "off": self.off, "copy": self.copy}

    @classmethod
    def from_json(cls, obj: dict) -> "Figures":
        return cls(obj["clean"], obj["off"], obj["copy"])


@dataclass(frozen=True)
class Occupancy:
    """An occupancy bound of the clean kernel and of its copy (CTAs per SM, warps per SM by
    registers); None where it is not known (the block size, the registers)."""
    clean: int | None
    copy: int | None

    def __post_init__(self):
        _counts(self, "occupancy")

    def to_json(self) -> dict:
        return {"clean": self.clean, "copy": self.copy}

    @classmethod
    def from_json(cls, obj: dict) -> "Occupancy":
        return cls(obj["clean"], obj["copy"])


@dataclass(frozen=True)
class LocalAccesses:
    """Local loads and stores (spills): the clean kernel's, and those of the copy's clean side (the
    code CTAs that record nothing run)."""
    clean: int
    copy_clean_side: int

    def __post_init__(self):
        _counts(self, "local accesses")

    def to_json(self) -> dict:
        return {"clean": self.clean, "copy_clean_side": self.copy_clean_side}


@dataclass(frozen=True)
class MissingLoop:
    """A clean loop the copy's clean side does not hold as the clean kernel schedules it."""
    loop: tuple[tuple[str, int], ...]  # (instruction family, count per trip), sass.FAMILIES' order
    in_flight: int
    missing: int  # how many such loops the clean side lacks
    copy_in_flight: tuple[int, ...]  # loads in flight of the clean side's loops with the same instructions

    def to_json(self) -> dict:
        return {"loop": dict(self.loop), "in_flight": self.in_flight, "missing": self.missing,
                "copy_in_flight": list(self.copy_in_flight)}


@dataclass(frozen=True)
class FewerInFlight:
    """A clean loop that recording CTAs run with fewer loads in flight: `trip` is the probed loop
    with a shorter trip where one is the cause (sass.shorter_trips), else None."""
    loop: str
    in_flight: int
    recording: int
    trip: str | None = None

    def to_json(self) -> dict:
        return {"loop": self.loop, "in_flight": self.in_flight, "recording": self.recording, "trip": self.trip}


@dataclass(frozen=True)
class MoreInFlight:
    """A recording loop with more loads in flight than any clean loop keeps (sass.more_in_flight)."""
    loop: str
    in_flight: int
    clean: int  # the most a clean loop keeps
    loads: int  # the loop's global loads per trip
    clean_loads: int  # the most of a clean loop

    def to_json(self) -> dict:
        return {"loop": self.loop, "in_flight": self.in_flight, "clean": self.clean, "loads": self.loads,
                "clean_loads": self.clean_loads}


@dataclass(frozen=True)
class Comparison:
    """sass.compare's reading of one kernel (one instantiation) in a clean and an instrumented build."""
    off_identical: bool  # with probes off, the clean kernel instruction for instruction
    registers: Figures
    shared: Figures
    spills: Figures
    local_accesses: LocalAccesses
    threads_per_block: int | None
    ctas_per_sm: Occupancy
    warps_per_sm_by_registers: Occupancy
    clean_loops: tuple[str, ...]
    recording_fewer_in_flight: tuple[FewerInFlight, ...]
    recording_more_in_flight: tuple[MoreInFlight, ...]
    missing: tuple[MissingLoop, ...]

    def __post_init__(self):
        kinds = {"registers": Figures, "shared": Figures, "spills": Figures, "local_accesses": LocalAccesses,
                 "ctas_per_sm": Occupancy, "warps_per_sm_by_registers": Occupancy}
        bad = [k for k, t in kinds.items() if not isinstance(getattr(self, k), t)]
        if bad or type(self.off_identical) is not bool or not (self.threads_per_block is None
                                                                or type(self.threads_per_block) is int):
            raise ValueError(f"a SASS comparison with {', '.join(bad) or 'off_identical or threads_per_block'} "
                             "of the wrong kind")
        _texts(self.clean_loops, "clean loops")
        for name, kind in (("recording_fewer_in_flight", FewerInFlight), ("recording_more_in_flight", MoreInFlight),
                           ("missing", MissingLoop)):
            if not all(isinstance(x, kind) for x in getattr(self, name)):
                raise ValueError(f"{name} holds what is not a {kind.__name__}")

    def to_json(self) -> dict:
        """check-sass's keys for the comparison, in its order (docs/design.md)."""
        return {"off_identical": self.off_identical, "registers": self.registers.to_json(),
                "shared": self.shared.to_json(), "spills": self.spills.to_json(),
                "local_accesses": self.local_accesses.to_json(), "threads_per_block": self.threads_per_block,
                "ctas_per_sm": self.ctas_per_sm.to_json(),
                "warps_per_sm_by_registers": self.warps_per_sm_by_registers.to_json(),
                "clean_loops": list(self.clean_loops),
                "recording_fewer_in_flight": [f.to_json() for f in self.recording_fewer_in_flight],
                "recording_more_in_flight": [f.to_json() for f in self.recording_more_in_flight],
                "missing": [m.to_json() for m in self.missing]}
