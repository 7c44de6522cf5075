"""Unified diffs that `git apply` (and `git apply -R`) accept byte for byte, and the forward
application revert uses to prove clean copy + patch = instrumented source before it writes.

Lines are split on `\\n` only, as git does: `\\r`, form feeds, U+2028 and the other characters
`str.splitlines` treats as line ends stay inside their line, so any text round-trips.
"""
from __future__ import annotations

import difflib
import re

NO_NEWLINE = "\\ No newline at end of file\n"
HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchMismatch(ValueError):
    """The patch does not apply to the given text."""


def split_lines(text: str) -> list[str]:
    """Lines with their `\\n` kept; the last one may lack it."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    return out + [lines[-1]] if lines[-1] else out


def unified_diff(old: str, new: str, rel_path: str, context: int = 3) -> str:
    out = []
    for line in difflib.unified_diff(split_lines(old), split_lines(new), f"a/{rel_path}", f"b/{rel_path}",
                                     n=context):
        if line.startswith(("---", "+++")):
            out.append(line.rstrip("\n") + "\n")
        elif line.endswith("\n"):
            out.append(line)
        else:  # the last line of a file without a trailing newline
            out.append(line + "\n" + NO_NEWLINE)
    if not out:
        return ""
    return f"diff --git a/{rel_path} b/{rel_path}\n" + "".join(out)


def apply_patch(old: str, patch: str) -> str:
    """`old` with a patch made by unified_diff applied at its recorded positions (no fuzz)."""
    src = split_lines(old)
    lines = split_lines(patch)
    out: list[str] = []
    pos = 0  # next unconsumed line of src
    i = 0
    while i < len(lines) and not lines[i].startswith("@@"):
        i += 1
    while i < len(lines):
        m = HUNK.match(lines[i])
        if not m:
            raise PatchMismatch(f"patch line {i + 1} is not a hunk header")
        start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
        if start < pos or start > len(src):
            raise PatchMismatch(f"hunk at patch line {i + 1} starts outside the text")
        out += src[pos:start]
        pos = start
        i += 1
        while i < len(lines) and not lines[i].startswith("@@"):
            tag, body = lines[i][:1], lines[i][1:]
            if i + 1 < len(lines) and lines[i + 1] == NO_NEWLINE:
                body = body[:-1]
                i += 1
            if tag in (" ", "-"):
                if pos >= len(src) or src[pos] != body:
                    raise PatchMismatch(f"patch line {i + 1} does not match line {pos + 1} of the text")
                pos += 1
            if tag in (" ", "+"):
                out.append(body)
            elif tag != "-":
                raise PatchMismatch(f"patch line {i + 1} is not a diff line")
            i += 1
    return "".join(out + src[pos:])


def diffstat(patch: str) -> tuple[int, int]:
    """(lines added, lines removed)."""
    added = removed = 0
    for line in patch.split("\n"):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed
