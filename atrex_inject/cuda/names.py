"""C++ kernel names: the spec's `kernel` (a qualified name, maybe with template arguments), which
definition it chooses, and which launches name that kernel.

A name matches a definition by its trailing components (`step` matches `fast::step` and
`slow::step`; `slow::step` only the second; `::step` only one at file scope). Template arguments
are compared as written, whitespace squashed (`gemm<128, 64>` is `gemm<128,64>`): the rewriter
cannot evaluate `BM` to 128, and says so rather than guess.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import AnchorError

_IDENT = r"[A-Za-z_]\w*"
_NAME = re.compile(rf"^\s*(::)?\s*({_IDENT}(?:\s*::\s*{_IDENT})*)\s*(?:<(.*)>)?\s*$")


def squash_targs(text: str) -> str:
    """Template arguments without the whitespace that does not separate two words: `128, 64` ->
    `128,64`, `unsigned int` stays."""
    text = re.sub(r"\s+", " ", text.strip())
    return re.sub(r" ?([^\w ]) ?", r"\1", text)


@dataclass(frozen=True)
class KernelName:
    parts: tuple[str, ...]  # `slow::step` -> ("slow", "step")
    absolute: bool = False  # written with a leading `::`
    targs: str | None = None  # squashed template arguments: `gemm<128, 64>` -> "128,64"

    @classmethod
    def parse(cls, text: str) -> "KernelName":
        """Raises ValueError (with what is wrong) for anything but `[::]a::b[<args>]`."""
        m = _NAME.match(text)
        if not m or any(c in text for c in '"\\\n\r'):
            raise ValueError("is not a kernel name: write an identifier, a qualified name (`slow::step`) or a "
                             "template's name with its arguments (`gemm<128, 64>`)")
        targs = m.group(3)
        if targs is not None and (targs.count("<") != targs.count(">") or not targs.strip()):
            raise ValueError("has unbalanced or empty template arguments")
        parts = tuple(p.strip() for p in m.group(2).split("::"))
        return cls(parts, bool(m.group(1)), squash_targs(targs) if targs is not None else None)

    @property
    def base(self) -> str:
        return self.parts[-1]

    def matches(self, qualname: str) -> bool:
        have = tuple(qualname.split("::"))
        return have == self.parts if self.absolute else have[-len(self.parts):] == self.parts

    def __str__(self) -> str:
        return ("::" if self.absolute else "") + "::".join(self.parts) + (
            f"<{self.targs}>" if self.targs is not None else "")


def resolve(written: tuple[str, ...], absolute: bool, namespace: tuple[str, ...], usings: list[tuple[str, ...]],
            known: set[str]) -> str | None:
    """The qualified name C++ lookup gives `written` (a launch's kernel, a reference) at a place
    inside `namespace` with `usings` visible, among `known` kernel names; None when none is known."""
    if absolute:
        cands = ["::".join(written)]
    else:
        cands = ["::".join(namespace[:k] + written) for k in range(len(namespace), -1, -1)]
        cands += ["::".join(u + written) for u in usings]
    return next((c for c in cands if c in known), None)


def select_kernel(src, name: KernelName, occurrence: int | None, spec_path: str | None = None,
                  spec_line: int | None = None):
    """The one definition in `src` (a source.SourceFile) that `name` and `occurrence` choose, None
    when none matches. Several matches without `occurrence` are refused, listing them: kernels of
    the same name in two namespaces (write the qualified name), definitions under #if/#else,
    overloads or specializations (add occurrence, or name the specialization's arguments)."""
    found = [k for k in src.kernels if name.matches(k.qualname)]
    if name.targs is not None:
        exact = [k for k in found if k.targs == name.targs]
        found = exact or [k for k in found if k.template and k.targs is None]
        if not found and any(name.matches(k.qualname) for k in src.kernels):
            listing = ", ".join(f"{k.label} (line {k.line})" for k in src.kernels if name.matches(k.qualname))
            raise AnchorError(f"kernel {str(name)!r}: no definition in {src.path} takes these template arguments "
                              f"(found {listing}, none a template)", path=spec_path or src.path, line=spec_line,
                              hint="name the kernel without template arguments, or the template that has them")
    where = spec_path or src.path
    if occurrence is not None:
        if not 1 <= occurrence <= len(found):
            raise AnchorError(f"kernel {str(name)!r}: occurrence {occurrence} but {len(found)} definition(s) match in "
                              f"{src.path}" + (f": {_listing(found)}" if found else ""), path=where, line=spec_line,
                              hint=f"occurrence counts the matching definitions in source order, 1 to {len(found)}")
        return found[occurrence - 1]
    if len(found) <= 1:
        return found[0] if found else None
    if len({k.label for k in found}) == 1:
        raise AnchorError(f"kernel {str(name)!r} has {len(found)} __global__ definitions in {src.path} "
                          f"(lines {', '.join(str(k.line) for k in found)}), for example under #if/#else or overloads; "
                          "atrex-inject instruments exactly one definition",
                          path=src.path, line=found[1].line,
                          hint=f'choose one with occurrence: kernel = {{ name = "{name}", occurrence = N }} '
                               "(N counts these definitions in source order); launches of that name are then taken "
                               "for launches of the chosen one")
    example = found[0].label.replace(",", ", ")
    raise AnchorError(f"kernel {str(name)!r} names {len(found)} __global__ definitions in {src.path}: "
                      f"{_listing(found)}", path=where, line=spec_line,
                      hint=f'write the qualified name or the specialization (kernel = "{example}"), or add '
                           f'occurrence: kernel = {{ name = "{name}", occurrence = N }}')


def _listing(kernels) -> str:
    return ", ".join(f"{k.label} (line {k.line})" for k in kernels)
