"""The grammar's token stream of a whole CUDA file, in two flat arrays.

Lark's lexer makes a `Token` object per token: a 50 MB file is 12.8M of them, a minute and
3.6 GB. This lexer runs the same terminals (grammars/cuda.lark, in the order and with the keyword
rule of Lark's basic lexer) as one regular expression inside the `re` engine and keeps, per token,
its type (a byte) and its end offset; a token starts where the ignored text after the previous
one ends, so its start and text are found only when asked for. tests/unit/test_tokens.py checks the
stream against Lark's.
"""
from __future__ import annotations

import bisect
import itertools
import operator
import re
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from lark import Lark
from lark.lexer import BasicLexer, PatternStr

BATCH = 64  # matches held at once while lexing (more is slower: they fall out of the CPU cache)
VSEMI = 0  # type code of the zero-width tokens a postlexer inserts (`insert`)


def _fast(regex: str) -> str:
    """The same language, matched in one step per character: `(?:.|\\n)*?` is a loop of
    alternatives in `re` (slow, and a backtracking frame per character), `[\\s\\S]*?` is not."""
    return regex.replace("(?:.|\n)", r"[\s\S]")


# Terminals tried before, and after, the others, whatever Lark's order (which ties on priority and
# width are broken by pattern length): the frequent one-character ones first, and last those whose
# regex starts with an optional part or an alternation, which `re` cannot reject on the first
# character. A terminal moves past another only if no character can start both (checked by
# tests/unit/test_tokens.py), so the first terminal that matches at an offset is the one Lark picks.
EARLY = ("LPAR", "RPAR", "LBRACE", "RBRACE", "LSQB", "RSQB", "SEMI")
LATE = ("IF0", "PREPROC", "LAUNCH_CLOSE", "LAUNCH_OPEN", "NUMBER", "PUNCT", "COLON", "LT", "GT")


@dataclass(frozen=True)
class Terminals:
    """The grammar's terminals as the regular expressions this lexer runs.

    `folded` matches one token and then every ignored token after it. Each alternative ends with
    an empty group named after its terminal: `lastindex` is then the type, and that group's end
    the token's end (a group around the whole alternative makes `re` enter it before it can reject
    the alternative on its first character: twice as slow). Keywords are alternatives just before
    the word terminal they are spelled in, `for(?![A-Za-z0-9_$])`: Lark's rule "a WORD whose whole
    text is a keyword is that keyword". The last one, `_error`, takes a character no terminal
    matches. `first` is Lark's own alternation, ignored terminals included: only at offset 0 can
    an ignored terminal lose to another one (a directive's `\\A[ \\t]*#` before the whitespace)."""
    folded: re.Pattern
    first: re.Pattern
    ignored: re.Pattern
    names: tuple[str, ...]  # type code (the group number in `folded`) -> terminal name; 0 is VSEMI
    order: tuple[str, ...]  # the terminals (keywords included) in the order `folded` tries them
    error: int

    @classmethod
    def of(cls, lark: Lark) -> "Terminals":
        conf = lark.lexer_conf
        terms = BasicLexer(conf).terminals  # in the order Lark's basic lexer tries them
        ignore = set(conf.ignore)
        keywords: dict[str, list] = {}  # regex terminal -> the string terminals it re-types
        for s in terms:
            for r in terms:
                if (isinstance(s.pattern, PatternStr) and not isinstance(r.pattern, PatternStr)
                        and r.priority == s.priority and (m := re.match(r.pattern.to_regexp(), s.pattern.value))
                        and m.group(0) == s.pattern.value):
                    keywords.setdefault(r.name, []).append(s)
        keyword_names = {s.name for ks in keywords.values() for s in ks}
        scanned = [t for t in terms if t.name not in keyword_names]  # what Lark's scanner tries
        alts, order = [], []
        for t in sorted((t for t in scanned if t.name not in ignore),
                        key=lambda t: (t.name not in EARLY) + (t.name in LATE)):
            if t.name in keywords:
                word = re.fullmatch(r"(\[[^\]]+\])(\[[^\]]+\])\*", t.pattern.to_regexp())
                if not word:
                    raise ValueError(f"terminal {t.name} has keywords but is not of the form [first][rest]*")
                for s in keywords[t.name]:
                    alts.append(f"{re.escape(s.pattern.value)}(?!{word.group(2)})(?P<{s.name}>)")
                    order.append(s.name)
            alts.append(f"(?:{_fast(t.pattern.to_regexp())})(?P<{t.name}>)")
            order.append(t.name)
        # possessive: nothing after it can fail, so giving back would never help, and `re` keeps no
        # backtracking state per ignored token (a quarter of the lexing time)
        skip = "(?:" + "|".join(f"(?:{_fast(t.pattern.to_regexp())})" for t in scanned if t.name in ignore) + ")*+"
        folded = re.compile("(?:" + "|".join(alts) + r"|[\s\S](?P<_error>))" + skip)
        names = ["VSEMI"] + [""] * folded.groups
        for name, n in folded.groupindex.items():
            names[n] = name
        if re.compile(skip).groups or len(names) > 256:
            raise ValueError("ignored terminals must have no groups, and there must be under 256 groups")
        first = re.compile("|".join(f"(?P<{t.name}>{_fast(t.pattern.to_regexp())})" for t in scanned))
        return cls(folded, first, re.compile(skip), tuple(names), tuple(order), folded.groupindex["_error"])


@cache
def terminals(lark: Lark) -> Terminals:
    return Terminals.of(lark)


class TokenStream:
    """A file's tokens: `types[i]` is token i's type code, `ends[i]` its end offset; `span(i)`."""

    def __init__(self, text: str, terms: Terminals):
        self.text, self.terms, self._skip = text, terms, terms.ignored.match
        self.start = 0  # of the first token
        m = terms.first.match(text)
        if m and m.lastgroup not in terms.folded.groupindex:  # an ignored token at offset 0
            self.start = terms.ignored.match(text).end()
        self.types = bytearray()
        self.ends = array("i" if len(text) < 2 ** 31 else "q")
        lastindex = operator.attrgetter("lastindex")
        it = terms.folded.finditer(text, self.start)
        while found := list(itertools.islice(it, BATCH)):  # Python runs once per BATCH tokens
            codes = bytes(map(lastindex, found))
            self.types += codes
            self.ends.extend(map(re.Match.end, found, codes))

    def __len__(self) -> int:
        return len(self.types)

    def name(self, i: int) -> str:
        return self.terms.names[self.types[i]]

    def error_offset(self) -> int | None:
        """Where the first character no terminal matches is (Lark's lexer stops there)."""
        i = self.types.find(self.terms.error)
        return None if i < 0 else self.span(i)[0]

    def insert(self, before: list[int]) -> None:
        """Insert a zero-width VSEMI before each of these (ascending) token indices, at the end of the
        token before it."""
        if not before:
            return
        types, ends, a = bytearray(), array(self.ends.typecode), 0
        for b in before:
            types += self.types[a:b]
            types.append(VSEMI)
            ends += self.ends[a:b]
            ends.append(self.ends[b - 1])
            a = b
        self.types = types + self.types[a:]
        self.ends = ends + self.ends[a:]

    def indices(self, names: set[str]) -> Iterator[int]:
        """Indices of the tokens of these types, ascending (made as read: brackets are millions)."""
        codes = bytes(sorted(self.terms.names.index(n) for n in names if n in self.terms.names))
        return map(re.Match.start, re.finditer(b"[" + re.escape(codes) + b"]" if codes else b"(?!)", self.types))

    def at(self, offset: int) -> int | None:
        """Index of the (not zero-width) token that starts at `offset`, if one does."""
        i = bisect.bisect_right(self.ends, offset)
        return i if i < len(self.types) and self.span(i)[0] == offset else None

    def span(self, i: int) -> tuple[int, int]:
        """Token i's [start, end) offsets."""
        end = self.ends[i]
        if self.types[i] == VSEMI:
            return end, end
        return (self._skip(self.text, self.ends[i - 1]).end() if i else self.start), end

    def __getitem__(self, i: int) -> "Tok":
        code = self.types[i]  # an IndexError as for a list
        return Tok(self, i if i >= 0 else i + len(self.types), self.terms.names[code])

    def __iter__(self):
        return self.from_(0)

    def from_(self, i: int):
        """The tokens from index i on, made one at a time."""
        return map(self.__getitem__, range(i, len(self.types)))


class Tok:
    """Token i of a stream, with the attributes of lark's Token that the source model reads; its
    offsets and text are looked up only when asked for."""
    __slots__ = ("stream", "i", "type")

    def __init__(self, stream: TokenStream, i: int, type: str):
        self.stream, self.i, self.type = stream, i, type

    @property
    def start_pos(self) -> int:
        return self.stream.span(self.i)[0]

    @property
    def end_pos(self) -> int:
        return self.stream.ends[self.i]

    @property
    def value(self) -> str:
        a, b = self.stream.span(self.i)
        return self.stream.text[a:b]
