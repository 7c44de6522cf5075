"""The recorder choice and its evidence as frozen records that check their own fields (choice.py
makes them; the manifest, check-sass and apply's lines read them). Each has one `to_json` /
`from_json` pair: the manifest's `recorder` record (docs/format.md), which the choice cache
(`.atrex/cache/choice-*.json`) keeps with the whole mode beside it. Records of an older tool read
back and write back as they were: evidence written without `verdict` and `doubts` keeps neither."""
from __future__ import annotations

from dataclasses import dataclass, field

from .plan import BufferPath, RecorderMode
from .sassrecord import Figures, Occupancy

KEEPS, UNSURE, ANOTHER = "keeps", "unsure", "another kernel"
HOWS = ("chosen", "asked", "fallback", "backend")  # Choice.how


def verdict(problems, doubts) -> str:
    """The SASS's word on a recording: it keeps the clean kernel, it is another kernel, or SASS
    cannot decide and measure does."""
    return ANOTHER if problems else UNSURE if doubts else KEEPS


def describe(mode: RecorderMode) -> str:
    """A mode in words, as apply, check-sass and the evidence name it."""
    if mode.held:
        caps = sorted({c for _, c in mode.held})
        return (f"{mode.path.value}, registers held to each instantiation's clean allocation "
                f"({caps[0]}{f'-{caps[-1]}' if len(caps) > 1 else ''})")
    return f"{mode.path.value}{f', registers held to {mode.max_registers}' if mode.max_registers else ''}"


def _texts(values, what: str) -> None:
    if not (isinstance(values, tuple) and all(isinstance(v, str) for v in values)):
        raise ValueError(f"{what} {values!r} are not text")


@dataclass(frozen=True)
class Evidence:
    """One candidate as compiled: what its SASS says against the clean kernel's (choice.judge)."""
    mode: RecorderMode
    registers: Figures
    ctas_per_sm: Occupancy  # copy None: block size unknown
    shared_added: int  # bytes of static shared memory the copy adds per CTA
    spills: Figures  # bytes
    problems: tuple[str, ...]  # what makes the recording another kernel
    doubts: tuple[str, ...] = ()  # what SASS cannot decide: measure does
    older: bool = field(default=False, compare=False)  # read from a record without verdict and doubts

    def __post_init__(self):
        if not (isinstance(self.mode, RecorderMode) and isinstance(self.registers, Figures)
                and isinstance(self.spills, Figures) and isinstance(self.ctas_per_sm, Occupancy)
                and type(self.shared_added) is int):
            raise ValueError("evidence that is not counts and text")
        _texts(self.problems, "problems")
        _texts(self.doubts, "doubts")

    @property
    def verdict(self) -> str:
        return verdict(self.problems, self.doubts)

    def to_json(self) -> dict:
        return {"recorder": describe(self.mode), "mode": self.mode.to_json(), "registers": self.registers.to_json(),
                "ctas_per_sm": self.ctas_per_sm.to_json(), "shared_added": self.shared_added,
                "spills": self.spills.to_json(), **({} if self.older else {"verdict": self.verdict}),
                "problems": list(self.problems), **({} if self.older else {"doubts": list(self.doubts)})}

    @classmethod
    def from_json(cls, obj: dict) -> "Evidence":
        return cls(RecorderMode.of_json(obj["mode"]), Figures.from_json(obj["registers"]),
                   Occupancy.from_json(obj["ctas_per_sm"]), obj["shared_added"], Figures.from_json(obj["spills"]),
                   tuple(obj["problems"]), tuple(obj.get("doubts", ())),
                   older="verdict" not in obj and "doubts" not in obj)


@dataclass(frozen=True)
class Choice:
    """The recorder a plan uses and why: `how` is "chosen" (compiled and compared), "asked" (the spec
    or --recorder names it), "fallback" (no nvcc: the default; or every candidate compiled is another
    kernel: the first, verdict ANOTHER) or "backend" (the backend records to buffers of its own)."""
    mode: RecorderMode
    how: str
    why: str
    evidence: tuple[Evidence, ...] = ()
    warnings: tuple[str, ...] = ()  # apply's warnings: the manifest keeps them among its own
    notes: tuple[str, ...] = ()  # why candidates were not tried (no block size, rings that do not fit, ...)
    key: str = field(default="", compare=False)  # what a cached copy is valid for (choice.Target.key)
    verdict: str = ""  # a chosen recorder's SASS verdict (KEEPS, UNSURE, ANOTHER); "" where none was compiled

    def __post_init__(self):
        if not isinstance(self.mode, RecorderMode) or self.how not in HOWS or not isinstance(self.why, str):
            raise ValueError(f"not a recorder choice: how {self.how!r} is not one of {', '.join(HOWS)}"
                             if self.how not in HOWS else "not a recorder choice: its mode or why")
        if self.verdict not in ("", KEEPS, UNSURE, ANOTHER):
            raise ValueError(f"verdict {self.verdict!r} is not one of {KEEPS}, {UNSURE}, {ANOTHER}")
        if not (isinstance(self.evidence, tuple) and all(isinstance(e, Evidence) for e in self.evidence)):
            raise ValueError("evidence that is not the candidates' records")
        _texts(self.warnings, "warnings")
        _texts(self.notes, "notes")

    def to_json(self) -> dict:
        """The manifest's `recorder` record (docs/format.md): the mode's path and register cap; the
        rest of the mode is the manifest's capture settings'."""
        m = self.mode
        held = {"held": m.to_json()["held"]} if m.held else {}
        return {"recorder": m.path.value, **({"max_registers": m.max_registers, **held} if m.max_registers else {}),
                "how": self.how, "why": self.why, **({"verdict": self.verdict} if self.verdict else {}),
                "evidence": [e.to_json() for e in self.evidence], **({"notes": list(self.notes)} if self.notes else {})}

    @classmethod
    def from_json(cls, obj: dict, mode: RecorderMode, warnings: tuple[str, ...] = (), key: str = "") -> "Choice":
        """The record to_json wrote, with its whole `mode` as its reader keeps it (the cache entry's
        `mode`; a manifest's: mode_of_record); KeyError, TypeError or ValueError where it is not one."""
        return cls(mode, obj["how"], obj["why"], tuple(Evidence.from_json(e) for e in obj["evidence"]),
                   tuple(warnings), tuple(obj.get("notes", ())), key, obj.get("verdict", ""))


def mode_of_record(obj: dict, capture: RecorderMode) -> RecorderMode:
    """The chosen mode a manifest describes: `capture` (its capture settings' mode: event width,
    rings, clock) on the record's path, with its register cap (Choice.to_json)."""
    held = {"held": obj["held"]} if "held" in obj else {}
    return RecorderMode.of_json({**capture.to_json(), "path": BufferPath(obj["recorder"]).value,
                                 "max_registers": obj.get("max_registers", 0), **held})
