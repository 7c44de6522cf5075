"""Unified diffs that `git apply` (and `git apply -R`) accept byte for byte, and the forward
application revert uses to prove clean copy + patch = instrumented source before it writes.

Lines are split on `\\n` only, as git does: `\\r`, form feeds, U+2028 and the other characters
`str.splitlines` treats as line ends stay inside their line, so any text round-trips.

The lines are aligned by difflib, whose cost is the pairs of equal lines its searches visit:
each search for the longest match in a range visits, for each old line there, its occurrences in
the new text, and difflib searches again on both sides of every match it finds. Small for source
code, but quadratic in a file whose lines repeat (bench/patch_scale.py: 100k lines, 4 s) and
worse where many short matches alternate (each search then rescans most of the range). difflib
runs on a budget of DIFFLIB_PAIRS visits, counted before each search (`_Matcher`); past it the
alignment is made in linear time instead (`_anchored`): lines unique in both texts anchor it, as
in patience diff, and the gaps between anchors are aligned the same way again, or by difflib
while a budget of its own lasts; the patch may then differ from difflib's, and is as valid.
"""
from __future__ import annotations

import bisect
import difflib
import re
from dataclasses import dataclass
from itertools import accumulate

NO_NEWLINE = "\\ No newline at end of file\n"
HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchMismatch(ValueError):
    """The patch does not apply to the given text."""


def split_lines(text: str) -> list[str]:
    """Lines with their `\\n` kept; the last one may lack it."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    return out + [lines[-1]] if lines[-1] else out


DIFFLIB_PAIRS = 1_000_000  # equal-line pairs difflib's searches may visit (about 0.2 s), per alignment
Opcode = tuple[str, int, int, int, int]  # difflib's (tag, a_start, a_end, b_start, b_end)


class _OverBudget(Exception):
    """difflib's next search would pass the budget of visits."""


class _Matcher(difflib.SequenceMatcher):
    """difflib, which refuses (_OverBudget) a search for the longest match that would take the
    visits spent past `budget[0]` (shared, so one budget covers every gap of an alignment). A
    search in a[alo:ahi] visits each line's occurrences in b (b2j, popular lines left out), so its
    cost is known before it runs: a prefix sum over a."""

    def __init__(self, a: list[str], b: list[str], budget: list[float]):
        super().__init__(None, a, b)
        self._visits = list(accumulate((len(self.b2j.get(x, ())) for x in a), initial=0))
        self._budget = budget

    def find_longest_match(self, alo=0, ahi=None, blo=0, bhi=None):
        cost = self._visits[len(self.a) if ahi is None else ahi] - self._visits[alo]
        if cost > self._budget[0]:
            raise _OverBudget
        self._budget[0] -= cost
        return super().find_longest_match(alo, ahi, blo, bhi)


def _difflib(a: list[str], b: list[str], budget: list[float]) -> list[Opcode] | None:
    """difflib's opcodes, or None when they would cost more than the budget left."""
    try:
        return _Matcher(a, b, budget).get_opcodes()
    except _OverBudget:
        return None


DEPTH = 64  # gaps nested deeper than this (only in contrived texts) are replaced whole: no recursion limit


def _anchored(a: list[str], b: list[str], a0: int, a1: int, b0: int, b1: int, out: list[Opcode],
              budget: list[float], depth: int = 0) -> None:
    """Opcodes for a[a0:a1] against b[b0:b1], appended to `out` (adjacent ones may share a tag);
    difflib aligns a gap while `budget` lasts."""
    head = 0
    while a0 + head < a1 and b0 + head < b1 and a[a0 + head] == b[b0 + head]:
        head += 1
    out.append(("equal", a0, a0 + head, b0, b0 + head))
    a0, b0 = a0 + head, b0 + head
    tail = 0
    while a1 - tail > a0 and b1 - tail > b0 and a[a1 - tail - 1] == b[b1 - tail - 1]:
        tail += 1
    a1, b1 = a1 - tail, b1 - tail
    small = None if a0 == a1 or b0 == b1 else _difflib(a[a0:a1], b[b0:b1], budget)
    if small is not None:
        out += [(t, i1 + a0, i2 + a0, j1 + b0, j2 + b0) for t, i1, i2, j1, j2 in small]
    elif a0 == a1 or b0 == b1 or depth >= DEPTH:
        out.append(("replace", a0, a1, b0, b1))
    else:
        in_a, in_b = _unique(a, a0, a1), _unique(b, b0, b1)
        pairs = sorted((i, j) for line, i in in_a.items() if i >= 0 and (j := in_b.get(line, -1)) >= 0)
        del in_a, in_b
        chain = _increasing(pairs)
        if not chain:  # nothing to anchor on: the whole gap is replaced
            out.append(("replace", a0, a1, b0, b1))
        for i, j in chain:
            _anchored(a, b, a0, i, b0, j, out, budget, depth + 1)
            out.append(("equal", i, i + 1, j, j + 1))
            a0, b0 = i + 1, j + 1
        if chain:
            _anchored(a, b, a0, a1, b0, b1, out, budget, depth + 1)
    out.append(("equal", a1, a1 + tail, b1, b1 + tail))


def _unique(x: list[str], lo: int, hi: int) -> dict[str, int]:
    """Line -> its index in x[lo:hi] if it occurs there once, -1 if more often."""
    at: dict[str, int] = {}
    for i in range(lo, hi):
        at[x[i]] = -1 if x[i] in at else i
    return at


def _increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest chain of (i, j) pairs (i ascending as given) whose j ascend too (patience)."""
    tops: list[int] = []  # j of the last pair of the best chain of each length
    ends: list[int] = []  # index into pairs of that pair
    back = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        n = bisect.bisect_left(tops, j)
        back[k] = ends[n - 1] if n else -1
        if n == len(tops):
            tops.append(j)
            ends.append(k)
        else:
            tops[n], ends[n] = j, k
    chain, k = [], ends[-1] if ends else -1
    while k >= 0:
        chain.append(pairs[k])
        k = back[k]
    return chain[::-1]


def _opcodes(a: list[str], b: list[str]) -> list[Opcode]:
    whole = _difflib(a, b, [DIFFLIB_PAIRS])
    if whole is not None:
        return whole
    raw: list[Opcode] = []
    _anchored(a, b, 0, len(a), 0, len(b), raw, [DIFFLIB_PAIRS])
    merged: list[Opcode] = []  # runs of equal lines, and runs of changes, each one opcode
    for t, i1, i2, j1, j2 in raw:
        if i1 == i2 and j1 == j2:
            continue
        if merged and (merged[-1][0] == "equal") == (t == "equal"):
            _, i1, _, j1, _ = merged.pop()
        if t != "equal":
            t = "insert" if i1 == i2 else "delete" if j1 == j2 else "replace"
        merged.append((t, i1, i2, j1, j2))
    return merged


class _Given(difflib.SequenceMatcher):
    """difflib's hunk grouping (get_grouped_opcodes, which reads only get_opcodes) over opcodes made here."""

    def __init__(self, opcodes: list[Opcode]):
        super().__init__(None, [], [])
        self._given = opcodes

    def get_opcodes(self) -> list[Opcode]:
        return self._given


def _range(start: int, stop: int) -> str:
    """A hunk's line range as unified diffs write it: `line` for one line, `line,count` otherwise,
    and the line before an empty range."""
    length = stop - start
    return f"{start + 1}" if length == 1 else f"{start + (1 if length else 0)},{length}"


def unified_diff(old: str, new: str, rel_path: str, context: int = 3) -> str:
    a, b = split_lines(old), split_lines(new)
    out = []
    for group in _Given(_opcodes(a, b)).get_grouped_opcodes(context):
        out.append(f"@@ -{_range(group[0][1], group[-1][2])} +{_range(group[0][3], group[-1][4])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            lines = ([" " + x for x in a[i1:i2]] if tag == "equal" else
                     ["-" + x for x in a[i1:i2]] + ["+" + x for x in b[j1:j2]])
            out += [x if x.endswith("\n") else x + "\n" + NO_NEWLINE for x in lines]  # a last line without \n
    if not out:
        return ""
    return f"diff --git a/{rel_path} b/{rel_path}\n--- a/{rel_path}\n+++ b/{rel_path}\n" + "".join(out)


@dataclass(frozen=True)
class Hunk:
    """One hunk of a patch made by unified_diff: its lines as (tag, text, line of the patch)."""
    number: int  # 1-based, in the patch's order
    header: str  # the `@@ -a,b +c,d @@` line
    at: int  # the header's line of the patch (1-based)
    old_start: int  # 0-based index of its first line in the old text (the line before an empty range)
    new_start: int  # the same in the new text
    lines: tuple[tuple[str, str, int], ...]


def hunks(patch: str) -> list[Hunk]:
    """The patch's hunks (everything before the first `@@` is the file header)."""
    lines = split_lines(patch)
    out: list[Hunk] = []
    i = 0
    while i < len(lines) and not lines[i].startswith("@@"):
        i += 1
    while i < len(lines):
        m = HUNK.match(lines[i])
        if not m:
            raise PatchMismatch(f"patch line {i + 1} is not a hunk header")
        header, at, body = lines[i].rstrip("\n"), i + 1, []
        old_start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
        new_start = int(m.group(3)) - (0 if m.group(4) == "0" else 1)
        i += 1
        while i < len(lines) and not lines[i].startswith("@@"):
            tag, text = lines[i][:1], lines[i][1:]
            if tag not in (" ", "-", "+"):
                raise PatchMismatch(f"patch line {i + 1} is not a diff line")
            if i + 1 < len(lines) and lines[i + 1] == NO_NEWLINE:
                text = text[:-1]
                i += 1
            body.append((tag, text, i + 1))
            i += 1
        out.append(Hunk(len(out) + 1, header, at, old_start, new_start, tuple(body)))
    return out


def apply_patch(old: str, patch: str) -> str:
    """`old` with a patch made by unified_diff applied at its recorded positions (no fuzz)."""
    src = split_lines(old)
    out: list[str] = []
    pos = 0  # next unconsumed line of src
    for h in hunks(patch):
        if h.old_start < pos or h.old_start > len(src):
            raise PatchMismatch(f"hunk at patch line {h.at} starts outside the text")
        out += src[pos:h.old_start]
        pos = h.old_start
        for tag, text, at in h.lines:
            if tag in (" ", "-"):
                if pos >= len(src) or src[pos] != text:
                    raise PatchMismatch(f"patch line {at} does not match line {pos + 1} of the text")
                pos += 1
            if tag in (" ", "+"):
                out.append(text)
    return "".join(out + src[pos:])


class PatchConflict(ValueError):
    """Edits made after a patch touch lines the patch changed; `conflicts` names each hunk."""

    def __init__(self, conflicts: list[dict]):
        self.conflicts = conflicts
        super().__init__("; ".join(f"hunk {c['hunk']} ({c['header']})" for c in conflicts))


@dataclass(frozen=True)
class _Region:
    """Lines [start, end) of the patched text replaced by `lines`: one change of the patch undone
    (hunk > 0) or one of the user's edits (hunk 0)."""
    start: int
    end: int
    lines: tuple[str, ...]
    hunk: int = 0


def _undo_regions(patch: str) -> list[_Region]:
    """Each run of changed lines of the patch, as the region of the new text that takes the old lines back."""
    out = []
    for h in hunks(patch):
        at, new, old = h.new_start, 0, []
        for tag, text, _ in (*h.lines, (" ", "", 0)):  # a context line closes the last run
            if tag == "+":
                new += 1
            elif tag == "-":
                old.append(text)
            elif new or old:
                out.append(_Region(at, at + new, tuple(old), h.number))
                at, new, old = at + new, 0, []
            if tag == " ":
                at += 1
    return out


def _touch(a: _Region, b: _Region) -> bool:
    """Two regions that cannot both be applied as they are: they share a line, or one inserts at a
    place the other covers or borders (which goes first is then undefined)."""
    if a.start == a.end or b.start == b.end:
        return max(a.start, b.start) <= min(a.end, b.end)
    return max(a.start, b.start) < min(a.end, b.end)


def _replay(base: list[str], lo: int, hi: int, regions: list[_Region]) -> list[str]:
    """base[lo:hi] with the regions (in order, none overlapping) applied."""
    text, at = [], lo
    for r in regions:
        text += base[at:r.start] + list(r.lines)
        at = r.end
    return text + base[at:hi]


def unapply_keeping_edits(patched: str, edited: str, patch: str) -> str:
    """`edited` (the patched text, then edited by hand) with the patch applied in reverse: each of
    its changes undone where the edits left its lines alone, the edits kept. A change whose lines
    an edit touches is a conflict (PatchConflict, naming the hunks), unless the edit made those
    lines exactly what undoing the change makes them (the probes removed by hand, say)."""
    base, mine = split_lines(patched), split_lines(edited)
    undo, headers = _undo_regions(patch), [h.header for h in hunks(patch)]
    for r in undo:
        if r.end > len(base):
            raise PatchMismatch(f"hunk {r.hunk} reaches past the end of the text")
    edits = [_Region(i1, i2, tuple(mine[j1:j2])) for t, i1, i2, j1, j2 in _opcodes(base, mine) if t != "equal"]
    regions = sorted(undo + edits, key=lambda r: (r.start, r.end))
    clusters: list[list[_Region]] = []
    for r in regions:
        if clusters and any(_touch(r, c) for c in clusters[-1]):
            clusters[-1].append(r)
        else:
            clusters.append([r])
    out: list[str] = []
    pos = shift = 0  # next line of base; lines the edits added before it, less those they removed
    conflicts = []
    for group in clusters:
        lo, hi = min(r.start for r in group), max(r.end for r in group)
        out += base[pos:lo]
        ours, theirs = [r for r in group if r.hunk], [r for r in group if not r.hunk]
        undone, kept = _replay(base, lo, hi, ours), _replay(base, lo, hi, theirs)
        if ours and theirs and undone != kept:
            conflicts += [{"hunk": r.hunk, "header": headers[r.hunk - 1], "patched_lines": [r.start + 1, r.end],
                           "edited_lines": [lo + shift + 1, lo + shift + max(1, len(kept))]} for r in ours]
        out += kept if theirs else undone
        shift += sum(len(r.lines) - (r.end - r.start) for r in theirs)
        pos = hi
    if conflicts:
        raise PatchConflict(conflicts)
    return "".join(out + base[pos:])


def diffstat(patch: str) -> tuple[int, int]:
    """(lines added, lines removed)."""
    added = removed = 0
    for line in patch.split("\n"):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


@dataclass(frozen=True)
class Embedded:
    """A text embedded whole among a patch's added lines, shown by `for_review` as one line."""
    name: str
    lines: int
    sha256: str  # of the text itself (as the string's value holds it)
    patch_line: int  # 1-based line of the full patch where it starts


def _embedded_forms() -> dict[str, tuple[str, list[list[str]]]]:
    """name -> (text, the lines it takes in a patch): the recorder header as a kernel.py embeds it,
    written in a raw string as it is, in a non-raw triple-quoted one escaped (cuda/python/literal.py)."""
    from .cuda.python.literal import escape  # noqa: PLC0415  (how a non-raw literal spells a text)
    from .cuda.python.rewrite import runtime_text  # noqa: PLC0415
    from .cuda.probes import HEADER  # noqa: PLC0415

    text = runtime_text()
    forms = {tuple(text.split("\n")[:-1])} | {tuple(escape(text, q * 3, "\n").split("\n")[:-1]) for q in "\"'"}
    return {HEADER: (text, [list(f) for f in forms])}


def for_review(patch: str) -> tuple[str, list[Embedded]]:
    """The patch as a reviewer reads it (`diff`, a report's excerpts): each run of added lines that
    is an embedded recorder header (a kernel.py carries the header's text instead of including it)
    becomes one line naming it, its length and its sha256; everything else as it is. The result
    is for reading, not for `git apply` (its hunk headers still count the lines); the patch file
    and `diff --full` stay complete."""
    import hashlib  # noqa: PLC0415

    lines = patch.split("\n")
    forms = [(name, hashlib.sha256(text.encode()).hexdigest(), f)
             for name, (text, fs) in _embedded_forms().items() for f in fs]
    out: list[str] = []
    found: list[Embedded] = []
    i = 0
    def added(at: int, form: list[str]) -> bool:  # lines[at:] start with `form`, each an added line
        return at + len(form) <= len(lines) and all(
            x[:1] == "+" and x[1:].removesuffix("\r") == y for x, y in zip(lines[at:at + len(form)], form))

    while i < len(lines):
        hit = next(((name, digest, f) for name, digest, f in forms if added(i, f)), None)
        if hit is None:
            out.append(lines[i])
            i += 1
            continue
        name, digest, f = hit
        found.append(Embedded(name, len(f), digest, i + 1))
        out.append(f"+[… {len(f)} lines: the recorder header {name}, embedded unchanged (sha256 {digest}); "
                   "`atrex-inject diff --full` shows them]")
        i += len(f)
    return "\n".join(out), found
