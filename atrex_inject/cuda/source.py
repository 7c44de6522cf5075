"""CUDA source → typed nodes: kernels (with their qualified names and statement trees) and the
file's tokens with brackets and namespaces matched, for cuda/launches.py.

The whole file is lexed once with the grammar's terminals (grammars/cuda.lark, by tokens.py) and
its brackets matched; a kernel's head is parsed with the `kernel_head` rule on its tokens, and
each kernel body, on first use, with `body`. Positions are absolute offsets into the file.
"""
from __future__ import annotations

import bisect
import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property, lru_cache

from lark import Token, Transformer, Tree
from lark.exceptions import LarkError, UnexpectedInput

from ..errors import SourceParseError
from ..lark_loader import parser
from . import ptx
from .names import squash_targs
from .tokens import TokenStream, terminals


class Kind(StrEnum):
    """A statement's kind: the name of its rule in grammars/cuda.lark (a test checks each one is)."""
    BLOCK = "block"
    FOR = "for_stmt"
    WHILE = "while_stmt"
    DO = "do_stmt"
    IF = "if_stmt"
    SWITCH = "switch_stmt"
    ASM = "asm_stmt"
    RETURN = "return_stmt"
    BREAK = "break_stmt"
    CONTINUE = "continue_stmt"
    CASE = "case_label"
    SIMPLE = "simple_stmt"
    EMPTY = "empty_stmt"
    PP = "pp_line"

    @property
    def word(self) -> str:
        """How a message names it: `for`, `return`, `simple`."""
        return self.value.removesuffix("_stmt")


STMT_RULES = frozenset(k.value for k in Kind)
LOOP_KINDS = frozenset({Kind.FOR, Kind.WHILE, Kind.DO})
JUMP_KINDS = frozenset({Kind.RETURN, Kind.BREAK, Kind.CONTINUE})
# Statements whose sub-statements stay among their own tokens (a lambda's body inside a return).
FLAT_KINDS = frozenset({Kind.SIMPLE, Kind.RETURN, Kind.CASE})
HEADER_SUFFIXES = (".cuh", ".h", ".hpp", ".hh", ".inl")  # files included, not compiled on their own
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
    """Postlexer: a zero-width VSEMI after a macro statement written without `;` (what
    _macro_statements finds in a whole file's token stream).

    VSEMI is emitted when a WORD or `)` outside any parenthesis is followed by `}` or a statement
    keyword (directives between them aside: `FATAL_MACRO` / `#endif` / `}`), unless that `)` closes
    an if/for/while/switch header.
    """

    TRIGGERS = {"RBRACE", "FOR", "WHILE", "DO", "IF", "SWITCH", "RETURN", "BREAK", "CONTINUE", "CASE", "DEFAULT"}
    HEADERS = {"IF", "FOR", "WHILE", "SWITCH", "CONSTEXPR"}
    always_accept = ()

    def process(self, stream):
        yield from self._vsemi(stream)

    def _vsemi(self, stream):
        prev = None
        headers: list[bool] = []  # per open paren: does it hold a control header?
        closed_header = False
        held: list[Token] = []  # directives right after a WORD or `)`: the VSEMI, if any, goes before them
        for tok in stream:
            candidate = prev is not None and not headers and not closed_header and prev.type in ("WORD", "RPAR")
            if candidate and tok.type in ("PREPROC", "IF0"):
                held.append(tok)
                continue
            if candidate and tok.type in self.TRIGGERS:
                yield Token("VSEMI", "", start_pos=prev.end_pos, end_pos=prev.end_pos, line=prev.end_line,
                            column=prev.end_column, end_line=prev.end_line, end_column=prev.end_column)
            yield from held
            held = []
            closed_header = False
            if tok.type in ("LPAR", "LSQB"):
                headers.append(tok.type == "LPAR" and prev is not None and prev.type in self.HEADERS)
            elif tok.type in ("RPAR", "RSQB") and headers:
                closed_header = headers.pop()
            yield tok
            prev = tok
        yield from held


def cuda_parser():
    """The CUDA grammar's LALR parser, with its start rules (built once per process)."""
    return parser("cuda.lark", "body", "kernel_head", "callee", postlex=MacroStatements)


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
    kind: Kind
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
        return self.parent is not None and self.parent.kind == Kind.BLOCK

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()


@dataclass(eq=False)
class Kernel:
    """A __global__ definition; its body is parsed into statements on first use."""
    name: str  # the declarator's identifier: `step`
    line: int
    text: str
    path: str
    body_start: int  # offset of the body's `{`
    body_end: int  # offset after its `}`
    macros: Macros = field(default_factory=Macros)
    qualname: str = ""  # with the namespaces around it: `slow::step` (the name alone at file scope)
    targs: str | None = None  # an explicit specialization's template arguments, squashed: `128,64`
    template: bool = False  # declared under `template <...>`
    decl_start: int = 0  # offset of the definition's first token (`template`, `extern`, `__global__`, ...)
    name_span: tuple[int, int] = (0, 0)  # offsets of the kernel's name in the definition
    name_end: int = 0  # offset after the name and an explicit specialization's template arguments

    def __post_init__(self):
        self.qualname = self.qualname or self.name
        self.name_end = self.name_end or self.name_span[1]

    @property
    def label(self) -> str:
        """How messages name it: `slow::step`, `gemm<128,64>`."""
        return self.qualname + (f"<{self.targs}>" if self.targs is not None else "")

    @cached_property
    def body(self) -> Stmt:
        """The body as a statement tree (kind block), from the grammar's `body` rule."""
        a, b = self.body_start, self.body_end
        try:
            tree = cuda_parser().parse(self.text[a:b], start="body")
        except LarkError as e:
            raise _parse_error(e, self.text, self.path, a) from None
        tree.data = Kind.BLOCK.value
        return _build(tree, a, self.macros.pragmas)


@dataclass(frozen=True)
class KernelDecl:
    """A `__global__` declaration without a body (`__global__ void k(float*);`)."""
    name: str
    qualname: str
    start: int  # offset of its first token
    end: int  # offset after its `;`
    name_span: tuple[int, int]
    name_end: int  # offset after the name and an explicit specialization's template arguments
    targs: str | None = None  # an explicit specialization's template arguments, squashed


@dataclass(eq=False)
class SourceFile:
    text: str  # the file's text without its UTF-8 BOM: every offset is into this
    path: str
    lines: Lines
    tokens: "Tokens"
    kernels: list[Kernel]
    declarations: list[KernelDecl]  # kernels declared (not defined) here
    unreadable: list[int]  # lines of `__global__` heads the grammar cannot read
    helper_asm: list[tuple[str, int, list[ptx.PtxInstr]]]  # (function, line, instructions) outside kernels
    bom: str = ""  # "\ufeff" when the file starts with one: a rewrite writes it back first

    def kernel(self, name: str, occurrence: int | None = None) -> Kernel | None:
        """The one definition `name` (a qualified name, maybe with template arguments) chooses; see
        names.select_kernel for what is refused."""
        from .names import KernelName, select_kernel
        return select_kernel(self, KernelName.parse(name), occurrence)


def _tokens(node) -> list[Token]:
    if isinstance(node, Token):
        return [node]
    return [t for t in node.scan_values(lambda v: isinstance(v, Token))]


def _span(node, off: int) -> tuple[int, int]:
    """Absolute [start, end) of a node. A directive token starts at the newline before its `#` (the
    lexer sees `#` only at line starts), but the directive's span starts at the `#`: a probe placed
    before it goes on its own line, not at the end of the line above (inside a `//` comment there)."""
    if isinstance(node, Tree) and node.data == Kind.PP:
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
    kind = Kind(node.data)
    start, end = _span(node, off)
    if kind == Kind.PP:
        return Stmt(kind, start, end, [_moved(node.children[0], off)])
    own: list[Token] = []
    subs: list[Stmt] = []
    for c in node.children:
        if isinstance(c, Tree) and c.data in STMT_RULES and kind not in FLAT_KINDS:
            subs.append(_build(c, off, pragmas))
        else:
            own.extend(_moved(t, off) for t in _tokens(c))
    if kind == Kind.SIMPLE:
        start = _past_labels(own, start)
    s = Stmt(kind, start, end, own, subs, lead=start)
    for c in subs:
        c.parent = s
    _mark_pragma_leads(subs, pragmas)
    return s


def _past_labels(own: list[Token], start: int) -> int:
    """Where a labelled statement (`again: x += 1;`) starts: after its labels, so a probe placed
    before it runs on every `goto` to the label, not only when control falls into it."""
    i = 0
    while i + 2 < len(own) and own[i].type == "WORD" and own[i + 1].type == "COLON":
        i += 2
    return own[i].start_pos if i else start


def _is_pragma(s: Stmt, pragmas: frozenset[str]) -> bool:
    """A `#pragma` line, or `_Pragma(...)` / a pragma macro used as a statement (`UNROLL` before a loop)."""
    if s.kind == Kind.PP:
        return s.own[0].value.lstrip().startswith("#pragma")
    return s.kind == Kind.SIMPLE and s.own[0].value in pragmas and s.own[-1].type == "VSEMI"


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
# Tokens a template argument list cannot hold at its own level: reaching one first means the `<`
# was a comparison.
NOT_IN_TARGS = {"SEMI", "VSEMI", "LBRACE", "RBRACE", "RPAR", "RSQB", "PREPROC", "IF0"}
BOUNDARY_TYPES = {"SEMI", "VSEMI", "PREPROC", "IF0", "LBRACE", "RBRACE"}


@dataclass(frozen=True)
class Scope:
    """A namespace's braces: token indices of `{` and `}`, and its name's parts (none: anonymous)."""
    open: int
    close: int
    parts: tuple[str, ...]


def _macro_statements(toks: TokenStream) -> list[int]:
    """The tokens MacroStatements puts a VSEMI before, found from the token types alone."""
    types, code = toks.types, toks.terms.names.index
    triggers = {code(n) for n in MacroStatements.TRIGGERS}
    header_words = {code(n) for n in MacroStatements.HEADERS}
    lpar, lsqb, rpar, rsqb, word = map(code, ("LPAR", "LSQB", "RPAR", "RSQB", "WORD"))
    directives = {code("PREPROC"), code("IF0")}
    out: list[int] = []
    headers: list[bool] = []  # per open paren or bracket: does it hold a control header?
    closed_header = -1  # index of the last `)` that closed a control header
    for i in toks.indices({*MacroStatements.TRIGGERS, "LPAR", "LSQB", "RPAR", "RSQB"}):
        t = types[i]
        if t in triggers and i and not headers:
            j = i - 1
            while j > 0 and types[j] in directives:  # the VSEMI goes before directives between them
                j -= 1
            if closed_header != j and types[j] in (word, rpar):
                out.append(j + 1)
        if t in (lpar, lsqb):
            headers.append(t == lpar and i > 0 and types[i - 1] in header_words)
        elif t in (rpar, rsqb) and headers and headers.pop():
            closed_header = i
    return out


class Tokens:
    """The file as the grammar's token stream with brackets and namespaces matched.

    The whole file is only lexed (with the grammar's terminals, so comments, strings, raw strings,
    directives and `#if 0` regions are single tokens; tokens.py keeps a byte per token and makes a
    token's text and offsets when asked); only the target kernel's body is parsed into statements.
    `match` (opener -> closer) and `opener` (closer -> opener) read one array of partners.
    """

    def __init__(self, text: str, path: str):
        self.text = text
        self.toks = TokenStream(text, terminals(cuda_parser()))
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
        self.scopes = [sc for i in self.find({"namespace"}, set()) for sc in [self._namespace(i)] if sc]
        # `using namespace X;`: (token index, the `}` closing its scope (len at file scope), X's parts)
        self.usings = [(i, self.close_of(i), tuple(self._qual_words(i + 2))) for i in self.find({"using"}, set())
                       if i + 2 < len(self.toks) and self.toks[i + 1].value == "namespace"]

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

    def _qual_words(self, i: int) -> list[str]:
        """The words of `A::B::C` starting at token i (a leading `::` is skipped)."""
        toks, out = self.toks, []
        if i < len(toks) and toks[i].type == "SCOPE":
            i += 1
        while i < len(toks) and toks[i].type == "WORD":
            out.append(toks[i].value)
            if i + 1 < len(toks) and toks[i + 1].type == "SCOPE":
                i += 2
            else:
                break
        return out

    def _namespace(self, i: int) -> Scope | None:
        """The namespace the word `namespace` at token i opens: `namespace a::b {`, `inline
        namespace v1 {`, `namespace {` (None for `using namespace x;` and aliases)."""
        j = i + 1
        while j < len(self.toks) and self.toks.name(j) in ("WORD", "SCOPE"):
            j += 1
        if j >= len(self.toks) or self.toks.name(j) != "LBRACE":
            return None
        parts = tuple(self.toks[k].value for k in range(i + 1, j) if self.toks.name(k) == "WORD")
        return Scope(j, self.match[j], parts)

    def close_of(self, i: int) -> int:
        """Index of the `}` closing the innermost braces around token i (len(toks) at file scope)."""
        j, n = i, len(self.toks)
        while j < n and self.toks.name(j) != "RBRACE":
            j = self.skip(j)
        return j

    def namespace_at(self, i: int) -> tuple[str, ...]:
        """The namespaces around token i, outermost first (anonymous ones add nothing)."""
        return tuple(p for sc in self.scopes if sc.open < i < sc.close for p in sc.parts)

    def usings_at(self, i: int) -> list[tuple[str, ...]]:
        """Namespaces a `using namespace` directive before token i makes visible there."""
        return [parts for u, close, parts in self.usings if u < i < close]

    def skip(self, i: int) -> int:
        """Index after the token at i, or after its whole bracketed group."""
        return self.match.get(i, i) + 1

    def angle_close(self, i: int, end: int, strict: bool = True) -> int | None:
        """Index of the `>` closing the `<` at token i, before index `end`; None when the `<` is a
        comparison (a `;`, brace or unmatched `)` comes first, or, `strict`, `&&` or `||`: not
        strict when the `<` follows a template's name, whose arguments may be `A && !B`). A `>>>`
        (the lexer's launch close) closes three levels: `Tag<Tag<int>>>`."""
        depth, j = 0, i
        while j < end:
            name = self.toks.name(j)
            if name in NOT_IN_TARGS or (strict and self.toks[j].value in ("&&", "||")):
                return None
            depth += (name == "LT") - (name == "GT") - 3 * (name == "LAUNCH_CLOSE")
            if depth <= 0:
                return j
            j = self.skip(j)
        return None

    def angle_open(self, i: int) -> int | None:
        """Index of the `<` whose `>` (or `>>>`) is token i, one that closes template arguments (as
        before `<<<`), walking back over bracketed groups."""
        depth, j = 0, i
        while j >= 0:
            if j in self.opener:
                j = self.opener[j] - 1
                continue
            name = self.toks.name(j)
            if name in NOT_IN_TARGS or name in ("LPAR", "LSQB"):
                return None
            depth += (name == "GT") + 3 * (name == "LAUNCH_CLOSE") - (name == "LT")
            if depth == 0:
                return j
            j -= 1
        return None

    def split_args(self, open_i: int) -> list[tuple[int, int]]:
        """(first, last) token index of each top-level comma-separated part inside a group."""
        return self.split(open_i + 1, self.match[open_i])

    def split(self, a: int, b: int) -> list[tuple[int, int]]:
        """(first, last) token index of each comma-separated part of tokens [a, b) at their own
        level; a comma inside template arguments (`k<128, 64>`) separates nothing."""
        parts, start, i = [], a, a
        while i < b:
            name = self.toks.name(i)
            if name == "COMMA":
                parts.append((start, i - 1))
                start = i + 1
            elif name == "LT" and i > start and self.toks.name(i - 1) == "WORD":
                shut = self.angle_close(i, b)
                if shut is not None:
                    i = shut
            i = self.skip(i)
        if start < b:
            parts.append((start, b - 1))
        return parts

    def slice(self, a: int, b: int) -> list:
        """Tokens [a, b) (the stream makes each on demand)."""
        return [self.toks[k] for k in range(a, b)]

    def grammar_view(self, a: int, b: int) -> list[tuple[str, int, int]]:
        """Tokens [a, b) as the host-level rules read them, (type, stream index, part): no VSEMI, a
        `>>>` as three `>` (parts 0, 1, 2)."""
        out = []
        for i in range(a, b):
            name = self.toks.name(i)
            if name == "LAUNCH_CLOSE":
                out += [("GT", i, k) for k in range(3)]
            elif name != "VSEMI":
                out.append((name, i, 0))
        return out

    def lark_token(self, name: str, i: int, part: int) -> Token:
        """One token of grammar_view as Lark's, with its text and offsets."""
        s, e = self.toks.span(i)
        if name == "GT" and self.toks.name(i) == "LAUNCH_CLOSE":
            return Token("GT", ">", start_pos=s + part, end_pos=s + part + 1)
        return Token(name, self.text[s:e], start_pos=s, end_pos=e)

    def lark_tokens(self, a: int, b: int) -> list[Token]:
        """Tokens [a, b) as Lark's, for the host-level rules."""
        return [self.lark_token(*v) for v in self.grammar_view(a, b)]

    def parse(self, start: str, a: int, b: int) -> Tree | None:
        """Tokens [a, b) parsed with one of the grammar's host-level rules; None when they do not fit."""
        ip = cuda_parser().parse_interactive(start=start)
        try:
            for t in self.lark_tokens(a, b):
                ip.feed_token(t)
            return ip.feed_eof()
        except LarkError:
            return None


class _Head(Transformer):
    """kernel_head tree → its declarators as (the name's WORD tokens, the template arguments' tokens
    or None): the kernel's own and its attributes'."""

    def qual(self, children):
        return [t for t in children if t.type == "WORD"]

    def targs(self, children):
        return ("targs", children)

    def declarator(self, children):
        words, rest = children[0], children[1:]
        targs = rest[0][1] if rest and isinstance(rest[0], tuple) else None
        return Tree("decl", [(words, targs)])

    def kernel_head(self, children):
        return [c.children[0] for c in children if isinstance(c, Tree) and c.data == "decl"]


@lru_cache(maxsize=4096)
def _head_shape(types: tuple[str, ...]) -> tuple[tuple[tuple[int, ...], tuple[int, int] | None], ...] | None:
    """The declarators of a kernel head with these token types, as token positions: (the name's
    words, the `<` and `>` of its template arguments or None). The parse depends on the types
    alone, and a file's kernel heads share a few shapes: each is parsed once."""
    ip = cuda_parser().parse_interactive(start="kernel_head")
    try:
        for k, t in enumerate(types):
            ip.feed_token(Token(t, "", start_pos=k, end_pos=k))
        tree = ip.feed_eof()
    except LarkError:
        return None
    return tuple((tuple(w.start_pos for w in words), targs and (targs[0].start_pos, targs[-1].start_pos))
                 for words, targs in _Head().transform(tree))


def _targs_text(targs: list, text: str) -> str:
    """Template arguments (the children of `targs`: `<`, ..., `>`) as squashed text."""
    return squash_targs(text[targs[0].end_pos:targs[-1].start_pos])


def parse_source(text: str, path: str = "<source>", declared_by: str | None = None) -> SourceFile:
    """`declared_by`: a function-like macro that declares kernels (`MACRO(name, ...) { body }`,
    defined in a header this file does not define it in): its uses are kernels too. A leading
    UTF-8 BOM is set aside (SourceFile.bom): offsets count from the text after it."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    text = text[len(bom):]
    tk = Tokens(text, path)
    lines = Lines(text)
    kernels: list[Kernel] = []
    declarations: list[KernelDecl] = []
    unreadable: list[int] = []
    macros = Macros.of([tk.toks[i] for i in tk.toks.indices({"PREPROC"})])
    for i in tk.find(macros.globals | {declared_by}, set()):
        t = tk.toks[i]
        # a macro the file defines with __global__ may take the kernel's name: MACRO(name, ...) { body }
        found = _macro_kernel_at(tk, i, text, path, lines, macros)
        if found is None and t.value in macros.globals:
            found = _kernel_at(tk, i, text, path, lines, macros)
        if isinstance(found, Kernel):
            kernels.append(found)
        elif isinstance(found, KernelDecl):
            declarations.append(found)
        elif found is None and t.value in macros.globals:
            unreadable.append(lines.line(t.start_pos))
    return SourceFile(text, path, lines, tk, kernels, declarations, unreadable,
                      _helper_asm(tk, kernels, lines, macros), bom)


def _decl_start(tk: Tokens, i: int) -> int:
    """Index of the first token of the declaration holding token i (`template <...>`, `extern "C"`,
    `static`, ...): walking back to the previous statement's end."""
    j = i
    while j > 0 and tk.toks.name(j - 1) not in BOUNDARY_TYPES:
        j = tk.opener.get(j - 1, j - 1)
    return j


def _is_template(tk: Tokens, start: int, i: int) -> bool:
    """Is the kernel declared at token i, in the declaration starting at `start`, under `template <...>`?"""
    return any(tk.toks.name(k) == "WORD" and tk.toks[k].value == "template" for k in range(start, i))


def _kernel_at(tk: Tokens, i: int, text: str, path: str, lines: Lines,
               macros: Macros) -> Kernel | KernelDecl | None | bool:
    """The kernel whose declaring word is token i (a declaration when `;` comes before any `{`);
    None when the grammar cannot read its head; False when the word is no kernel's (nothing
    follows it)."""
    toks = tk.toks
    j = i + 1
    while j < len(toks) and toks.name(j) not in ("SEMI", "LBRACE", "RBRACE"):
        j = tk.skip(j)
    if j >= len(toks) or toks.name(j) == "RBRACE":
        return False
    view = tk.grammar_view(i + 1, j)
    shape = _head_shape(tuple(v[0] for v in view))
    # the kernel's declarator: the last one that is no attribute's (`__launch_bounds__(256)`)
    decl = next((d for d in reversed(shape or ()) if tk.lark_token(*view[d[0][-1]]).value not in ATTR_WORDS), None)
    if decl is None:
        return None
    words = [tk.lark_token(*view[w]) for w in decl[0]]
    targs = decl[1] and [tk.lark_token(*view[decl[1][0]]), tk.lark_token(*view[decl[1][1]])]
    name = words[-1]
    qual = "::".join(tk.namespace_at(i) + tuple(w.value for w in words))
    first = _decl_start(tk, i)
    start = toks[first].start_pos
    spec_args = _targs_text(targs, text) if targs is not None else None
    name_end = targs[-1].end_pos if targs is not None else name.end_pos
    if toks[j].type == "SEMI":
        return KernelDecl(name.value, qual, start, toks[j].end_pos, (name.start_pos, name.end_pos), name_end, spec_args)
    return Kernel(name.value, lines.line(toks[i].start_pos), text, path, toks[j].start_pos, toks[tk.match[j]].end_pos,
                  macros, qualname=qual, targs=spec_args, template=_is_template(tk, first, i), decl_start=start,
                  name_span=(name.start_pos, name.end_pos), name_end=name_end)


def _macro_kernel_at(tk: Tokens, i: int, text: str, path: str, lines: Lines, macros: Macros) -> Kernel | None:
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
                  toks[tk.match[close + 1]].end_pos, macros, qualname="::".join(tk.namespace_at(i) + (toks[a].value,)),
                  template=_is_template(tk, _decl_start(tk, i), i), decl_start=toks[_decl_start(tk, i)].start_pos,
                  name_span=(toks[a].start_pos, toks[a].end_pos))


ASM_TYPES = {"ASM", "ASM_GNU", "ASM_ALT"}
NOT_FUNCTIONS = {"if", "for", "while", "switch", "catch"}


def _helper_asm(tk: Tokens, kernels: list[Kernel], lines: Lines,
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


def _function_at(tk: Tokens, i: int) -> str:
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


def asm_unscoped(stmt: Stmt, lines: Lines, macros: Macros) -> str | None:
    """Why `stmt` cannot be written twice in one function (a versioned body, a strip-mined loop), or
    None: an asm in it declares PTX registers or labels outside braces (ptx.unscoped)."""
    for s in stmt.walk():
        template = _template(s.own[1:], macros) if s.kind == Kind.ASM else None
        names = ptx.unscoped(template) if template else []
        if names:
            return (f"the asm at line {lines.line(s.start)} declares {', '.join(f'`{n}`' for n in names)} outside "
                    "braces in its PTX, which two copies in one function would declare twice (put its PTX in `{ }` "
                    "to allow it)")
    return None


def _instructions(toks: Iterable[Token], macros: Macros) -> list[ptx.PtxInstr] | None:
    """The instructions of the template that starts the tokens after `asm`; None when it cannot be
    read (_template)."""
    template = _template(toks, macros)
    return None if template is None else ptx.instructions(template)


def _template(toks: Iterable[Token], macros: Macros) -> str | None:
    """The template that starts the tokens after `asm` (its string literals and the file's string
    macros among them, first included: `FENCE ";"`); "" when it has none. A macro defined
    elsewhere expands to nothing here, which may make the template unreadable: None, so it is
    listed."""
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
        return None if unknown else ""
    return ptx.template_of(strings)
