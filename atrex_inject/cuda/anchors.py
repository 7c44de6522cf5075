"""Resolve a site's anchor to exactly one statement of the kernel, or explain why not."""
from __future__ import annotations

from dataclasses import dataclass

from ..anchoring import Candidate, call_matches, pick, squash
from ..spec import ProbeSpec, Site
from .source import LOOP_KINDS, Kernel, SourceFile, Stmt, asm_instructions
from .ptx import opcode_matches

PATTERN_KINDS = {"simple_stmt", "asm_stmt", "return_stmt", "break_stmt", "continue_stmt", "do_stmt", "for_stmt",
                 "while_stmt", "if_stmt", "switch_stmt"}


@dataclass(frozen=True)
class Match:
    stmt: Stmt
    what: str  # how the candidate reads in a message


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
                if call_matches(callee, pat):
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
                if squash(pat) in squash(s.text):
                    hits.append(m)
    elif kind == "stmt":
        for s in stmts:
            if s.kind in PATTERN_KINDS:
                m = Match(s, "statement")
                every.append(m)
                if squash(pat) in squash(s.text):
                    hits.append(m)
    return hits, every


def resolve(spec: ProbeSpec, src: SourceFile, kernel: Kernel, site: Site) -> Stmt:
    hits, every = candidates(kernel, site)

    def row(m: Match) -> Candidate:
        ln = src.lines.line(m.stmt.start)
        return Candidate(m.stmt, m.what, ln, src.lines.line_text(ln).strip())
    return pick(spec, site, kernel.name, [row(m) for m in hits], [row(m) for m in every])
