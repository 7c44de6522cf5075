"""One Python string-literal token (`r'''…'''`, `"…\\n"`, `u'…'`): its value character by
character, and how to write more characters into it so that its value gains exactly those.

The value is the body with escapes resolved (none in a raw string) and line ends read as Python
reads a file (CRLF and CR become LF). `segments` maps each piece of the body to the value text it
makes, so a position in the value maps back to a position in the token, and an insertion lands
between two pieces without touching how the user spelled either.
"""
from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from functools import cached_property

# One piece of a non-raw body: an escape (a line continuation, \N{…}, \x.., \u...., \U........,
# octal, a one-character escape), a line end, or one plain character.
_PIECE = re.compile(r"\\(?:\r\n|\r|\n|N\{[^}]*\}|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{1,3}|.)"
                    r"|\r\n|\r|.", re.S)
_SIMPLE_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
                   "v": "\v"}
_TOKEN = re.compile(r"([A-Za-z]*)('''|\"\"\"|'|\")", re.S)


class LiteralError(ValueError):
    """A literal this module does not write into (bytes, f-string) or cannot keep valid."""


def _value_of(piece: str, raw: bool) -> str:
    if piece in ("\r\n", "\r"):
        return "\n"
    if raw or not piece.startswith("\\"):
        return piece
    esc = piece[1:]
    if esc[0] in "\r\n":
        return ""  # a line continuation inside the string
    if esc in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[esc]
    if esc[0] in "xuUN01234567":
        return codecs.decode(piece, "unicode_escape")
    return piece  # an unknown escape keeps its backslash (Python warns, the value keeps both)


@dataclass(frozen=True)
class Literal:
    token: str
    prefix: str
    quote: str
    segments: tuple[tuple[int, int, str], ...]  # (start, end) in the body -> the value text it makes

    @classmethod
    def parse(cls, token: str) -> "Literal":
        m = _TOKEN.match(token)
        if m is None or not token.endswith(m.group(2)) or len(token) < m.end() + len(m.group(2)):
            raise LiteralError(f"not a string literal: {token[:40]!r}")
        prefix, quote = m.groups()
        if set(prefix.lower()) - {"r", "u"}:
            kind = "an f-string" if "f" in prefix.lower() else "a bytes literal"
            raise LiteralError(kind)
        body = token[m.end():len(token) - len(quote)]
        raw = "r" in prefix.lower()
        if raw:  # every character stands for itself; only line ends are read as LF
            pieces = [(p.start(), p.end()) for p in re.finditer(r"\r\n|.", body, re.S)]
        else:
            pieces = [(p.start(), p.end()) for p in _PIECE.finditer(body)]
        return cls(token, prefix, quote, tuple((a, b, _value_of(body[a:b], raw)) for a, b in pieces))

    @property
    def raw(self) -> bool:
        return "r" in self.prefix.lower()

    @property
    def triple(self) -> bool:
        return len(self.quote) == 3

    @property
    def body(self) -> str:
        return self.token[len(self.prefix) + len(self.quote):len(self.token) - len(self.quote)]

    @cached_property
    def value(self) -> str:
        return "".join(v for _, _, v in self.segments)

    def body_offset(self, v: int) -> int:
        """The body position where value offset `v` starts (the body's end for the value's end)."""
        at = 0
        for a, _, val in self.segments:
            if at >= v:
                return a
            at += len(val)
        return len(self.body)

    def with_insertions(self, insertions: list[tuple[int, str]], nl: str) -> str:
        """The token text (or several adjacent tokens) whose value is this value with each (value
        offset, text) inserted. Text goes inside the token when its quoting can hold it as written;
        otherwise, and for multi-line text in a one-line literal, the token is closed there and a
        literal of its own carries the text (triple-quoted when it has several lines, so inserted
        lines stay lines a reviewer reads), and the token reopens after it."""
        body, head, q = self.body, self.prefix + self.quote, self.quote[0]
        tokens: list[str] = []
        cur: list[str] = []
        pos = 0
        for v, text in sorted(insertions, key=lambda x: x[0]):
            p = self.body_offset(v)
            cur.append(body[pos:p])
            pos = p
            inline = self._inline(text, body, p, nl)
            if inline is not None:
                cur.append(inline)
                continue
            if self.raw and _odd_backslashes(body, p):
                raise LiteralError("text would be inserted right after a backslash in a raw string")
            closed = "".join(cur)
            if closed:
                if self.triple and closed.endswith(q) and not _odd_backslashes(closed, len(closed) - 1):
                    raise LiteralError("text would be inserted right after a quote character")
                tokens.append(head + closed + self.quote)
            cur = []
            quote = q * 3 if "\n" in text else self.quote
            tokens.append(quote + escape(text, quote, nl) + quote)
        cur.append(body[pos:])
        if "".join(cur) or not tokens:
            tokens.append(head + "".join(cur) + self.quote)
        return " ".join(tokens)

    def _inline(self, text: str, body: str, p: int, nl: str) -> str | None:
        """`text` written inside this token at body position p, or None when its quoting cannot hold it."""
        q = self.quote[0]
        if not self.triple and "\n" in text:
            return None
        if not self.raw:
            return escape(text, self.quote, nl)
        if ("\r" in text or text.endswith("\\") or _odd_backslashes(body, p) or text.startswith(q)
                or text.endswith(q) or (q * 3 if self.triple else q) in text):
            return None
        return text.replace("\n", nl)


def _odd_backslashes(body: str, p: int) -> bool:
    n = len(body[:p]) - len(body[:p].rstrip("\\"))
    return n % 2 == 1


def escape(text: str, quote: str, nl: str) -> str:
    """`text` as the body of a non-raw literal with this quote: backslashes doubled, line ends real
    lines in a triple-quoted literal (`\\n` otherwise), a quote character escaped wherever it could
    end the literal (always in a one-line literal; in a triple-quoted one at either end of the text
    or next to another), other control characters as \\x escapes."""
    q, triple = quote[0], len(quote) == 3
    out = []
    for i, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append(nl if triple else "\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == q and (not triple or i == 0 or i == len(text) - 1 or text[i - 1] == q or text[i + 1] == q):
            out.append("\\" + c)
        elif c != "\t" and (ord(c) < 0x20 or c == "\x7f"):
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
    return "".join(out)
