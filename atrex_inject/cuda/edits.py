"""Insertions into a parsed CUDA source, rendered with the file's own layout.

The rewriter's steps (recorders, sites, sampled loops, the instrumented copy, launch wrapping)
each add insertions or replacements here; render() lays them out once: whole-line probes on
lines of their own with the statement's indent and the file's line ending, inline ones otherwise,
so every byte of the original stays, in order.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from .source import Kind, SourceFile, Stmt

# Ordering of insertions that share an offset: text after a statement, then a block's first line,
# then a block's last line, then text before the next statement.
AFTER, BLOCK_BEGIN, BLOCK_END, BEFORE = 0, 1, 2, 3


class Edits:
    """Collects insertions by statement and side, then renders them with the source's layout."""

    def __init__(self, src: SourceFile):
        self.src = src
        # inserted lines end like the file's lines: CRLF in a CRLF file, so no file gets mixed endings
        self.nl = "\r\n" if src.text.count("\r\n") * 2 > src.text.count("\n") else "\n"
        self.sides: dict[Stmt, dict[str, list[tuple[str, str]]]] = {}
        self.raw: list[tuple[int, int, int, str]] = []  # offset, rank, tiebreak, text
        self.replacements: list[Replacement] = []

    def before(self, s: Stmt, code: str, label: str):
        self.sides.setdefault(s, {"before": [], "after": []})["before"].append((code, label))

    def after(self, s: Stmt, code: str, label: str):
        self.sides.setdefault(s, {"before": [], "after": []})["after"].append((code, label))

    def insert(self, offset: int, rank: int, text: str, tiebreak: int = 0):
        self.raw.append((offset, rank, tiebreak, text))

    # -- layout helpers --
    def indent(self, off: int) -> str:
        line = self.src.lines.line_text(self.src.lines.line(off))
        return line[: len(line) - len(line.lstrip())]

    def starts_line(self, off: int) -> bool:
        return self.src.text[self.src.lines.line_start(off):off].strip() == ""

    def rest_blank(self, off: int) -> bool:
        rest = self.src.text[off:self.src.lines.line_end(off)].strip()
        return rest == "" or (rest.startswith("//") and not rest.endswith("\\"))

    def lines_of(self, items, indent: str) -> str:
        return "".join(f"{indent}{code}  // atrex: {label}{self.nl}" for code, label in items)

    @staticmethod
    def inline(items) -> str:
        return " ".join(f"{code} /* atrex: {label} */" for code, label in items)

    def block_begin(self, block: Stmt, items):
        off = block.start + 1
        first = next((c for c in block.children if c.kind != Kind.PP), None)
        inner = self.indent(first.start) if first is not None and self.starts_line(first.start) \
            else self.indent(block.start) + "  "
        if self.rest_blank(off):
            self.insert(self.src.lines.line_end(off) + 1, BLOCK_BEGIN, self.lines_of(items, inner))
        else:
            self.insert(off, BLOCK_BEGIN, " " + self.inline(items))

    def block_end(self, block: Stmt, items):
        off = block.end - 1
        if self.starts_line(off):
            first = next((c for c in block.children if c.kind != Kind.PP), None)
            inner = self.indent(first.start) if first is not None and self.starts_line(first.start) \
                else self.indent(off) + "  "
            self.insert(self.src.lines.line_start(off), BLOCK_END, self.lines_of(items, inner))
        else:
            self.insert(off, BLOCK_END, self.inline(items) + " ")

    def statement(self, s: Stmt, before, after, wrap: bool, depth: int):
        """Probes before/after statement `s`; `before` goes above the #pragma lines that lead it, indented
        like the statement itself."""
        start, end, ind = s.lead, s.end, self.indent(s.start)
        if wrap:
            opening = "{ " + "".join(self.inline([b]) + " " for b in before)
            if self.src.text.startswith("#", start):  # a directive must stay first on its line
                self.insert(self.src.lines.line_start(start), BEFORE, ind + opening + self.nl, depth)
            else:
                self.insert(start, BEFORE, opening, depth)
            self.insert(end, AFTER, "".join(" " + self.inline([a]) for a in after) + " }", -depth)
            return
        if before:
            if self.starts_line(start):
                self.insert(self.src.lines.line_start(start), BEFORE, self.lines_of(before, ind), depth)
            else:
                self.insert(start, BEFORE, self.inline(before) + " ", depth)
        if after:
            if self.rest_blank(end):
                self.insert(self.src.lines.line_end(end) + 1, AFTER, self.lines_of(after, ind), -depth)
            else:
                self.insert(end, AFTER, " " + self.inline(after), -depth)

    def replace(self, a: int, b: int, gen, inclusive: bool) -> "Replacement":
        """Replace text[a:b] with gen(); insertions strictly inside belong to the replacement (gen
        renders them with span), those exactly at a or b too when `inclusive`."""
        self.replacements.append(Replacement(a, b, gen, inclusive))
        return self.replacements[-1]

    def span(self, a: int, b: int, exclude: "Replacement | None" = None) -> str:
        """text[a:b] with the insertions in [a, b] and the replacements inside it rendered."""
        inner = [r for r in self.replacements if r is not exclude and a <= r.a and r.b <= b]
        top = sorted((r for r in inner if not any(o is not r and o.a <= r.a and r.b <= o.b for o in inner)),
                     key=lambda r: r.a)
        out, pos, lo_in = [], a, True
        for r in top:
            out.append(self._plain(pos, r.a, lo_in, not r.inclusive))
            out.append(r.gen())
            pos, lo_in = r.b, not r.inclusive
        out.append(self._plain(pos, b, lo_in, True))
        return "".join(out)

    def _plain(self, a: int, b: int, lo_in: bool, hi_in: bool) -> str:
        text = self.src.text
        out, pos = [], a
        for off, _, _, ins in sorted((r for r in self.raw if (a < r[0] < b) or (r[0] == a and lo_in)
                                      or (r[0] == b and hi_in and b != a)), key=lambda r: (r[0], r[1], r[2])):
            out.append(text[pos:off])
            out.append(ins)
            pos = off
        out.append(text[pos:b])
        return "".join(out)

    def render(self, prefix: str) -> str:
        """The rewritten text; `prefix` (the recorder's definitions) goes at the top, or after a
        header's include guard."""
        for s, side in self.sides.items():
            depth = 0
            p = s.parent
            while p is not None:
                depth, p = depth + 1, p.parent
            self.statement(s, side["before"], side["after"], wrap=not s.in_block, depth=depth)
        if prefix:
            self.insert(_prefix_offset(self.src.text), -1, prefix.replace("\n", self.nl))
        return self.span(0, len(self.src.text))


_LEADING = r"(?:\s|//[^\n]*|/\*.*?\*/)*"  # whitespace and comments before a file's first directive
_ONCE_OR_GUARD = re.compile(_LEADING + r"#[ \t]*(?:pragma[ \t]+once\b|"
                            r"(?:ifndef[ \t]+|if[ \t]+!\s*defined\s*\(?\s*)(\w+)[^\n]*\n"
                            + _LEADING + r"#[ \t]*define[ \t]+\1\b)[^\n]*\n", re.S)


def _prefix_offset(text: str) -> int:
    """Where the instrumentation prefix goes: after a header's `#pragma once` or include guard
    (`#ifndef G` / `#define G`), so a translation unit that includes the header twice defines the
    recorder globals once; else at the top of the file."""
    m = _ONCE_OR_GUARD.match(text)
    return m.end() if m else 0


@dataclass(eq=False)
class Replacement:
    a: int
    b: int
    gen: Callable[[], str]
    inclusive: bool
