"""What validation's named checks are made of, and what a route registers with them.

A named check is a row of the report (validate.CHECKS: its name and next step); rules count
failures under it. validate.py holds the core rules; a route (the IKeT route, Python launches,
measure) keeps the rules about its own files in its own module, which defines `ROUTE` (a Route)
and is named in registry.CHECK_MODULES. validate loads those modules by name (`registered`), the
way apply loads a backend, so it imports no route and no route imports it back: the import graph
still flows one way, and a route's facts stay with the route.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from . import registry

if TYPE_CHECKING:  # types only: a route registering checks (measure) need not load the decoder
    from .decode import Launch
    from .manifest import Manifest
    from .runrecord import RunRecord

FIRST = 5  # offenders a check names


@dataclass
class Check:
    """One named check's result: its count, first details and next step."""
    name: str
    count: int = 0
    details: list[str] = field(default_factory=list)
    hint: str = ""

    @property
    def ok(self) -> bool:
        return self.count == 0

    def fail(self, n: int, detail: str) -> None:
        if n:
            self.count += int(n)
            if len(self.details) < FIRST:
                self.details.append(detail)


@dataclass
class Provenance:
    """What the capture must match; unset fields are not checked (and listed as unchecked)."""
    source: Path | None = None  # the instrumented source file (its source id is recomputed)
    # the binary that ran: with a run record (run.json), a file it hashed; else it must have binary_sha256
    binary: Path | None = None
    binary_sha256: str | None = None
    workload: str | None = None
    device_uuid: str | None = None


@dataclass
class Folder:
    """What the capture-wide rules read (one launch, any part of it, per file decoded; the run
    record; what the user asked to check) and what they add besides failures."""
    path: Path
    manifest: Manifest
    launches: list[Launch]
    run: RunRecord | None
    provenance: Provenance
    claims: list[dict] | None
    summaries: list[dict]  # per launch, where claims need them
    notes: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)  # provenance not given


@dataclass(frozen=True)
class Rule:
    """A function that counts failures under the named check `check`: with scope "launch",
    run(launch, manifest, check) on every decoded part of every file; with "capture",
    run(folder, check) once the files are read. Rules of one check run in registration order,
    which is the order of its details."""
    check: str
    scope: str
    run: Callable


@dataclass(frozen=True)
class Artifact:
    """Another artifact `validate` rechecks beside a capture (the report's key `name`): `recheck`
    (path, root) gives a dict whose "valid" says whether it passed; `usage` is how the command
    line names it."""
    name: str
    usage: str
    recheck: Callable[[Path, Path | None], dict]


@dataclass(frozen=True)
class Route:
    """What one route module registers: rules, notes (functions of the folder giving lines for
    the report's notes), the source id of an instrumented source by file suffix (for
    stale_provenance's --source) and artifacts."""
    rules: tuple[Rule, ...] = ()
    notes: tuple[Callable[[Folder], list[str]], ...] = ()
    source_ids: dict[str, Callable[[str], str]] = field(default_factory=dict)
    artifacts: tuple[Artifact, ...] = ()


def registered() -> Route:
    """Every route's registrations, in registry.CHECK_MODULES order."""
    routes = [importlib.import_module(m).ROUTE for m in registry.CHECK_MODULES]
    return Route(tuple(r for x in routes for r in x.rules), tuple(n for x in routes for n in x.notes),
                 {k: v for x in routes for k, v in x.source_ids.items()}, tuple(a for x in routes for a in x.artifacts))
