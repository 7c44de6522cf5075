"""The instrumented copy `K__atrex` of kernel K, and its versioned body: the kernel's definition
stays byte for byte what it was, the probes go into the copy, and in the copy only recording CTAs
run the instrumented body (docs/design.md)."""
from __future__ import annotations

import bisect
import re

from ..plan import Plan, RecorderMode
from .edits import AFTER, Edits, Replacement
from .source import Kernel, Kind, SourceFile, Stmt, asm_unscoped

CLONE_SUFFIX = "__atrex"  # the instrumented copy of kernel K is K__atrex


def _declares_static_shared(s: Stmt) -> bool:
    words = [t.value for t in s.own]
    return s.kind == Kind.SIMPLE and "__shared__" in words and "extern" not in words


def kernel_split(src: SourceFile, kernel: Kernel, anchored: dict[str, Stmt]) -> int | str:
    """Index of the first body statement after the common prefix (the leading statements up to the
    last static `__shared__` declaration, kept outside both copies so shared memory is allocated
    once), or why the body cannot be versioned."""
    kids = kernel.body.children
    shared = [i for i, c in enumerate(kids) if _declares_static_shared(c)]
    first = shared[-1] + 1 if shared else 0
    for c in kids:
        for s in c.walk():
            if s is not c and _declares_static_shared(s):
                return f"a static __shared__ declaration at line {src.lines.line(s.start)} is not at the body's top level"
            if any(t.value == "goto" for t in s.own):
                return f"it has a goto at line {src.lines.line(s.start)}"
    if first == len(kids):
        return "nothing follows its __shared__ declarations"
    twice = next(filter(None, (asm_unscoped(c, src.lines, kernel.macros) for c in kids[first:])), None)
    if twice:
        return twice
    anchored_stmts = set(anchored.values())
    for c in kids[:first]:
        for s in c.walk():
            if s in anchored_stmts:
                return f"a site is anchored at line {src.lines.line(s.start)}, before its last __shared__ declaration"
            if s.kind == Kind.RETURN:
                return f"it returns at line {src.lines.line(s.start)}, before its last __shared__ declaration"
    return first


def guard(plan: Plan) -> str:
    """The CTA-uniform test for "this CTA records": some owner group selects this CTA. Every thread
    of a CTA takes the same side, so barriers stay matched. The copy runs only while a buffer is
    bound (the launch picks it), so the guard does not test the buffer: that test loaded
    `atrex_tl_buffer` from constant memory before every CTA's first branch, cold at the kernel's
    start (reduce_sumsq's copy launched with no CTA recording measured +0.54% with it on an H200, and
    within noise without it). The leading `gridDim.x != 0u` is always true and costs a compare of a
    value the selection loads anyway; it keeps the branch's shape, without which ptxas gives
    layernorm's resident copy 44 registers instead of the clean kernel's 32 (docs/design.md)."""
    sel = list(dict.fromkeys((g.cta_stride, g.cta_limit) for g in plan.groups))
    return "gridDim.x != 0u && (" + " || ".join(f"atrex::cta_selected({a}u, {b}u)" for a, b in sel) + ")"


def versioned_body(edits: Edits, kernel: Kernel, first: int, guard: str, entry_items) -> None:
    """Two copies of the body after its common prefix: the instrumented one for recording CTAs, the
    clean text verbatim for the others (probes off launch the clean kernel itself)."""
    body, src = kernel.body, edits.src
    kids = body.children
    prev_end = kids[first - 1].end if first > 0 else body.start + 1
    close = body.end - 1
    nice = edits.rest_blank(prev_end) and edits.starts_line(close)
    a = src.lines.line_end(prev_end) + 1 if nice else prev_end
    b = src.lines.line_start(close) if nice else close
    ind = edits.indent(kids[first].start) if edits.starts_line(kids[first].start) else edits.indent(body.start) + "  "
    why = "recording CTAs run the instrumented body; the others the clean copy (probes off: the clean kernel)"
    holder: list[Replacement] = []

    def gen() -> str:
        inst = edits.span(a, b, exclude=holder[0])
        if nice:
            nl = edits.nl
            return (f"{ind}if ({guard}) {{  // atrex: {why}{nl}{edits.lines_of(entry_items, ind)}{inst}"
                    f"{ind}}} else {{  // atrex: the clean body, verbatim{nl}{src.text[a:b]}"
                    f"{ind}}}  // atrex: end of the clean body{nl}")
        return (f" if ({guard}) {{ /* atrex: {why} */ {edits.inline(entry_items)} {inst} }} else {{ "
                f"/* atrex: the clean body, verbatim */ {src.text[a:b]} }} ")

    holder.append(edits.replace(a, b, gen, inclusive=True))


def clone_kernel(edits: Edits, kernel: Kernel, declarations, mode: RecorderMode | None = None) -> None:
    """The kernel's definition stays byte for byte what it was: the probes go into a copy of it,
    `K__atrex`, defined right after it (and declared after each declaration of K, for launches
    that come before the definition). Wrapped launches run the copy only while recording, so with
    probes off the program runs exactly the clean kernel: same SASS, same registers. The copy of an
    explicit specialization (`template <> ... gemm<128, 64>(...)`) is a plain kernel, `gemm__atrex`:
    no `gemm__atrex` template exists to specialize. A mode that holds the copy's registers
    (RecorderMode.max_registers) gives the copy's head the attribute that does (held)."""
    text, nl = edits.src.text, edits.nl
    a, b = kernel.body_start, kernel.body_end

    def head(start: int, name_span: tuple[int, int], name_end: int, end: int) -> str:
        lead = text[start:name_span[0]]
        if kernel.targs is not None:
            lead = re.sub(r"^template\s*<\s*>\s*", "", lead)
        return held(lead, mode) + kernel.name + CLONE_SUFFIX + text[name_end:end]

    what = f"{kernel.name}{CLONE_SUFFIX}, the instrumented copy of {kernel.name}, launched in its place only while recording"
    note = f"// atrex: {what}"
    for d in declarations:  # on a line of its own, or inline where code follows (a block-scope `extern`)
        decl = head(d.start, d.name_span, d.name_end, d.end)
        edits.insert(d.end, AFTER, f"{nl}{decl}  {note}" if edits.rest_blank(d.end) else f" {decl} /* atrex: {what} */",
                     1)
    holder: list[Replacement] = []

    def gen() -> str:
        inst = edits.span(a + 1, b - 1, exclude=holder[0])
        return f"{text[a:b]}{nl}{nl}{note}{nl}{head(kernel.decl_start, kernel.name_span, kernel.name_end, a)}{{{inst}}}"

    holder.append(edits.replace(a, b, gen, inclusive=False))


_LAUNCH_BOUNDS = re.compile(r"\b__launch_bounds__\s*\(")
_GLOBAL = re.compile(r"\b__global__\b")


def _template_params(lead: str) -> list[str | None] | None:
    """The names of a template head's parameters, in order, None for a type or template parameter;
    None where there is no head or it has a pack."""
    m = re.match(r"\s*template\s*<", lead)
    if not m:
        return None
    depth, i, parts, start = 1, m.end(), [], m.end()
    while i < len(lead) and depth:
        c = lead[i]
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(c, 0)
        if (c == "," and depth == 1) or depth == 0:
            parts.append(lead[start:i].split("=")[0].strip())
            start = i + 1
        i += 1
    if depth or any("..." in p for p in parts):
        return None
    names = []
    for p in parts:
        word = re.search(r"([A-Za-z_]\w*)\s*$", p)
        kind = re.match(r"(typename|class|template)\b", p)
        names.append(None if kind or not word else word.group(1))
    return names


def _cap(lead: str, mode: RecorderMode) -> str:
    """`__maxnreg__`'s argument: the one cap, or for a template kernel held instantiation by
    instantiation, a choice among each one's cap by its integer arguments (the largest where two
    instantiations differ only in other arguments, and for any other instantiation)."""
    params = _template_params(lead) if mode.held else None
    if not params or any(len(args) != len(params) for args, _ in mode.held):
        return str(mode.max_registers)
    caps: dict[str, int] = {}
    for args, cap in mode.held:
        test = " && ".join(f"{p} == {a}" for p, a in zip(params, args) if p is not None and a is not None)
        if test:
            caps[test] = max(caps.get(test, 0), cap)
    fallback = max(cap for _, cap in mode.held)
    return "".join(f"({t}) ? {c} : " for t, c in caps.items() if c != fallback) + str(fallback)


def held(lead: str, mode: RecorderMode | None) -> str:
    """A kernel head's text before its name with the copy's registers held to `mode.max_registers`
    (or, instantiation by instantiation, to `mode.held`): `__maxnreg__(R)` after `__global__`, in
    place of any `__launch_bounds__(...)` (nvcc refuses the two together, and launch bounds cap
    registers only by whole CTAs per SM). The copy is launched with the clean kernel's
    configuration, so its launch bounds have nothing else to say."""
    if mode is None or not mode.max_registers:
        return lead
    m = _LAUNCH_BOUNDS.search(lead)
    if m:
        depth, i = 1, m.end()
        while i < len(lead) and depth:
            depth += {"(": 1, ")": -1}.get(lead[i], 0)
            i += 1
        lead = lead[:m.start()] + lead[i:].lstrip(" ")
    g = _GLOBAL.search(lead)
    return f"{lead[:g.end()]} __maxnreg__({_cap(lead, mode)}){lead[g.end():]}" if g else lead


def default_arguments(src: SourceFile, heads: list[tuple[int, int]]) -> bool:
    """Does one of the kernel's heads ((name end, end of head) offsets: its definition's and its
    declarations') give a parameter a default? A launch through a conditional expression, `(on ?
    k__atrex : k)<<<...>>>(p)`, calls a pointer, which has no defaults, so it cannot leave that
    argument out."""
    toks = src.tokens.toks
    for a, b in heads:
        i = bisect.bisect_left(toks.ends, a + 1)
        while i < len(toks) and toks.ends[i] <= b and toks.name(i) != "LPAR":
            i += 1
        if i >= len(toks) or toks.ends[i] > b:  # no parameter list here (a head written by a macro)
            continue
        j, close = i + 1, src.tokens.match[i]
        while j < close:
            if toks.name(j) == "PUNCT" and toks[j].value == "=":
                return True
            j = src.tokens.match.get(j, j) + 1  # over a bracketed group: `f(a = b)` is no default
    return False


def copy_of(text: str, kernel: Kernel, named_by: tuple[int, int], name_span: tuple[int, int]) -> str:
    """The expression naming the instrumented copy where `named_by` names the kernel: `ns::k<T>`
    -> `ns::k__atrex<T>`; an explicit specialization's copy is a plain kernel, so no arguments."""
    return text[named_by[0]:name_span[1]] + CLONE_SUFFIX + (
        "" if kernel.targs is not None else text[name_span[1]:named_by[1]])
