"""Canonical counted loops: the ones a sampled probe may strip-mine without changing what they do.

A sampled site (`every = N`) in a loop used to test a hit counter every iteration, and the test
alone made nvcc give up unrolling the loop (docs/design.md). In a canonical loop

    for (INIT; i < E; i += S) BODY        (also `i <= E`, `++i`, `i++`)

the rewriter can instead issue one probed iteration and N - 1 clean copies of BODY per group of N
iterations, guarded once, then a remainder loop; the compiler sees straight-line copies and keeps
their loads in flight together. That is only the same program when E and S do not change inside
the loop and BODY cannot leave early, so this module checks what it can see in the tokens: `i`,
and every variable of E and S, are never assigned, incremented or address-taken in BODY, BODY has
no break/continue of this loop, return, goto, label or static `__shared__` declaration (which a
copy would duplicate), and E and S call no function.
"""
from __future__ import annotations

from dataclasses import dataclass

from lark import Token

from .source import LOOP_KINDS, Kind, Stmt

ASSIGN_OPS = {"+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"}
STEP_FORBIDDEN = {"=", "++", "--", "<<=", ">>=", "?", ","}


@dataclass(frozen=True)
class CanonicalLoop:
    """A loop the rewriter may strip-mine; texts are the user's own, for pasting."""
    stmt: Stmt
    init: str  # "long i = ..." (may be empty: the variable is declared before the loop)
    var: str
    op: str  # "<" or "<="
    bound: str  # E
    step: str  # S ("1" for ++i / i++)
    incr: str  # the header's third clause, verbatim: reused as a statement between copies
    cond: str  # the header's second clause, verbatim


def _split_header(loop: Stmt) -> list[list[Token]] | None:
    """The three clauses of a for header, as token lists (None if it is not `for (a; b; c)`)."""
    toks = loop.own
    if len(toks) < 3 or toks[1].type != "LPAR":
        return None
    parts: list[list[Token]] = [[]]
    depth = 0
    for t in toks[2:]:
        if t.type in ("LPAR", "LSQB", "LBRACE"):
            depth += 1
        elif t.type in ("RPAR", "RSQB", "RBRACE"):
            if depth == 0:
                break
            depth -= 1
        if t.type == "SEMI" and depth == 0:
            parts.append([])
            continue
        parts[-1].append(t)
    return parts if len(parts) == 3 else None


def _text(src: str, toks: list[Token]) -> str:
    return src[toks[0].start_pos:toks[-1].end_pos] if toks else ""


def _is_member(toks: list[Token], i: int) -> bool:
    return i > 0 and toks[i - 1].value in (".", "->")


def _names(toks: list[Token]) -> set[str]:
    """Variables an expression reads (member names after `.`/`->` are not variables)."""
    return {t.value for i, t in enumerate(toks) if t.type == "WORD" and not _is_member(toks, i)}


def _modified(toks: list[Token]) -> set[str]:
    """Variables a token stream may change: assigned, compound-assigned, ++/--'d or address-taken."""
    out = set()
    for i, t in enumerate(toks):
        if t.type != "WORD" or _is_member(toks, i):
            continue
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        prev = toks[i - 1] if i > 0 else None
        if nxt is not None and nxt.value in ("=", "++", "--", "<<=", ">>="):
            out.add(t.value)
        elif (nxt is not None and nxt.value in ASSIGN_OPS and i + 2 < len(toks) and toks[i + 2].value == "="
              and toks[i + 2].start_pos == nxt.end_pos):
            out.add(t.value)
        elif prev is not None and prev.value in ("++", "--", "&"):
            out.add(t.value)
    return out


def _all_tokens(s: Stmt) -> list[Token]:
    toks = list(s.own)
    for c in s.children:
        toks.extend(_all_tokens(c))
    return sorted(toks, key=lambda t: t.start_pos)


def loop_exits(loop: Stmt) -> list[Stmt]:
    """continue/break statements that leave an iteration of this loop (not of a nested one)."""
    found = []

    def visit(s: Stmt, in_switch: bool):
        for c in s.children:
            if c.kind in LOOP_KINDS:
                continue
            if c.kind == Kind.CONTINUE or (c.kind == Kind.BREAK and not in_switch):
                found.append(c)
            visit(c, in_switch or c.kind == Kind.SWITCH)

    visit(loop, False)
    return found


def canonical_loop(loop: Stmt, src: str) -> CanonicalLoop | str:
    """The loop's canonical form, or the reason (a phrase) it has none."""
    if loop.kind != Kind.FOR:
        return f"it is a {loop.kind.word} loop, not `for (init; i < n; i += s)`"
    parts = _split_header(loop)
    if parts is None:
        return "its header is not `for (init; cond; incr)`"
    init, cond, incr = parts
    eq = [i for i, t in enumerate(init) if t.value == "="]
    if init and (len(eq) != 1 or eq[0] == 0 or init[eq[0] - 1].type != "WORD" or any(t.value == "," for t in init)):
        return "its init clause is not one `i = a` or `T i = a`"
    if len(cond) < 3 or cond[0].type != "WORD" or cond[1].value not in ("<", "<="):
        return "its condition is not `i < n` or `i <= n`"
    var = cond[0].value
    if init and init[eq[0] - 1].value != var:
        return f"its init clause does not set {var}"
    bound = cond[2:]
    vals = [t.value for t in incr]
    if vals in (["++", var], [var, "++"]):
        step: list[Token] = []
    elif len(incr) >= 4 and vals[:3] == [var, "+", "="] and incr[2].start_pos == incr[1].end_pos:
        step = incr[3:]
    else:
        return f"its increment is not `++{var}`, `{var}++` or `{var} += s`"
    for what, toks in (("bound", bound), ("step", step)):
        for i, t in enumerate(toks):
            if t.value in STEP_FORBIDDEN or (t.type == "WORD" and i + 1 < len(toks) and toks[i + 1].type == "LPAR"):
                return f"its {what} `{_text(src, toks)}` is not a plain expression (a call or a side effect)"
    body = loop.body
    exits = loop_exits(loop)
    if exits:
        return f"its body has a {exits[0].kind.word}"
    if any(x.kind == Kind.RETURN for x in body.walk()):
        return "its body has a return"
    body_toks = _all_tokens(body)
    words = [t.value for t in body_toks]
    if "goto" in words:
        return "its body has a goto"
    if any(s.kind == Kind.SIMPLE and len(s.own) > 1 and s.own[0].type == "WORD" and s.own[1].type == "COLON"
           for s in body.walk()):
        return "its body has a label (each copy would define it again)"
    for i, t in enumerate(body_toks):
        if t.value == "__shared__" and "extern" not in words[max(0, i - 3):i + 1]:
            return "its body declares a static __shared__ variable (each copy would allocate it again)"
    changed = _modified(body_toks) & ({var} | _names(bound) | _names(step))
    if changed:
        return f"its body may change {', '.join(sorted(changed))}"
    return CanonicalLoop(loop, _text(src, init), var, cond[1].value, _text(src, bound),
                         _text(src, step) or "1", _text(src, incr), _text(src, cond))


@dataclass(frozen=True)
class LeadingLoads:
    """BODY's first statement, a declaration whose initializers only read (`float4 v = x[i];`), with
    the rest of BODY writing no memory: its N copies' initializers can all be issued at the start of
    a strip-mined group, as the compiler's own unrolling issues the clean loop's loads together."""
    first: Stmt
    type: str  # "const float4"
    decls: tuple[tuple[str, str], ...]  # (name, initializer with the loop variable as {i})


def _top_split(toks: list[Token], sep: str) -> list[list[Token]]:
    parts: list[list[Token]] = [[]]
    depth = 0
    for t in toks:
        if t.type in ("LPAR", "LSQB", "LBRACE"):
            depth += 1
        elif t.type in ("RPAR", "RSQB", "RBRACE"):
            depth -= 1
        if t.value == sep and depth == 0:
            parts.append([])
        else:
            parts[-1].append(t)
    return parts


def _pure(toks: list[Token]) -> bool:
    """No call, assignment or increment: evaluating it earlier changes nothing but its timing."""
    for i, t in enumerate(toks):
        if t.value in ("=", "++", "--", "<<=", ">>=") or (t.type == "WORD" and i + 1 < len(toks)
                                                         and toks[i + 1].type == "LPAR"):
            return False
        if t.value in ASSIGN_OPS and i + 1 < len(toks) and toks[i + 1].value == "=" \
                and toks[i + 1].start_pos == t.end_pos:
            return False
    return True


def _writes_memory(stmts: list[Stmt]) -> bool:
    """May these statements store to memory (through a subscript, `->` or `*`) or call anything?"""
    for s in stmts:
        for x in s.walk():
            if x.kind == Kind.ASM:
                return True
            toks = x.own
            for i, t in enumerate(toks):
                if t.type == "WORD" and i + 1 < len(toks) and toks[i + 1].type == "LPAR":
                    return True
                assign = t.value in ("=", "++", "--", "<<=", ">>=") or (
                    t.value in ASSIGN_OPS and i + 1 < len(toks) and toks[i + 1].value == "="
                    and toks[i + 1].start_pos == t.end_pos)
                if assign:
                    j = i - 1
                    while j >= 0 and toks[j].value not in (";", ",", "{", "(") and toks[j].type != "SEMI":
                        if toks[j].value in ("[", "]", "->", "*"):
                            return True
                        j -= 1
    return False


def leading_loads(loop: CanonicalLoop, src: str, anchored: set) -> LeadingLoads | None:
    """The body's leading loads, if the strip-mined group may issue them together (see LeadingLoads)."""
    body = loop.stmt.body
    kids = body.children
    if not kids or kids[0].kind != Kind.SIMPLE or kids[0] in anchored:
        return None
    first = kids[0]
    toks = [t for t in first.own if t.type not in ("SEMI", "VSEMI")]
    parts = _top_split(toks, ",")
    head = parts[0]
    eq = [i for i, t in enumerate(head) if t.value == "="]
    if not eq or eq[0] < 2 or head[eq[0] - 1].type != "WORD":
        return None
    type_toks = head[:eq[0] - 1]
    if any(t.value in ("*", "&", "[", "]", "static", "__shared__", "extern") for t in type_toks):
        return None
    decls = [(head[eq[0] - 1], head[eq[0] + 1:])]
    for p in parts[1:]:
        if len(p) < 3 or p[0].type != "WORD" or p[1].value != "=":
            return None
        decls.append((p[0], p[2:]))
    names = {n.value for n, _ in decls}
    out = []
    for name, init in decls:
        if not init or not _pure(init) or _names(init) & names:
            return None
        text, pos = [], init[0].start_pos
        for i, t in enumerate(init):
            if t.type == "WORD" and t.value == loop.var and not _is_member(init, i):
                text.append(src[pos:t.start_pos] + "{i}")
                pos = t.end_pos
        text.append(src[pos:init[-1].end_pos])
        out.append((name.value, "".join(text).replace("{", "{{").replace("}", "}}").replace("{{i}}", "{i}")))
    if _writes_memory(kids[1:]):
        return None
    return LeadingLoads(first, _text(src, type_toks), tuple(out))
