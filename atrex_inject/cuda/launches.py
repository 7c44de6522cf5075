"""The launches of the instrumented kernel in one file: each one is either captured (rewrite.py
brackets its statement with a capture session) or reported as not captured, with why and what to
do. Nothing that may launch the kernel goes unmentioned (docs/launches.md).

Captured: `k<<<...>>>(...)` and the runtime's launch functions (`cudaLaunchKernelEx(&cfg, k, ...)`,
`cudaLaunchKernel((void*)k, ...)`, ...) whose kernel expression names the kernel, or a local
alias of it (`auto kernel = &k<T>;` then `kernel<<<...>>>`), as a statement of their own, inside
an error-check macro (`CHECK(...);`, the whole statement is bracketed), as a declaration's
initializer (`auto e = ...;`) or returned (`return ...;`). Reported: a launch in a condition or a
conditional expression, two launches in one statement, a launch from device code, a launch
inside a `#define` body, a driver launch (`cuLaunchKernel`: its CUfunction names no kernel),
template arguments that differ from the spec's, a kernel expression the grammar cannot read, and
any other use of the kernel's address (a launch through a pointer). Calls that set the kernel's
attributes (`cudaFuncSetAttribute`) are listed as mirrors: rewrite.py repeats them for the
instrumented copy, which launches in the kernel's place while recording.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import AnchorError, SourceParseError
from .exprs import Callee, before_chevron, declares, name_extent, read_callee, statement, strip_casts
from .names import KernelName, resolve
from .source import HEADER_SUFFIXES, Kernel, SourceFile, Tokens, parse_source

CHEVRON = "<<<>>>"
# The runtime's launch functions (terminals of grammars/cuda.lark): the argument that is the kernel.
RUNTIME_KERNEL_ARG = {"LAUNCH_EX": 1, "LAUNCH_EXC": 1, "LAUNCH_FUNC": 0, "COOP_LAUNCH": 0}
CONFIG_FIRST = {"LAUNCH_EX", "LAUNCH_EXC"}  # grid, block and stream come from the launch config
DRIVER_LAUNCHES = {"CU_LAUNCH", "CU_LAUNCH_EX", "CU_COOP_LAUNCH"}
# Calls that set a kernel's attributes (first argument: the kernel): the copy needs them too.
SET_ATTRIBUTE = {"cudaFuncSetAttribute", "cudaFuncSetCacheConfig", "cudaFuncSetSharedMemConfig"}
# Calls that take a kernel's address to read its attributes, not to launch it.
READ_ATTRIBUTE = {"cudaFuncGetAttributes", "cudaFuncGetName", "sizeof", "decltype"}
DEFINE = re.compile(r"\s*#\s*define\s+(\w+)(\(([^)]*)\))?")


@dataclass(frozen=True)
class Launch:
    """A launch of the instrumented kernel that rewrite.py captures."""
    file: str
    line: int
    via: str  # CHEVRON or the launch function's name
    callee: tuple[int, int]  # the kernel expression at the launch (`slow::step<float, 4>`, `kernel`), offsets
    named_by: tuple[int, int]  # the expression that names the kernel: the callee, or an alias's initializer
    name_span: tuple[int, int]  # the kernel's name inside named_by (`step`)
    targs: str | None  # named_by's template arguments, squashed; None when it names none
    stmt: tuple[int, int]  # the statement holding it: its first character to after its `;`
    grid: str
    block: str
    stream: str
    shape: str  # "statement", "declaration" (`auto e = ...;`) or "return" (`return ...;`)
    macro: str | None  # the call around the launch in its statement (`CHECK`), if any
    braced: bool  # bracketed in a block of its own (False: a declaration whose name is used later)
    alias: str | None = None  # the local variable the launch goes through (`kernel`), if any
    deduced: bool = False  # `k<<<...>>>(args)` of a template kernel: its template arguments are deduced

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "via": self.via, "grid": self.grid, "block": self.block,
                "stream": self.stream, "shape": self.shape, "macro": self.macro, "alias": self.alias,
                "deduced": self.deduced}


@dataclass(frozen=True)
class Mirror:
    """A call that sets the kernel's attributes (`cudaFuncSetAttribute(k, ...)`, maybe through an
    alias): rewrite.py repeats it for the instrumented copy, which would otherwise launch without
    them (with more than 48 KiB of dynamic shared memory, say)."""
    file: str
    line: int
    call: tuple[int, int]  # the call, from its function's name to its `)`
    arg: tuple[int, int]  # the kernel inside its first argument (replaced by the copy)
    named_by: tuple[int, int]
    name_span: tuple[int, int]
    stmt: tuple[int, int]
    unbraced: bool


@dataclass(frozen=True)
class NotCaptured:
    """Something that launches, or may launch, the kernel without a capture session."""
    file: str
    line: int
    via: str
    reason: str
    hint: str

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "via": self.via, "reason": self.reason, "hint": self.hint}

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.via}: {self.reason}"


@dataclass(frozen=True)
class Target:
    """The kernel whose launches are wanted, and the kernel names the files know (to tell its
    launches from those of a same-named kernel in another namespace)."""
    kernel: Kernel
    name: KernelName
    known: frozenset[str]  # qualified names of every kernel the files define or declare
    siblings: tuple[str | None, ...] = ()  # template arguments of other definitions of its name

    @property
    def targs(self) -> str | None:
        """The template arguments a launch must have (None: any)."""
        return self.name.targs if self.name.targs is not None else self.kernel.targs

    @property
    def others_named_alike(self) -> list[str]:
        return sorted(q for q in self.known if q.split("::")[-1] == self.kernel.name and q != self.kernel.qualname)


@dataclass(frozen=True)
class _Alias:
    """`auto kernel = &k<T>;`: a local variable holding the kernel's address, in scope from its
    declaration to the `}` closing its block."""
    name: str
    decl: int  # token index of the variable's name
    close: int  # token index of the `}` ending its scope
    named_by: Callee  # the initializer's kernel expression
    reassigned: tuple[int, ...] = ()  # lines where it is assigned again: what it holds cannot be told

    def holds(self, c: Callee) -> bool:
        return c.words == (self.name,) and c.targs is None and self.decl < c.a < self.close


@dataclass
class Scan:
    captured: list[Launch]
    not_captured: list[NotCaptured]
    mirrors: list[Mirror] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def scan(src: SourceFile, target: Target) -> Scan:
    """Every launch of the target kernel in `src`, captured or not, in source order, and the calls
    that set its attributes."""
    tk, out = src.tokens, Scan([], [])
    aliases = _aliases(src, target)
    bodies = [(k.body_start, k.body_end) for k in src.kernels]
    spans: list[tuple[int, int]] = [a.named_by.span(tk) for a in aliases]  # names accounted for
    kinds = {"LAUNCH_OPEN", "PREPROC", *RUNTIME_KERNEL_ARG, *DRIVER_LAUNCHES}
    for i in tk.find(SET_ATTRIBUTE, kinds):  # what may launch the kernel or set its attributes, in order
        t = tk.toks[i]
        if t.type == "LAUNCH_OPEN":
            _chevron(src, target, aliases, i, bodies, out, spans)
        elif t.type in RUNTIME_KERNEL_ARG and i + 1 < len(tk.toks) and tk.toks[i + 1].type == "LPAR":
            _runtime(src, target, aliases, i, bodies, out, spans)
        elif t.type in DRIVER_LAUNCHES:
            out.not_captured.append(NotCaptured(
                src.path, src.lines.line(t.start_pos), t.value,
                f"a driver launch runs a CUfunction, which names no kernel in the source: if it runs "
                f"{target.kernel.label}, that launch is not captured",
                f"launch {target.kernel.label} by name (<<<>>> or cudaLaunchKernelEx) in a file the spec lists, or "
                "capture it from Python with atrex_inject.cuda.python.capture.LaunchCapture"))
        elif t.type == "PREPROC":
            _define(src, target, i, out)
        elif t.type == "WORD" and t.value in SET_ATTRIBUTE and i + 1 < len(tk.toks) and tk.toks[i + 1].type == "LPAR":
            _mirror(src, target, aliases, i, out, spans)
    _dedupe_statements(out)
    _references(src, target, aliases, spans, out)
    out.not_captured.sort(key=lambda n: n.line)
    return out


def _aliases(src: SourceFile, target: Target) -> list[_Alias]:
    """Local variables initialized with the kernel's address: `auto kernel = &k<T>;`."""
    tk, toks, out = src.tokens, src.tokens.toks, []
    for j in tk.find({target.kernel.name}, set()):
        a, e = name_extent(tk, j)
        p = a - 2 if a >= 2 and toks[a - 1].value == "&" else a - 1
        if p < 1 or toks[p].value != "=" or e + 1 >= len(toks) or toks[e + 1].type != "SEMI":
            continue
        c = read_callee(tk, a, e, src.text)
        st = statement(tk, a, e)
        if c is None or isinstance(st, str) or _is_target(tk, c, target) is not True:
            continue
        name = declares(tk, st.start, a)
        if name is not None and toks[p - 1].value == name:
            close = tk.close_of(p - 1)
            again = tuple(src.lines.line(toks[k].start_pos) for k in range(p, close) if _assigns(tk, k, name))
            out.append(_Alias(name, p - 1, close, c, again))
    return out


def _assigns(tk: Tokens, k: int, name: str) -> bool:
    """Is token k `name` on the left of a plain assignment (`name = ...`)?"""
    toks = tk.toks
    return (toks[k].type == "WORD" and toks[k].value == name and k + 1 < len(toks) and toks[k + 1].value == "="
            and not (k > 0 and toks[k - 1].value in (".", "->", "::")))


def _targeted(tk: Tokens, c: Callee, target: Target, aliases: list[_Alias]) -> tuple[bool | str, Callee, str | None]:
    """(is it the target? (or why that cannot be told), the expression that names it, the alias it
    goes through)."""
    alias = next((a for a in aliases if a.holds(c)), None)
    if alias is not None and alias.reassigned:
        return (f"`{alias.name}` holds {target.kernel.label} but is assigned again (line "
                f"{', '.join(map(str, alias.reassigned))}): which kernel it holds here cannot be told"), c, alias.name
    if alias is not None:
        return True, alias.named_by, alias.name
    return _is_target(tk, c, target), c, None


def _chevron(src: SourceFile, target: Target, aliases, i: int, bodies, out: Scan, spans: list) -> None:
    tk, toks = src.tokens, src.tokens.toks
    close = i + 1
    while close < len(toks) and toks[close].type != "LAUNCH_CLOSE":
        close = tk.skip(close)
    if close + 1 >= len(toks) or toks[close + 1].type != "LPAR":
        return
    a, b = before_chevron(tk, i)
    if not _may_name(tk, a, b, i, target, aliases):
        return
    cfg = [_text(src, a, b) for a, b in tk.split(i + 1, close)]
    callee = read_callee(tk, a, b, src.text)
    _launch(src, target, aliases, callee, i, CHEVRON, tk.match[close + 1], bodies, out, spans,
            lambda: (cfg[0], cfg[1], cfg[3] if len(cfg) > 3 else "0") if len(cfg) >= 2 else None)


def _runtime(src: SourceFile, target: Target, aliases, i: int, bodies, out: Scan, spans: list) -> None:
    tk, toks = src.tokens, src.tokens.toks
    args = tk.split_args(i + 1)
    k = RUNTIME_KERNEL_ARG[toks[i].type]
    if len(args) <= k:
        return
    a, b = strip_casts(tk, *args[k])
    if not _may_name(tk, a, b, i, target, aliases):
        return
    callee = read_callee(tk, a, b, src.text)

    def geometry():
        if toks[i].type in CONFIG_FIRST:
            c = f"({_text(src, *args[0])})"
            return f"{c}->gridDim", f"{c}->blockDim", f"{c}->stream"
        if len(args) < 3:
            return None
        return _text(src, *args[1]), _text(src, *args[2]), _text(src, *args[5]) if len(args) > 5 else "0"
    _launch(src, target, aliases, callee, i, toks[i].value, tk.match[i + 1], bodies, out, spans, geometry,
            kernel_arg=args[k])


def _may_name(tk: Tokens, a: int | None, b: int | None, at: int, target: Target, aliases: list[_Alias]) -> bool:
    """Can the kernel expression in tokens [a, b] (or, unreadable, the 8 tokens before `at`) be the
    target or an alias of it? A cheap test by its words, before the grammar reads it."""
    names = {target.kernel.name} | {x.name for x in aliases}
    lo, hi = (a, b) if a is not None and b is not None and a <= b else (max(0, at - 8), at)
    return any(tk.toks.name(k) == "WORD" and tk.toks[k].value in names for k in range(lo, hi + 1))


def _launch(src: SourceFile, target: Target, aliases, callee: Callee | None, at: int, via: str, last: int, bodies,
            out: Scan, spans: list, geometry, kernel_arg: tuple[int, int] | None = None) -> None:
    """Classify one launch (tokens from its kernel expression, or its function's name, to `last`,
    the `)` closing its arguments) of some kernel: the target's is captured or reported."""
    tk, toks = src.tokens, src.tokens.toks
    line = src.lines.line(toks[at].start_pos)
    first = callee.a if callee is not None and via == CHEVRON else at

    def report(reason: str, hint: str) -> None:
        out.not_captured.append(NotCaptured(src.path, line, via, reason, hint))
        if callee is not None:
            spans.append(callee.span(tk))

    if callee is None:
        region = kernel_arg or (max(0, at - 8), at)
        if any(t.type == "WORD" and t.value == target.kernel.name for t in tk.slice(region[0], region[1] + 1)):
            report(f"atrex-inject cannot read this launch's kernel expression, which names {target.kernel.name}",
                   f"launch {target.kernel.label} by its name (`{target.kernel.name}<<<...>>>(...)` or "
                   f"cudaLaunchKernelEx(&cfg, {target.kernel.name}, ...)) and apply again")
        return
    verdict, named, alias = _targeted(tk, callee, target, aliases)
    if verdict is False:
        return
    if isinstance(verdict, str):
        return report(verdict, "launch the kernel by its qualified name (`ns::kernel<<<...>>>`), or through a "
                               "variable assigned once (`auto kernel = &k<T>;`), and apply again")
    problem = _instance_problem(named, target)
    if problem is False:
        return  # another definition of the name (an explicit specialization) is what it launches
    if problem:
        return report(problem, f"if this launch runs {target.kernel.qualname}<{target.targs}>, write its template "
                               "arguments as the spec does; otherwise it launches another instantiation, which runs "
                               "without probes")
    if any(a <= toks[at].start_pos < b for a, b in bodies):
        return report("a launch from device code (dynamic parallelism) is not captured",
                      "launch the kernel from host code to capture it")
    geo = geometry()
    if geo is None:
        return
    st = statement(tk, first, last)
    if isinstance(st, str):
        return report(st, "make the launch a statement of its own (`cudaError_t err = LAUNCH;` then test err) "
                          "and apply again")
    shape = ("return" if toks[st.start].type == "RETURN" else
             "declaration" if declares(tk, st.start, first) else "statement")
    spans.append(callee.span(tk))
    deduced = via == CHEVRON and alias is None and named.targs is None and target.kernel.template
    out.captured.append(Launch(
        src.path, line, via, callee.span(tk), named.span(tk), (named.name.start_pos, named.name.end_pos),
        named.targs, st.span(tk), *geo, shape, st.macro, shape != "declaration" or st.unbraced, alias, deduced))


def _instance_problem(named: Callee, target: Target) -> str | bool | None:
    """Why the launch may run another instantiation than the spec's (a message), False when it
    runs another definition of the name (an explicit specialization), None when it is the spec's."""
    want = target.targs
    if want is not None and named.targs != want:
        if named.targs is None:
            return f"it names {target.kernel.qualname} with no template arguments (they are deduced), not the spec's <{want}>"
        return (f"it names {target.kernel.qualname}<{named.targs}> with template arguments <{named.targs}>, not the "
                f"spec's <{want}>")
    if named.targs in target.siblings and named.targs != target.kernel.targs:
        return False
    return None


def _mirror(src: SourceFile, target: Target, aliases, i: int, out: Scan, spans: list) -> None:
    """`cudaFuncSetAttribute(k, ...)` on the target (or an alias of it): a Mirror for rewrite.py."""
    tk, toks = src.tokens, src.tokens.toks
    args = tk.split_args(i + 1)
    if not args:
        return
    callee = read_callee(tk, *strip_casts(tk, *args[0]), src.text)
    if callee is None:
        return
    verdict, named, _ = _targeted(tk, callee, target, aliases)
    if verdict is not True or _instance_problem(named, target) is not None:
        return
    spans.append(callee.span(tk))
    line = src.lines.line(toks[i].start_pos)
    st = statement(tk, i, tk.match[i + 1])
    if isinstance(st, str):
        out.warnings.append(f"{src.path}:{line}: {toks[i].value} sets an attribute of {target.kernel.label} where the "
                            f"rewriter cannot repeat it for the instrumented copy ({st.replace('launch', 'call')}): "
                            f"set it for the copy too, or launches that record may fail")
        return
    out.mirrors.append(Mirror(src.path, line, (toks[i].start_pos, toks[tk.match[i + 1]].end_pos), callee.span(tk),
                              named.span(tk), (named.name.start_pos, named.name.end_pos), st.span(tk), st.unbraced))


def _is_target(tk: Tokens, c: Callee, target: Target) -> bool | str:
    """True: the callee is the target kernel; False: it is another kernel (or no kernel); a string:
    it may be the target but the name cannot tell (why)."""
    got = resolve(c.words, c.absolute, tk.namespace_at(c.a), tk.usings_at(c.a), target.known)
    if got is not None:
        return got == target.kernel.qualname
    if c.words[-1] != target.kernel.name:
        return False
    others = target.others_named_alike
    if others:
        return (f"cannot tell which kernel `{'::'.join(c.words)}` launches: {target.kernel.qualname} or "
                f"{', '.join(others)}")
    return True


def _dedupe_statements(out: Scan) -> None:
    """Two captured launches in one statement cannot each have a session around them: report both."""
    by: dict[tuple[int, int], list[Launch]] = {}
    for l in out.captured:
        by.setdefault(l.stmt, []).append(l)
    for group in by.values():
        if len(group) > 1:
            for l in group:
                out.captured.remove(l)
                out.not_captured.append(NotCaptured(
                    l.file, l.line, l.via, f"{len(group)} launches of the kernel in one statement",
                    "put each launch in a statement of its own and apply again"))


def _define(src: SourceFile, target: Target, i: int, out: Scan) -> None:
    """A `#define` whose body launches the kernel, or launches a kernel its parameters name: the
    rewriter cannot bracket a launch inside a macro body, so each use is reported."""
    tok = src.tokens.toks[i]
    m = DEFINE.match(tok.value)
    if not m:
        return
    body = tok.value[m.end():]
    if "<<<" not in body and "cudaLaunch" not in body:
        return  # no launch in it: most directives, spared the lexer
    try:
        inner = Tokens(body, src.path)
    except SourceParseError:
        return
    params = {p.strip() for p in (m.group(3) or "").split(",")}
    launched: set[str] = set()
    for j, t in enumerate(inner.toks):
        if t.type == "LAUNCH_OPEN":
            a, b = before_chevron(inner, j)
        elif t.type in RUNTIME_KERNEL_ARG and j + 1 < len(inner.toks) and inner.toks[j + 1].type == "LPAR":
            args = inner.split_args(j + 1)
            k = RUNTIME_KERNEL_ARG[t.type]
            a, b = strip_casts(inner, *args[k]) if len(args) > k else (None, None)
        else:
            continue
        c = read_callee(inner, a, b, body)
        if c is not None:
            launched.add(c.words[-1])
    if not launched:
        return
    name = m.group(1)
    line = src.lines.line(tok.start_pos + len(tok.value) - len(tok.value.lstrip()))
    direct = target.kernel.name in launched
    via_param = launched & params
    uses = []
    toks = src.tokens.toks
    for j in src.tokens.find({name}, set()):
        args = src.tokens.split_args(j + 1) if j + 1 < len(toks) and toks[j + 1].type == "LPAR" else []
        named = any(x.type == "WORD" and x.value == target.kernel.name
                    for a, b in args for x in src.tokens.slice(a, b + 1))
        if direct or (via_param and named):
            uses.append(src.lines.line(toks[j].start_pos))
    hint = (f"launch {target.kernel.label} outside the macro, or bracket the macro's use with an "
            "atrex::host::Capture by hand (docs/launches.md)")
    for ln in uses or ([line] if direct else []):
        out.not_captured.append(NotCaptured(
            src.path, ln, f"macro {name}",
            f"the launch is inside the body of macro {name} (defined at line {line}), which the rewriter cannot "
            "bracket", hint))


def _references(src: SourceFile, target: Target, aliases: list[_Alias], spans: list[tuple[int, int]],
                out: Scan) -> None:
    """Uses of the kernel's address other than its launches, its attribute calls and its aliases'
    initializers (`launch(k, ...)`, `params.func = (void*)k`), and uses of an alias other than
    launching it or reading its attributes: a launch through such a pointer is not captured."""
    tk, toks = src.tokens, src.tokens.toks
    skip = spans + [(k.decl_start, k.body_end) for k in src.kernels] + [(d.start, d.end) for d in src.declarations]
    names = {target.kernel.name} | {a.name for a in aliases}
    for j in tk.find(names, set()):
        t = toks[j]
        if any(a <= t.start_pos < b for a, b in skip):
            continue
        nxt = toks[j + 1] if j + 1 < len(toks) else None
        if j > 0 and toks[j - 1].value in (".", "->"):
            continue
        if nxt is not None and nxt.type == "LPAR":
            continue  # a call: a kernel cannot be called, so it is a function of the same name
        if nxt is not None and nxt.type == "LT":
            shut = tk.angle_close(j + 1, len(toks), strict=False)
            if shut is not None and shut + 1 < len(toks) and toks[shut + 1].type == "LPAR":
                continue
        if _in_declaration(tk, j) or _in_attribute_call(tk, j):
            continue
        alias = next((a for a in aliases if a.name == t.value and a.decl < j < a.close), None)
        if alias is not None:
            if j == alias.decl or _assigns(tk, j, alias.name):
                continue  # its declaration, or an assignment whose right side is reported on its own
            what = f"{target.kernel.label}'s address, held in `{alias.name}` (line {src.lines.line(toks[alias.decl].start_pos)}), is used here"
        elif t.value == target.kernel.name:
            a, _ = name_extent(tk, j)
            words = tuple(x.value for x in tk.slice(a, j + 1) if x.type == "WORD")
            got = resolve(words, toks[a].type == "SCOPE", tk.namespace_at(j), tk.usings_at(j), target.known)
            if (got is not None and got != target.kernel.qualname) or (got is None and target.others_named_alike):
                continue
            what = f"{target.kernel.label}'s address is taken here"
        else:
            continue
        out.not_captured.append(NotCaptured(
            src.path, src.lines.line(t.start_pos), "pointer",
            f"{what}: a launch through that pointer (a launch helper, a CUDA graph node, cudaLaunchKernel on a "
            "variable) is not captured",
            f"launch {target.kernel.label} by name in a file the spec lists (source or launchers), or ignore this "
            "if the pointer is never launched"))


def _in_declaration(tk: Tokens, j: int) -> bool:
    """Is token j in a declaration of a kernel (`__global__ void k(...);`, `template void k<T>(...);`)?"""
    k = j - 1
    while k >= 0 and tk.toks[k].type not in ("SEMI", "VSEMI", "LBRACE", "RBRACE", "PREPROC", "IF0"):
        if tk.toks[k].value in ("__global__", "template", "CUTLASS_GLOBAL", "friend"):
            return True
        k = tk.opener.get(k, k) - 1
    return False


def _in_attribute_call(tk: Tokens, j: int) -> bool:
    """Is token j an argument of a call that reads or sets a kernel's attributes (cudaFuncSetAttribute,
    cudaOccupancy...)? Walks out through the parentheses around it, within its statement."""
    k = j - 1
    while k > 0 and tk.toks.name(k) not in ("SEMI", "VSEMI", "LBRACE", "RBRACE"):
        if k in tk.opener:
            k = tk.opener[k] - 1
            continue
        if tk.toks.name(k) == "LPAR":
            w = tk.toks[k - 1].value
            if w in SET_ATTRIBUTE or w in READ_ATTRIBUTE or w.startswith("cudaOccupancy"):
                return True
        k -= 1
    return False


def _text(src: SourceFile, a: int, b: int) -> str:
    toks = src.tokens.toks
    return src.text[toks[a].start_pos:toks[b].end_pos]


@dataclass
class FileLaunches:
    """One file the rewriter sees (the source or a launcher), parsed, with its scan."""
    src: SourceFile
    scan: Scan


def sized_at_launch(src: SourceFile, kernel: Kernel, mirrors: list[Mirror]) -> str | None:
    """Why how many CTAs of the kernel an SM holds is decided at launch beyond what its SASS shows,
    or None: its body declares `extern __shared__` (dynamic shared memory, sized by the launch), or
    the program sets its attributes at run time (a `cudaFuncSetAttribute` the rewrite repeats for
    the copy: a shared-memory size or carveout). Static shared memory a copy adds then changes the
    occupancy by an amount the SASS check cannot compute (choice.judge)."""
    tk = src.tokens.toks
    i = tk.at(kernel.body_start)
    while i is not None and i + 1 < len(tk) and tk.span(i)[0] < kernel.body_end:
        if tk[i].value == "extern" and tk[i + 1].value == "__shared__":
            return f"{kernel.label} declares `extern __shared__` (line {src.lines.line(tk.span(i)[0])})"
        i += 1
    if mirrors:
        return f"the program sets {kernel.label}'s attributes at run time ({mirrors[0].file}:{mirrors[0].line})"
    return None


def find_all(spec, src: SourceFile, kernel: Kernel, launchers: dict[str, str]) -> tuple[list[FileLaunches], list[str]]:
    """The target's launches in the source and in each launcher (rel path -> text), and warnings.

    Refused (exit 2): launches captured in two translation units (two `.cu` launchers), whose
    copies of the static capture plan would number their launches alike and overwrite each other's
    capture files."""
    files: list[FileLaunches] = []
    parsed = [parse_source(text, rel, spec.backend_keys.declared_by) for rel, text in launchers.items()]
    everyone = [src] + parsed
    known = frozenset({k.qualname for f in everyone for k in f.kernels} | {d.qualname for f in everyone
                                                                           for d in f.declarations})
    siblings = tuple(k.targs for k in src.kernels if k.qualname == kernel.qualname and k is not kernel)
    target = Target(kernel, KernelName.parse(spec.kernel), known, siblings)
    files.append(FileLaunches(src, scan(src, target)))
    files += [FileLaunches(p, scan(p, target)) for p in parsed]
    units = [f.src.path for f in files[1:] if f.scan.captured and not f.src.path.lower().endswith(HEADER_SUFFIXES)]
    if len(units) > 1:
        raise AnchorError(f"launches of {kernel.label} would be captured in {len(units)} translation units "
                          f"({', '.join(units)}): each compiles its own copy of the capture plan, so their launches "
                          "would be numbered alike and their capture files overwrite each other's",
                          path=str(spec.path), line=spec.line_of("launchers"),
                          hint="list one .cu file in launchers (the one whose launches you want "
                                                    "captured); the others' launches run without probes")
    warnings = [w for f in files for w in f.scan.warnings]
    if not any(f.scan.captured for f in files) and spec.source.suffix != ".py":  # kernel.py says its own
        warnings.append(f"no launch of {kernel.label} is captured in {', '.join(f.src.path for f in files)}: "
                        + ("launches elsewhere run without probes and write nothing; list the files that launch it "
                           'in the spec (launchers = ["main.cu"]) and apply again' if not launchers else
                           "see the launches not captured below"))
    same = [k for k in src.kernels if k.label == kernel.label and k is not kernel]
    if same:
        warnings.append(f"{kernel.label} has {len(same) + 1} definitions (lines "
                        f"{', '.join(str(k.line) for k in sorted([kernel, *same], key=lambda k: k.line))}); launches "
                        f"of that name are captured as launches of the one at line {kernel.line}, whichever one the "
                        "build compiles or the overload they call")
    name = spec.source.name
    for p in parsed:
        if not re.search(rf'#\s*include\s*[<"](?:[^">]*/)?{re.escape(name)}[">]', p.text):
            warnings.append(f"launcher {p.path} does not #include {name} directly: its capture sessions need the "
                            "capture plan the instrumented header defines (a build error if no header it includes "
                            "brings it in)")
    return files, warnings
