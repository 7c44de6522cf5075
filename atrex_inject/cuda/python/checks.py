"""Validation's part for kernels launched from Python: the launches the hooks could not capture
(the folder's ledgers, hooks/ledger.py) as notes, and the source id of a `.py` instrumented source
for `validate --source` (registered through registry.CHECK_MODULES, checks.py).
"""
from __future__ import annotations

from ...checks import Folder, Route
from .hooks import ledger


def _not_captured(folder: Folder) -> list[str]:
    return ledger.notes(folder.path)


def _source_id(text: str) -> str:
    """rewrite.source_id_of_python, loaded only when a `.py` source is checked (it reads the file
    with the rewriter's locator)."""
    from .rewrite import source_id_of_python
    return source_id_of_python(text)


ROUTE = Route(notes=(_not_captured,), source_ids={".py": _source_id})
