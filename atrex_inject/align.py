"""Where the CUDA rewriter inserted text: (offset in the clean string, inserted text) pairs.

The rewriter keeps every clean byte in order and only adds (probes, the instrumented copy of the
kernel, launch wrapping), so the clean CUDA text is a subsequence of the instrumented one. Both
CUDA routes read the pairs: linemap.py puts a `#line` directive after each that adds lines, and a
CUDA string in Python gets them written into its literal, so the user's spelling of every clean
character stays as it was. Lines are matched first (most insertions are whole lines), then
characters inside the lines that differ. A module of its own, below both routes, so that neither
imports the other to use it.
"""
from __future__ import annotations

from difflib import SequenceMatcher
from itertools import accumulate


class NotAnInsertion(ValueError):
    """The new text does not hold the old one in order: something was dropped or changed."""


def insertions(old: str, new: str) -> list[tuple[int, str]]:
    """Pairs in increasing offset order, at most one per offset, such that inserting each text at
    its offset of `old` gives `new`."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    starts = [0, *accumulate(len(x) for x in a)]
    out: list[tuple[int, str]] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "insert":
            out.append((starts[i1], "".join(b[j1:j2])))
        elif tag != "equal":
            out += [(starts[i1] + o, t) for o, t in _in_lines(a[i1:i2], b[j1:j2])]
    return _whole_lines(old, _merged(out))


def _in_lines(old: list[str], new: list[str]) -> list[tuple[int, str]]:
    """Insertions inside a block of changed lines: each old line paired, in order, with the most
    similar new line that holds it in order (the others are inserted lines), so text inserted
    into a line is not matched against a look-alike in an inserted line; characters otherwise."""
    out, j, at = [], 0, 0
    for line in old:
        cands = [k for k in range(j, len(new)) if _holds(new[k], line)]
        if not cands:
            return _in_chars("".join(old), "".join(new))
        k = max(cands, key=lambda c: (SequenceMatcher(None, line, new[c], autojunk=False).ratio(), -c))
        if k > j:
            out.append((at, "".join(new[j:k])))
        out += [(at + o, t) for o, t in _in_chars(line, new[k])]
        j, at = k + 1, at + len(line)
    if j < len(new):
        out.append((at, "".join(new[j:])))
    return out


def _holds(new: str, old: str) -> bool:
    """Does `new` hold the characters of `old` in order?"""
    it = iter(new)
    return all(c in it for c in old)


def _merged(ins: list[tuple[int, str]]) -> list[tuple[int, str]]:
    merged: list[tuple[int, str]] = []
    for off, text in ins:
        if merged and merged[-1][0] == off:
            merged[-1] = (off, merged[-1][1] + text)
        elif text:
            merged.append((off, text))
    return merged


def _whole_lines(old: str, ins: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Move the lines of an insertion that lands after a line's indentation to the line's start:
    `  ` + `{ open;\n  (pick) ` + `k<<<…` reads as the whole line `  { open;\n` before the clean
    line and `(pick) ` inside it, which is how it was inserted (and where a #line belongs)."""
    out = []
    for off, text in ins:
        start = old.rfind("\n", 0, off) + 1
        indent = old[start:off]
        joined = indent + text
        cut = joined.rfind("\n") + 1
        if indent and not indent.strip() and cut and joined.startswith(indent, cut):
            out += [(start, joined[:cut]), (off, joined[cut + len(indent):])]
        else:
            out.append((off, text))
    return _merged(sorted(out, key=lambda x: x[0]))


def _in_chars(old: str, new: str) -> list[tuple[int, str]]:
    ops = SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    if all(tag in ("equal", "insert") for tag, *_ in ops):
        return [(i1, new[j1:j2]) for tag, i1, _, j1, j2 in ops if tag == "insert"]
    # the matcher paired characters across an insertion: match each old character at its first
    # place in what is left of the new text instead
    out, j = [], 0
    for i, c in enumerate(old):
        k = new.find(c, j)
        if k < 0:
            raise NotAnInsertion(f"the instrumented text lacks {old[max(0, i - 20):i + 20]!r} of the clean text")
        if k > j:
            out.append((i, new[j:k]))
        j = k + 1
    if j < len(new):
        out.append((len(old), new[j:]))
    return out
