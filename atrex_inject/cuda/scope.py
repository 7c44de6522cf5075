"""Is a pasted expression (a site's payload, a role's predicate) in scope where it is pasted?

The spec's expressions are pasted into the kernel as written; one that names a local of the kernel
declared where the probe cannot see it (after a loop, the loop's counter; at entry, a local
declared below) compiles nowhere, and without nvcc nothing would say so before the user's build.
The kernel's locals are read from its statements (a declarator: a name after a type word, `*`, `&`
or `>`, followed by `=`, `;`, `,`, `[`, `{` or `(`), each visible from its declaration to the end
of the block holding it, or inside its loop for a `for` header's. A name no local declares (a
parameter, a global, a builtin) is left to the compiler.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .source import LOOP_KINDS, Kernel, Kind, Lines, Stmt

_NAME = re.compile(r"(?<![\w.>:])([A-Za-z_]\w*)\b(?!\s*::)")
_PARAM = re.compile(r"([A-Za-z_]\w*)\s*(?=[,)=\[])")
_BEFORE = {"WORD", "GT"}
_AFTER = {"=", ";", ",", "[", "{", "("}


@dataclass(frozen=True)
class Local:
    name: str
    start: int  # visible from here ...
    end: int  # ... to here (the end of its block, or of its loop)
    line: int


def _declared(toks, start: int, end: int, lines: Lines) -> list[Local]:
    """The declarators among a statement's own tokens, visible from the statement to `end`."""
    out, depth = [], 0
    for i, t in enumerate(toks):
        if t.type in ("LPAR", "LSQB", "LBRACE"):
            depth += 1
        elif t.type in ("RPAR", "RSQB", "RBRACE"):
            depth -= 1
        elif depth == 0 and t.type == "WORD" and 0 < i < len(toks) - 1 and toks[i + 1].value in _AFTER and (
                toks[i - 1].type in _BEFORE or toks[i - 1].value in ("*", "&", "&&")):
            out.append(Local(t.value, start, end, lines.line(t.start_pos)))
    return out


def _header(loop: Stmt, lines: Lines) -> list[Local]:
    """A `for` header's declarations, visible inside the loop: its tokens after `(` up to the first `;`."""
    toks = loop.own[2:]
    semi = next((i for i, t in enumerate(toks) if t.type == "SEMI"), -1)
    return _declared(toks[:semi + 1], loop.start, loop.end, lines)


def locals_of(kernel: Kernel, lines: Lines) -> list[Local]:
    """Every local the kernel's body declares, with where it is visible."""
    out = []
    for s in kernel.body.walk():
        if s.kind == Kind.SIMPLE and s.parent is not None:
            scope_end = s.parent.end if s.parent.kind == Kind.BLOCK else s.end
            out += _declared(s.own, s.end, scope_end, lines)
        elif s.kind == Kind.FOR:
            out += _header(s, lines)
    return out


def parameters(kernel: Kernel) -> set[str]:
    """The kernel's parameter names (the words before `,`, `)`, `=` or `[` in its head's parentheses)."""
    head = kernel.text[kernel.name_end:kernel.body_start]
    return set(_PARAM.findall(head[head.find("("):]))


def hidden(expr: str, at: int, locals_: list[Local], params: set[str]) -> Local | None:
    """A local `expr` names that is declared in the kernel but not visible at offset `at`, where no
    other declaration of that name is (and no parameter: a local may shadow one)."""
    names = set(_NAME.findall(expr)) - params
    for loc in locals_:
        if loc.name in names and not any(o.name == loc.name and o.start <= at < o.end for o in locals_):
            return loc
    return None


def point(stmt: Stmt, position: str) -> int:
    """Where a site's probe goes, as an offset whose visible locals are the probe's."""
    if position in ("loop-begin", "loop-end") and stmt.kind in LOOP_KINDS and stmt.body is not None:
        return stmt.body.start + 1 if position == "loop-begin" else stmt.body.end - 1
    return stmt.start if position == "before" else stmt.end
