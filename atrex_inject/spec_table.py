"""Reading a spec's TOML tables key by key: each value checked for its type (an integer also for
the range the generated code and the capture format can hold), each refusal a SpecError at the
line of the key, or of its table where the key is missing. The generic parser (spec.py) and each
backend's own keys (Backend.parse_keys) read through it, so every refusal reads alike."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Collection

from .errors import SpecError
from .layout import U32
from .spec_paths import confine


class KeyLines:
    """Maps TOML key paths to their line numbers: tomllib keeps no positions."""

    HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\"-]+)\s*\]\]?")
    KEY = re.compile(r"^\s*([A-Za-z0-9_\"-]+)\s*=")

    def __init__(self, text: str):
        self.lines: dict[tuple, int] = {}
        self.headers: dict[tuple, int] = {}  # the paths written as a [table] or [[table]] header -> its line
        table: tuple = ()
        counts: dict[str, int] = {}
        for no, line in enumerate(text.split("\n"), 1):  # TOML lines end at \n only
            m = self.HEADER.match(line)
            if m:
                name = m.group(2).strip('"')
                if m.group(1) == "[[":
                    counts[name] = counts.get(name, -1) + 1
                    table = (name, counts[name])
                else:
                    table = (name,)
                self.lines.setdefault(table, no)
                self.headers.setdefault(table, no)
                continue
            m = self.KEY.match(line)
            if m:
                self.lines.setdefault(table + (m.group(1).strip('"'),), no)

    def of(self, *path) -> int | None:
        """The line of `path`, or of the nearest table holding it; None when there is none."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None


@dataclass(frozen=True)
class SpecFile:
    """The spec being read: its file, its key lines, and (once its source names it) the project
    tree its paths must stay inside."""
    path: Path
    lines: KeyLines
    root: Path | None = None

    def error(self, msg: str, *keypath, hint: str | None = None) -> SpecError:
        """A refusal at the line of `keypath`: a missing key has none, so it points at its table
        (a top-level key before the first table: line 1)."""
        return SpecError(msg, path=str(self.path), line=self.lines.of(*keypath) or 1, hint=hint)


@dataclass(frozen=True)
class Table:
    """One TOML table of the spec at key path `at` (() the top level, ("capture",),
    ("site", 0)), read one key at a time."""
    data: dict
    at: tuple
    file: SpecFile

    def error(self, msg: str, *keys, hint: str | None = None) -> SpecError:
        return self.file.error(msg, *self.at, *keys, hint=hint)

    def refuse_unknown(self, allowed: Collection[str]) -> None:
        """Refuse the first key not in `allowed`, listing those that are."""
        for k in self.data:
            if k not in allowed:
                raise self.error(f"unknown key {k!r}", k, hint=f"allowed keys here: {', '.join(sorted(allowed))}")

    def get(self, key: str, kind: type, default=None):
        """The value of a string, bool, list or table key (`default` where it is missing)."""
        if key not in self.data:
            return default
        v = self.data[key]
        if not isinstance(v, kind):
            raise self.error(f"{key!r} must be a {kind.__name__}, not {type(v).__name__}", key)
        return v

    def integer(self, key: str, default: int | None = None, lo: int = 0, hi: int = U32, unit: str = "") -> int | None:
        """The value of an integer key, within [lo, hi] (`unit` names what it counts)."""
        if key not in self.data:
            return default
        v = self.data[key]
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.error(f"{key!r} must be an integer, not {v!r}", key)
        if not lo <= v <= hi:
            label = re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", ".".join(map(str, (*self.at, key))))
            raise self.error(f"{label} must be between {lo} and {hi}{unit}, not {v}", key)
        return v

    def require(self, key: str, kind: type):
        """The value of a key the spec must give."""
        if key not in self.data:
            raise self.error(f"missing required key {key!r}", hint=f"add `{key} = ...`")
        return self.integer(key) if kind is int else self.get(key, kind)

    def table(self, key: str) -> Table:
        """The sub-table `key` (empty where it is missing)."""
        return Table(self.get(key, dict, {}), (*self.at, key), self.file)

    def path(self, rel: str, key: str) -> Path:
        """`rel`, the value of `key`, as an absolute path confined to the project tree."""
        spec = self.file
        return confine(rel, spec.path.parent, spec.root, str(spec.path), spec.lines.of(*self.at, key))
