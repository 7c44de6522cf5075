"""Host-code expressions and statements read from the file's tokens (source.Tokens), for
cuda/launches.py: a kernel expression (`ns::k<T, 4>`, read with the grammar's `callee` rule), the
kernel inside a launch function's argument (`(void*)&k`), and the statement holding a call, with
what keeps a capture session from bracketing it. Nothing here knows which kernel is wanted.
"""
from __future__ import annotations

from dataclasses import dataclass

from lark import Token, Tree

from .names import squash_targs
from .source import Tokens

HEADER_KEYWORDS = {"IF": "if", "WHILE": "while", "FOR": "for", "SWITCH": "switch", "CONSTEXPR": "if constexpr"}
CASTS = {"reinterpret_cast", "static_cast", "const_cast"}


@dataclass(frozen=True)
class Callee:
    """A kernel expression: a qualified name with optional template arguments."""
    a: int  # token indices of the expression, inclusive
    b: int
    words: tuple[str, ...]  # the name's components: ("slow", "step")
    absolute: bool  # written with a leading `::`
    targs: str | None  # its template arguments, squashed
    name: Token  # the last component's token

    def span(self, tk: Tokens) -> tuple[int, int]:
        return tk.toks[self.a].start_pos, tk.toks[self.b].end_pos


@dataclass(frozen=True)
class Statement:
    """The statement holding a call: its first token, its `;` token, the call around the call
    (`CHECK` in `CHECK(launch);`), and whether it is the unbraced body of an if/else/for/while/do
    (so anything put around it needs braces)."""
    start: int
    end: int
    macro: str | None
    unbraced: bool

    def span(self, tk: Tokens) -> tuple[int, int]:
        return tk.toks[self.start].start_pos, tk.toks[self.end].end_pos


def before_chevron(tk: Tokens, i: int) -> tuple[int, int] | tuple[None, None]:
    """Token range of the kernel expression right before the `<<<` at i: a qualified name and its
    template arguments."""
    toks, b = tk.toks, i - 1
    k = b
    if k >= 0 and toks[k].type in ("GT", "LAUNCH_CLOSE"):  # `>>>`: the end of `Tag<Tag<int>>>`
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


def name_extent(tk: Tokens, j: int) -> tuple[int, int]:
    """Token range of the qualified name ending at the WORD j, with the template arguments after it."""
    toks, k, e = tk.toks, j, j
    while k >= 2 and toks[k - 1].type == "SCOPE" and toks[k - 2].type == "WORD":
        k -= 2
    if k >= 1 and toks[k - 1].type == "SCOPE":
        k -= 1
    if j + 1 < len(toks) and toks[j + 1].type == "LT":
        e = tk.angle_close(j + 1, len(toks), strict=False) or j
    return k, e


def strip_casts(tk: Tokens, a: int, b: int) -> tuple[int, int]:
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


def read_callee(tk: Tokens, a: int | None, b: int | None, text: str) -> Callee | None:
    """The kernel expression in tokens [a, b], read with the grammar's `callee` rule; None when
    they are not one."""
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
    return Callee(a, b, tuple(w.value for w in words), qual.children[0].type == "SCOPE", targ_text, words[-1])


def statement(tk: Tokens, first: int, last: int) -> Statement | str:
    """The statement holding the call at tokens [first, last], stepping out of the parentheses of
    calls around it (`CHECK(launch);`) unless the call ends a statement inside a macro's argument
    (`SWITCH(cond, auto k = ...; launch;)`, the statement then ends at that `;`); or why a capture
    session cannot bracket it: it sits in a condition, in brackets, or in a conditional expression,
    or the statement has no `;` of its own."""
    toks, k, macro, after_comma = tk.toks, first, None, None
    while k > 0:
        p, t = k - 1, tk.toks[k - 1]
        if p in tk.opener and t.type != "RBRACE":
            o = tk.opener[p]
            if t.type == "RPAR" and o > 0 and toks[o - 1].type in HEADER_KEYWORDS:
                break  # the unbraced body of an if/for/while
            k = o
            continue
        if t.type == "COMMA" and after_comma is None:
            after_comma = k
        if t.type in ("LPAR", "LSQB"):
            before = toks[p - 1] if p > 0 else None
            if before is not None and before.type in HEADER_KEYWORDS:
                return f"the launch is inside the header of `{HEADER_KEYWORDS[before.type]} (...)`"
            if t.type == "LSQB":
                return "the launch is inside brackets"
            if _semicolon(tk, last + 1, tk.match[p]) is not None:
                k = after_comma if after_comma is not None else p + 1
                break  # a statement inside a macro's argument
            if before is not None and before.type == "WORD":
                macro = before.value
            k, after_comma = p, None
            continue
        if t.type in ("SEMI", "VSEMI", "PREPROC", "IF0", "LBRACE", "RBRACE", "ELSE", "DO", "COLON"):
            break
        k = p
    end = _semicolon(tk, k, len(toks))
    if end is None:
        return "the statement holding the launch has no `;` of its own"
    for j in range(k, end):
        if (j < first or j > last) and toks[j].value in ("?", "&&", "||"):
            return f"the launch runs conditionally inside an expression (`{toks[j].value}`)"
    unbraced = k > 0 and (toks[k - 1].type in ("ELSE", "DO") or (
        toks[k - 1].type == "RPAR" and tk.opener[k - 1] > 0 and toks[tk.opener[k - 1] - 1].type in HEADER_KEYWORDS))
    return Statement(k, end, macro, unbraced)


def _semicolon(tk: Tokens, a: int, b: int) -> int | None:
    """Index of the first `;` at the level of token a, before b (None when a `}` or b comes first)."""
    j = a
    while j < b and tk.toks[j].type not in ("SEMI", "VSEMI"):
        if tk.toks[j].type == "RBRACE":
            return None
        j = tk.skip(j)
    return j if j < b else None


def declares(tk: Tokens, start: int, first: int) -> str | None:
    """The name a statement declares and initializes from the expression at token `first`
    (`cudaError_t e = LAUNCH`, `auto kernel = &k<T>`), None when it declares nothing there."""
    toks, j = tk.toks, start
    while j < first and toks[j].value != "=":
        j = tk.skip(j)
    pre = tk.slice(start, j)
    if j >= first or len(pre) < 2 or pre[-1].type != "WORD":
        return None
    if pre[-2].type in ("WORD", "GT") or (pre[-2].value in ("*", "&", "&&") and len(pre) >= 3):
        return pre[-1].value
    return None
