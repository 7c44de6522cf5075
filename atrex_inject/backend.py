"""The seam between the pipeline and a backend: what a backend does, what its rewriter returns,
and the registry that finds a backend by the name a spec gives (`backend = "cuda"`).

A backend checks what it alone knows about a spec (the language of payload and predicate
expressions, its own rules), rewrites the kernel source from the plan, and runs a program so
that its launches land in a capture folder as format-2 files (docs/format.md). Everything else
(apply/revert, decode, validation, summary, export, measurement) is shared and never branches on
the backend's name: it asks the backend object. To add a backend, write a package with a module
that defines `BACKEND` (an object with the attributes and methods of `Backend`) and add its name
and module to REGISTRY (docs/api.md, "A new backend").
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .manifest import Manifest
    from .plan import Plan
    from .spec import ProbeSpec, Site

# name -> module defining BACKEND; imported on first use, so reading a spec loads no rewriter
REGISTRY = {"cuda": "atrex_inject.cuda.backend", "cutedsl": "atrex_inject.cutedsl.backend"}


@dataclass
class SitePlacement:
    """Where a backend placed a site: what the manifest's site table records."""
    site: Site
    site_id: int
    source_line: int  # line of the anchor in the clean source
    instrumented_line: int = 0


@dataclass
class Rewrite:
    """A backend rewriter's result; snapshot.apply turns it into the patch, manifest and writes."""
    text: str  # the instrumented source
    source_id: str  # what captures carry to name their source (source_id.py)
    placements: list[SitePlacement]
    launches: list[dict]
    warnings: list[str] = field(default_factory=list)
    # manifest fields only this backend writes, in their manifest JSON form (manifest.py reads them):
    # cuda `perturbation`, cutedsl `iket`
    backend_data: dict = field(default_factory=dict)
    not_captured: list[dict] = field(default_factory=list)  # launches (or may-be launches) left without capture
    launchers: dict[str, str] = field(default_factory=dict)  # other files rewritten: rel path -> their new text


class Backend(Protocol):
    name: str  # what a spec's `backend` says
    language: str  # of payload and predicate expressions, for messages ("C++", "Python")
    staging_refused: str | None  # why `[capture] staging` does not apply here; None: it does
    capacity_from_header: bool  # its captures size every owner to the fullest one, not to the spec's capacity

    def expression_problem(self, expr: str) -> str | None:
        """Why `expr` is not one expression on one line of the backend's language (None if it is)."""

    def check(self, spec: ProbeSpec) -> list[str]:
        """The backend's own rules on a parsed spec: raise SpecError (naming the site's line) for a
        spec it cannot instrument; return warnings."""

    def rewrite(self, plan: Plan, text: str, launchers: dict[str, str] | None = None) -> Rewrite:
        """The instrumented source for the plan's spec, and each of the spec's launchers (rel path
        -> clean text) rewritten in Rewrite.launchers (a backend whose specs name no launchers
        ignores them); AnchorError/SpecError when a site cannot be placed."""

    def capture(self, manifest: Manifest, cmd: list[str], out_dir: Path, env: dict[str, str]) -> None:
        """Run `cmd` (the user's program) so that the instrumented kernel's launches land in
        `out_dir` as `<kernel>-launch<N>.atrex` + sidecar; CaptureError when it cannot."""


def names() -> tuple[str, ...]:
    """The registered backends' names, in registry order."""
    return tuple(REGISTRY)


def get(name: str) -> Backend:
    """The backend a spec or manifest names; KeyError for a name not in REGISTRY (the spec and
    manifest readers refuse those)."""
    return importlib.import_module(REGISTRY[name]).BACKEND
