"""Resolve a site's anchor to exactly one statement of the kernel, or explain why not."""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from ..anchoring import Candidate, call_matches, listing, pick, squash
from ..errors import AnchorError
from ..spec import ProbeSpec, Site
from .source import JUMP_KINDS, LOOP_KINDS, Kernel, Kind, SourceFile, Stmt, asm_instructions
from .ptx import opcode_matches

PATTERN_KINDS = {Kind.SIMPLE, Kind.ASM, Kind.IF, Kind.SWITCH} | JUMP_KINDS | LOOP_KINDS


@dataclass(frozen=True)
class Match:
    stmt: Stmt
    what: str  # how the candidate reads in a message
    in_lambda: bool = False  # the match is inside a lambda body held by `stmt`: no probe can go there
    at: int = field(default=-1, compare=False)  # offset of a lambda match, for its line (-1: the statement's start)


# Tokens that only a statement can hold: a braced group with one at its own level is code, not data.
CODE_TOKENS = {"SEMI", "VSEMI", "FOR", "WHILE", "DO", "IF", "SWITCH", "RETURN", "BREAK", "CONTINUE", "CASE",
               "DEFAULT", "ASM", "ASM_GNU", "ASM_ALT"}


def _lambda_spans(toks) -> list[tuple[int, int]]:
    """(open, close) token indices of the outermost lambda bodies among a statement's own tokens.

    The grammar keeps a lambda inside the statement that holds it, so a probe anchored in its body
    could only go before or after that whole statement. A braced group is a lambda body (or a GNU
    statement expression) when it holds a `;` or a statement keyword at its own level; an
    initializer list never does."""
    spans, stack = [], []  # stack: [open index, paren depth inside the group, holds code]
    for j, t in enumerate(toks):
        if t.type == "LBRACE":
            stack.append([j, 0, False])
        elif t.type == "RBRACE" and stack:
            i, _, code = stack.pop()
            if code:
                spans = [sp for sp in spans if not i < sp[0]] + [(i, j)]
        elif stack:
            top = stack[-1]
            if t.type in ("LPAR", "LSQB"):
                top[1] += 1
            elif t.type in ("RPAR", "RSQB"):
                top[1] -= 1
            elif top[1] == 0 and t.type in CODE_TOKENS:
                top[2] = True
    return spans


def _statements(kernel: Kernel):
    return [s for s in kernel.body.walk() if s is not kernel.body]


def _template_call(toks, i: int) -> bool:
    """Does the `<` at toks[i] open template arguments followed by `(`? `f<T, 4>(x)` does;
    `k < steps)` and `a < b && c > (d)` do not: a comparison reaches a `;`, an unmatched `)`, `&&`,
    `||` or a brace before its `>` closes, or the `>` is not followed by `(`."""
    angle = nest = 0
    for j in range(i, len(toks)):
        t = toks[j]
        if t.type in ("SEMI", "VSEMI", "LBRACE", "RBRACE") or t.value in ("&&", "||"):
            return False
        if t.type in ("LPAR", "LSQB"):
            nest += 1
        elif t.type in ("RPAR", "RSQB"):
            nest -= 1
            if nest < 0:
                return False
        elif nest == 0 and t.value.strip("<>") == "":  # `<`, `>`, and `>>>` closing three levels
            angle += t.value.count("<") - t.value.count(">")
            if angle <= 0:
                return angle == 0 and j + 1 < len(toks) and toks[j + 1].type == "LPAR"
    return False


def _calls(stmt: Stmt) -> list[tuple[int, str]]:
    """(token index, qualified callee) for each call among the statement's own tokens."""
    toks = stmt.own
    out = []
    for i, t in enumerate(toks):
        if t.type != "WORD" or i + 1 >= len(toks):
            continue
        nxt = toks[i + 1].value
        if nxt != "(" and not (nxt == "<" and _template_call(toks, i + 1)):
            continue
        j = i
        while j >= 2 and toks[j - 1].value in ("::", ".", "->") and toks[j - 2].type == "WORD":
            j -= 2
        out.append((i, "".join(x.value for x in toks[j:i + 1])))
    return out


LOOP_TOKENS = {"FOR", "WHILE", "DO"}


def _find(toks, pat: str):
    """The token where the squashed pattern first starts in the tokens' squashed text, or None."""
    text, ends = "", []
    for t in toks:
        text += squash(t.value)
        ends.append(len(text))
    i = text.find(pat) if pat else -1
    return None if i < 0 else toks[bisect.bisect_right(ends, i)]


def candidates(kernel: Kernel, site: Site) -> tuple[list[Match], list[Match]]:
    """(matches, the placeable candidates of that anchor kind) — the second list feeds 'no match'
    messages. Matches inside a lambda body are flagged (resolve refuses them) and are no candidates."""
    kind, pat = site.anchor.kind, squash(site.anchor.pattern)
    every: list[Match] = []
    hits: list[Match] = []
    for s in _statements(kernel):
        toks = s.own
        spans = _lambda_spans(toks)

        def inside(j: int) -> tuple[int, int] | None:
            return next((sp for sp in spans if sp[0] < j < sp[1]), None)
        if kind == "call":
            for j, callee in _calls(s):
                lam = inside(j) is not None
                m = Match(s, f"call {callee}" + (" inside a lambda" if lam else ""), lam,
                          toks[j].start_pos if lam else -1)
                if not lam:
                    every.append(m)
                if call_matches(callee, site.anchor.pattern):
                    hits.append(m)
        elif kind == "ptx" and s.kind == Kind.ASM:
            found = asm_instructions(s, kernel.macros)
            if found is None:
                every.append(Match(s, "asm whose PTX template atrex-inject cannot read (no opcode of it can match)"))
            # one candidate per opcode and one match per asm statement: `occurrence` counts asm
            # statements, however many matching instructions a template holds
            opcodes = list(dict.fromkeys(ins.opcode for ins in found or []))
            every += [Match(s, f"ptx {op}") for op in opcodes]
            hits += [Match(s, f"ptx {op}") for op in opcodes if opcode_matches(op, site.anchor.pattern)][:1]
        elif kind in ("loop", "stmt"):
            if s.kind in (LOOP_KINDS if kind == "loop" else PATTERN_KINDS):
                m = Match(s, f"{s.kind.word} loop" if kind == "loop" else "statement")
                every.append(m)
                outside = "".join(t.value for j, t in enumerate(toks) if inside(j) is None)
                if pat in squash(outside):
                    hits.append(m)
                    continue
            for a, b in spans:
                inner = toks[a + 1:b]
                found = _find(inner, pat)
                if found is not None and (kind == "stmt" or any(t.type in LOOP_TOKENS for t in inner)):
                    hits.append(Match(s, f"{kind} inside a lambda", True, found.start_pos))
                    break
    return hits, every


def resolve(spec: ProbeSpec, src: SourceFile, kernel: Kernel, site: Site) -> Stmt:
    hits, every = candidates(kernel, site)

    def row(m: Match) -> Candidate:
        ln = src.lines.line(m.at if m.at >= 0 else m.stmt.start)
        return Candidate(m, m.what, ln, src.lines.line_text(ln).strip())
    rows = [row(m) for m in every]
    helpers = [(f, ln) for f, ln, found in src.helper_asm if site.anchor.kind == "ptx"
               and any(opcode_matches(i.opcode, site.anchor.pattern) for i in found)]
    if not hits and helpers:
        where = ", ".join(f"{f} ({spec.source_rel}:{ln})" for f, ln in helpers)
        raise AnchorError(f"site {site.name!r}: anchor ptx {site.anchor.pattern!r} matches nothing in kernel "
                          f"{kernel.name!r}; that opcode is in the asm of {where}, outside the kernel",
                          path=str(spec.path), line=site.line,
                          hint=f'anchor the kernel\'s call of that function instead: call = "{helpers[0][0]}"')
    chosen = pick(spec, site, kernel.name, [row(m) for m in hits], rows)
    if chosen.in_lambda:
        ln = row(chosen).line
        raise AnchorError(f"site {site.name!r}: anchor {site.anchor.kind} {site.anchor.pattern!r} matches inside a "
                          f"lambda at {spec.source_rel}:{ln}; a probe cannot be placed inside a lambda body (it would "
                          f"land before or after the whole statement at line {src.lines.line(chosen.stmt.start)})"
                          + (f"; the kernel's placeable {site.anchor.kind} candidates are:\n" + listing(spec, rows)
                             if rows else f"; the kernel has no placeable {site.anchor.kind} candidate"),
                          path=str(spec.path), line=site.line,
                          hint="anchor the statement that calls the lambda, or one of the candidates")
    return chosen.stmt
