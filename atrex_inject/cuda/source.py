"""CUDA source → typed nodes: kernels with their statement trees, and launches of kernels.

Positions come from the grammar (grammars/cuda.lark): the whole file is lexed once with its
terminals (tokens.py) and its brackets matched, then a kernel body is parsed with the
statement-level start rule of the Lark parser.
"""
from __future__ import annotations

import bisect
import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from lark import Token, Tree
from lark.exceptions import LarkError, UnexpectedInput

from ..errors import AnchorError, SourceParseError
from ..lark_loader import parser
from . import ptx
from .tokens import TokenStream, terminals

STMT_KINDS = {"block", "for_stmt", "while_stmt", "do_stmt", "if_stmt", "switch_stmt", "asm_stmt", "return_stmt",
              "break_stmt", "continue_stmt", "case_label", "simple_stmt", "empty_stmt", "pp_line"}
LOOP_KINDS = {"for_stmt", "while_stmt", "do_stmt"}
ATTR_WORDS = {"__launch_bounds__", "__cluster_dims__", "__attribute__", "alignas", "__declspec", "__maxnreg__"}
# Statements that are a pragma in disguise: the operators, and the unroll macros of CUTLASS/CuTe
# (defined in headers we do not read). A macro the file itself defines with `_Pragma` is added.
PRAGMA_WORDS = frozenset({"_Pragma", "__pragma", "CUTLASS_PRAGMA_UNROLL", "CUTLASS_PRAGMA_NO_UNROLL", "CUTE_UNROLL",
                          "CUTE_NO_UNROLL"})
PRAGMA_DEFINE = re.compile(r"#\s*define\s+(\w+)\b.*\b_Pragma\b", re.S)
# Words that declare a kernel: `__global__`, CUTLASS's CUTLASS_GLOBAL (defined in a header we do not
# read), and a macro the file defines with `__global__` in its body (`#define KERNEL_ATTRS __global__ ...`).
GLOBAL_WORDS = frozenset({"__global__", "CUTLASS_GLOBAL"})
GLOBAL_DEFINE = re.compile(r"#\s*define\s+(\w+)\b.*\b__global__\b", re.S)
STRING_DEFINE = re.compile(r'#\s*define\s+(\w+)[ \t]+((?:"(?:[^"\\\n]|\\.)*"\s*)+)$')


@dataclass(frozen=True)
class Macros:
    """What the file's own #defines tell the statement model: which names are pragmas (they lead
    the next statement), which declare kernels, and which expand to string literals (spliced into
    asm templates, `"mbarrier.arrive" SCOPE ".b64 ..."`)."""
    pragmas: frozenset[str] = PRAGMA_WORDS
    strings: dict[str, list[str]] = field(default_factory=dict)
    globals: frozenset[str] = GLOBAL_WORDS

    @classmethod
    def of(cls, toks: list[Token]) -> "Macros":
        defines = [t.value.strip() for t in toks if t.type == "PREPROC"]
        strings = {m.group(1): re.findall(r'"(?:[^"\\\n]|\\.)*"', m.group(2))
                   for d in defines for m in [STRING_DEFINE.match(d)] if m}
        def named(regex: re.Pattern) -> set[str]:
            return {m.group(1) for d in defines for m in [regex.match(d)] if m}
        return cls(PRAGMA_WORDS | named(PRAGMA_DEFINE), strings, GLOBAL_WORDS | named(GLOBAL_DEFINE))


class MacroStatements:
    """Postlexer: a zero-width VSEMI after a macro statement written without `;`.

    Emitted when a WORD or `)` outside any parenthesis is followed by `}` or a statement keyword,
    unless that `)` closes an if/for/while/switch header.
    """

    TRIGGERS = {"RBRACE", "FOR", "WHILE", "DO", "IF", "SWITCH", "RETURN", "BREAK", "CONTINUE", "CASE", "DEFAULT"}
    HEADERS = {"IF", "FOR", "WHILE", "SWITCH", "CONSTEXPR"}
    always_accept = ()

    def process(self, stream):
        prev = None
        headers: list[bool] = []  # per open paren: does it hold a control header?
        closed_header = False
        for tok in stream:
            if (prev is not None and tok.type in self.TRIGGERS and not headers and not closed_header
                    and prev.type in ("WORD", "RPAR")):
                yield Token("VSEMI", "", start_pos=prev.end_pos, end_pos=prev.end_pos, line=prev.end_line,
                            column=prev.end_column, end_line=prev.end_line, end_column=prev.end_column)
            closed_header = False
            if tok.type in ("LPAR", "LSQB"):
                headers.append(tok.type == "LPAR" and prev is not None and prev.type in self.HEADERS)
            elif tok.type in ("RPAR", "RSQB") and headers:
                closed_header = headers.pop()
            yield tok
            prev = tok


def _parser():
    return parser("cuda.lark", "body", postlex=MacroStatements)


class Lines:
    """Offset → 1-based line, and each line's text."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)

    def line_text(self, line: int) -> str:
        a = self.starts[line - 1]
        b = self.starts[line] - 1 if line < len(self.starts) else len(self.text)
        return self.text[a:b]

    def line_start(self, offset: int) -> int:
        return self.starts[self.line(offset) - 1]

    def line_end(self, offset: int) -> int:
        """Offset of the newline ending the line that holds `offset` (or end of text)."""
        i = self.text.find("\n", offset)
        return len(self.text) if i < 0 else i


@dataclass(eq=False)
class Stmt:
    kind: str
    start: int  # absolute offset of the first character
    end: int  # absolute offset after the last character
    own: list[Token]  # this statement's tokens, without those of its sub-statements
    children: list["Stmt"] = field(default_factory=list)
    parent: "Stmt | None" = None
    lead: int = 0  # start including directly preceding #pragma lines (a probe must not split them)

    @property
    def text(self) -> str:
        """Own tokens joined without whitespace: what statement and loop patterns are matched against."""
        return "".join(t.value for t in self.own)

    @property
    def body(self) -> "Stmt | None":
        """A loop's body: its last sub-statement (directives before it are separate pp_line children)."""
        return self.children[-1] if self.kind in LOOP_KINDS and self.children else None

    @property
    def in_block(self) -> bool:
        return self.parent is not None and self.parent.kind == "block"

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()


@dataclass(eq=False)
class Kernel:
    """A __global__ definition; its body is parsed into statements on first use."""
    name: str
    line: int
    text: str
    path: str
    body_start: int  # offset of the body's `{`
    body_end: int  # offset after its `}`
    macros: Macros = field(default_factory=Macros)
    decl_start: int = 0  # offset of the definition's first token (`template`, `extern`, `__global__`, ...)
    name_span: tuple[int, int] = (0, 0)  # offsets of the kernel's name in the definition

    @cached_property
    def body(self) -> Stmt:
        """The body as a statement tree (kind "block"), from the grammar's `body` rule."""
        a, b = self.body_start, self.body_end
        try:
            tree = _parser().parse(self.text[a:b], start="body")
        except LarkError as e:
            raise _parse_error(e, self.text, self.path, a) from None
        tree.data = "block"
        return _build(tree, a, self.macros.pragmas)


@dataclass(eq=False)
class Launch:
    kernel: str
    start: int  # start of the statement holding the launch
    end: int  # after its semicolon
    grid: str
    block: str
    stream: str
    line: int
    via: str  # "<<<>>>" or "cudaLaunchKernelEx"
    callee: tuple[int, int] = (0, 0)  # offsets of the launched expression (`ns::k<T, 4>`, `&k`)
    name_span: tuple[int, int] = (0, 0)  # offsets of the kernel's name inside it


@dataclass(frozen=True)
class KernelDecl:
    """A `__global__` declaration without a body (`__global__ void k(float*);`)."""
    name: str
    start: int  # offset of its first token
    end: int  # offset after its `;`
    name_span: tuple[int, int]


@dataclass(eq=False)
class SourceFile:
    text: str
    path: str
    lines: Lines
    kernels: list[Kernel]
    launches: list[Launch]
    helper_asm: list[tuple[str, int, list[ptx.PtxInstr]]]  # (function, line, instructions) outside kernels
    declarations: list[KernelDecl] = field(default_factory=list)

    def kernel(self, name: str) -> Kernel | None:
        """The one definition of `name`; several (under #if/#else, or specializations) are refused:
        instrumenting only the first would leave the build that uses another without probes."""
        found = [k for k in self.kernels if k.name == name]
        if len(found) > 1:
            lines = ", ".join(str(k.line) for k in found)
            raise AnchorError(f"kernel {name!r} has {len(found)} __global__ definitions in {self.path} "
                              f"(lines {lines}), for example under #if/#else; atrex-inject instruments exactly one "
                              "definition",
                              path=self.path, line=found[1].line,
                              hint="target a kernel defined once; instrumenting only one of several definitions "
                                   "would leave the build that compiles another without probes")
        return found[0] if found else None


def _tokens(node) -> list[Token]:
    if isinstance(node, Token):
        return [node]
    return [t for t in node.scan_values(lambda v: isinstance(v, Token))]


def _span(node, off: int) -> tuple[int, int]:
    """Absolute [start, end) of a node. A directive token starts at the newline before its `#` (the
    lexer sees `#` only at line starts), but the directive's span starts at the `#`: a probe placed
    before it goes on its own line, not at the end of the line above (inside a `//` comment there)."""
    if isinstance(node, Tree) and node.data == "pp_line":
        node = node.children[0]
    if isinstance(node, Token):
        v = node.value
        lead = len(v) - len(v.lstrip()) if node.type in ("PREPROC", "IF0") else 0
        return off + node.start_pos + lead, off + node.end_pos
    return off + node.meta.start_pos, off + node.meta.end_pos


def _moved(tok: Token, off: int) -> Token:
    """The token with absolute offsets (kernel bodies are parsed as slices of the file)."""
    return Token(tok.type, tok.value, start_pos=tok.start_pos + off, end_pos=tok.end_pos + off)


def _build(node: Tree, off: int, pragmas: frozenset[str]) -> Stmt:
    kind = node.data
    start, end = _span(node, off)
    if kind == "pp_line":
        return Stmt(kind, start, end, [_moved(node.children[0], off)])
    own: list[Token] = []
    subs: list[Stmt] = []
    for c in node.children:
        if isinstance(c, Tree) and c.data in STMT_KINDS and kind not in ("simple_stmt", "return_stmt", "case_label"):
            subs.append(_build(c, off, pragmas))
        else:
            own.extend(_moved(t, off) for t in _tokens(c))
    s = Stmt(kind, start, end, own, subs, lead=start)
    for c in subs:
        c.parent = s
    _mark_pragma_leads(subs, pragmas)
    return s


def _is_pragma(s: Stmt, pragmas: frozenset[str]) -> bool:
    """A `#pragma` line, or `_Pragma(...)` / a pragma macro used as a statement (`UNROLL` before a loop)."""
    if s.kind == "pp_line":
        return s.own[0].value.lstrip().startswith("#pragma")
    return s.kind == "simple_stmt" and s.own[0].value in pragmas and s.own[-1].type == "VSEMI"


def _mark_pragma_leads(stmts: list[Stmt], pragmas: frozenset[str]) -> None:
    """Each statement's lead: the start of the pragmas directly before it, which apply to it and must
    stay attached (a probe goes above them)."""
    for i, s in enumerate(stmts):
        j = i
        while j > 0 and _is_pragma(stmts[j - 1], pragmas):
            j -= 1
        s.lead = stmts[j].start if j < i else s.start


def _parse_error(e: LarkError, text: str, path: str, base: int = 0) -> SourceParseError:
    if isinstance(e, UnexpectedInput):
        return _unparsable(text, path, base + (e.pos_in_stream or 0))
    return SourceParseError(f"cannot parse the source: {e}", path=path)


def _unparsable(text: str, path: str, offset: int) -> SourceParseError:
    lines = Lines(text)
    line = lines.line(offset)
    return SourceParseError(f"cannot parse the source near {lines.line_text(line).strip()!r}", path=path, line=line,
                            hint="atrex-inject recognizes balanced braces/parens, statements, asm blocks; "
                                 "unbalanced braces across #if branches are not supported")


class _Pairs:
    """Bracket partners as a read-only mapping from the tokens of some bracket types."""

    def __init__(self, partner: array, types: bytearray, keys: set[int]):
        self.partner, self.types, self.keys = partner, types, keys

    def __contains__(self, i: int) -> bool:
        return 0 <= i < len(self.types) and self.types[i] in self.keys

    def __getitem__(self, i: int) -> int:
        if i not in self:
            raise KeyError(i)
        return self.partner[i]

    def get(self, i: int, default: int | None = None) -> int | None:
        return self.partner[i] if 0 <= i < len(self.types) and self.types[i] in self.keys else default


OPEN = {"LBRACE": "RBRACE", "LPAR": "RPAR", "LSQB": "RSQB"}


def _macro_statements(toks: TokenStream) -> list[int]:
    """The tokens MacroStatements puts a VSEMI before, found from the token types alone."""
    types, code = toks.types, toks.terms.names.index
    triggers = {code(n) for n in MacroStatements.TRIGGERS}
    header_words = {code(n) for n in MacroStatements.HEADERS}
    lpar, lsqb, rpar, rsqb, word = map(code, ("LPAR", "LSQB", "RPAR", "RSQB", "WORD"))
    out: list[int] = []
    headers: list[bool] = []  # per open paren or bracket: does it hold a control header?
    closed_header = -1  # index of the last `)` that closed a control header
    for i in toks.indices({*MacroStatements.TRIGGERS, "LPAR", "LSQB", "RPAR", "RSQB"}):
        t = types[i]
        if t in triggers and i and not headers and closed_header != i - 1 and types[i - 1] in (word, rpar):
            out.append(i)
        if t in (lpar, lsqb):
            headers.append(t == lpar and i > 0 and types[i - 1] in header_words)
        elif t in (rpar, rsqb) and headers and headers.pop():
            closed_header = i
    return out


class _Tokens:
    """The file as the grammar's token stream with brackets matched.

    The whole file is only lexed (with the grammar's terminals, so comments, strings, raw strings,
    directives and `#if 0` regions are single tokens; tokens.py keeps a byte per token and makes a
    token's text and offsets when asked); only the target kernel's body is parsed into statements.
    `match` (opener -> closer) and `opener` (closer -> opener) read one array of partners.
    """

    def __init__(self, text: str, path: str):
        self.text = text
        self.toks = TokenStream(text, terminals(_parser()))
        bad = self.toks.error_offset()
        if bad is not None:
            raise _unparsable(text, path, bad)
        self.toks.insert(_macro_statements(self.toks))
        types, code = self.toks.types, self.toks.terms.names.index
        close_of = {code(o): code(c) for o, c in OPEN.items()}
        partner = array("i" if len(types) < 2 ** 31 else "q", [0]) * len(types)
        stack: list[int] = []
        for i in self.toks.indices({*OPEN, *OPEN.values()}):
            if types[i] in close_of:
                stack.append(i)
            elif not stack or close_of[types[stack[-1]]] != types[i]:
                t = self.toks[i]
                raise SourceParseError(f"unbalanced {t.value!r}", path=path, line=Lines(text).line(t.start_pos),
                                       hint="braces, parentheses and brackets must balance outside comments, "
                                            "strings and #if 0 regions")
            else:
                j = stack.pop()
                partner[i], partner[j] = j, i
        if stack:
            t = self.toks[stack[-1]]
            raise SourceParseError(f"{t.value!r} is never closed", path=path, line=Lines(text).line(t.start_pos))
        self.match = _Pairs(partner, types, set(close_of))
        self.opener = _Pairs(partner, types, set(close_of.values()))

    def find(self, words: set[str], types: set[str]) -> list[int]:
        """Indices, ascending, of the tokens of these types and of the WORD tokens spelled as one of
        these words (found as text first: a file holds few of them)."""
        found = set(self.toks.indices(types))
        for w in filter(None, words):
            at = self.text.find(w)
            while at >= 0:
                i = self.toks.at(at)
                if i is not None and self.toks.name(i) == "WORD" and self.toks.span(i)[1] == at + len(w):
                    found.add(i)
                at = self.text.find(w, at + 1)
        return sorted(found)

    def skip(self, i: int) -> int:
        """Index after the token at i, or after its whole bracketed group."""
        return self.match.get(i, i) + 1

    def split_args(self, open_i: int) -> list[tuple[int, int]]:
        """(first, last) token index of each top-level comma-separated part inside a group."""
        parts, start, i, close = [], open_i + 1, open_i + 1, self.match[open_i]
        while i < close:
            if self.toks[i].value == "," and self.toks[i].type == "PUNCT":
                parts.append((start, i - 1))
                start = i + 1
            i = self.skip(i)
        if start < close:
            parts.append((start, close - 1))
        return parts


def parse_source(text: str, path: str = "<source>", declared_by: str | None = None) -> SourceFile:
    """`declared_by`: a function-like macro that declares kernels (`MACRO(name, ...) { body }`,
    defined in a header this file does not define it in): its uses are kernels too."""
    tk = _Tokens(text, path)
    lines = Lines(text)
    kernels: list[Kernel] = []
    declarations: list[KernelDecl] = []
    launches: list[Launch] = []
    macros = Macros.of([tk.toks[i] for i in tk.toks.indices({"PREPROC"})])
    for i in tk.find(macros.globals | {declared_by, "cudaLaunchKernelEx"}, {"LAUNCH_OPEN"}):
        t = tk.toks[i]
        if t.type == "WORD" and t.value in macros.globals:
            k = _kernel_at(tk, i, text, path, lines, macros)
            if isinstance(k, Kernel):
                kernels.append(k)
            elif k:
                declarations.append(k)
        elif t.type == "WORD" and t.value == declared_by:
            k = _macro_kernel_at(tk, i, text, path, lines, macros)
            if k:
                kernels.append(k)
        elif t.type == "LAUNCH_OPEN" or (t.type == "WORD" and t.value == "cudaLaunchKernelEx"):
            launch = _launch(tk, i, text, lines)
            if launch:
                launches.append(launch)
    return SourceFile(text, path, lines, kernels, launches, _helper_asm(tk, kernels, lines, macros), declarations)


def _kernel_at(tk: _Tokens, i: int, text: str, path: str, lines: Lines,
               macros: Macros) -> Kernel | KernelDecl | None:
    toks, name = tk.toks, None
    j = i + 1
    while j < len(toks):
        t = toks[j]
        if t.type == "SEMI":
            if name is None:
                return None
            return KernelDecl(name.value, toks[_statement_start(tk, i)].start_pos, t.end_pos,
                              (name.start_pos, name.end_pos))
        if t.type == "LPAR" and toks[j - 1].type == "WORD" and toks[j - 1].value not in ATTR_WORDS:
            name = toks[j - 1]
        if t.type == "LBRACE":
            if name is None:
                return None
            return Kernel(name.value, lines.line(toks[i].start_pos), text, path, t.start_pos,
                          toks[tk.match[j]].end_pos, macros, toks[_statement_start(tk, i)].start_pos,
                          (name.start_pos, name.end_pos))
        j = tk.skip(j)
    return None


def _macro_kernel_at(tk: _Tokens, i: int, text: str, path: str, lines: Lines, macros: Macros) -> Kernel | None:
    """`MACRO(name, ...) { body }`: the kernel is the macro's first argument, its body the braces
    right after the call."""
    toks = tk.toks
    if i + 1 >= len(toks) or toks[i + 1].type != "LPAR" or i + 1 not in tk.match:
        return None
    close = tk.match[i + 1]
    args = tk.split_args(i + 1)
    if not args or close + 1 >= len(toks) or toks[close + 1].type != "LBRACE":
        return None
    a, b = args[0]
    if a != b or toks[a].type != "WORD":
        return None
    return Kernel(toks[a].value, lines.line(toks[i].start_pos), text, path, toks[close + 1].start_pos,
                  toks[tk.match[close + 1]].end_pos, macros, toks[_statement_start(tk, i)].start_pos,
                  (toks[a].start_pos, toks[a].end_pos))


BOUNDARY_TYPES = {"SEMI", "VSEMI", "PREPROC", "IF0", "LBRACE", "RBRACE", "ELSE", "DO", "COLON", "LPAR", "LSQB"}
HEADER_KEYWORDS = {"IF", "FOR", "WHILE", "SWITCH", "CONSTEXPR"}


def _statement_start(tk: _Tokens, i: int) -> int:
    """Index of the first token of the statement holding token i (walking back at one depth)."""
    k = i
    while k > 0:
        prev = k - 1
        t = tk.toks[prev]
        if t.type in ("RPAR", "RSQB", "RBRACE") and prev in tk.opener:
            opener = tk.opener[prev]
            if t.type == "RBRACE" or (t.type == "RPAR" and opener > 0 and tk.toks[opener - 1].type in HEADER_KEYWORDS):
                break
            k = opener
            continue
        if t.type in BOUNDARY_TYPES:
            break
        k = prev
    return k


def _launch(tk: _Tokens, i: int, text: str, lines: Lines) -> Launch | None:
    toks = tk.toks

    def src(a: int, b: int) -> str:
        return text[toks[a].start_pos:toks[b].end_pos]

    if toks[i].type == "LAUNCH_OPEN":
        close = i + 1
        while close < len(toks) and toks[close].type != "LAUNCH_CLOSE":
            close = tk.skip(close)
        if close + 1 >= len(toks) or toks[close + 1].type != "LPAR":
            return None
        k = i - 1
        if k >= 0 and toks[k].value == ">":  # template arguments
            depth = 0
            while k >= 0:
                depth += (toks[k].value == ">") - (toks[k].value == "<")
                if depth == 0:
                    break
                k -= 1
            k -= 1
        if k < 0 or toks[k].type != "WORD":
            return None
        name, name_i, first = toks[k].value, k, k
        while first >= 2 and toks[first - 1].value == "::" and toks[first - 2].type == "WORD":
            first -= 2  # a qualified name: ns::k
        callee = (toks[first].start_pos, toks[i - 1].end_pos)
        cfg, start = [], i + 1
        j = i + 1
        while j < close:
            if toks[j].value == "," and toks[j].type == "PUNCT":
                cfg.append(src(start, j - 1))
                start = j + 1
            j = tk.skip(j)
        cfg.append(src(start, close - 1))
        if len(cfg) < 2:
            return None
        grid, block, stream, via = cfg[0], cfg[1], cfg[3] if len(cfg) > 3 else "0", "<<<>>>"
        after = tk.match[close + 1] + 1
    else:
        if i + 1 >= len(toks) or toks[i + 1].type != "LPAR":
            return None
        parts = _template_args_joined(tk, tk.split_args(i + 1))
        args = [src(a, b) for a, b in parts]
        if len(args) < 2:
            return None
        name = re.sub(r"<.*", "", args[1]).strip().lstrip("&").split("::")[-1].strip()
        name_i = next((j for j in range(parts[1][0], parts[1][1] + 1) if toks[j].value == name), None)
        if name_i is None:
            return None
        callee = (toks[parts[1][0]].start_pos, toks[parts[1][1]].end_pos)
        c = f"({args[0]})"
        grid, block, stream, via = f"{c}->gridDim", f"{c}->blockDim", f"{c}->stream", "cudaLaunchKernelEx"
        after = tk.match[i + 1] + 1
    start = _statement_start(tk, i)
    end = after
    while end < len(toks) and toks[end].type not in ("SEMI", "VSEMI"):
        end = tk.skip(end)
    if end >= len(toks):
        return None
    a = toks[start].start_pos
    return Launch(name, a, toks[end].end_pos, grid, block, stream, lines.line(a), via, callee,
                  (toks[name_i].start_pos, toks[name_i].end_pos))


def _template_args_joined(tk: _Tokens, parts: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Comma-separated parts with the commas of a template argument list (`k<64, 64>`) put back:
    brackets are matched by the lexer, angle brackets are not."""
    out: list[tuple[int, int]] = []
    depth = 0
    for a, b in parts:
        if depth > 0:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
        i = a
        while i <= b:
            v = tk.toks[i].value if tk.toks[i].type == "PUNCT" else ""
            depth += (v == "<") - (v == ">")
            i = tk.skip(i)
    return out


ASM_TYPES = {"ASM", "ASM_GNU", "ASM_ALT"}
NOT_FUNCTIONS = {"if", "for", "while", "switch", "catch"}


def _helper_asm(tk: _Tokens, kernels: list[Kernel], lines: Lines,
                macros: Macros) -> list[tuple[str, int, list[ptx.PtxInstr]]]:
    """Each asm statement outside the kernels with the function that holds it: a ptx anchor that
    matches nothing in the kernel may name an opcode of a `__device__` helper, whose call can be
    anchored instead."""
    toks, out = tk.toks, []
    bodies: list[list[int]] = []  # the kernels' bodies, overlapping ones merged, by offset
    for a, b in sorted((k.body_start, k.body_end) for k in kernels):
        if bodies and a <= bodies[-1][1]:
            bodies[-1][1] = max(bodies[-1][1], b)
        else:
            bodies.append([a, b])
    starts = [a for a, _ in bodies]
    for i in toks.indices(ASM_TYPES):
        t = toks[i]
        j = bisect.bisect_right(starts, t.start_pos) - 1
        if j >= 0 and t.start_pos < bodies[j][1]:
            continue
        found = _instructions(toks.from_(i + 1), macros)
        if found:
            out.append((_function_at(tk, i), lines.line(t.start_pos), found))
    return out


def _function_at(tk: _Tokens, i: int) -> str:
    """The name of the innermost function whose body holds token i (`?` if none is found)."""
    toks, depth = tk.toks, 0
    for k in range(i - 1, -1, -1):
        if toks[k].type == "RBRACE":
            depth += 1
        elif toks[k].type == "LBRACE":
            if depth:
                depth -= 1
                continue
            j = k - 1
            while j >= 0 and toks[j].type == "WORD" and toks[j].value in ("const", "noexcept"):
                j -= 1
            if j > 0 and toks[j].type == "RPAR":
                name = toks[tk.opener[j] - 1]
                if name.type == "WORD" and name.value not in NOT_FUNCTIONS:
                    return name.value
    return "?"


def asm_instructions(stmt: Stmt, macros: Macros = Macros()) -> list[ptx.PtxInstr] | None:
    """PTX instructions of an asm statement's template; None when the PTX grammar cannot read it."""
    return _instructions(stmt.own[1:], macros)


def _instructions(toks: Iterable[Token], macros: Macros) -> list[ptx.PtxInstr] | None:
    """The instructions of the template that starts the tokens after `asm` (its string literals and
    the file's string macros among them, first included: `FENCE ";"`). A macro defined elsewhere
    expands to nothing here, which may make the template unreadable: None, so it is listed."""
    strings: list[str] = []
    unknown = False
    for t in toks:
        if t.type in ("STRING", "RAWSTRING"):
            strings.append(t.value)
        elif t.type == "WORD":
            strings += macros.strings.get(t.value, [])
            unknown |= t.value not in macros.strings
        elif t.type in ("VOLATILE", "VOLATILE_GNU", "INLINE", "GOTO", "LPAR"):
            continue
        else:
            break
    if not strings:
        return None if unknown else []
    return ptx.instructions(ptx.template_of(strings))
