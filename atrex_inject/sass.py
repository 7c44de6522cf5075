"""What the compiler made of a kernel's loops, read from its SASS (no GPU needed).

The probes' worst cost is indirect: their presence can make nvcc give up unrolling a loop, and with
it the loads a clean kernel keeps in flight (docs/perturbation.md). So the check compares loops,
not instruction totals: a loop is the span between a backward branch and its target, and each is
described by how many memory and tensor instructions of each kind it issues per trip. The clean
copy of an instrumented kernel must contain every loop of the clean kernel with the same counts.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .errors import AtrexError

# Opcode families whose count per trip says how much work a loop keeps in flight.
FAMILIES = ("LDG", "LDGSTS", "STG", "LDS", "STS", "HMMA", "LDSM", "UTMALDG", "HGMMA")
_INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
_TARGET = re.compile(r"^\s*(?:`\()?0x([0-9a-f]+)")
_FUNC = re.compile(r"Function : (\S+)")


@dataclass(frozen=True)
class Loop:
    start: int  # address of the branch target (first instruction of the loop)
    end: int  # address of the backward branch
    ops: tuple[str, ...]  # opcodes in [start, end], with their modifiers

    def count(self, family: str) -> int:
        """Instructions of one family per trip: `LDG` counts LDG.E.128 and friends, not LDGSTS."""
        return sum(1 for o in self.ops if o.split(".")[0] == family)

    @property
    def signature(self) -> tuple[int, ...]:
        return tuple(self.count(f) for f in FAMILIES)


def cuobjdump() -> str:
    """cuobjdump from PATH, or from the nvidia-cuda-cuobjdump wheel (a test dependency)."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import nvidia.cu13  # noqa: PLC0415  (the wheel's namespace package)
    except ImportError:
        raise AtrexError("cuobjdump is not installed", hint="pip install nvidia-cuda-cuobjdump, or put CUDA's bin/ on PATH")
    return str(Path(list(nvidia.cu13.__path__)[0]) / "bin" / "cuobjdump")


def disassemble(cubin: Path) -> dict[str, list[tuple[int, str]]]:
    """Function (mangled name) -> [(address, opcode with modifiers)], predicates dropped."""
    tool = cuobjdump()
    env = dict(os.environ, PATH=str(Path(tool).parent) + os.pathsep + os.environ.get("PATH", ""))
    out = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise AtrexError(f"cuobjdump failed on {cubin}: {out.stderr.strip()}", path=str(cubin))
    funcs: dict[str, list[tuple[int, str]]] = {}
    cur = None
    for line in out.stdout.splitlines():
        m = _FUNC.search(line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = _INSN.search(line)
        if m and cur is not None:
            op = m.group(3)
            target = _TARGET.match(m.group(4)) if op == "BRA" else None
            if target:
                op = f"BRA>{int(target.group(1), 16)}"
            cur.append((int(m.group(1), 16), op))
    return funcs


def loops(insns: list[tuple[int, str]]) -> list[Loop]:
    """Every backward branch and the instructions it repeats, innermost spans included. A span
    holding an EXIT is not a loop: it is out-of-line code (a barrier's retry stub placed after the
    kernel's end) jumping back into the body."""
    out = []
    for addr, op in insns:
        if op.startswith("BRA>"):
            target = int(op[4:])
            ops = tuple(o for a, o in insns if target <= a <= addr)
            if target <= addr and "EXIT" not in ops:
                out.append(Loop(target, addr, ops))
    return out


def function(funcs: dict[str, list[tuple[int, str]]], kernel: str) -> list[tuple[int, str]]:
    """The function whose (mangled) name holds the kernel's name."""
    hits = [k for k in funcs if re.search(rf"(^|[^A-Za-z0-9_]|\d){re.escape(kernel)}($|[^A-Za-z0-9_]|I|P|E|v)", k)
            or k == kernel]
    if len(hits) != 1:
        raise AtrexError(f"kernel {kernel!r} matches {len(hits)} functions in the SASS: {sorted(funcs)}")
    return funcs[hits[0]]


def missing_loops(clean: list[Loop], instrumented: list[Loop]) -> list[Loop]:
    """Loops of the clean kernel that the instrumented kernel has no loop for, with the same
    number of memory and tensor instructions per trip (its clean copy lost unrolling or overlap)."""
    have = Counter(l.signature for l in instrumented)
    out = []
    for l in clean:
        if not any(l.signature[i] for i in range(len(FAMILIES))):
            continue  # a loop with no memory or tensor work (a barrier spin) says nothing here
        if have[l.signature]:
            have[l.signature] -= 1
        else:
            out.append(l)
    return out


def describe(l: Loop) -> str:
    parts = [f"{l.count(f)} {f}" for f in FAMILIES if l.count(f)]
    return f"loop 0x{l.start:04x}-0x{l.end:04x} ({len(l.ops)} instructions: {', '.join(parts)})"
