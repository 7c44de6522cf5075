"""Loads the Lark grammars shipped with the package (grammars/ in the source tree)."""
from __future__ import annotations

from functools import cache

from lark import Lark

from .assets import asset_dir


def grammar_text(name: str) -> str:
    return (asset_dir("grammars") / name).read_text()


@cache
def parser(name: str, *starts: str, postlex: type | None = None) -> Lark:
    """An LALR parser with positions; built once per process (about 0.1 s)."""
    return Lark(grammar_text(name), parser="lalr", start=list(starts) or ["start"], propagate_positions=True,
                maybe_placeholders=False, postlex=postlex() if postlex else None)
