"""Do a spec's probes run where the whole warp runs? Staged rings need it: every lane of a
recording warp stores each event into the warp's ring and copies the ring out with the others, so
a site that only some lanes reach, or an exit some lanes take early, leaves the copy waiting on
lanes that are not there (runtime/atrex_recorder.cuh, BasicRecorder). The recorder choice offers
staged rings only where this check finds every site warp-uniform; resident rings and the global
path need nothing of the kind.

The check is conservative (a "no" may be a warp-uniform kernel it cannot prove): a site is
uniform at the kernel's entry; at its exit when the body returns nowhere else; and elsewhere when
no `if`, `switch` or `case` encloses it and every loop around it (its own, for loop-begin and
loop-end) is a canonical `for` with no break, continue or return whose header reads only names
every lane of a warp agrees on: the kernel's parameters, names the body never assigns (globals,
constants), blockIdx, blockDim and gridDim, and the loop's own variable.
"""
from __future__ import annotations

from .loops import canonical_loop
from .source import LOOP_KINDS, Kernel, Kind, Stmt

UNIFORM_BUILTINS = frozenset({"blockIdx", "blockDim", "gridDim", "x", "y", "z"})
NOT_UNIFORM = frozenset({"threadIdx", "laneid", "__lane_id", "warpSize"})


ASSIGN = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "|=", "&=", "^=", "<<=", ">>=", "++", "--"})


def _assigned(kernel: Kernel) -> set[str]:
    """Names the body declares (`T x;`, `T x = ...`, `T* x`, `T x[...]`) or assigns (`x = ...`,
    `x += ...`, `++x`): a local may differ between lanes."""
    names: set[str] = set()
    for s in kernel.body.walk():
        toks = s.own
        for i, t in enumerate(toks):
            if t.type != "WORD":
                continue
            nxt = toks[i + 1].value if i + 1 < len(toks) else ""
            prev = toks[i - 1] if i else None
            declarator = prev is not None and (prev.type == "WORD" or prev.value in ("*", "&")) and nxt in (
                "=", ";", ",", "[", ")")
            if declarator or nxt in ASSIGN or (prev is not None and prev.value in ("++", "--")):
                names.add(t.value)
    return names


def _header_uniform(loop: Stmt, text: str, local: set[str]) -> str | None:
    form = canonical_loop(loop, text)
    if isinstance(form, str):
        return f"the loop at offset {loop.start} is not canonical ({form})"
    words = {t.value for t in loop.own if t.type == "WORD"} - {form.var, "int", "long", "unsigned", "size_t",
                                                                 "const", "auto", "for"}
    bad = sorted(words & NOT_UNIFORM) or sorted((words & local) - UNIFORM_BUILTINS)
    return f"its header reads {', '.join(bad)}, which lanes may not agree on" if bad else None


def not_uniform(kernel: Kernel, text: str, anchored: dict[str, Stmt], sites, lines) -> str | None:
    """Why a site may run on part of a warp (None: every site runs where the whole warp runs)."""
    local = _assigned(kernel)
    body = kernel.body
    returns = [s for s in body.walk() if s.kind == Kind.RETURN]
    if returns and not (len(returns) == 1 and body.children and returns[0] is body.children[-1]):
        return f"the kernel returns early at line {lines.line(returns[0].start)}, so its lanes may leave apart"
    for site in sites:
        stmt = anchored.get(site.name)
        if stmt is None:
            continue  # entry and exit
        loops = [stmt] if stmt.kind in LOOP_KINDS and site.position in ("loop-begin", "loop-end") else []
        p = stmt.parent
        while p is not None and p is not body:
            if p.kind in (Kind.IF, Kind.SWITCH, Kind.CASE):
                return f"site {site.name!r} at line {lines.line(stmt.start)} is under an {p.kind.word}"
            if p.kind in LOOP_KINDS:
                loops.append(p)
            p = p.parent
        for loop in loops:
            why = _header_uniform(loop, text, local)
            if why:
                return f"site {site.name!r} at line {lines.line(stmt.start)} runs in a loop that {why}"
    return None


BARRIERS = frozenset({"__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or", "bar.sync",
                      "barrier.sync", "bar.arrive", "barrier.cluster.arrive"})


def barrier_loop(kernel: Kernel, anchored: dict[str, Stmt], sites, lines) -> int | None:
    """The line of a loop that records a site at every iteration and waits at a CTA barrier (None:
    none does). There a staged ring's copy-out, which holds its warp for the copy, holds every warp
    of the CTA at the next barrier: staged rings are then tried after the others (choice.ranked)."""
    for site in sites:
        stmt = anchored.get(site.name)
        if stmt is None or site.every != 1:
            continue
        loop = stmt if stmt.kind in LOOP_KINDS and site.position in ("loop-begin", "loop-end") else None
        p = stmt.parent
        while loop is None and p is not None and p is not kernel.body:
            loop = p if p.kind in LOOP_KINDS else None
            p = p.parent
        if loop is None:
            continue
        words = {t.value.strip() for s in loop.walk() for t in s.own}
        text = " ".join(t.value for s in loop.walk() for t in s.own)
        if words & BARRIERS or any(b in text for b in BARRIERS if "." in b):
            return lines.line(loop.start)
    return None
