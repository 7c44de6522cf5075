"""The whole-file token stream (atrex_inject/cuda/tokens.py plus the VSEMIs of the MacroStatements
rule) is Lark's: the grammar's basic lexer with the postlexer, token for token, and the same
offset where a character matches no terminal."""
from __future__ import annotations

from re import _constants as C, _parser as P

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark.exceptions import UnexpectedCharacters
from lark.lexer import BasicLexer

from atrex_inject.cuda.source import _macro_statements, cuda_parser as _parser, parse_source
from atrex_inject.cuda.tokens import TokenStream, terminals
from atrex_inject.errors import SourceParseError
from conftest import REPO


def larks(text: str) -> list[tuple] | int:
    try:
        return [(t.type, t.value, t.start_pos, t.end_pos) for t in _parser().lex(text)]
    except UnexpectedCharacters as e:
        return e.pos_in_stream


def ours(text: str) -> list[tuple] | int:
    s = TokenStream(text, terminals(_parser()))
    bad = s.error_offset()
    if bad is not None:
        return bad
    s.insert(_macro_statements(s))
    return [(t.type, t.value, t.start_pos, t.end_pos) for t in s]


SOURCES = sorted(p for pattern in ("examples/**/*.cu", "examples/**/*.cuh", "runtime/*.cuh", "tests/**/*.cu")
                 for p in REPO.glob(pattern))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_stream_is_larks_on_the_repository_sources(path):
    text = path.read_text()
    assert ours(text) == larks(text)


# Pieces whose neighbours change how they lex: keywords glued to words, literal prefixes, raw
# strings, digit separators, comments and strings holding brackets, directives and `#if 0` regions
# (nested, unterminated, at offset 0, after CRLF), macros used as statements, characters no
# terminal takes.
PIECES = ["__global__", " void ", "k", "x1", "$a", "_", "(", ")", "{", "}", "[", "]", ";", ":", "::", ",", "<<<",
          ">>>", "<", ">", ">>=", "->*", "...", "@", "#", "\\", "for", "while", "do", "if", "else", "switch",
          "return", "break", "continue", "case", "default", "constexpr", "asm", "__asm__", "__asm", "volatile",
          "__volatile__", "inline", "goto", "FMA(a)", "UNROLL", "0", ".5", "1.5e+3f", "0x1'F", "1'000", "'a'",
          "'\\''", "L'x'", "u8'x'", "'", '"s"', '"a\\"b{"', 'u8"s"', 'L"s"', '"\\\n"', '"', 'R"(x)"', 'R"d(a)"b)d"',
          'uR"(\n})"', 'LR"x(y)x"', 'u8R"(', 'XR"(a)"', "// c {\n", "// c \\\n more\n", "/* c } */", "/*", "*/",
          "\n", "\r\n", " ", "\t", "\f", "\v", "\r", "\n#define X 1\n", "#define G __global__\n",
          "\n#define S \"a\" \\\n \"b\"\n", "\n#if 0\n", "\n  #  if 0 // x\n", "\n#ifdef A\n", "\n#endif\n",
          "\n#else\n", "\n#elif 1\n", "\n#pragma unroll\n", "é", "\x00", "\u2028", "CUTLASS_GLOBAL",
          "cudaLaunchKernelEx"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.lists(st.sampled_from(PIECES), max_size=40).map("".join),
                 st.text(alphabet=st.sampled_from("#{}()[];:<>\"'/*\\\n\r \tRLu8x0.e+-"), max_size=40)))
def test_stream_is_larks_on_generated_text(text):
    assert ours(text) == larks(text)


def _first_chars(items) -> tuple[set[str] | None, bool]:
    """The characters a parsed regex can start with (None: any) and whether it can match empty."""
    out: set[str] = set()
    for op, av in items:
        if op is C.LITERAL:
            return out | {chr(av)}, False
        if op is C.IN:
            if any(o in (C.NEGATE, C.CATEGORY) for o, _ in av):
                return None, False
            for o, a in av:
                out |= {chr(a)} if o is C.LITERAL else {chr(c) for c in range(a[0], a[1] + 1)}
            return out, False
        if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            continue
        if op is C.BRANCH:
            subs, empty = av[1], False
        elif op is C.SUBPATTERN:
            subs, empty = [av[-1]], False
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
            subs, empty = [av[2]], av[0] == 0
        else:
            return None, False
        for sub in subs:
            chars, can_be_empty = _first_chars(sub)
            if chars is None:
                return None, False
            out |= chars
            empty |= can_be_empty
        if not empty:
            return out, False
    return out, True


def test_terminals_only_move_past_those_that_cannot_start_alike():
    """tokens.py tries some terminals before or after their place in Lark's order, and keywords
    just before the word terminal; that picks Lark's token only if a terminal never passes one
    that can start with the same character."""
    lexer = BasicLexer(_parser().lexer_conf)
    scanner = [t.name for t in lexer.scanner.terminals]  # what Lark tries, in order; keywords re-type a WORD
    place = {name: scanner.index(name if name in scanner else "WORD") for name in terminals(_parser()).order}
    regex = {t.name: t.pattern.to_regexp() for t in lexer.terminals}
    starts = {}
    for name in place:
        starts[name], can_be_empty = _first_chars(P.parse(regex[name]).data)
        assert not can_be_empty, name
    order = terminals(_parser()).order
    for i, a in enumerate(order):
        for b in order[i + 1:]:
            if place[a] > place[b]:
                assert starts[a] is not None and starts[b] is not None and not starts[a] & starts[b], (a, b)


@pytest.mark.parametrize("text, message", [
    ("__global__ void k() {\n  x = 1;\n  }\n}\n", "k.cu:4: unbalanced '}'"),
    ("__global__ void k() {\n  f(a[1);\n}\n", "k.cu:2: unbalanced ')'"),
    ("int a;\n__global__ void k() {\n  x = (1;\n", "k.cu:3: '(' is never closed"),
    ("__global__ void k() {\n  int \u00e9 = 1;\n}\n", "k.cu:2: cannot parse the source near 'int \u00e9 = 1;'"),
    ("  #if 0\n{\n#endif\nk<<<1,2>>>(x)\n}", "k.cu:5: unbalanced '}'"),
])
def test_a_file_that_cannot_be_lexed_or_matched_is_refused_at_its_line(text, message):
    with pytest.raises(SourceParseError) as e:
        parse_source(text, "k.cu")
    assert str(e.value).splitlines()[0] == message
