"""Resolve a site's anchor to exactly one statement of the kernel, or explain why not."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import AnchorError
from ..spec import ProbeSpec, Site
from .source import LOOP_KINDS, Kernel, SourceFile, Stmt, asm_instructions
from .ptx import opcode_matches

PATTERN_KINDS = {"simple_stmt", "asm_stmt", "return_stmt", "break_stmt", "continue_stmt", "do_stmt", "for_stmt",
                 "while_stmt", "if_stmt", "switch_stmt"}
_CALL_TOKEN = re.compile(r"->|::|\w+|\S")


@dataclass(frozen=True)
class Match:
    stmt: Stmt
    what: str  # how the candidate reads in a message


def _squash(s: str) -> str:
    return re.sub(r"\s+", "", s)


def _statements(kernel: Kernel):
    return [s for s in kernel.body.walk() if s is not kernel.body]


def _calls(stmt: Stmt) -> list[tuple[int, str]]:
    """(token index, qualified callee) for each call among the statement's own tokens."""
    toks = stmt.own
    out = []
    for i, t in enumerate(toks):
        if t.type != "WORD" or i + 1 >= len(toks):
            continue
        nxt = toks[i + 1].value
        if nxt != "(" and nxt != "<":
            continue
        j = i
        while j >= 2 and toks[j - 1].value in ("::", ".", "->") and toks[j - 2].type == "WORD":
            j -= 2
        out.append((i, "".join(x.value for x in toks[j:i + 1])))
    return out


def _call_matches(callee: str, pattern: str) -> bool:
    want = _CALL_TOKEN.findall(pattern)
    have = _CALL_TOKEN.findall(callee)
    return have[-len(want):] == want


def candidates(kernel: Kernel, site: Site) -> tuple[list[Match], list[Match]]:
    """(matches, everything of that anchor kind) — the second list feeds 'no match' messages."""
    kind, pat = site.anchor.kind, site.anchor.pattern
    stmts = _statements(kernel)
    every: list[Match] = []
    hits: list[Match] = []
    if kind == "call":
        for s in stmts:
            for _, callee in _calls(s):
                m = Match(s, f"call {callee}")
                every.append(m)
                if _call_matches(callee, pat):
                    hits.append(m)
    elif kind == "ptx":
        for s in stmts:
            if s.kind == "asm_stmt":
                for ins in asm_instructions(s):
                    m = Match(s, f"ptx {ins.opcode}")
                    every.append(m)
                    if opcode_matches(ins.opcode, pat):
                        hits.append(m)
    elif kind == "loop":
        for s in stmts:
            if s.kind in LOOP_KINDS:
                m = Match(s, f"{s.kind.removesuffix('_stmt')} loop")
                every.append(m)
                if _squash(pat) in _squash(s.text):
                    hits.append(m)
    elif kind == "stmt":
        for s in stmts:
            if s.kind in PATTERN_KINDS:
                m = Match(s, "statement")
                every.append(m)
                if _squash(pat) in _squash(s.text):
                    hits.append(m)
    return hits, every


def resolve(spec: ProbeSpec, src: SourceFile, kernel: Kernel, site: Site) -> Stmt:
    hits, every = candidates(kernel, site)
    a = site.anchor
    where = str(spec.path)

    def listing(ms: list[Match], limit: int = 12) -> str:
        rows = []
        for i, m in enumerate(ms[:limit], 1):
            ln = src.lines.line(m.stmt.start)
            rows.append(f"    {i}. {spec.source_rel}:{ln}: {m.what}: {src.lines.line_text(ln).strip()}")
        if len(ms) > limit:
            rows.append(f"    ... and {len(ms) - limit} more")
        return "\n".join(rows)

    if not hits:
        what = f"{a.kind} {a.pattern!r}"
        msg = f"site {site.name!r}: anchor {what} matches nothing in kernel {kernel.name!r}"
        if every:
            msg += f"; the kernel's {a.kind} candidates are:\n" + listing(every)
        raise AnchorError(msg, path=where, line=site.line, hint="change the anchor to one of the candidates")
    if a.occurrence is not None:
        if a.occurrence > len(hits):
            raise AnchorError(f"site {site.name!r}: occurrence {a.occurrence} asked, but the anchor matches "
                              f"{len(hits)} place(s):\n" + listing(hits), path=where, line=site.line)
        return hits[a.occurrence - 1].stmt
    distinct = list(dict.fromkeys(m.stmt for m in hits))
    if len(distinct) > 1:
        raise AnchorError(f"site {site.name!r}: anchor {a.kind} {a.pattern!r} matches {len(hits)} places:\n"
                          + listing(hits), path=where, line=site.line,
                          hint="add `occurrence = N` to the anchor table or make the pattern more specific")
    return distinct[0]
