"""Where the shipped non-Python files are: grammars/*.lark and runtime/atrex_timeline.cuh.

Installed, they are the packages atrex_inject.grammars and atrex_inject.runtime (pyproject maps
the repository's top-level folders onto them); run from a source checkout without installing,
they are the top-level folders themselves.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path


def asset_dir(kind: str) -> Path:
    """kind: "grammars" or "runtime"."""
    try:
        return Path(str(resources.files(f"atrex_inject.{kind}")))
    except ModuleNotFoundError:
        return Path(__file__).resolve().parent.parent / kind
