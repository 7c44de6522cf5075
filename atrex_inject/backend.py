"""The seam between the pipeline and a backend: what a backend does, what its rewriter returns,
and the spec rules every backend applies in its own language.

A backend reads the spec keys only it uses (parse_keys), checks what it alone knows about a spec
(the language of payload and predicate expressions, its own rules), rewrites the kernel source
from the plan, and runs a program so that its launches land in a capture folder as format-2
files (docs/format.md). Everything else (apply/revert, decode, validation, summary, export,
measurement) is shared and never branches on the backend's name: it asks the backend object, or
the registry (registry.py) for its facts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from . import registry
from .errors import SpecError

if TYPE_CHECKING:
    from .manifest import Manifest
    from .plan import Plan
    from .spec import BackendKeys, ProbeSpec, Site
    from .spec_table import Table


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
    spans: dict[str, int] = field(default_factory=dict)  # interval name -> iterations it spans, where more than one

    @property
    def copy(self) -> "CopyFacts":
        """What the CUDA rewriter says about the copy it wrote, typed: the one reader of
        `backend_data` for the recorder choice and check-sass (the manifest reads its own fields:
        manifest.perturbation_of). ValueError where this rewrite wrote no copy (another backend)."""
        p = self.backend_data.get("perturbation")
        if not isinstance(p, dict):
            raise ValueError("this rewrite wrote no instrumented copy (not the CUDA backend's)")
        return CopyFacts(p["clone"], p["versioned"], p.get("not_warp_uniform"), p.get("barrier_loop"),
                         p.get("sized_at_launch"))


@dataclass(frozen=True)
class CopyFacts:
    """The CUDA rewriter's instrumented copy: its name (KERNEL__atrex), whether its body is
    versioned (CTAs that record nothing run a clean side), why a site may run on part of a warp
    (no staged rings: cuda/uniform.py), the line of a loop recorded every iteration that waits
    at a CTA barrier, and why the kernel's occupancy is decided at launch beyond its SASS
    (cuda/launches.sized_at_launch)."""
    clone: str
    versioned: bool
    not_uniform: str | None = None
    barrier_loop: int | None = None
    sized_at_launch: str | None = None

    def __post_init__(self):
        if not (isinstance(self.clone, str) and type(self.versioned) is bool
                and (self.not_uniform is None or isinstance(self.not_uniform, str))
                and (self.barrier_loop is None or type(self.barrier_loop) is int)
                and (self.sized_at_launch is None or isinstance(self.sized_at_launch, str))):
            raise ValueError(f"not the facts of an instrumented copy: {self!r}")


class Backend(Protocol):
    name: str  # its registry entry's name (registry.py holds its facts)

    def parse_keys(self, table: Table, source: Path) -> BackendKeys:
        """The keys of the spec's top-level `table` only this backend reads (its registry entry's
        `spec_keys`), as a frozen BackendKeys; `source` is the spec's source, confined already. Raise
        SpecError (table.error) at a bad one's line, or at a key of another backend's that this one
        refuses in its own words (the spec reader refuses any left with a message of its own)."""

    def expression_problem(self, expr: str) -> str | None:
        """Why `expr` is not one expression on one line of the backend's language (None if it is)."""

    def check(self, spec: ProbeSpec) -> None:
        """The backend's own rules on a parsed spec (plan.make_plan calls it): raise SpecError,
        naming the spec's line, for a spec it cannot instrument."""

    def rewrite(self, plan: Plan, text: str, launchers: dict[str, str] | None = None) -> Rewrite:
        """The instrumented source for the plan's spec, and each of the spec's launchers (rel path
        -> clean text) rewritten in Rewrite.launchers (a backend whose specs name no launchers
        ignores them); AnchorError/SpecError when a site cannot be placed."""

    def capture(self, manifest: Manifest, cmd: list[str], out_dir: Path, env: dict[str, str]) -> None:
        """Run `cmd` (the user's program) so that the instrumented kernel's launches land in
        `out_dir` as `<kernel>-launch<N>.atrex` + sidecar; CaptureError when it cannot."""


def check_expressions(spec: ProbeSpec, backend: Backend) -> None:
    """Every payload and predicate read as one expression of the backend's language."""
    language = registry.info(backend.name).language
    for i, site in enumerate(spec.sites):
        for key, expr in (("predicate", site.predicate), ("payload", site.payload)):
            why = backend.expression_problem(expr) if expr is not None else None
            if why:
                raise SpecError(f"site {site.name!r}: {key} {expr!r} {why}", path=str(spec.path),
                                line=spec.line_of("site", i, key),
                                hint=f"write one {language} expression on one line; it is pasted into the generated "
                                     "code as is")


def check_own_buffers(spec: ProbeSpec, backend: Backend) -> None:
    """Refuse the recorder's buffer options (staging rings, packed events) where the backend records
    to buffers of its own."""
    why = registry.info(backend.name).own_buffers_refused
    if why is None:
        return
    c = spec.capture
    if c.packed:
        raise SpecError(f"capture.packed applies to the recorder's own buffers ({why})", path=str(spec.path),
                        line=spec.line_of("capture", "packed"), hint="drop `packed`")
    if c.recorder not in ("auto", "global") or c.warps or c.ring:
        own = " and ".join(n for n in registry.names() if not registry.info(n).own_buffers_refused)
        key = next(k for k, v in (("recorder", c.recorder not in ("auto", "global")), ("warps", c.warps), ("ring", c.ring))
                   if v)
        raise SpecError(f"capture.{key} applies to the {own} backend's recorder ({why})", path=str(spec.path),
                        line=spec.line_of("capture", key), hint=f"drop `{key}`")
