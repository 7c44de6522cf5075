"""Choosing one place for an anchor, shared by the backends: exactly one match (or the one that
`occurrence` names), otherwise an error that lists the candidates with their source lines."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .errors import AnchorError
from .spec import ProbeSpec, Site

_CALL_TOKEN = re.compile(r"->|::|\w+|\S")


@dataclass(frozen=True)
class Candidate:
    node: Any  # the backend's statement node
    what: str  # how the candidate reads in a message ("call cute.copy", "for loop")
    line: int
    text: str  # its source line, stripped


def squash(s: str) -> str:
    """Whitespace-free text: how statement and loop patterns are compared."""
    return re.sub(r"\s+", "", s)


def call_matches(callee: str, pattern: str) -> bool:
    """`copy` matches `cute.copy` and `ns::copy`: the pattern is a suffix of the callee's tokens."""
    want = _CALL_TOKEN.findall(pattern)
    have = _CALL_TOKEN.findall(callee)
    return have[-len(want):] == want


def listing(spec: ProbeSpec, cs: list[Candidate], limit: int = 12) -> str:
    """Numbered candidate rows `file:line: what: source line` for an error message."""
    rows = [f"    {i}. {spec.source_rel}:{c.line}: {c.what}: {c.text}" for i, c in enumerate(cs[:limit], 1)]
    if len(cs) > limit:
        rows.append(f"    ... and {len(cs) - limit} more")
    return "\n".join(rows)


def pick(spec: ProbeSpec, site: Site, kernel: str, hits: list[Candidate], every: list[Candidate]):
    a = site.anchor
    where = str(spec.path)

    if not hits:
        msg = f"site {site.name!r}: anchor {a.kind} {a.pattern!r} matches nothing in kernel {kernel!r}"
        if every:
            msg += f"; the kernel's {a.kind} candidates are:\n" + listing(spec, every)
        raise AnchorError(msg, path=where, line=site.line, hint="change the anchor to one of the candidates")
    if a.occurrence is not None:
        if a.occurrence > len(hits):
            raise AnchorError(f"site {site.name!r}: occurrence {a.occurrence} asked, but the anchor matches "
                              f"{len(hits)} place(s):\n" + listing(spec, hits), path=where, line=site.line)
        return hits[a.occurrence - 1].node
    distinct = list(dict.fromkeys(c.node for c in hits))
    if len(distinct) > 1:
        raise AnchorError(f"site {site.name!r}: anchor {a.kind} {a.pattern!r} matches {len(hits)} places:\n"
                          + listing(spec, hits), path=where, line=site.line,
                          hint="add `occurrence = N` to the anchor table or make the pattern more specific")
    return distinct[0]
