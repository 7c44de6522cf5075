"""What the compiler made of a kernel's loops, read from its SASS (no GPU needed).

The probes' worst cost is indirect: their presence can make nvcc give up unrolling a loop, and with
it the loads a clean kernel keeps in flight (docs/design.md). So the check compares loops,
not instruction totals: a loop is the span between a backward branch and its target, and each is
described by how many memory and tensor instructions of each kind it issues per trip and how many
of its global loads are in flight before the first use of one. The clean side of an instrumented
kernel's copy must contain every loop of the clean kernel with the same counts and loads in flight.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .errors import AtrexError
from .sassrecord import (Comparison, FewerInFlight, Figures, LocalAccesses, MissingLoop, MoreInFlight,
                         Occupancy)

# Opcode families whose count per trip says how much work a loop keeps in flight, and the local
# loads and stores of spilled registers: a clean side that keeps a loop's loads in flight by
# spilling is not the clean loop.
FAMILIES = ("LDG", "LDGSTS", "STG", "LDS", "STS", "HMMA", "LDSM", "UTMALDG", "HGMMA", "LDL", "STL")
_INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
# a branch's target, after the second predicate ptxas may give it (`@P0 BRA P1, 0x7d0`: taken when both hold)
_TARGET = re.compile(r"^\s*(?:!?U?P[T0-9]+\s*,\s*)?(?:`\()?0x([0-9a-f]+)")
_SECOND_PREDICATE = re.compile(r"BRA !?U?P\d")  # `BRA P1, 0x...` without a guard: taken when P1 holds
_FUNC = re.compile(r"Function : (\S+)")


@dataclass(frozen=True)
class Loop:
    start: int  # address of the branch target (first instruction of the loop)
    end: int  # address of the backward branch
    ops: tuple[str, ...]  # opcodes in [start, end], with their modifiers
    in_flight: int = 0  # global loads issued in a trip before the first use of one's result

    def count(self, family: str) -> int:
        """Instructions of one family per trip: `LDG` counts LDG.E.128 and friends, not LDGSTS."""
        return sum(1 for o in self.ops if o.split(".")[0] == family)

    @property
    def signature(self) -> tuple[int, ...]:
        return tuple(self.count(f) for f in FAMILIES)


_REG = re.compile(r"\bR(\d+)\b")
_WIDTH = {"64": 2, "128": 4}


def loads_in_flight(body: list[Insn]) -> int:
    """How many global loads a loop trip issues before an instruction reads the result of one of
    them: the memory-level parallelism a memory-bound loop lives on (four unrolled 16-byte loads
    issued together, against two when the schedule interleaves their uses). SASS names a load's
    destination first and a store's registers are all sources; a wide load writes 2 or 4
    consecutive registers."""
    pending: set[int] = set()
    issued = 0
    for _, op, whole in body:
        args = whole.split(op, 1)[1].rstrip(" ;") if op in whole else ""
        operands = args.split(",")
        writes_first = not op.startswith(("ST", "RED", "ATOM", "BRA"))
        read = set(map(int, _REG.findall(",".join(operands[1:] if writes_first else operands))))
        if read & pending:
            break
        if op.split(".")[0] == "LDG":
            first = _REG.search(operands[0])
            if first:
                width = next((_WIDTH[m] for m in op.split(".") if m in _WIDTH), 1)
                pending |= set(range(int(first.group(1)), int(first.group(1)) + width))
                issued += 1
    return issued


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


Insn = tuple[int, str, str]  # address, opcode with modifiers (predicate dropped), the whole instruction


def _cuobjdump(cubin: Path, what: str) -> str:
    """cuobjdump's `-sass` or `-elf` text of a cubin (its own bin/ on PATH, for the tools it runs)."""
    tool = cuobjdump()
    env = dict(os.environ, PATH=str(Path(tool).parent) + os.pathsep + os.environ.get("PATH", ""))
    out = subprocess.run([tool, what, str(cubin)], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise AtrexError(f"cuobjdump failed on {cubin}: {out.stderr.strip()}", path=str(cubin))
    return out.stdout


def disassemble(cubin: Path) -> dict[str, list[Insn]]:
    """Function (mangled name) -> its instructions."""
    return parse(_cuobjdump(cubin, "-sass"))


def parse(text: str) -> dict[str, list[Insn]]:
    """cuobjdump -sass text -> function (mangled name) -> its instructions; a branch's opcode is
    `BRA>target` (its address, decimal)."""
    funcs: dict[str, list[Insn]] = {}
    cur = None
    for line in text.splitlines():
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
            cur.append((int(m.group(1), 16), op, " ".join(m.group(0).split()[1:])))
    return funcs


def loops(insns: list[Insn]) -> list[Loop]:
    """Every backward branch and the instructions it repeats, innermost spans included. A span
    holding an EXIT is not a loop: it is out-of-line code (a barrier's retry stub placed after the
    kernel's end) jumping back into the body."""
    out = []
    for addr, op, _ in insns:
        if op.startswith("BRA>"):
            target = int(op[4:])
            body = [i for i in insns if target <= i[0] <= addr]
            ops = tuple(o for _, o, _ in body)
            if target <= addr and "EXIT" not in ops:
                out.append(Loop(target, addr, ops, loads_in_flight(body)))
    return out


_SOURCE_NAME = re.compile(r"(\d+)")


def qualified_name(mangled: str) -> tuple[str, ...] | None:
    """The source names of a function's (possibly nested) name, read from its Itanium mangling
    (`_Z[L]<len><name>[I…E]<params>` or `_Z[L]N<len><name>…[I…E]E<params>`), anonymous namespaces
    dropped: `_Z1kiPf` -> ("k",), `_ZN4slow4stepIfEEvPT_` -> ("slow", "step"). Reading stops at the
    function's template arguments or its parameters, which are never read, so a kernel whose first
    parameter is a scalar (`i`, `f`, `x`, `b`, a struct's `<len><name>`) is found like any other.
    A kernel is a free function, so only its own name can carry template arguments. None: not a
    mangled name (an `extern "C"` kernel's name is its own)."""
    got = _read_name(mangled)
    return got[0] if got else None


def _read_name(mangled: str) -> tuple[tuple[str, ...], int] | None:
    """qualified_name's names, and where the name ends in `mangled` (its template arguments' `I`,
    a nested name's `E`, or its parameters)."""
    m = re.match(r"_ZL?(N)?(St)?", mangled)
    if not m:
        return None
    nested, i = m.group(1) is not None, m.end()
    names = ["std"] if m.group(2) else []
    while True:
        d = _SOURCE_NAME.match(mangled, i)
        if not d:
            return None
        n, i = int(d.group()), d.end()
        if i + n > len(mangled):
            return None
        if not mangled.startswith("_GLOBAL__N", i):
            names.append(mangled[i:i + n])
        i += n
        if not nested or mangled.startswith(("I", "E"), i):
            return (tuple(names), i) if names else None


# builtin types of the Itanium mangling: one letter each
_BUILTIN = set("vwbcahstijlmxynofdeg")


def _skip_type(m: str, i: int) -> int | None:
    """The end of the type encoded at m[i] (a builtin, a source name, a nested name, a qualified,
    pointer or reference type, a substitution), each with its template arguments; None for what
    this reader does not know."""
    if i >= len(m):
        return None
    c = m[i]
    if c in _BUILTIN:
        return i + 1
    if c in "PRKVO":
        return _skip_type(m, i + 1)
    if c.isdigit():
        d = _SOURCE_NAME.match(m, i)
        i = d.end() + int(d.group())
        return _skip_args(m, i) if m.startswith("I", i) else i
    if c == "N":
        i += 1
        while i < len(m) and m[i] != "E":
            if m[i] in "KV":
                i += 1
                continue
            i = _skip_type(m, i) if m[i].isdigit() or m[i] == "S" else None
            if i is None:
                return None
            if m.startswith("I", i):
                i = _skip_args(m, i)
                if i is None:
                    return None
        return i + 1 if i < len(m) else None
    if c == "S":
        e = re.match(r"S[0-9A-Z]*_|St|Sa|Sb|Ss|Si|So|Sd", m[i:])
        if not e:
            return None
        i += e.end()
        return _skip_args(m, i) if m.startswith("I", i) else i
    return None


def _skip_args(m: str, i: int) -> int | None:
    """The end of a template argument list `I…E` at m[i]."""
    args = _template_args(m, i)
    return None if args is None else args[1]


def _template_args(m: str, i: int) -> tuple[list[str | None], int] | None:
    """The arguments of the list `I…E` at m[i], and its end: a literal of a builtin integer type as
    its value (`Lj128E` -> "128", `Lb0E` -> "0", `Lin3E` -> "-3"), any other argument None."""
    if not m.startswith("I", i):
        return None
    i += 1
    out: list[str | None] = []
    while i < len(m) and m[i] != "E":
        lit = re.match(r"L([bcahstijlmxy])(n?)(\d+)E", m[i:])
        if lit:
            out.append(("-" if lit.group(2) else "") + lit.group(3))
            i += lit.end()
            continue
        if m[i] in "LXJ":  # another literal, an expression, a pack: this reader stops
            return None
        i = _skip_type(m, i)
        if i is None:
            return None
        out.append(None)
    return (out, i + 1) if i < len(m) else None


def template_args(mangled: str) -> list[str | None] | None:
    """The template arguments of a function template's instantiation, read from its mangled name
    (qualified_name's grammar, then `I…E`): an integer or bool literal as its value, a type or any
    other argument None. None: not an instantiation this reader can read (no arguments, or an
    encoding it does not know), so no caller mistakes one argument for another."""
    name = _read_name(mangled)
    got = _template_args(mangled, name[1]) if name else None
    return got[0] if got else None


def matches(funcs, kernel: str) -> list[str]:
    """The functions (mangled names) whose name is the kernel's, by the structure of their mangled
    names (qualified_name): `step` matches `slow::step` and `step`, `slow::step` only the nested
    one; an `extern "C"` kernel, or one instantiation, by its (mangled) name itself. A template
    kernel matches once per instantiation."""
    if kernel in funcs:
        return [kernel]
    want = tuple(kernel.split("::"))
    return [k for k in funcs if (qualified_name(k) or ())[-len(want):] == want]


def instances(clean: "Build", inst: "Build", kernel: str, clone: str) -> list[tuple[str, str]]:
    """(the kernel, its copy) as the SASS names them: the names themselves for one function, or,
    for a template kernel instantiated more than once (a dispatch on the vector width), each
    instantiation's mangled name and its copy's, the same template arguments with the copy's name."""
    hits = matches(clean.funcs, kernel)
    if len(hits) <= 1:
        return [(kernel, clone)]
    last, copy_last = kernel.split("::")[-1], clone.split("::")[-1]
    pairs = []
    for h in sorted(hits):
        copy = re.sub(rf"(?<!\d){len(last)}{re.escape(last)}(?=I)", f"{len(copy_last)}{copy_last}", h, count=1)
        if copy not in inst.funcs:
            raise AtrexError(f"kernel {kernel!r}'s instantiation {h} has no copy {copy} in the instrumented SASS")
        pairs.append((h, copy))
    return pairs


def function(funcs: dict[str, list[Insn]], kernel: str) -> list[Insn]:
    """The one function whose name is the kernel's (matches)."""
    hits = matches(funcs, kernel)
    if len(hits) != 1:
        raise AtrexError(f"kernel {kernel!r} matches {len(hits)} functions in the SASS: {sorted(funcs)}")
    return funcs[hits[0]]


def describe(l: Loop) -> str:
    parts = [f"{l.count(f)} {f}" for f in FAMILIES if l.count(f)]
    flight = f", {l.in_flight} in flight" if l.count("LDG") else ""
    return f"loop 0x{l.start:04x}-0x{l.end:04x} ({len(l.ops)} instructions: {', '.join(parts)}{flight})"


def _timed(insns: list[Insn]) -> set[int]:
    """Addresses of the instructions that can reach a `%globaltimer` read, or be reached from one,
    following branches (not calls: a callee's code is reached only through its CALL). In a
    versioned copy that is the recording side (and the guard before it); the clean side reaches no
    timer read and none reaches it, wherever ptxas lays the two out."""
    at = {a: i for i, (a, _, _) in enumerate(insns)}
    succ: list[list[int]] = []
    for i, (_, op, whole) in enumerate(insns):
        predicated = whole.startswith("@") or _SECOND_PREDICATE.match(whole) is not None
        nxt = [i + 1] if i + 1 < len(insns) else []
        if op.startswith("BRA>"):
            target = at.get(int(op[4:]))
            succ.append(([target] if target is not None else []) + (nxt if predicated else []))
        elif op.startswith(("EXIT", "RET", "BRA")) and not predicated:
            succ.append([])
        else:
            succ.append(nxt)
    pred: list[list[int]] = [[] for _ in insns]
    for i, ss in enumerate(succ):
        for j in ss:
            pred[j].append(i)
    timers = [i for i, (_, _, whole) in enumerate(insns) if "SR_GLOBALTIMER" in whole]

    def reach(edges: list[list[int]]) -> set[int]:
        seen, todo = set(timers), list(timers)
        while todo:
            for j in edges[todo.pop()]:
                if j not in seen:
                    seen.add(j)
                    todo.append(j)
        return seen

    return {insns[i][0] for i in reach(succ) | reach(pred)}


def _local(insns: list[Insn]) -> int:
    """Local-memory loads and stores (spilled registers, stack) among these instructions."""
    return sum(1 for _, op, _ in insns if op.split(".")[0] in ("LDL", "STL"))


def sides(insns: list[Insn]) -> tuple[list[Loop], list[Loop]]:
    """(clean side, recording side): the copy's loops split by whether a timer read is reachable
    from or to them (_timed). A copy that is not versioned has no clean side."""
    timed = _timed(insns)
    clean, recording = [], []
    for l in loops(insns):
        (recording if any(l.start <= a <= l.end for a in timed) else clean).append(l)
    return clean, recording


def compare_loops(clean: list[Loop], copy: tuple[list[Loop], list[Loop]]) -> tuple[list[MissingLoop],
                                                                                 list[FewerInFlight]]:
    """(missing, fewer): the copy's clean side should hold every loop of the clean kernel, with the
    same memory and tensor instructions per trip and as many global loads in flight; `fewer` lists
    the recording side's copies of a clean loop that keep fewer of its loads in flight, which
    recording CTAs then run slower (loads in flight there depend on where the recorder's state
    lives). `copy` is (clean side, recording side), from sides()."""
    def key(l: Loop) -> tuple:
        return l.signature, l.in_flight

    have = Counter(key(l) for l in copy[0] if any(l.signature))
    want = Counter(key(l) for l in clean if any(l.signature))
    missing = [MissingLoop(tuple(zip(FAMILIES, s)), f, n - have[(s, f)],
                           tuple(sorted(f2 for s2, f2 in have.elements() if s2 == s)))
               for (s, f), n in want.items() if have[(s, f)] < n]
    rest = Counter(key(l) for l in copy[1] if any(l.signature))  # the recording side's loops
    fewer = [FewerInFlight(describe(l), l.in_flight, f)
             for l in clean if l.count("LDG")
             for (s, f) in sorted(set(rest.elements())) if s == l.signature and f < l.in_flight]
    return missing, fewer


def probed(insns: list[Insn], recording: list[Loop]) -> list[Loop]:
    """The recording side's loops with a `%globaltimer` read in their own body: the loops that
    carry probes (a strip-mined trip, a loop recorded every iteration), not those merely reached."""
    timers = [a for a, _, whole in insns if "SR_GLOBALTIMER" in whole]
    return [l for l in recording if any(l.start <= a <= l.end for a in timers)]


def shorter_trips(clean: list[Loop], probes: list[Loop]) -> list[FewerInFlight]:
    """Probed loops whose trip has fewer global loads than a clean loop's, a whole fraction of them
    (a strip-mined trip of `every` iterations below the clean loop's unroll, or a probed loop
    ptxas no longer unrolls), that keep fewer of them in flight: recording CTAs run that loop with
    less memory-level parallelism than the clean kernel (`reduce_sumsq` at every = 2: 2 loads in
    flight against 4). The same entries as compare_loops' `fewer`, with the probed loop."""
    return [FewerInFlight(describe(c), c.in_flight, p.in_flight, describe(p))
            for c in clean if c.count("LDG")
            for p in probes if 0 < p.count("LDG") < c.count("LDG") and c.count("LDG") % p.count("LDG") == 0
            and p.in_flight < c.in_flight]


def more_in_flight(clean: list[Loop], recording: list[Loop]) -> list[MoreInFlight]:
    """The recording side's loops that keep more global loads (LDG) in flight than any loop of the
    clean kernel: recording CTAs then run a loop the clean kernel does not, its intervals time that
    loop, and they may finish sooner than the CTAs they stand for. Two causes, told apart by `loads`
    (the loop's LDG per trip) against `clean_loads` (the most of a clean loop): more loads per trip is
    a strip-mined trip, its body written out `every` times and scheduled as one block
    (`reduce_sumsq` at every = 8: 8 loads, all in flight, against the clean loop's 4, 50 registers;
    on an H200 it recorded cheaper than at every = 4 because it is another loop); as many
    is a loop ptxas rescheduled for the copy's registers (`layernorm` on the global path). Loops of
    cp.async or TMA copies are not compared."""
    ldg = [l for l in clean if l.count("LDG")]
    most = max((l.in_flight for l in ldg), default=0)
    loads = max((l.count("LDG") for l in ldg), default=0)
    return [MoreInFlight(describe(l), l.in_flight, most, l.count("LDG"), loads)
            for l in recording if most and l.count("LDG") and l.in_flight > most]


@dataclass(frozen=True)
class Resources:
    """What ptxas reported for one function (-Xptxas -v)."""
    registers: int | None = None
    shared: int = 0  # static shared memory, bytes
    spills: int = 0  # spill stores + spill loads, bytes


def ptxas_resources(ptxas_log: str) -> dict[str, Resources]:
    """Registers, static shared memory and spills per function (mangled name), from ptxas' -v log."""
    current, found = None, {}
    for line in ptxas_log.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'|Function properties for (\S+)", line)
        if m:
            current = m.group(1) or m.group(2)
            found.setdefault(current, {})
        if current is None:
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            found[current].setdefault("spills", int(m.group(1)) + int(m.group(2)))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            found[current].setdefault("registers", int(m.group(1)))
            smem = re.search(r"(\d+) bytes smem", line)
            found[current].setdefault("shared", int(smem.group(1)) if smem else 0)
    return {k: Resources(**v) for k, v in found.items()}


_NV_INFO = re.compile(r"^\.nv\.info\.(\S+)")


def max_threads(elf_text: str) -> dict[str, int]:
    """Threads per block a kernel was compiled for (its __launch_bounds__: EIATTR_MAX_THREADS in the
    cubin's .nv.info section of that function), from `cuobjdump -elf`; absent without launch bounds."""
    current, attr, out = None, None, {}
    for line in elf_text.splitlines():
        m = _NV_INFO.match(line)
        if m:
            current = m.group(1)
            continue
        if "Attribute:" in line:
            attr = line.split("Attribute:", 1)[1].strip()
        elif "Value:" in line and attr == "EIATTR_MAX_THREADS" and current:
            dims = [int(x, 16) for x in line.split("Value:", 1)[1].split()]
            out[current] = dims[0] * dims[1] * dims[2] if len(dims) == 3 else dims[0]
            attr = None
    return out


@dataclass(frozen=True)
class Build:
    """One compiled source: its functions' SASS, resources and launch bounds, by mangled name."""
    funcs: dict[str, list[Insn]]
    resources: dict[str, Resources]
    threads: dict[str, int]  # __launch_bounds__ maximum threads per block

    def to_json(self) -> dict:
        return {"funcs": self.funcs, "resources": {k: vars(v) for k, v in self.resources.items()},
                "threads": self.threads}

    @classmethod
    def of_json(cls, obj) -> "Build":
        """A build as to_json wrote it; ValueError naming what is not (a cache entry damaged or
        edited: every function's instructions, and resources with integer registers for each)."""
        def check(ok: bool, what: str) -> None:
            if not ok:
                raise ValueError(what)

        check(isinstance(obj, dict) and all(isinstance(obj.get(k), dict) for k in ("funcs", "resources", "threads")),
              "not an object with funcs, resources and threads")
        for name, insns in obj["funcs"].items():
            check(isinstance(insns, list) and all(isinstance(i, list) and len(i) == 3 and type(i[0]) is int
                                                  and all(isinstance(x, str) for x in i[1:]) for i in insns),
                  f"the instructions of {name} are not [address, opcode, text] triples")
            r = obj["resources"].get(name)
            check(isinstance(r, dict) and set(r) == {"registers", "shared", "spills"}
                  and all(type(v) is int and v >= 0 for v in r.values()),
                  f"the resources of {name} are not integer registers, shared and spills")
        check(all(type(v) is int for v in obj["threads"].values()), "a launch bound is not an integer")
        return cls({k: [tuple(i) for i in v] for k, v in obj["funcs"].items()},
                   {k: Resources(**v) for k, v in obj["resources"].items()}, dict(obj["threads"]))

    def kernel(self, name: str) -> tuple[list[Insn], Resources, int | None]:
        f = function(self.funcs, name)
        mangled = next(k for k, v in self.funcs.items() if v is f)
        return f, self.resources.get(mangled, Resources()), self.threads.get(mangled)


_TORCH_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](?:torch|ATen|c10)/', re.M)


def includes_torch(text: str) -> bool:
    return _TORCH_INCLUDE.search(text) is not None


def torch_include_dirs(text: str) -> list[str]:
    """The include folders a torch extension is built with (torch.utils.cpp_extension.include_paths(),
    as load_inline passes them to nvcc, and Python's, which torch/extension.h includes), when `text`
    includes torch's headers and torch is importable; otherwise none."""
    if not _TORCH_INCLUDE.search(text):
        return []
    try:
        from torch.utils.cpp_extension import include_paths  # noqa: PLC0415
    except Exception:  # noqa: BLE001 - not installed, or an install that does not import: nvcc then names the header
        return []
    import sysconfig  # noqa: PLC0415
    return [*map(str, include_paths()), sysconfig.get_paths()["include"]]


def nvcc() -> str:
    """nvcc from PATH (ATREX_NVCC names another); AtrexError when there is none."""
    found = os.environ.get("ATREX_NVCC") or shutil.which("nvcc")
    if not found:
        raise AtrexError("nvcc is not on PATH", hint="put CUDA's nvcc on PATH, or set ATREX_NVCC to it")
    return found


def build(src: Path, include: list[str], flags: list[str], cwd: Path | None = None,
          hint: str = "pass the flags your build uses with --nvcc-flag") -> Build:
    """Compile `src` (a copy of a source; `include`: its own folder, then any others) to a cubin and
    read it; `cwd`: where the build's relative paths (-I in `flags`) are read from; `hint` goes with
    nvcc's error."""
    from .assets import asset_dir  # noqa: PLC0415

    cubin = src.with_suffix(".cubin")
    folders = [str(asset_dir("runtime")), *include]
    cmd = [nvcc(), "-cubin", "-Xptxas", "-v", *(f"-I{d}" for d in folders), *flags, "-o", str(cubin), str(src)]
    cached = _cache_path(src, folders, flags, cwd)
    if cached is not None and cached.is_file():
        try:
            return Build.of_json(json.loads(cached.read_text()))
        except (OSError, ValueError) as e:  # damaged or edited: built again, and said
            sys.stderr.write(f"atrex: the build cache entry {cached} is not a build ({e}); building it again\n")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    except OSError as e:
        raise AtrexError(f"cannot run nvcc: {e}", hint="put CUDA's nvcc on PATH") from None
    if p.returncode != 0:
        raise AtrexError(f"nvcc failed on {src.name}: {p.stderr.strip()[-1500:]}", path=str(src), hint=hint)
    built = Build(disassemble(cubin), ptxas_resources(p.stderr), max_threads(_cuobjdump(cubin, "-elf")))
    if cached is not None:
        from .fsio import write_atomic  # noqa: PLC0415
        try:
            write_atomic(cached, json.dumps(built.to_json()).encode())
        except OSError:
            pass  # an unwritable cache is built again next time
    return built


BUILD_CACHE_ENV = "ATREX_BUILD_CACHE"  # a folder that keeps builds across runs (the tests' shared cache)


def _cache_path(src: Path, folders: list[str], flags: list[str], cwd: Path | None) -> Path | None:
    """Where a build is kept when BUILD_CACHE_ENV names a folder: keyed by dependency_digest, what
    the build reads, not where it lies: a cache for test runs, which compile the same sources from
    many copies of a project, not a build system. None without the folder, or when nvcc cannot list
    what the build reads."""
    root = os.environ.get(BUILD_CACHE_ENV)
    digest = dependency_digest(src, folders, flags, cwd) if root else None
    return None if digest is None else Path(root) / f"build-{digest[:32]}.json"


@functools.cache
def _nvcc_version(path: str) -> str:
    try:
        return subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    except OSError:
        return ""


def dependency_digest(src: Path, folders: list[str], flags: list[str], cwd: Path | None) -> str | None:
    """What a build of `src` (with -I `folders`, then `flags`, run in `cwd`) depends on, wherever its
    files lie: nvcc's version, the flags, and the content of every file the preprocessor reads for it,
    `src` first (`nvcc -M`: headers in subfolders, system headers, those only the device pass
    includes). A name nvcc lists that is no file is a `#line` directive's (an instrumented source
    names its clean file so): its name is keyed, not content. None when nvcc cannot list them, or a
    file it lists cannot be read: the build then fails and says why."""
    deps = _dependencies(src, folders, flags, cwd)
    if deps is None:
        return None
    h = hashlib.sha256(json.dumps([_nvcc_version(nvcc()), flags]).encode())
    for path, content in deps:
        h.update(b"#line " + path.encode() if content is None else content)
    return h.hexdigest()


# nvcc -M's answer for a unit's directives, flags and number of search folders, each file it listed
# kept as where it lies (the unit's folder, a search folder, or cwd: its root, and its name under
# it) with its content digest. Another unit of the same directives, in another scratch folder or
# another copy of the same project, reads the files at the same places under its own roots as long
# as each has the same content and no file of the same name has appeared in a root searched before
# its own (which would shadow it); otherwise nvcc is asked again. Candidate builds of one source
# differ only in their code, and the check of one build and the next differ only in their scratch
# folders, so one nvcc -M (a quarter of a second: it preprocesses the CUDA runtime twice) serves them all.
_LISTED: dict[tuple, list[tuple[int | None, str, bytes | None]]] = {}
SHADOW_DEPTH = 6  # a toolkit header's name with up to this many of its folders, looked for in each root


def _directives(text: str) -> tuple[str, ...]:
    """The preprocessor lines of `text` that decide what it reads: every directive, a `#line`'s
    number left out (an insertion moves it, the file it names is listed)."""
    return tuple(re.sub(r"^#\s*line\s+\d+", "#line", l.strip()) for l in text.splitlines()
                 if l.lstrip().startswith("#"))


def _roots(src: Path, folders: list[str], base: Path) -> list[Path]:
    """Where a build of `src` finds files, in search order: its folder, the search folders, cwd."""
    return [Path(os.path.normpath(p)) for p in (src.parent, *(base / f for f in folders), base)]


def _place(name: str, roots: list[Path], base: Path) -> tuple[int | None, str]:
    """(root, name under it) of a file nvcc listed; (None, the name) for one under no root."""
    path = Path(os.path.normpath(base / name))
    for i, root in enumerate(roots):
        if path.is_relative_to(root):
            return i, str(path.relative_to(root))
    return None, name


def _unchanged(listed: list[tuple[int | None, str, bytes | None]], roots: list[Path], base: Path) -> bool:
    """Whether every listed file is where, and what, it was for the unit it was listed for: the
    same content (a name no file had still has none), none shadowed by a root searched first. A
    file under no root (the toolkit's, the system's) is shadowed wherever a root holds a file of
    its name, or of its last folders and name (`cub/cub.cuh` beside a project's vendored copy):
    the directive's spelling is not in the listing, so every spelling it could have is looked for."""
    held = [set(os.listdir(r)) if r.is_dir() else set() for r in roots]  # what each root holds at its top
    for i, rel, content in listed:
        path = roots[i] / rel if i is not None else base / rel
        if content is None:
            if path.exists():
                return False
        elif _content(path) != content:
            return False
        elif i is not None and any((r / rel).exists() for r in roots[:i]):
            return False
        elif i is None:
            parts = Path(rel).parts
            for k in range(1, min(SHADOW_DEPTH, len(parts) - 1) + 1):
                if any(parts[-k] in top and r.joinpath(*parts[-k:]).exists() for r, top in zip(roots, held)):
                    return False
    return True


def _dependencies(src: Path, folders: list[str], flags: list[str], cwd: Path | None) -> list[tuple[str, bytes | None]] | None:
    """(name, sha256 of its content; None for a name no file has) of every file a build of `src`
    reads, `src` first; from _LISTED where its files are unchanged, else from `nvcc -M`."""
    try:
        text = src.read_bytes()
    except OSError:
        return None
    base = Path(cwd or ".")
    roots = _roots(src, folders, base)
    key = (nvcc(), len(folders), tuple(flags), _directives(text.decode(errors="replace")))
    here = [(str(src), hashlib.sha256(text).digest())]
    listed = _LISTED.get(key)
    if listed is not None and _unchanged(listed, roots, base):
        return here + [(rel if i is None or content is None else str(roots[i] / rel), content)
                       for i, rel, content in listed]
    cmd = [key[0], "-M", *(f"-I{d}" for d in folders), *flags, str(src)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    except OSError:
        return None
    if p.returncode != 0 or ":" not in p.stdout:
        return None
    rule = p.stdout.replace("\\\n", " ").split(":", 1)[1]  # `x.o : a.cu \<newline> b.h`, a space in a name as `\ `
    names = re.findall(r"(?:\\ |\S)+", rule)
    if not names or (base / names[0].replace("\\ ", " ")).resolve() != src.resolve():
        return None  # nvcc lists the source first
    out, kept = [], []
    for dep in names[1:]:
        name = dep.replace("\\ ", " ")
        path = base / name
        if not path.exists():  # `#line 1 "examples/cuda/k.cu"`: nvcc -M lists the name, which nothing reads
            out.append((name, None))
            kept.append((None, name, None))
            continue
        content = _content(path)
        if content is None:
            return None
        out.append((name, content))
        kept.append((*_place(name, roots, base), content))
    _LISTED[key] = kept
    return here + out


def _content(path: Path) -> bytes | None:
    try:
        return hashlib.sha256(path.read_bytes()).digest()
    except OSError:
        return None


REGISTERS_PER_SM, MAX_WARPS_PER_SM, MAX_CTAS_PER_SM = 65536, 64, 32  # sm_90
SHARED_PER_SM, SHARED_RESERVED_PER_CTA = 228 * 1024, 1024  # sm_90: bytes an SM holds; the system's per CTA


def allocated_registers(regs: int | None) -> int | None:
    """Registers a thread is given: allocation is in units of 8 per thread (256 per warp)."""
    return None if not regs else -(-regs // 8) * 8


def warps_by_registers(regs: int | None) -> int | None:
    """The most warps an SM holds at this many registers per thread (allocated in steps of 8): the
    occupancy bound registers set, before block size, shared memory and the grid."""
    if not regs:
        return None
    return min(MAX_WARPS_PER_SM, REGISTERS_PER_SM // (allocated_registers(regs) * 32))


def ctas_per_sm(regs: int | None, shared: int, threads: int | None) -> int | None:
    """CTAs of `threads` threads an SM holds at this many registers per thread and bytes of static
    shared memory per CTA (dynamic shared memory is set at launch and not counted); None when the
    block size or registers are unknown."""
    if not threads or not regs:
        return None
    warps = -(-threads // 32)
    limits = [MAX_CTAS_PER_SM, MAX_WARPS_PER_SM // warps, REGISTERS_PER_SM // (allocated_registers(regs) * 32 * warps)]
    if shared:
        limits.append(SHARED_PER_SM // (shared + SHARED_RESERVED_PER_CTA))
    return min(limits)


def compare(clean: Build, inst: Build, kernel: str, clone: str, threads: int | None = None) -> Comparison:
    """What the probes did to the kernel, read from the SASS of a clean and an instrumented build:
    - probes off: the instrumented build's kernel must be the clean build's kernel, instruction for
      instruction (the probes live in the copy K__atrex, launched only while recording);
    - CTAs that record nothing: the copy must hold every loop of the clean kernel, with the same
      memory and tensor instructions per trip and loads in flight (compare_loops);
    - recording CTAs: their loops that keep fewer loads in flight than the clean loop they stand for
      (a probed loop with a shorter trip too: shorter_trips), or more than any clean loop
      (more_in_flight);
    - resources: registers (they are the whole copy's, so a higher count changes occupancy even for
      its clean side), static shared memory, spills, and CTAs per SM at `threads` threads per block
      (the kernel's __launch_bounds__ when it has them)."""
    k_clean, r_clean, bound = clean.kernel(kernel)
    k_off, r_off, _ = inst.kernel(kernel)
    k_copy, r_copy, _ = inst.kernel(clone)
    threads = threads or bound
    found = loops(k_clean)
    copy_sides = sides(k_copy)
    timed = _timed(k_copy)
    short, fewer = compare_loops(found, copy_sides)
    return Comparison(
        off_identical=[i[2] for i in k_off] == [i[2] for i in k_clean],
        registers=Figures(r_clean.registers, r_off.registers, r_copy.registers),
        shared=Figures(r_clean.shared, r_off.shared, r_copy.shared),
        spills=Figures(r_clean.spills, r_off.spills, r_copy.spills),
        # local loads and stores: the clean kernel's, and those of the copy's clean side (the code
        # CTAs that record nothing run): spills the probes cause there cost every CTA
        local_accesses=LocalAccesses(_local(k_clean), _local([i for i in k_copy if i[0] not in timed])),
        threads_per_block=threads,
        ctas_per_sm=Occupancy(ctas_per_sm(r_clean.registers, r_clean.shared, threads),
                              ctas_per_sm(r_copy.registers, r_copy.shared, threads)),
        # the copy's registers are its clean side's too: a lower bound here means that where
        # registers limit occupancy, a recording run has fewer warps per SM than the clean kernel
        warps_per_sm_by_registers=Occupancy(warps_by_registers(r_clean.registers),
                                            warps_by_registers(r_copy.registers)),
        clean_loops=tuple(describe(l) for l in found if any(l.signature)),
        recording_fewer_in_flight=tuple(fewer + shorter_trips(found, probed(k_copy, copy_sides[1]))),
        recording_more_in_flight=tuple(more_in_flight(found, copy_sides[1])),
        missing=tuple(short))
