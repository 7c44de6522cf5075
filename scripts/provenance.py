"""One home for writing a section of tests/fixtures/h200/PROVENANCE.md: each fixture script writes
its own section after a GPU run, in place of the one it wrote before."""
from __future__ import annotations

import re


def put_section(text: str, heading: str, section: str, before: str | None = None, after: str | None = None) -> str:
    """`text` (Markdown whose sections start at "## " lines) with `section` in it: the section whose
    heading line starts with `heading` is taken out, if there (it runs to the next "## " line), and
    `section` (its heading first) goes before the section whose heading starts with `before`, or
    after the one whose heading starts with `after`, else at the end; one blank line between
    sections, the file ending in one newline."""
    text = re.sub(rf"(?ms)^{re.escape(heading)}.*?(?=^## |\Z)", "", text)
    at = len(text)
    if before is not None and (m := re.search(rf"(?m)^{re.escape(before)}", text)):
        at = m.start()
    elif after is not None and (m := re.search(rf"(?ms)^{re.escape(after)}.*?(?=^## |\Z)", text)):
        at = m.end()
    head, tail = text[:at].rstrip("\n"), text[at:].strip("\n")
    return "\n\n".join(p for p in (head, section.strip("\n"), tail) if p) + "\n"
