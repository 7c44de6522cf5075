"""`#line` directives after inserted text, so that the compiler's diagnostics, and `__LINE__` and
`__FILE__` in the program's own messages, name the clean file's lines: after every insertion that
adds lines, `#line N "file"` goes at the next clean line start, N being the line that clean line
has in the clean file. Both CUDA routes use it: a `.cu` file (cuda/backend.py, whose directives
carry MARK so that the source id can leave them out, source_id.py) and a CUDA string in Python
(cuda/python/rewrite.py, whose file lines are the Python file's).
"""
from __future__ import annotations

import bisect
import re
from typing import Callable

from .align import insertions

MARK = "// atrex: clean line"  # ends each directive the .cu route writes (source_id.py leaves those lines out)
_MARKED = re.compile(r'^#line (\d+) "(?:[^"\\\n]|\\.)*" ' + re.escape(MARK) + r'\r?\n', re.M)

Insertions = list[tuple[int, str]]  # (offset in the clean text, text inserted there), increasing offsets


def starts_line(value: str, s: int) -> bool:
    """A line begins at s, outside a backslash-continued line (where a directive would break a macro)."""
    return s < len(value) and (s == 0 or value[s - 1] == "\n") and not value[max(0, s - 2):s].startswith("\\")


def line_directives(ins: Insertions, value: str, line_of: Callable[[int], int], rel: str, mark: str = "",
                    nl: str = "\n") -> Insertions:
    """The insertions with a directive after each that adds lines (at the next clean line start)."""
    name = rel.replace("\\", "\\\\").replace('"', '\\"')

    def directive(s: int) -> str:
        return f'#line {line_of(s)} "{name}"{" " + mark if mark else ""}{nl}'

    def next_start(a: int, limit: int) -> int | None:
        s = a
        while s < limit:
            if starts_line(value, s):
                return s
            n = value.find("\n", s, limit)
            if n < 0:
                return None
            s = n + 1
        return None

    out, pending, cursor = [], False, 0
    for off, t in ins:
        s = next_start(cursor, off) if pending else None
        if s is not None:
            out.append((s, directive(s)))
            pending = False
        if starts_line(value, off) and (pending or "\n" in t):
            cut = t.rfind("\n") + 1
            t = t[:cut] + directive(off) + t[cut:]
            pending = False
        elif "\n" in t:
            pending = True
        out.append((off, t))
        cursor = off + 1
    s = next_start(cursor, len(value)) if pending else None
    if s is not None:
        out.append((s, directive(s)))
    return out


def apply(value: str, ins: Insertions) -> str:
    """The clean text with the insertions made."""
    out, pos = [], 0
    for off, t in ins:
        out += [value[pos:off], t]
        pos = off
    return "".join(out) + value[pos:]


def without_directives(text: str) -> str:
    """The text with the MARKed directives the .cu route wrote taken out again."""
    return _MARKED.sub("", text)


def presumed_line(text: str) -> Callable[[int], int]:
    """The line the compiler presumes at an offset of `text`: its physical line, or, after a MARKed
    directive an earlier rewrite left (a second spec rewriting a file the first already did), the
    clean line that directive names and the lines since. So every spec's directives name the clean
    file's lines."""
    marks = [(m.end(), int(m.group(1))) for m in _MARKED.finditer(text)]
    ends = [e for e, _ in marks]

    def line_of(s: int) -> int:
        i = bisect.bisect_right(ends, s) - 1
        if i < 0:
            return text.count("\n", 0, s) + 1
        end, n = marks[i]
        return n + text.count("\n", end, s)
    return line_of


def with_directives(clean: str, instrumented: str, rel: str) -> str:
    """A rewritten CUDA file (`instrumented` holds `clean` in order, align.py) with a MARKed
    directive after each insertion that adds lines."""
    bom = "\ufeff" if clean.startswith("\ufeff") else ""  # stays first (the rewriter writes it before its prefix)
    clean, instrumented = clean[len(bom):], instrumented[len(bom):]
    nl = "\r\n" if "\r\n" in clean else "\n"
    return bom + apply(clean, line_directives(insertions(clean, instrumented), clean, presumed_line(clean), rel,
                                              MARK, nl))
