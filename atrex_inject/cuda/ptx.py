"""PTX inside inline asm: recover the template from its C string literals and list its instructions."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from lark import Token
from lark.exceptions import LarkError

from ..lark_loader import parser

_PREFIX = re.compile(r'^(?:u8|u|U|L)?')


@dataclass(frozen=True)
class PtxInstr:
    opcode: str
    guard: str | None
    text: str  # the instruction as written in the template


def template_of(string_tokens: list[str]) -> str:
    """Concatenate adjacent C string literals and decode their escapes (\\n, \\t, \\")."""
    parts = []
    for tok in string_tokens:
        body = _PREFIX.sub("", tok)
        if body.startswith('R"'):
            d = body[2:body.index("(")]
            parts.append(body[len(d) + 3: -len(d) - 2])
        else:
            parts.append(ast.literal_eval(body.replace("\\\n", "")))
    return "".join(parts)


def instructions(template: str) -> list[PtxInstr] | None:
    """The template's instructions in order; None for a template outside the grammar (an anchor
    error lists it, so a ptx anchor never misses it silently)."""
    try:
        tree = parser("ptx.lark").parse(template)
    except LarkError:
        return None
    out = []
    for node in tree.iter_subtrees_topdown():
        if node.data != "instr":
            continue
        guard = None
        op = None
        for c in node.children:
            if getattr(c, "data", None) == "guard":
                guard = "".join(t.value for t in c.scan_values(lambda v: isinstance(v, Token)))
            elif isinstance(c, Token) and op is None:
                op = c.value
        text = template[node.meta.start_pos:node.meta.end_pos] if not node.meta.empty else op
        out.append(PtxInstr(op, guard, " ".join(text.split())))
    return out


def unscoped(template: str) -> list[str]:
    """What the template declares at its top level, outside `{ }`: `.reg` registers, and labels not
    made unique with `%=`. Written twice in one function (two copies of a body, or of a loop),
    ptxas refuses them as defined twice; inside braces each copy has its own."""
    try:
        tree = parser("ptx.lark").parse(template)
    except LarkError:
        return []
    out = []
    for node in tree.children:
        first = node.children[0] if node.children else None
        if node.data == "instr" and isinstance(first, Token) and first.value == ".reg":
            out.append(" ".join(template[node.meta.start_pos:node.meta.end_pos].split()))
        elif node.data == "label" and "%=" not in first.value:
            out.append(f"{first.value}:")
    return out


def opcode_matches(opcode: str, pattern: str) -> bool:
    """`wgmma.commit_group` matches `wgmma.commit_group.sync.aligned`: dot-component prefix."""
    want = pattern.strip().split(".")
    have = opcode.split(".")
    return have[: len(want)] == want
