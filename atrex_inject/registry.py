"""The backends by name: what a spec's `backend = "..."` may say, the facts every stage needs
about each one, and the module that implements it (loaded on first use, so reading a spec, a
manifest or a capture loads no rewriter).

This module sits at the bottom of the import graph: the spec and manifest readers check a name
here, decode reads a fact here, and only apply, capture and the checks load a backend object.
To add a backend, write a package with a module that defines `BACKEND` (an object with the
attributes and methods of backend.Backend) and add its entry to REGISTRY (docs/api.md, "A new
backend").
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    name: str  # what a spec's `backend` says
    module: str  # the module defining BACKEND
    language: str  # of payload and predicate expressions, for messages ("C++", "Python")
    # why the recorder's own buffer options ([capture] recorder, staging, packed) do not apply; None: they do
    own_buffers_refused: str | None
    capacity_from_header: bool  # its captures size every owner to the fullest one, not to the spec's capacity


REGISTRY = {e.name: e for e in (
    Entry("cuda", "atrex_inject.cuda.backend", "C++", None, False),
    Entry("cutedsl", "atrex_inject.cutedsl.backend", "Python", "IKeT buffers its own events", True),
)}


def names() -> tuple[str, ...]:
    """The registered backends' names, in registry order."""
    return tuple(REGISTRY)


def info(name: str) -> Entry:
    """A backend's facts; KeyError for a name not in REGISTRY (the spec and manifest readers refuse those)."""
    return REGISTRY[name]


def get(name: str):
    """The backend object (backend.Backend) a spec or manifest names."""
    return importlib.import_module(REGISTRY[name].module).BACKEND
