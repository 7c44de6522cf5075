"""The source id: what a capture carries to name the instrumented source it was built from.

It is the sha256 of the instrumented source with its own id zeroed: the CUDA rewriter embeds the
id in the source it writes (`__atrex_source_id[] = "<64 hex digits>"`, in a header
`__atrex_source_id_<8 hex digits>`), so the text hashed is the text with those digits replaced by
SOURCE_ID_PLACEHOLDER; a source without the array (the CuTe DSL backend's) is hashed as it is. The
`#line` directives the .cu route writes after its insertions (linemap.py, each ending in
linemap.MARK) are left out of the text hashed: they say where the clean lines are, not what runs.
A format fact (docs/format.md), so the rewriters that write it and the validator that recomputes
it read it here.
"""
from __future__ import annotations

import re

from .fsio import sha256_bytes
from .linemap import without_directives

SOURCE_ID_PLACEHOLDER = "0" * 64
_SOURCE_ID = re.compile(r'__atrex_source_id(?:_[0-9a-f]{8})?\[\] = "([0-9a-f]{64})"')


def zeroed(text: str) -> str:
    """`text` with its own id replaced by SOURCE_ID_PLACEHOLDER (as it is without one)."""
    m = _SOURCE_ID.search(text)
    return text if m is None else text[:m.start(1)] + SOURCE_ID_PLACEHOLDER + text[m.end(1):]


def source_id_of(text: str) -> str:
    """The identity a capture carries: the instrumented source with its own id zeroed, hashed."""
    return sha256_bytes(zeroed(without_directives(text)).encode())
