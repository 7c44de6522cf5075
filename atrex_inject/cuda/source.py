"""CUDA source → typed nodes: kernels with their statement trees, and launches of kernels.

Positions come from the Lark parse tree (grammars/cuda.lark): the whole file is parsed once as
balanced groups, then each kernel body is parsed again with the statement-level start rule.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from lark import Token, Tree
from lark.exceptions import LarkError, UnexpectedInput

from ..errors import SourceParseError
from ..lark_loader import parser
from . import ptx

STMT_KINDS = {"block", "for_stmt", "while_stmt", "do_stmt", "if_stmt", "switch_stmt", "asm_stmt", "return_stmt",
              "break_stmt", "continue_stmt", "case_label", "simple_stmt", "empty_stmt", "pp_line"}
LOOP_KINDS = {"for_stmt", "while_stmt", "do_stmt"}
ATTR_WORDS = {"__launch_bounds__", "__cluster_dims__", "__attribute__", "alignas", "__declspec", "__maxnreg__"}


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
    return parser("cuda.lark", "file", "body", postlex=MacroStatements)


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
    name: str
    body: Stmt  # kind "block": the function body
    line: int


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


@dataclass(eq=False)
class SourceFile:
    text: str
    lines: Lines
    kernels: list[Kernel]
    launches: list[Launch]

    def kernel(self, name: str) -> Kernel | None:
        found = [k for k in self.kernels if k.name == name]
        return found[0] if found else None


def _tokens(node) -> list[Token]:
    if isinstance(node, Token):
        return [node]
    return [t for t in node.scan_values(lambda v: isinstance(v, Token))]


def _span(node, off: int) -> tuple[int, int]:
    if isinstance(node, Token):
        v = node.value
        lead = len(v) - len(v.lstrip()) if node.type in ("PREPROC", "IF0") else 0
        return off + node.start_pos + lead, off + node.end_pos
    return off + node.meta.start_pos, off + node.meta.end_pos


def _moved(tok: Token, off: int) -> Token:
    """The token with absolute offsets (kernel bodies are parsed as slices of the file)."""
    return Token(tok.type, tok.value, start_pos=tok.start_pos + off, end_pos=tok.end_pos + off)


def _build(node: Tree, off: int) -> Stmt:
    kind = node.data
    start, end = _span(node, off)
    if kind == "pp_line":
        return Stmt(kind, start, end, [_moved(node.children[0], off)])
    own: list[Token] = []
    subs: list[Stmt] = []
    for c in node.children:
        if isinstance(c, Tree) and c.data in STMT_KINDS and kind not in ("simple_stmt", "return_stmt", "case_label"):
            subs.append(_build(c, off))
        else:
            own.extend(_moved(t, off) for t in _tokens(c))
    s = Stmt(kind, start, end, own, subs, lead=start)
    for c in subs:
        c.parent = s
    _mark_pragma_leads(subs)
    return s


def _mark_pragma_leads(stmts: list[Stmt]) -> None:
    for i, s in enumerate(stmts):
        j = i
        while j > 0 and stmts[j - 1].kind == "pp_line" and stmts[j - 1].own[0].value.lstrip().startswith("#pragma"):
            j -= 1
        s.lead = stmts[j].start if j < i else s.start


def _parse_error(e: LarkError, text: str, path: str, base: int = 0) -> SourceParseError:
    if isinstance(e, UnexpectedInput):
        pos = base + (e.pos_in_stream or 0)
        line = Lines(text).line(pos)
        return SourceParseError(f"cannot parse the source near {Lines(text).line_text(line).strip()!r}",
                                path=path, line=line,
                                hint="atrex-inject recognizes balanced braces/parens, statements, asm blocks; "
                                     "unbalanced braces across #if branches are not supported")
    return SourceParseError(f"cannot parse the source: {e}", path=path)


def parse_source(text: str, path: str = "<source>") -> SourceFile:
    p = _parser()
    try:
        tree = p.parse(text, start="file")
    except LarkError as e:
        raise _parse_error(e, text, path) from None
    lines = Lines(text)
    kernels: list[Kernel] = []
    launch_sites: list[tuple[list, int]] = []
    _scan(tree.children, kernels, launch_sites, text, path, lines)
    launches = [l for l in (_launch(items, i, text, lines) for items, i in launch_sites) if l]
    return SourceFile(text, lines, kernels, launches)


def _scan(items: list, kernels, launch_sites, text, path, lines) -> None:
    for i, it in enumerate(items):
        if isinstance(it, Tree):
            _scan(it.children, kernels, launch_sites, text, path, lines)
        elif it.type == "WORD" and it.value == "__global__":
            k = _kernel_at(items, i, text, path, lines)
            if k:
                kernels.append(k)
        elif it.type == "LAUNCH_OPEN" or (it.type == "WORD" and it.value == "cudaLaunchKernelEx"):
            launch_sites.append((items, i))


def _kernel_at(items: list, i: int, text: str, path: str, lines: Lines) -> Kernel | None:
    name = None
    for j in range(i + 1, len(items)):
        it = items[j]
        if isinstance(it, Token) and it.type == "SEMI":
            return None  # a declaration
        if isinstance(it, Tree) and it.data == "paren":
            prev = items[j - 1]
            if isinstance(prev, Token) and prev.type == "WORD" and prev.value not in ATTR_WORDS:
                name = prev.value
        if isinstance(it, Tree) and it.data == "brace_expr":
            if name is None:
                return None
            a, b = it.meta.start_pos, it.meta.end_pos
            try:
                body_tree = _parser().parse(text[a:b], start="body")
            except LarkError as e:
                raise _parse_error(e, text, path, a) from None
            body_tree.data = "block"
            return Kernel(name, _build(body_tree, a), lines.line(items[i].start_pos))
    return None


def _is_boundary(items: list, k: int) -> bool:
    it = items[k]
    if isinstance(it, Token):
        return it.type in ("SEMI", "PREPROC", "IF0", "LBRACE", "RBRACE", "ELSE", "DO", "COLON")
    if it.data == "brace_expr":
        return True
    if it.data == "paren" and k > 0:
        prev = items[k - 1]
        return isinstance(prev, Token) and prev.type in ("IF", "FOR", "WHILE", "SWITCH", "CONSTEXPR")
    return False


def _statement_bounds(items: list, i: int) -> tuple[int, int] | None:
    """Start/end offsets of the statement around items[i] in one item list."""
    k = i
    while k > 0 and not _is_boundary(items, k - 1):
        k -= 1
    end = next((j for j in range(i, len(items)) if isinstance(items[j], Token) and items[j].type == "SEMI"), None)
    if end is None:
        return None
    return _span(items[k], 0)[0], items[end].end_pos


def _args(paren: Tree, text: str) -> list[str]:
    """Top-level comma-separated argument texts of a paren group."""
    inner = paren.children[1:-1]
    out, cur = [], []
    for c in inner:
        if isinstance(c, Token) and c.type == "PUNCT" and c.value == ",":
            out.append(cur)
            cur = []
        else:
            cur.append(c)
    out.append(cur)
    return [text[_span(a[0], 0)[0]:_span(a[-1], 0)[1]] for a in out if a]


def _launch(items: list, i: int, text: str, lines: Lines) -> Launch | None:
    it = items[i]
    if it.type == "LAUNCH_OPEN":
        close = next((j for j in range(i + 1, len(items)) if isinstance(items[j], Token)
                      and items[j].type == "LAUNCH_CLOSE"), None)
        if close is None or close + 1 >= len(items):
            return None
        k = i - 1
        if isinstance(items[k], Token) and items[k].value == ">":  # template arguments
            depth = 0
            while k >= 0:
                v = items[k].value if isinstance(items[k], Token) else ""
                depth += (v == ">") - (v == "<")
                if depth == 0:
                    break
                k -= 1
            k -= 1
        if k < 0 or not isinstance(items[k], Token) or items[k].type != "WORD":
            return None
        name = items[k].value
        cfg_tree = Tree("paren", [it, *items[i + 1:close], items[close]])
        cfg = _args(cfg_tree, text)
        if len(cfg) < 2:
            return None
        stream = cfg[3] if len(cfg) > 3 else "0"
        via = "<<<>>>"
        grid, block = cfg[0], cfg[1]
    else:
        if i + 1 >= len(items) or not isinstance(items[i + 1], Tree) or items[i + 1].data != "paren":
            return None
        args = _args(items[i + 1], text)
        if len(args) < 2:
            return None
        name = re.sub(r"<.*", "", args[1]).strip().lstrip("&").split("::")[-1].strip()
        cfg = f"({args[0]})"
        grid, block, stream, via = f"{cfg}->gridDim", f"{cfg}->blockDim", f"{cfg}->stream", "cudaLaunchKernelEx"
    bounds = _statement_bounds(items, i)
    if bounds is None:
        return None
    return Launch(name, bounds[0], bounds[1], grid, block, stream, lines.line(bounds[0]), via)


def asm_instructions(stmt: Stmt) -> list[ptx.PtxInstr]:
    """PTX instructions of an asm statement's template (its leading string literals)."""
    strings = []
    for t in stmt.own[1:]:
        if t.type in ("STRING", "RAWSTRING"):
            strings.append(t.value)
        elif t.type in ("VOLATILE", "VOLATILE_GNU", "INLINE", "GOTO", "LPAR"):
            continue
        else:
            break
    return ptx.instructions(ptx.template_of(strings)) if strings else []
