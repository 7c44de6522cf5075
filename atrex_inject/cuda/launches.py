"""The launches of the instrumented kernel in one file: each one is either captured (rewrite.py
brackets its statement with a capture session) or reported as not captured, with why and what to
do. Nothing that may launch the kernel goes unmentioned (docs/launches.md).

Captured: `k<<<...>>>(...)` and the runtime's launch functions (`cudaLaunchKernelEx(&cfg, k, ...)`,
`cudaLaunchKernel((void*)k, ...)`, ...) whose kernel expression names the kernel, as a statement
of their own, inside an error-check macro (`CHECK(...);`, the whole statement is bracketed), as a
declaration's initializer (`auto e = ...;`) or returned (`return ...;`). Reported: a launch in a
condition or a conditional expression, two launches in one statement, a launch from device code,
a launch inside a `#define` body, a driver launch (`cuLaunchKernel`: its CUfunction names no
kernel), template arguments that differ from the spec's, a kernel expression the grammar cannot
read, and any other use of the kernel's name that takes its address (a launch through a pointer).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from lark import Token, Tree

from ..errors import AnchorError, SourceParseError
from .names import KernelName, resolve, squash_targs
from .source import HEADER_SUFFIXES, Kernel, SourceFile, Tokens, parse_source

CHEVRON = "<<<>>>"
# The runtime's launch functions (terminals of grammars/cuda.lark): the argument that is the kernel.
RUNTIME_KERNEL_ARG = {"LAUNCH_EX": 1, "LAUNCH_EXC": 1, "LAUNCH_FUNC": 0, "COOP_LAUNCH": 0}
CONFIG_FIRST = {"LAUNCH_EX", "LAUNCH_EXC"}  # grid, block and stream come from the launch config
DRIVER_LAUNCHES = {"CU_LAUNCH", "CU_LAUNCH_EX", "CU_COOP_LAUNCH"}
HEADER_KEYWORDS = {"IF": "if", "WHILE": "while", "FOR": "for", "SWITCH": "switch", "CONSTEXPR": "if constexpr"}
CASTS = {"reinterpret_cast", "static_cast", "const_cast"}
# Calls that take a kernel's address to read or set its attributes, not to launch it.
ATTRIBUTE_CALLS = {"cudaFuncSetAttribute", "cudaFuncGetAttributes", "cudaFuncSetCacheConfig",
                   "cudaFuncSetSharedMemConfig", "cudaFuncGetName", "sizeof", "decltype"}
DEFINE = re.compile(r"\s*#\s*define\s+(\w+)(\(([^)]*)\))?")


@dataclass(frozen=True)
class Launch:
    """A launch of the instrumented kernel that rewrite.py captures."""
    file: str
    line: int
    via: str  # CHEVRON or the launch function's name
    callee: tuple[int, int]  # the kernel expression (`slow::step<float, 4>`), offsets in the file
    name_span: tuple[int, int]  # the kernel's name inside it (`step`)
    targs: str | None  # its template arguments, squashed; None when it names none
    stmt: tuple[int, int]  # the statement holding it: its first character to after its `;`
    grid: str
    block: str
    stream: str
    shape: str  # "statement", "declaration" (`auto e = ...;`) or "return" (`return ...;`)
    macro: str | None  # the call around the launch in its statement (`CHECK`), if any
    braced: bool  # bracketed in a block of its own (False: a declaration whose name is used later)

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "via": self.via, "grid": self.grid, "block": self.block,
                "stream": self.stream, "shape": self.shape, "macro": self.macro}


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


@dataclass
class Scan:
    captured: list[Launch]
    not_captured: list[NotCaptured]


@dataclass(frozen=True)
class _Callee:
    a: int  # token indices of the kernel expression, inclusive
    b: int
    words: tuple[str, ...]
    absolute: bool
    targs: str | None
    name: Token


def scan(src: SourceFile, target: Target) -> Scan:
    """Every launch of the target kernel in `src`, captured or not, in source order."""
    tk, out = src.tokens, Scan([], [])
    bodies = [(k.body_start, k.body_end) for k in src.kernels]
    spans: list[tuple[int, int]] = []  # kernel expressions already accounted for
    for i, t in enumerate(tk.toks):
        if t.type == "LAUNCH_OPEN":
            _chevron(src, target, i, bodies, out, spans)
        elif t.type in RUNTIME_KERNEL_ARG and i + 1 < len(tk.toks) and tk.toks[i + 1].type == "LPAR":
            _runtime(src, target, i, bodies, out, spans)
        elif t.type in DRIVER_LAUNCHES:
            out.not_captured.append(NotCaptured(
                src.path, src.lines.line(t.start_pos), t.value,
                f"a driver launch runs a CUfunction, which names no kernel in the source: if it runs "
                f"{target.kernel.label}, that launch is not captured",
                f"launch {target.kernel.label} by name (<<<>>> or cudaLaunchKernelEx) in a file the spec lists, or "
                "capture it from Python with atrex_inject.pycapture.LaunchCapture"))
        elif t.type == "PREPROC":
            _define(src, target, i, out)
    _dedupe_statements(out)
    _references(src, target, spans, out)
    out.not_captured.sort(key=lambda n: n.line)
    return out


def _chevron(src: SourceFile, target: Target, i: int, bodies, out: Scan, spans: list) -> None:
    tk, toks = src.tokens, src.tokens.toks
    close = i + 1
    while close < len(toks) and toks[close].type != "LAUNCH_CLOSE":
        close = tk.skip(close)
    if close + 1 >= len(toks) or toks[close + 1].type != "LPAR":
        return
    cfg = [_text(src, a, b) for a, b in tk.split(i + 1, close)]
    callee = _callee(tk, *_before_chevron(tk, i), src.text)
    _launch(src, target, callee, i, CHEVRON, tk.match[close + 1], bodies, out, spans,
            lambda: (cfg[0], cfg[1], cfg[3] if len(cfg) > 3 else "0") if len(cfg) >= 2 else None)


def _runtime(src: SourceFile, target: Target, i: int, bodies, out: Scan, spans: list) -> None:
    tk, toks = src.tokens, src.tokens.toks
    args = tk.split_args(i + 1)
    k = RUNTIME_KERNEL_ARG[toks[i].type]
    if len(args) <= k:
        return
    callee = _callee(tk, *_strip_casts(tk, *args[k]), src.text)

    def geometry():
        if toks[i].type in CONFIG_FIRST:
            c = f"({_text(src, *args[0])})"
            return f"{c}->gridDim", f"{c}->blockDim", f"{c}->stream"
        if len(args) < 3:
            return None
        return _text(src, *args[1]), _text(src, *args[2]), _text(src, *args[5]) if len(args) > 5 else "0"
    _launch(src, target, callee, i, toks[i].value, tk.match[i + 1], bodies, out, spans, geometry,
            kernel_arg=args[k])


def _launch(src: SourceFile, target: Target, callee: _Callee | None, at: int, via: str, last: int, bodies,
            out: Scan, spans: list, geometry, kernel_arg: tuple[int, int] | None = None) -> None:
    """Classify one launch (tokens from its kernel expression, or its function's name, to `last`,
    the `)` closing its arguments) of some kernel: the target's is captured or reported."""
    tk, toks = src.tokens, src.tokens.toks
    line = src.lines.line(toks[at].start_pos)
    first = callee.a if callee is not None and via == CHEVRON else at

    def report(reason: str, hint: str) -> None:
        out.not_captured.append(NotCaptured(src.path, line, via, reason, hint))
        if callee is not None:
            spans.append((toks[callee.a].start_pos, toks[callee.b].end_pos))

    if callee is None:
        region = kernel_arg or (max(0, at - 8), at)
        if any(t.type == "WORD" and t.value == target.kernel.name for t in toks[region[0]:region[1] + 1]):
            report(f"atrex-inject cannot read this launch's kernel expression, which names {target.kernel.name}",
                   f"launch {target.kernel.label} by its name (`{target.kernel.name}<<<...>>>(...)` or "
                   f"cudaLaunchKernelEx(&cfg, {target.kernel.name}, ...)) and apply again")
        return
    verdict = _is_target(tk, callee, target)
    if verdict is False:
        return
    if isinstance(verdict, str):
        return report(verdict, "launch the kernel by its qualified name (`ns::kernel<<<...>>>`) and apply again")
    want = target.targs
    if want is not None and callee.targs != want:
        got = f"<{callee.targs}>" if callee.targs is not None else "no template arguments (they are deduced)"
        return report(f"it names {target.kernel.qualname}{got if callee.targs is not None else ''} with "
                      f"{'template arguments ' + got if callee.targs is not None else got}, not the spec's <{want}>",
                      f"if this launch runs {target.kernel.qualname}<{want}>, write its template arguments as the "
                      "spec does; otherwise it launches another instantiation, which runs without probes")
    if callee.targs in target.siblings and callee.targs != target.kernel.targs:
        return  # another definition of the name (an explicit specialization) is what it launches
    if any(a <= toks[at].start_pos < b for a, b in bodies):
        return report("a launch from device code (dynamic parallelism) is not captured",
                      "launch the kernel from host code to capture it")
    geo = geometry()
    if geo is None:
        return
    stmt = _statement(tk, first, last)
    if isinstance(stmt, str):
        return report(stmt, "make the launch a statement of its own (`cudaError_t err = LAUNCH;` then test err) "
                            "and apply again")
    start, end, macro = stmt
    shape = "return" if toks[start].type == "RETURN" else "declaration" if _declares(tk, start, first) else "statement"
    unbraced = start > 0 and (toks[start - 1].type in ("ELSE", "DO") or (
        toks[start - 1].type == "RPAR" and tk.opener[start - 1] > 0
        and toks[tk.opener[start - 1] - 1].type in HEADER_KEYWORDS))
    spans.append((toks[callee.a].start_pos, toks[callee.b].end_pos))
    out.captured.append(Launch(
        src.path, line, via, (toks[callee.a].start_pos, toks[callee.b].end_pos),
        (callee.name.start_pos, callee.name.end_pos), callee.targs,
        (toks[start].start_pos, toks[end].end_pos), *geo, shape, macro, shape != "declaration" or unbraced))


def _is_target(tk: Tokens, c: _Callee, target: Target) -> bool | str:
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


def _before_chevron(tk: Tokens, i: int) -> tuple[int, int] | tuple[None, None]:
    """Token range of the kernel expression right before the `<<<` at i: a qualified name and its
    template arguments."""
    toks, b = tk.toks, i - 1
    k = b
    if k >= 0 and toks[k].type == "GT":
        k = tk.angle_open(k)
        if k is None:
            return None, None
        k -= 1
    if k < 0 or toks[k].type != "WORD":
        return None, None
    while k >= 2 and toks[k - 1].type == "SCOPE" and toks[k - 2].type == "WORD":
        k -= 2
    if k >= 1 and toks[k - 1].type == "SCOPE":
        k -= 1
    return k, b


def _strip_casts(tk: Tokens, a: int, b: int) -> tuple[int, int]:
    """The kernel inside a launch function's argument: without `&`, enclosing parentheses, a C cast
    `(void*)` or a named cast `reinterpret_cast<const void*>(...)`."""
    toks = tk.toks
    while a < b:
        t = toks[a]
        if t.value == "&":
            a += 1
        elif t.type == "LPAR" and tk.match[a] == b:
            a, b = a + 1, b - 1
        elif t.type == "LPAR":
            a = tk.match[a] + 1
        elif t.value in CASTS and toks[a + 1].type == "LT":
            shut = tk.angle_close(a + 1, b)
            if shut is None or toks[shut + 1].type != "LPAR" or tk.match[shut + 1] != b:
                break
            a, b = shut + 2, b - 1
        else:
            break
    return a, b


def _callee(tk: Tokens, a: int | None, b: int | None, text: str) -> _Callee | None:
    """The kernel expression in tokens [a, b], read with the grammar's `callee` rule."""
    if a is None or b < a:
        return None
    tree = tk.parse("callee", a, b + 1)
    if tree is None:
        return None
    qual = next(c for c in tree.children if isinstance(c, Tree) and c.data == "qual")
    words = [t for t in qual.children if t.type == "WORD"]
    targs = next((c for c in tree.children if isinstance(c, Tree) and c.data == "targs"), None)
    targ_text = None
    if targs is not None:
        lt, gt = targs.children[0], targs.children[-1]
        targ_text = squash_targs(text[lt.end_pos:gt.start_pos])
    return _Callee(a, b, tuple(w.value for w in words), qual.children[0].type == "SCOPE", targ_text, words[-1])


def _statement(tk: Tokens, first: int, last: int) -> tuple[int, int, str | None] | str:
    """(first token, `;` token, the call around the launch) of the statement holding the launch at
    tokens [first, last]; or why the launch cannot be bracketed by a capture session."""
    toks, k, macro = tk.toks, first, None
    while k > 0:
        p, t = k - 1, tk.toks[k - 1]
        if p in tk.opener and t.type != "RBRACE":
            o = tk.opener[p]
            if t.type == "RPAR" and o > 0 and toks[o - 1].type in HEADER_KEYWORDS:
                break  # the unbraced body of an if/for/while
            k = o
            continue
        if t.type in ("LPAR", "LSQB"):
            before = toks[p - 1] if p > 0 else None
            if before is not None and before.type in HEADER_KEYWORDS:
                return f"the launch is inside the header of `{HEADER_KEYWORDS[before.type]} (...)`"
            if t.type == "LSQB":
                return "the launch is inside brackets"
            if before is not None and before.type == "WORD":
                macro = before.value
            k = p
            continue
        if t.type in ("SEMI", "VSEMI", "PREPROC", "IF0", "LBRACE", "RBRACE", "ELSE", "DO", "COLON"):
            break
        k = p
    end = k
    while end < len(toks) and toks[end].type not in ("SEMI", "VSEMI"):
        if toks[end].type == "RBRACE":
            return "the statement holding the launch has no `;` of its own"
        end = tk.skip(end)
    if end >= len(toks):
        return "the statement holding the launch has no `;` of its own"
    for j in range(k, end):
        if (j < first or j > last) and toks[j].value in ("?", "&&", "||"):
            return f"the launch runs conditionally inside an expression (`{toks[j].value}`)"
    return k, end, macro


def _declares(tk: Tokens, start: int, first: int) -> bool:
    """Does the statement declare a name initialized from the launch (`cudaError_t e = LAUNCH`)?
    Then it must stay in its scope: no braces around it."""
    toks, j = tk.toks, start
    while j < first and toks[j].value != "=":
        j = tk.skip(j)
    pre = toks[start:j]
    if j >= first or len(pre) < 2 or pre[-1].type != "WORD":
        return False
    return pre[-2].type in ("WORD", "GT") or (pre[-2].value in ("*", "&", "&&") and len(pre) >= 3)


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
    try:
        inner = Tokens(body, src.path)
    except SourceParseError:
        return
    params = {p.strip() for p in (m.group(3) or "").split(",")}
    launched: set[str] = set()
    for j, t in enumerate(inner.toks):
        if t.type == "LAUNCH_OPEN":
            a, b = _before_chevron(inner, j)
        elif t.type in RUNTIME_KERNEL_ARG and j + 1 < len(inner.toks) and inner.toks[j + 1].type == "LPAR":
            args = inner.split_args(j + 1)
            k = RUNTIME_KERNEL_ARG[t.type]
            a, b = _strip_casts(inner, *args[k]) if len(args) > k else (None, None)
        else:
            continue
        c = _callee(inner, a, b, body)
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
    for j, t in enumerate(toks):
        if t.type == "WORD" and t.value == name:
            args = src.tokens.split_args(j + 1) if j + 1 < len(toks) and toks[j + 1].type == "LPAR" else []
            named = any(x.type == "WORD" and x.value == target.kernel.name for a, b in args for x in toks[a:b + 1])
            if direct or (via_param and named):
                uses.append(src.lines.line(t.start_pos))
    hint = (f"launch {target.kernel.label} outside the macro, or bracket the macro's use with an "
            "atrex::host::Capture by hand (docs/launches.md)")
    for ln in uses or ([line] if direct else []):
        out.not_captured.append(NotCaptured(
            src.path, ln, f"macro {name}",
            f"the launch is inside the body of macro {name} (defined at line {line}), which the rewriter cannot "
            "bracket", hint))


def _references(src: SourceFile, target: Target, spans: list[tuple[int, int]], out: Scan) -> None:
    """Uses of the kernel's name that take its address (`auto f = k;`, `launch(k, ...)`,
    `params.func = (void*)k`): a launch through such a pointer is not captured."""
    tk, toks, name = src.tokens, src.tokens.toks, target.kernel.name
    skip = spans + [(k.decl_start, k.body_end) for k in src.kernels] + [(d.start, d.end) for d in src.declarations]
    for j, t in enumerate(toks):
        if t.type != "WORD" or t.value != name or any(a <= t.start_pos < b for a, b in skip):
            continue
        nxt = toks[j + 1] if j + 1 < len(toks) else None
        if j > 0 and toks[j - 1].value in (".", "->"):
            continue
        if nxt is not None and nxt.type == "LPAR":
            continue  # a call: a kernel cannot be called, so it is a function of the same name
        if nxt is not None and nxt.type == "LT":
            shut = tk.angle_close(j + 1, len(toks))
            if shut is not None and shut + 1 < len(toks) and toks[shut + 1].type == "LPAR":
                continue
        if _in_declaration(tk, j) or _in_attribute_call(tk, j):
            continue
        k = j
        while k >= 2 and toks[k - 1].type == "SCOPE" and toks[k - 2].type == "WORD":
            k -= 2
        words = tuple(x.value for x in toks[k:j + 1] if x.type == "WORD")
        absolute = k >= 1 and toks[k - 1].type == "SCOPE"
        got = resolve(words, absolute, tk.namespace_at(j), tk.usings_at(j), target.known)
        if got is not None and got != target.kernel.qualname:
            continue
        if got is None and target.others_named_alike:
            continue
        out.not_captured.append(NotCaptured(
            src.path, src.lines.line(t.start_pos), "pointer",
            f"{target.kernel.label}'s address is taken here: a launch through that pointer (a launch helper, a "
            "CUDA graph node, cudaLaunchKernel on a variable) is not captured",
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
    cudaOccupancy...)?"""
    for o, c in tk.match.items():
        if o < j < c and tk.toks[o].type == "LPAR" and o > 0:
            w = tk.toks[o - 1].value
            if w in ATTRIBUTE_CALLS or w.startswith("cudaOccupancy"):
                return True
    return False


def _text(src: SourceFile, a: int, b: int) -> str:
    toks = src.tokens.toks
    return src.text[toks[a].start_pos:toks[b].end_pos]


@dataclass
class FileLaunches:
    """One file the rewriter sees (the source or a launcher), parsed, with its scan."""
    src: SourceFile
    bom: str
    scan: Scan


def find_all(spec, src: SourceFile, kernel: Kernel, launchers: dict[str, str]) -> tuple[list[FileLaunches], list[str]]:
    """The target's launches in the source and in each launcher (rel path -> text), and warnings.

    Refused (exit 2): launches captured in two translation units (two `.cu` launchers), whose
    copies of the static capture plan would number their launches alike and overwrite each other's
    capture files."""
    files: list[FileLaunches] = []
    parsed = []
    for rel, text in launchers.items():
        bom = "\ufeff" if text.startswith("\ufeff") else ""
        parsed.append((parse_source(text[len(bom):], rel, spec.declared_by), bom))
    everyone = [src] + [p for p, _ in parsed]
    known = frozenset({k.qualname for f in everyone for k in f.kernels} | {d.qualname for f in everyone
                                                                           for d in f.declarations})
    siblings = tuple(k.targs for k in src.kernels if k.qualname == kernel.qualname and k is not kernel)
    target = Target(kernel, KernelName.parse(spec.kernel), known, siblings)
    files.append(FileLaunches(src, "", scan(src, target)))
    files += [FileLaunches(p, bom, scan(p, target)) for p, bom in parsed]
    units = [f.src.path for f in files[1:] if f.scan.captured and not f.src.path.lower().endswith(HEADER_SUFFIXES)]
    if len(units) > 1:
        raise AnchorError(f"launches of {kernel.label} would be captured in {len(units)} translation units "
                          f"({', '.join(units)}): each compiles its own copy of the capture plan, so their launches "
                          "would be numbered alike and their capture files overwrite each other's",
                          path=str(spec.path), hint="list one .cu file in launchers (the one whose launches you want "
                                                    "captured); the others' launches run without probes")
    warnings = []
    if not any(f.scan.captured for f in files):
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
    for p, _ in parsed:
        if not re.search(rf'#\s*include\s*[<"](?:[^">]*/)?{re.escape(name)}[">]', p.text):
            warnings.append(f"launcher {p.path} does not #include {name} directly: its capture sessions need the "
                            "capture plan the instrumented header defines (a build error if no header it includes "
                            "brings it in)")
    return files, warnings
