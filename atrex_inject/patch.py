"""Unified diffs that `git apply` (and `git apply -R`) accept byte for byte."""
from __future__ import annotations

import difflib

NO_NEWLINE = "\\ No newline at end of file\n"


def unified_diff(old: str, new: str, rel_path: str, context: int = 3) -> str:
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    out = []
    for line in difflib.unified_diff(a, b, f"a/{rel_path}", f"b/{rel_path}", n=context):
        if line.startswith(("---", "+++")):
            out.append(line.rstrip("\n") + "\n")
        elif line.endswith("\n"):
            out.append(line)
        else:  # the last line of a file without a trailing newline
            out.append(line + "\n" + NO_NEWLINE)
    if not out:
        return ""
    return f"diff --git a/{rel_path} b/{rel_path}\n" + "".join(out)


def diffstat(patch: str) -> tuple[int, int]:
    """(lines added, lines removed)."""
    added = removed = 0
    for line in patch.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed
