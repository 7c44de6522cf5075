"""Where a spec's paths may point: the project tree a spec's files stay inside (find_root), and the
one check every path a spec or manifest names goes through (confine). Kept apart from the parser
so a backend reading its own path keys (Backend.parse_keys) confines them the same way."""
from __future__ import annotations

from pathlib import Path

from .errors import SpecError

ROOT_MARKERS = (".git", ".atrex")
NEVER_TARGETS = {".atrex", ".git"}  # the tool's own state and git's are never instrumented


def _marked(path: Path) -> Path | None:
    """The nearest folder above `path` holding .git or .atrex (the tool's workspace: `mkdir .atrex`
    marks a tree that is not a git checkout, a tarball's, say)."""
    return next((p for p in path.parents if any((p / m).exists() for m in ROOT_MARKERS)), None)


def find_root(spec_path: Path, source: str | None = None) -> Path:
    """The project tree: the source's repository, the nearest folder above the source holding .git
    or .atrex, so a spec kept outside the source's tree needs no --root; where none is above the
    source (or `source` is not given), the nearest one above the spec, else the spec's folder."""
    try:
        at_source = _marked((spec_path.parent / source).resolve()) if source else None
    except (OSError, ValueError):  # a path confine() refuses by name
        at_source = None
    return at_source or _marked(spec_path) or spec_path.parent


def confine(rel: str, base: Path, root: Path, where: str, line: int | None) -> Path:
    """Resolve a spec or manifest path and refuse anything outside the project tree, inside the
    tool's or git's own state, or not a regular file."""
    def refuse(msg: str, hint: str = "name a file inside the project, relative to the spec") -> SpecError:
        return SpecError(msg, path=where, line=line, hint=hint)

    if not isinstance(rel, str) or not rel or not rel.isprintable() or len(rel) > 4096:
        raise refuse(f"path {str(rel)[:80]!r} is empty, too long, or holds control characters")
    try:
        p = Path(rel)
        full = (p if p.is_absolute() else base / p).resolve()
        inside = full.relative_to(root)
    except ValueError:
        raise refuse(f"path {rel!r} leaves the project tree {root}",
                     hint="name a file inside the project; the tree's root is the nearest folder above the source "
                          "holding .git or .atrex (mkdir .atrex there), or pass --root") from None
    except OSError as e:
        raise refuse(f"path {rel!r} cannot be resolved: {e.strerror}") from None
    if NEVER_TARGETS & set(inside.parts):
        raise refuse(f"path {rel!r} is inside {'/'.join(NEVER_TARGETS & set(inside.parts))}/, which atrex-inject "
                     "and git own", hint="name the kernel source itself, not the tool's saved copies")
    try:
        regular = full.is_file()
    except OSError as e:
        raise refuse(f"path {rel!r} cannot be read: {e.strerror}") from None
    if not regular:
        raise refuse(f"source file {rel!r} does not exist ({full})")
    return full
