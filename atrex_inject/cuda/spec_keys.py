"""The spec keys only the cuda backend reads (registry entry `spec_keys`): the macro that declares
the kernel, the files that launch it, the Python variable holding CUDA source, and [build]. Read
through the spec's key reader (spec_table.py), so each refusal names its line like the rest."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..spec import BackendKeys
from ..spec_table import Table

BUILD_KEYS = {"nvcc_flags", "unit"}


@dataclass(frozen=True)
class CudaKeys(BackendKeys):
    declared_by: str | None = None  # a macro that declares the kernel: `MACRO(kernel, ...) { body }`
    cuda_string: str | None = None  # a Python source's variable holding the CUDA source (cuda/python/)
    nvcc_flags: tuple[str, ...] = ()  # [build] nvcc_flags: the kernel's build's flags (choice.py compiles with them)
    build_unit: Path | None = None  # [build] unit: the .cu that includes a header kernel and instantiates it


def parse(top: Table, source: Path) -> CudaKeys:
    """The cuda backend's keys of the spec's top-level table, in the order they are checked."""
    launchers = _launchers(top, source)
    declared_by = top.get("declared_by", str)
    if declared_by is not None and not re.fullmatch(r"[A-Za-z_]\w*", declared_by):
        raise top.error(f"declared_by {declared_by!r} must be the name of a macro", "declared_by",
                        hint='e.g. declared_by = "DEFINE_FLASH_FORWARD_KERNEL" for `DEFINE_FLASH_FORWARD_KERNEL(name, '
                             '...) {`')
    cuda_string = top.get("cuda_string", str)
    if cuda_string is not None and not cuda_string.isidentifier():
        raise top.error(f"cuda_string {cuda_string!r} must be a Python variable name", "cuda_string",
                        hint='e.g. cuda_string = "cuda_src" for `cuda_src = r"""..."""`')
    build = top.table("build")
    flags, unit = _build(build)
    return CudaKeys(launchers=launchers, declared_by=declared_by, cuda_string=cuda_string, nvcc_flags=flags,
                    build_unit=None if unit is None else build.path(unit, "unit"))


def _launchers(top: Table, source: Path) -> tuple[Path, ...]:
    """`launchers = ["main.cu", ...]`: files besides the source whose launches of the kernel are
    captured (a kernel in a header, launched from a .cu that includes it)."""
    out: list[Path] = []
    for rel in top.get("launchers", list, []):
        if not isinstance(rel, str):
            raise top.error(f"launchers must list file paths (strings), not {rel!r}", "launchers",
                            hint='launchers = ["main.cu"], relative to the spec')
        p = top.path(rel, "launchers")
        if p == source:
            raise top.error(f"launcher {rel!r} is the spec's source; its launches are captured anyway", "launchers",
                            hint="list only the other files that launch the kernel")
        if p in out:
            raise top.error(f"launcher {rel!r} is listed twice", "launchers")
        out.append(p)
    return tuple(out)


def _build(build: Table) -> tuple[tuple[str, ...], str | None]:
    """[build]: the nvcc flags of the kernel's build (relative paths read from the spec's folder),
    and the translation unit that includes a header kernel and instantiates it (a template kernel
    exists only as some .cu instantiates it: the recorder choice compiles that one)."""
    build.refuse_unknown(BUILD_KEYS)
    flags = build.get("nvcc_flags", list, [])
    if not all(isinstance(f, str) and f and f.isprintable() for f in flags):
        raise build.error("build.nvcc_flags must list nvcc's flags as strings", "nvcc_flags",
                          hint='e.g. nvcc_flags = ["-O3", "-gencode=arch=compute_90a,code=sm_90a", "-Iinclude"]')
    return tuple(flags), build.get("unit", str)
