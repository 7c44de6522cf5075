"""The backends by name: what a spec's `backend = "..."` may say, the facts every stage needs
about each one, and the module that implements it (loaded on first use, so reading a spec, a
manifest or a capture loads no rewriter).

This module sits at the bottom of the import graph: the spec and manifest readers check a name
here, decode reads a fact here; the spec reader has the backend object read the keys only it
reads (a backend module loads its rewriter when it rewrites), and apply, capture and the checks
use the rest of it. It also names the route modules whose checks validation runs (CHECK_MODULES).
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
    # the top-level spec keys (and tables) only this backend reads, with its Backend.parse_keys; here, not on
    # the backend, so the spec reader can name every allowed key and refuse these in another backend's spec
    spec_keys: tuple[str, ...] = ()


REGISTRY = {e.name: e for e in (
    Entry("cuda", "atrex_inject.cuda.backend", "C++", None, False,
          ("declared_by", "launchers", "cuda_string", "build")),
    Entry("cutedsl", "atrex_inject.cutedsl.backend", "Python", "IKeT buffers its own events", True),
)}


# the modules that register validation checks of a route (each defines ROUTE, a checks.Route), in the
# order their rules and notes run after validate's own: checks.registered loads them by name, so
# validate imports no route. A route whose files validate should check adds its module here.
CHECK_MODULES = ("atrex_inject.cutedsl.checks", "atrex_inject.cuda.python.checks", "atrex_inject.measure")


def names() -> tuple[str, ...]:
    """The registered backends' names, in registry order."""
    return tuple(REGISTRY)


def spec_keys() -> tuple[str, ...]:
    """The top-level spec keys some backend reads alone (Entry.spec_keys), in registry order."""
    return tuple(dict.fromkeys(k for e in REGISTRY.values() for k in e.spec_keys))


def info(name: str) -> Entry:
    """A backend's facts; KeyError for a name not in REGISTRY (the spec and manifest readers refuse those)."""
    return REGISTRY[name]


def get(name: str):
    """The backend object (backend.Backend) a spec or manifest names."""
    return importlib.import_module(REGISTRY[name].module).BACKEND
