"""Find the CUDA source string in a Python file (libcst) and refuse what cannot be instrumented.

The string is the value assigned to the spec's `cuda_string` variable, or else the only string
literal of the file holding `__global__`. It must be a literal whose text is the text the
compiler sees: plain, raw, triple-quoted or implicitly concatenated; an f-string, or a string
filled in with .format / % at run time, is refused (its braces or percent signs are templates,
and the inserted code would be read as fields).
"""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.metadata import ByteSpanPositionProvider, MetadataWrapper, PositionProvider

from ...errors import SpecError
from .literal import Literal, LiteralError

FILLERS = ("format", "format_map")  # methods that fill {fields}: refused
EDITORS = ("replace",)  # methods that edit the text at run time: warned about


@dataclass(frozen=True)
class Part:
    """One literal token of the string: its text, where it is in the file."""
    literal: Literal
    line: int  # line of the token's first character
    start: int  # byte offset of the token in the UTF-8 file
    end: int

    def line_at(self, v: int) -> int:
        """The file line of value offset `v` of this token."""
        lit = self.literal
        return self.line + lit.token[:len(lit.prefix) + len(lit.quote) + lit.body_offset(v)].count("\n")


@dataclass(frozen=True)
class CudaString:
    parts: tuple[Part, ...]
    name: str | None  # the variable it is assigned to, if any
    line: int
    warnings: tuple[str, ...]

    @property
    def value(self) -> str:
        return "".join(p.literal.value for p in self.parts)

    def split(self, v: int) -> tuple[int, int]:
        """(part index, offset in that part's value) of value offset v; a part boundary belongs to
        the part that ends there, so text inserted there follows the earlier token."""
        at = 0
        for i, p in enumerate(self.parts):
            n = len(p.literal.value)
            if v <= at + n:
                return i, v - at
            at += n
        raise IndexError(v)

    def line_of(self, v: int) -> int:
        i, local = self.split(v)
        p = self.parts[i]
        if local == len(p.literal.value) and i + 1 < len(self.parts):
            return self.parts[i + 1].line_at(0)  # a line's first character, in the next token
        return p.line_at(local)


class _Collect(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider, ByteSpanPositionProvider)

    def __init__(self):
        self.strings: list[cst.BaseExpression] = []  # whole string expressions, outermost only
        self.assigned: list[tuple[str, cst.BaseExpression]] = []  # (variable, value)
        self.calls: list[tuple[str, cst.BaseExpression, cst.CSTNode]] = []  # (method or "%", receiver, node)

    def visit_SimpleString(self, node):
        self.strings.append(node)

    def visit_ConcatenatedString(self, node):
        self.strings.append(node)
        return False

    def visit_FormattedString(self, node):
        self.strings.append(node)
        return False

    def visit_Assign(self, node):
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                self.assigned.append((t.target.value, node.value))

    def visit_AnnAssign(self, node):
        if isinstance(node.target, cst.Name) and node.value is not None:
            self.assigned.append((node.target.value, node.value))

    def visit_Call(self, node):
        f = node.func
        if isinstance(f, cst.Attribute) and f.attr.value in FILLERS + EDITORS:
            self.calls.append((f.attr.value, f.value, node))

    def visit_BinaryOperation(self, node):
        if isinstance(node.operator, cst.Modulo):
            self.calls.append(("%", node.left, node))


def _flatten(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(node, cst.ConcatenatedString):
        return _flatten(node.left) + _flatten(node.right)
    return [node]


def _is_string(node) -> bool:
    return isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))


def locate(text: str, rel: str, path: str, variable: str | None) -> CudaString:
    """The CUDA string of `text` (the Python file `rel`, at `path`)."""
    try:
        wrapper = MetadataWrapper(cst.parse_module(text), unsafe_skip_copy=True)
    except cst.ParserSyntaxError as e:
        raise SpecError(f"{rel} is not Python libcst can read: {e.message}", path=path, line=e.raw_line,
                        hint="fix the syntax (the file must run as it is before it can be instrumented)") from None
    col = _Collect()
    wrapper.visit(col)
    pos, span = wrapper.resolve(PositionProvider), wrapper.resolve(ByteSpanPositionProvider)

    def line(node) -> int:
        return pos[node].start.line

    if variable is not None:
        found = [v for n, v in col.assigned if n == variable]
        if not found:
            names = sorted({n for n, v in col.assigned
                            if _is_string(v) and "__global__" in cst.Module([]).code_for_node(v)})
            raise SpecError(f"{rel} assigns nothing to {variable!r} (the spec's cuda_string)", path=path,
                            hint=f"variables holding a __global__ kernel there: {', '.join(names) or 'none'}")
        if len(found) > 1:
            raise SpecError(f"{rel} assigns {variable!r} {len(found)} times (lines "
                            f"{', '.join(str(line(v)) for v in found)}); which one is compiled depends on the run",
                            path=path, line=line(found[1]), hint="keep one assignment of the CUDA string")
        node = found[0]
        if not _is_string(node):
            raise SpecError(f"{variable} is assigned an expression, not a string literal", path=path, line=line(node),
                            hint="assign the CUDA source as one literal (plain, raw, triple-quoted or implicitly "
                                 "concatenated), so the text the compiler sees is the text in the file")
    else:
        cands = [s for s in col.strings if "__global__" in cst.Module([]).code_for_node(s)]
        if len(cands) != 1:
            where = ", ".join(f"line {line(s)}" for s in cands)
            raise SpecError(f"{rel} has {len(cands)} string literals holding a __global__ kernel"
                            f"{' (' + where + ')' if cands else ''}; the CUDA route needs exactly one", path=path,
                            line=line(cands[1]) if cands else None,
                            hint='name the variable holding it in the spec: cuda_string = "NAME"' if cands else
                            "keep the CUDA source in a string literal of this file (load_inline, NVRTC, CuPy)")
        node = cands[0]
        variable = next((n for n, v in col.assigned if v is node), None)
    tokens = _flatten(node)
    for t in tokens:
        if isinstance(t, cst.FormattedString):
            raise SpecError("the CUDA string is an f-string: its {fields} are filled in at run time, so the text "
                            "the compiler sees is not the text in the file", path=path, line=line(t),
                            hint="write the CUDA source as a plain or raw string; pass run-time values as kernel "
                                 "arguments or -D options")
    data, parts = text.encode(), []
    for t in tokens:
        try:
            lit = Literal.parse(t.value)
        except LiteralError as e:
            raise SpecError(f"the CUDA string is {e}", path=path, line=line(t),
                            hint="write the CUDA source as a str literal (encode it where a compiler wants bytes)")
        s = span[t]  # the node's span, which holds its parentheses, if any
        start = data.find(t.value.encode(), s.start, s.start + s.length)
        parts.append(Part(lit, data.count(b"\n", 0, start) + 1, start, start + len(t.value.encode())))
    warnings = []
    for method, receiver, call in col.calls:
        if not (receiver is node or (variable and isinstance(receiver, cst.Name) and receiver.value == variable)):
            continue
        if method in FILLERS or method == "%":
            use = f".{method}(...)" if method != "%" else " % ..."
            raise SpecError(f"the CUDA string is filled in with {variable or 'the literal'}{use} at run time: the "
                            f"inserted code would be read as template fields", path=path, line=line(call),
                            hint="write the filled-in values into the CUDA source (or pass them as kernel arguments "
                                 "or -D options) so the text in the file is the text the compiler sees")
        warnings.append(f"{rel}:{line(call)}: {variable or 'the CUDA string'}.{method}(...) edits the CUDA text at "
                        f"run time; the compiled text then differs from the instrumented one the manifest names")
    return CudaString(tuple(parts), variable, line(node), tuple(warnings))


def marked_value(text: str, marker: str) -> str | None:
    """The value of the file's string literal holding `marker` (the instrumented CUDA string), or
    None when no literal holds it or the file does not parse."""
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None
    col = _Collect()
    MetadataWrapper(module, unsafe_skip_copy=True).visit(col)
    for node in col.strings:
        try:
            value = "".join(Literal.parse(t.value).value for t in _flatten(node))
        except (LiteralError, AttributeError):  # f-strings and bytes hold no instrumented CUDA
            continue
        if marker in value:
            return value
    return None
