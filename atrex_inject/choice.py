"""The recorder choice: which recorder mode records this spec's kernel without making it another
kernel (docs/guide.md, "Recorder modes"; the figures behind the rules: docs/design.md).

A recording run is evidence about the clean kernel only if the recording CTAs run the clean
kernel's code with probes added: the same registers (so the same occupancy), every clean loop, and
the loads in flight of the loops they time. Which recorder keeps that depends on the kernel: the
global path keeps each owner's slot range in registers from entry to exit, which takes registers
from a kernel that needs them; resident rings keep it in shared memory, which changes what ptxas
does to a kernel that has registers to spare. So, with nvcc, the tool compiles the candidates and
reads their SASS (sass.compare), and `problems` is the one place that says what disqualifies one.

The rules, in order:
Registers count as allocated (8 a thread) and matter through occupancy: where the block size is
known (the kernel's __launch_bounds__ or `[capture] warps`), when they change the CTAs an SM holds;
where it is not, when they lower the warps an SM can hold (only above 32 a thread). A tiny
kernel's copy may take more registers than it and keep its occupancy: its probes' calls need about
20, which `__maxnreg__` cannot lower. ptxas' schedule of the loops is checked loop by loop.

1. candidates: staged and resident rings need warp-level roles and the block size (the kernel's
   __launch_bounds__, or `[capture] warps`), and must fit a CTA's static shared memory;
2. preference: where a site records at every iteration of a loop, the per-event cost decides:
   staged rings record such loops in trips at 2 to 3 SASS instructions an event, resident rings at 5,
   the global path at 7; where some CTAs record nothing, a candidate whose copy loses CTAs per SM
   through its registers alone is compiled again held to the clean allocation before the next is
   tried, and taken where its SASS shows no problem (the same recorder and events: bench/probe_cost's
   mma loop with staged rings, 1 CTA in 2 recording, takes 37 registers against the clean loop's 27,
   6 CTAs per SM against 8, and held to 32 keeps 8 and spills 36 bytes around the unrolled trip,
   on its recording side); where every CTA records, that occupancy is the recording's own cost
   (rule 3), and the rings are taken as compiled (bench/probe_cost's barrier and mma loops on an
   H200: +14.8 to +15.7% and +2.2 to +2.7% as compiled, +15.5 to +16.6% and +2.3 to +3.1% held
   to 8 CTAs per SM, where the barrier loop's shared loads go one at a time); but where that
   loop waits at a CTA barrier and some CTAs record nothing, the global path comes first: a staged
   ring's copy-out holds every warp of a recording CTA at the barrier, and the kernel waits for its
   slowest CTA (the shared-memory GEMM's k-loop at 1 CTA in 64 recorded at +4.1% staged, +2.7%
   global, 8-byte events); with every CTA recording, the staged ring's cheaper event decides
   (bench/probe_cost's barrier loop, packed events: +14.8 to +15.7% staged, +19.0 to +19.6%
   global, docs/cost.md); elsewhere (sampled or straight-line sites, a bounded number of
   events an owner) the fixed cost decides: the global path has no rings to copy out at exit, staged
   rings copy out what is left, resident rings copy out every event;
3. the first candidate that keeps the kernel is chosen, and where every CTA records, the first whose
   SASS shows no problem (no CTA runs a clean side, so what the copy changes is the recording's own
   cost, for measure to weigh beside its probes'); where none is, each is compiled again with
   its copy's registers held to the clean kernel's allocation (`__maxnreg__` on the copy's head) and
   the first that keeps it, spills included, is chosen; where still none does, the first candidate
   SASS cannot decide ("unsure") that keeps the clean kernel's register allocation is kept (else
   the first unsure) and `measure` decides; where every candidate is another kernel, the first is
   kept and its problems are apply's warnings (check-sass fails on it).

A site at every trip of a loop leaves a kept copy unsure (`per_trip`): what its probe costs each
trip of a recording CTA SASS cannot weigh.

What SASS decides (`judge`, the one judgment apply and check-sass give): a change every CTA of a
recording run pays is a problem: probes off not the clean kernel, fewer CTAs per SM at the kernel's
block size (registers, shared memory) where some CTAs record nothing, more spills where CTAs that
record nothing run them. What SASS cannot weigh is a doubt: a change in the schedule of a loop (a
clean loop the copy no longer has as it was, fewer or more loads in flight where recording CTAs
time a loop; only the recording CTAs run it), spills on the recording side only (a copy held to the
clean kernel's registers: the CTAs that record nothing run the clean side without them; where every
CTA records, the whole copy is its recording side, and its spills, as its CTAs per SM, are costs
of the recording beside its probes'), static shared memory the copy adds to a
kernel whose dynamic shared memory is sized at launch, and more registers where the block size
is unknown (whether the launches fill an SM that far is the grid's). On public kernels
such copies measured within target as often as not (bench/realkernels, docs/realkernels.md), so
the SASS says "unsure" and `measure` decides.
Without nvcc the spec's recorder is the documented default, the global path, and apply says so.
"""
from __future__ import annotations

import json
import os
import posixpath
import re
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from . import __version__, registry, sass
# the choice's records, also known here to its callers (sasscheck, the tests)
from .choicerecord import ANOTHER, KEEPS, UNSURE, Choice, Evidence, describe, verdict  # noqa: F401
from .errors import AtrexError, SpecError
from .fsio import inside, sha256_bytes, write_atomic
from .plan import DEFAULT_PATH, BufferPath, RecorderMode, make_plan, requested_mode
from .sass import allocated_registers, dependency_digest
from .sassrecord import Comparison
from .spec import RECORDERS, ProbeSpec, every_trip

DEFAULT_FLAGS = ("-O3", "-gencode=arch=compute_90a,code=sm_90a", "-std=c++17")
CACHE_ENV = "ATREX_CHOICE_CACHE"  # a folder that keeps choices across projects (the tests' session cache)
# the choice's builds go in the machine's temp folder, never beside the source: a run killed while
# nvcc compiles leaves nothing in the user's tree
SCRATCH_PREFIX = ".atrex-choice-"


_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)


def _include_chain(launcher: str, path: Path, header: Path, search: list[Path],
                   depth: int = 4) -> list[tuple[str, Path]] | None:
    """How `launcher` (at `path`) reaches `header` through #includes, directly or through headers it
    includes (flashinfer's mamba kernel comes in through selective_state_update.cuh): each hop's
    place in a shadow tree and its file, the last `header`. A shadow copy of each hop, placed where
    the hop before it finds it, serves the rewritten text to the real build's include order. None
    where no chain of at most `depth` hops leads there. Breadth first: the shortest chain."""
    target = header.resolve()
    seen = {path.resolve()}
    level = [(launcher, path, "", [])]  # (text, file, its place in the shadow tree, the hops to it)
    for _ in range(depth):
        nxt = []
        for text, file, place, hops in level:
            for m in _INCLUDE.finditer(text):
                spelled = m.group(1)
                here = [] if not hops or m.group(0).rstrip().endswith(">") else [(file.parent, posixpath.dirname(place))]
                for base, at in [*here, *((d, "") for d in search)]:
                    found = base / spelled
                    if not found.is_file():
                        continue
                    spot = posixpath.normpath(posixpath.join(at, spelled))
                    if spot.startswith(".."):
                        break  # above the shadow tree's root: no copy can stand in for it
                    chain, real = [*hops, (spot, found)], found.resolve()
                    if real == target:
                        return chain
                    if real not in seen:
                        seen.add(real)
                        try:
                            nxt.append((found.read_text(errors="replace"), found, spot, chain))
                        except OSError:
                            pass
                    break  # the first folder that holds it is the one the preprocessor takes
        level = nxt
    return None


def held_mode(mode: RecorderMode, clean_registers: int, clean, kernel: str) -> RecorderMode:
    """The candidate compiled again with its copy's registers held to the clean kernel's allocation
    (rule 3): for a template kernel built in several instantiations whose template arguments can
    be read from their mangled names, each to its own, so that a heavy instantiation is not held
    to a light one's registers and made to spill; else to `clean_registers`, the judged one's."""
    hits = sorted(sass.matches(clean.funcs, kernel))
    args = [sass.template_args(h) for h in hits]
    held = ()
    if len(hits) > 1 and None not in args:
        held = tuple((tuple(a), allocated_registers(clean.kernel(h)[1].registers)) for h, a in zip(hits, args))
        held = held if all(r for _, r in held) else ()
    return replace(mode, max_registers=allocated_registers(clean_registers), held=held)


@dataclass
class Target:
    """What a choice compiles: the spec's clean CUDA source (a kernel.py's CUDA string, with the
    recorder runtime embedded as apply will embed it), the build's flags, and where it builds."""
    spec: ProbeSpec
    text: str
    runtime: str | None
    suffix: str
    flags: list[str]
    include: list[str] = field(default_factory=list)  # -I folders: the source's own, then torch's for an extension
    threads: int | None = None  # threads per block: [capture] warps, else the kernel's __launch_bounds__
    kernel: str = ""  # the kernel's qualified name as the SASS check looks it up
    not_uniform: str | None = None  # why a site may run on part of a warp (cuda/uniform.py): no staged rings
    barrier_loop: int | None = None  # line of a loop recorded every iteration that waits at a CTA barrier
    launchers: dict[str, str] = field(default_factory=dict)  # the spec's launchers: rel path -> clean text
    clean: object = field(default=None, repr=False)  # the clean build (sass.Build), once built
    built: dict = field(default_factory=dict, repr=False)  # RecorderMode -> (its rewrite, its sass.Build), as choose built them

    @classmethod
    def of(cls, spec: ProbeSpec, text: str, flags: list[str] | None = None,
           launchers: dict[str, str] | None = None) -> "Target":
        runtime, suffix = None, spec.source.suffix
        if suffix == ".py":  # CUDA source in a Python string (cuda/python/): its text, built as a .cu file
            from .cuda.python.locate import locate  # noqa: PLC0415
            from .cuda.python.rewrite import runtime_text  # noqa: PLC0415
            text = locate(text, spec.source_rel, str(spec.path), spec.backend_keys.cuda_string).value
            runtime, suffix = runtime_text(), ".cu"
        from .cuda.names import KernelName  # noqa: PLC0415
        from .sass import torch_include_dirs  # noqa: PLC0415
        return cls(spec, text, runtime, suffix, list(flags or spec.backend_keys.nvcc_flags or DEFAULT_FLAGS),
                   [str(spec.source.parent), *torch_include_dirs(text)], spec.capture.warps * 32 or None,
                   "::".join(KernelName.parse(spec.kernel).parts), launchers=dict(launchers or {}))

    def unit(self, tmp: Path, name: str, text: str, launchers: dict[str, str] | None = None) -> tuple[Path, list[str]]:
        """`text` written into `tmp` as the spec's source, the file nvcc compiles and the include
        folders it needs. A header is compiled through the launcher that includes it (`launchers`:
        their texts, as rewritten with `text`; default the clean ones), or else the spec's
        `[build] unit`, with `text` served first where that file's #include finds it: a template
        kernel exists only as some unit instantiates it, and its copy only as the rewritten launches
        (or the header's own launching code) do. Without either, a .cu that includes the header."""
        if self.suffix == ".cu":
            src = tmp / f"{name}.cu"
            src.write_text(text)
            return src, self.include
        texts = dict(launchers if launchers is not None else self.launchers)
        build_unit = self.spec.backend_keys.build_unit
        unit_rel = build_unit.relative_to(self.spec.root).as_posix() if build_unit else None
        if unit_rel and unit_rel not in texts and build_unit.is_file():  # [build] unit, as it is
            texts[unit_rel] = build_unit.read_text()
        for rel, launcher in texts.items():
            chain = _include_chain(launcher, self.spec.root / rel, self.spec.source, self._search(rel))
            if chain:
                shadow = tmp / name / "shadow"
                for i, (spot, file) in enumerate(chain):
                    (shadow / spot).parent.mkdir(parents=True, exist_ok=True)
                    (shadow / spot).write_text(text if i == len(chain) - 1 else file.read_text(errors="replace"))
                unit = tmp / name / Path(rel).name
                unit.write_text(launcher)
                # the headers copied on the way keep their own includes: their folders after the rest
                return unit, [str(shadow), *self.include, str((self.spec.root / rel).parent),
                              *dict.fromkeys(str(f.parent) for _, f in chain[:-1])]
        src = tmp / f"{name}{self.suffix}"
        src.write_text(text)
        unit = tmp / f"{name}.cu"
        unit.write_text(f'#include "{src.name}"\n')
        return unit, self.include

    def _search(self, rel: str) -> list[Path]:
        """Where a launcher's #include is looked for: its own folder, the include folders, the
        flags' -I folders (read from the spec's folder)."""
        here = self.spec.path.parent
        return [(self.spec.root / rel).parent, *map(Path, self.include),
                *(here / f[2:] for f in self.flags if f.startswith("-I") and len(f) > 2)]

    def build(self, tmp: Path, name: str, text: str, launchers: dict[str, str] | None = None):
        """Compile `text` as the spec's source (unit)."""
        from . import sass  # noqa: PLC0415
        torch = sass.includes_torch(self.text) and len(self.include) == 1
        unit, include = self.unit(tmp, name, text, launchers)
        return sass.build(unit, include, self.flags, cwd=self.spec.path.parent, hint=(
            "the source includes torch's headers and torch is not importable here: install torch (its include "
            "paths are then passed), or pass them with --nvcc-flag=-I<folder>" if torch else
            "pass the flags your build uses with --nvcc-flag"))

    def key(self) -> str:
        """What a cached choice is valid for: the spec, the tool (its version and the code of its
        rules) and its recorder runtime, and every file a build of the clean source reads, by
        content (sass.dependency_digest: the source, each header it includes however deep, nvcc's
        version, the flags); "" when nvcc cannot list those files (the choice is then not cached)."""
        from .assets import asset_dir  # noqa: PLC0415
        runtime = asset_dir("runtime")
        with tempfile.TemporaryDirectory(prefix=SCRATCH_PREFIX) as tmp:
            unit, include = self.unit(Path(tmp), "clean", self.text)
            deps = dependency_digest(unit, [str(runtime), *include],
                                     self.flags, self.spec.path.parent)
        if deps is None:
            return ""
        recorder = [f"{p.relative_to(runtime)}\0{sha256_bytes(p.read_bytes())}" for p in sorted(runtime.rglob("*"))
                    if p.is_file() and p.suffix in (".cuh", ".h")]
        # the rules that judged it, by content: a choice made by other rules is not this tool's
        rules = [sha256_bytes(Path(m.__file__).read_bytes()) for m in (sys.modules[__name__], sass)]
        return sha256_bytes("\0\0".join([self.spec.text, deps, *recorder, *rules, __version__]).encode())[:32]


def judge(r: Comparison, versioned: bool, clean_side: bool = True,
          sized_at_launch: str | None = None) -> tuple[list[str], list[str]]:
    """(problems, doubts): why a recording run of this build would be another kernel, and what SASS
    cannot decide about it (r: what sass.compare read; `versioned`: the copy's body is versioned;
    module docstring). The one judgment of the choice and of check-sass. `clean_side`: some CTAs
    record nothing, so the copy keeps a clean side that should hold every clean loop (where every
    CTA records, the recording side is the whole copy, checked by its loads in flight).
    `sized_at_launch`: why the kernel's occupancy is set at launch (backend.CopyFacts)."""
    problems, doubts = [], []
    if not r.off_identical:
        problems.append("with probes off the program does not run the clean kernel instruction for instruction")
    regs, ctas, warps = r.registers, r.ctas_per_sm, r.warps_per_sm_by_registers
    grew = None not in (regs.clean, regs.copy) and allocated_registers(regs.copy) > allocated_registers(regs.clean)
    # block size unknown: registers may lower the warps an SM holds (above 32 a thread), but whether
    # the launches fill an SM that far SASS cannot tell: flashinfer's fused add + RMSNorm recorded at
    # -0.21% and its merge-states at +4.4% with such copies on an H200 (docs/realkernels.md)
    if grew and ctas.clean is None and warps.copy < warps.clean:
        doubts.append(f"the copy takes {regs.copy} registers against the clean kernel's {regs.clean} "
                        f"({allocated_registers(regs.copy)} against {allocated_registers(regs.clean)} as allocated)")
    if None not in (ctas.clean, ctas.copy) and ctas.copy != ctas.clean:
        fits = (f"the copy fits {ctas.copy} CTAs per SM against the clean kernel's {ctas.clean} "
                f"(registers and static shared memory, {r.threads_per_block} threads per CTA)")
        # every CTA records: the occupancy is the recording's own, weighed against the probes as its
        # spills are (bench/probe_cost's barrier and mma loops recorded cheaper at 6 CTAs per SM than
        # held to 8, docs/cost.md)
        if clean_side:
            problems.append(fits)
        else:
            doubts.append(f"{fits}, a cost of the recording itself (every CTA records)")
    # dynamic shared memory is sized at launch: static bytes the copy adds may cost an SM a CTA that
    # the figures above, static shared memory only, cannot show
    if sized_at_launch and r.shared.copy > r.shared.clean:
        doubts.append(f"the copy adds {r.shared.copy - r.shared.clean} bytes of static shared memory a CTA and "
                      f"{sized_at_launch}: how many CTAs an SM holds then depends on the launch's dynamic shared "
                      "memory, which the SASS does not show")
    if r.spills.copy > r.spills.clean:
        spilled = f"the copy spills {r.spills.copy} bytes against the clean kernel's {r.spills.clean}"
        local = r.local_accesses
        if not clean_side:  # the whole copy is its recording side: its spills cost as its probes do
            doubts.append(f"{spilled}, which every CTA runs beside its probes (every CTA records)")
        elif versioned and local.copy_clean_side <= local.clean:
            doubts.append(f"{spilled}, on its recording side only (the CTAs that record nothing run without them)")
        else:
            problems.append(spilled)
    for m in r.missing if clean_side else []:
        have = ", ".join(f"{n} {f}" for f, n in m.loop if n)
        doubts.append(f"the copy's clean side does not hold {m.missing} clean loop(s) with {have} per trip as the "
                      "clean kernel schedules them")
    for f in r.recording_fewer_in_flight:
        doubts.append(f"recording CTAs keep {f.recording} loads in flight in their copy of the clean {f.loop} "
                      f"against {f.in_flight}")
    for f in r.recording_more_in_flight:
        doubts.append(f"recording CTAs run {f.loop} with {f.in_flight} loads in flight where the clean "
                      f"kernel's loops keep at most {f.clean}")
    return problems, doubts


def assess(clean, inst, kernel: str, clone: str, threads: int | None, clean_side: bool,
           versioned: bool, sized_at_launch: str | None = None) -> tuple[Comparison, list[str], list[str]]:
    """(r, problems, doubts): sass.compare and judge of each instantiation of the kernel (one for a
    plain kernel), the judgment of all of them together: the instantiation the program launches is
    chosen at run time, so every one must keep the kernel. `r` is the first instantiation's with the
    worst verdict; with more than one, each problem and doubt names its instantiation. `versioned`:
    the copy's body is versioned (the rewrite's word), so CTAs that record nothing run a clean side."""
    from .sass import compare, instances  # noqa: PLC0415
    pairs = instances(clean, inst, kernel, clone)
    judged = []
    for k, c in pairs:
        r = compare(clean, inst, k, c, threads)
        problems, doubts = judge(r, versioned, clean_side, sized_at_launch)
        if len(pairs) > 1:
            problems, doubts = [f"{k}: {p}" for p in problems], [f"{k}: {d}" for d in doubts]
        judged.append((r, problems, doubts))
    worst = max(judged, key=lambda j: (bool(j[1]), bool(j[2])))
    return worst[0], [p for j in judged for p in j[1]], [d for j in judged for d in j[2]]


def some_ctas_idle(plan) -> bool:
    """Some CTAs record nothing (an owner group's CTA stride or limit): the copy's body keeps a
    clean side for them."""
    return any(g.cta_stride > 1 or g.cta_limit for g in plan.groups)


def ranked(spec: ProbeSpec, warps: int | None, not_uniform: str | None = None,
           barrier_loop: int | None = None) -> tuple[list[BufferPath], list[str]]:
    """The candidate buffer paths in order of preference, and why the others are not candidates."""
    notes = []
    rings = True
    if any(s.role.per_thread for s in spec.sites):
        rings = False
        notes.append("staged and resident rings stage per warp; this spec records per thread")
    elif not warps:
        rings = False
        notes.append("staged and resident rings are sized for the block: give the kernel __launch_bounds__ or add "
                     "`warps = W` to [capture]")
    dense = bool(every_trip(spec.sites))
    some_idle = any(s.cta_stride > 1 or s.cta_limit for s in spec.sites)
    if dense and barrier_loop and some_idle:
        notes.append(f"the loop at line {barrier_loop} records every iteration and waits at a CTA barrier, and some "
                     "CTAs record nothing: a staged ring's copy-out would hold every warp of a recording CTA there, "
                     "and the kernel waits for its slowest CTA, so the global path is tried first")
    order = ([BufferPath.STAGED, BufferPath.RESIDENT, BufferPath.GLOBAL] if dense and not (barrier_loop and some_idle)
             else [BufferPath.GLOBAL, BufferPath.STAGED, BufferPath.RESIDENT])
    if rings and not_uniform:
        notes.append(f"staged rings need every lane of a recording warp at each site and at exit: {not_uniform}")
        order.remove(BufferPath.STAGED)
    return [p for p in order if rings or p == BufferPath.GLOBAL], notes


def target(spec: ProbeSpec, text: str, flags: list[str] | None = None, rewrite=None,
           launchers: dict[str, str] | None = None) -> Target | None:
    """What the choice compiles for `spec` (its clean source `text`), or None where nothing is to be
    compiled: the backend records to buffers of its own, or there is no nvcc. `rewrite`: the CUDA
    rewriter's result for the spec (backend.Rewrite), which names the kernel as it resolved it and
    says whether every site runs where the whole warp runs."""
    from .sass import nvcc  # noqa: PLC0415
    if registry.info(spec.backend).own_buffers_refused:
        return None
    try:
        nvcc()
    except AtrexError:
        return None
    t = Target.of(spec, text, flags, launchers)
    if rewrite is not None:
        learn(t, rewrite)
    return t


def learn(t: Target, rewrite) -> None:
    """What the CUDA rewriter found (`rewrite`, backend.Rewrite): the kernel's qualified name and
    whether staged rings can run its sites."""
    from .cuda.clone import CLONE_SUFFIX  # noqa: PLC0415
    copy = rewrite.copy
    t.kernel, t.not_uniform, t.barrier_loop = copy.clone.removesuffix(CLONE_SUFFIX), copy.not_uniform, copy.barrier_loop


def resolve(spec: ProbeSpec, target: Target | None, override: str | None = None,
            progress: Callable[[str], None] | None = None) -> Choice:
    """The recorder for `spec`: the one it (or `override`) asks for, or, for "auto", the one chosen
    by compiling the candidates (`target` None: no build possible, the fallback)."""
    asked = override or spec.capture.recorder
    if asked not in RECORDERS:  # the spec's own value is checked when it loads: this is --recorder's
        raise AtrexError(f"--recorder {asked!r} is not one of {', '.join(RECORDERS)}",
                         hint="auto lets the tool choose (docs/guide.md)")
    if registry.info(spec.backend).own_buffers_refused:
        return Choice(requested_mode(spec), "backend", registry.info(spec.backend).own_buffers_refused)
    if asked != "auto":
        path = BufferPath(asked)
        warps = spec.capture.warps or (-(-_threads(target) // 32) if path != BufferPath.GLOBAL and target else 0)
        if path != BufferPath.GLOBAL and not warps:
            raise SpecError(f"recorder {asked!r} sizes its rings for the block: the kernel has no __launch_bounds__",
                            path=str(spec.path), line=spec.line_of("capture", "recorder"),
                            hint="add `warps = W` to [capture], W the largest block of its launches in warps")
        return Choice(requested_mode(spec, path, warps), "asked", f"the {'spec' if override is None else '--recorder'} "
                                                           f"asks for the {asked} recorder")
    if target is None:
        return _fallback(spec, "no nvcc to compile the candidates")
    try:
        return _cached(spec, target, lambda: choose(spec, target, progress))
    except _Unbuildable as e:
        return _fallback(spec, f"the clean kernel could not be compiled and read on its own with "
                               f"{' '.join(target.flags)} ({e.message}); pass your build's flags with --nvcc-flag "
                               "or [build] nvcc_flags" + ("" if spec.backend_keys.build_unit
                                                          or spec.source.suffix not in HEADERS else
                                                          ", or, for a kernel in a header that needs what another "
                                                          "file declares first, [build] unit = a .cu that #includes it "
                                                          "(directly or through a header), after what it needs"))


HEADERS = (".cuh", ".h", ".hpp", ".hh", ".inl")  # a kernel in one of these is compiled through a unit


class _Unbuildable(AtrexError):
    """The clean source does not compile as the choice builds it, or its kernel cannot be told
    apart in the SASS."""


def _fallback(spec: ProbeSpec, why: str) -> Choice:
    return Choice(requested_mode(spec, DEFAULT_PATH, 0), "fallback",
                  f"{why}: the {DEFAULT_PATH.value} recorder, the default", warnings=(
                      f"the recorder was not chosen ({why}): the {DEFAULT_PATH.value} recorder may make the recording "
                      "another kernel; run check-sass where the kernel builds",))


def _threads(target: Target) -> int:
    """Threads per block from the clean build's launch bounds (0: none, or it does not build)."""
    try:
        with tempfile.TemporaryDirectory(prefix=SCRATCH_PREFIX) as tmp:
            clean_build(target, Path(tmp))
    except _Unbuildable:
        return 0
    return target.threads or 0


def _first_error(message: str) -> str:
    """The line of an nvcc failure that says what failed, its build folder's path left out (a
    temporary folder: the same failure reads the same every time)."""
    message = re.sub(r"\S*\.atrex-(?:choice|sass)-[^/\s]+/", "", message)
    lines = [l.strip() for l in message.splitlines() if l.strip()]
    return next((l for l in lines if "error" in l or "fatal" in l), lines[-1] if lines else message)[:300]


def clean_build(target: Target, tmp: Path):
    """The clean build (once per target), and the block size from its launch bounds when the spec
    gives none."""
    if target.clean is None:
        try:
            from .sass import matches  # noqa: PLC0415
            clean = target.build(tmp, "clean", target.text)
            found = matches(clean.funcs, target.kernel)
            if not found or (len(found) > 1 and "<" in target.spec.kernel):  # one specialization among several
                raise AtrexError(f"kernel {target.spec.kernel!r} matches {len(found)} functions in the SASS: "
                                 f"{sorted(clean.funcs)}")
            threads = max((clean.threads.get(f) or 0 for f in found), default=0) or None
        except AtrexError as e:
            raise _Unbuildable(_first_error(e.message), hint=e.hint) from None
        target.clean, target.threads = clean, target.threads or threads
    return target.clean


def choose(spec: ProbeSpec, target: Target, progress: Callable[[str], None] | None = None) -> Choice:
    """Compile the candidates and take the first, in order of preference, that keeps the clean
    kernel (module docstring, rules 1-3). The builds run side by side, one nvcc per core: the clean
    build beside the global path's (a candidate whatever the block size), then each candidate
    beside the next ones while it is judged, in order; once one keeps the kernel, builds not yet
    started are dropped."""
    from .cuda.rewrite import rewrite  # noqa: PLC0415

    seen: list[Evidence] = []
    notes: list[str] = []
    jobs = max(2, os.cpu_count() or 2)
    with tempfile.TemporaryDirectory(prefix=SCRATCH_PREFIX) as tmp, \
            ThreadPoolExecutor(max_workers=jobs) as pool:
        tmp = Path(tmp)
        started: dict[RecorderMode, Future] = {}

        def build(mode: RecorderMode, name: str):
            """(plan, rewrite, build) of one candidate, or the note that says why it is none."""
            try:
                plan = make_plan(spec, mode)
            except SpecError as e:  # rings that do not fit a CTA's shared memory
                return f"{describe(mode)}: {e.message}"
            rw = rewrite(plan, target.text, runtime=target.runtime, launchers=target.launchers or None)
            try:
                return plan, rw, target.build(tmp, name, rw.text, rw.launchers or None)
            except AtrexError as e:
                return f"{describe(mode)} does not compile: {_first_error(e.message)}"

        def start(mode: RecorderMode) -> None:
            if mode not in started:
                if progress:
                    progress(f"compiling the {describe(mode)} recorder's build")
                started[mode] = pool.submit(build, mode, f"inst_{len(started)}")

        def evaluate(mode: RecorderMode) -> Evidence | None:
            start(mode)
            built = started[mode].result()
            if isinstance(built, str):
                notes.append(built)
                return None
            plan, rw, inst = built
            target.built[mode] = (rw, inst)
            try:
                r, problems, doubts = assess(clean, inst, target.kernel, rw.copy.clone, target.threads,
                                             some_ctas_idle(plan), rw.copy.versioned, rw.copy.sized_at_launch)
            except AtrexError as e:
                notes.append(f"{describe(mode)}: {e.message}")
                return None
            staging = mode.staging(plan.groups)
            ev = Evidence(mode, r.registers, r.ctas_per_sm, staging.shared_bytes_per_cta if staging else 0,
                          r.spills, tuple(problems), tuple(doubts))
            seen.append(ev)
            return ev

        def first_keeping(modes: list[RecorderMode], hold: bool = False) -> Evidence | None:
            """The first of `modes` that keeps the kernel, or, where every CTA records, the first
            with no problem (rule 3); with `hold`, each that loses CTAs per SM through its registers
            alone is compiled again held before the next (rule 2)."""
            for i, mode in enumerate(modes):
                for ahead in modes[i:i + jobs]:  # the next candidates build while this one is judged
                    start(ahead)
                ev = evaluate(mode)
                if ev is not None and hold and ev.verdict != KEEPS and _registers_only(ev):
                    ev = evaluate(held_mode(ev.mode, ev.registers.clean, clean, target.kernel))
                    if ev is not None and not ev.problems:  # its doubts join the per-trip one: measure decides
                        return ev
                if ev is not None and (ev.verdict == KEEPS or (every_cta and not ev.problems)):
                    return ev
            return None

        if progress:
            progress("compiling the clean kernel to choose its recorder (nvcc)")
        clean_future = pool.submit(clean_build, target, tmp)
        start(requested_mode(spec, BufferPath.GLOBAL))
        try:
            clean = clean_future.result()
            warps = -(-(target.threads or 0) // 32)
            paths, ranked_notes = ranked(spec, warps, target.not_uniform, target.barrier_loop)
            notes += ranked_notes
            every_cta = not some_ctas_idle(make_plan(spec, requested_mode(spec, BufferPath.GLOBAL)))
            kept = first_keeping([requested_mode(spec, path, warps) for path in paths],
                                 hold=bool(every_trip(spec.sites)))
            held = (held_mode(e.mode, e.registers.clean, clean, target.kernel) for e in list(seen)
                    if e.registers.clean and not e.mode.max_registers)
            kept = kept or first_keeping([m for m in held if m not in started])  # rule 3: those not held yet
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # no build outlives its folder
    if kept is not None:
        return _chosen(kept, seen, notes, per_trip(spec.sites), every_cta)
    if not seen:
        raise AtrexError(f"no recorder can record spec {spec.name!r}: {'; '.join(notes)}", path=str(spec.path))
    # among the unsure, the first whose copy keeps the clean kernel's register allocation: more
    # registers lower every CTA's occupancy wherever they count, where recording-side doubts
    # (spills, a loop's schedule) cost only the recording CTAs (flashinfer's RoPE recorded at +8.2%
    # with 48 registers against 40, a CTA in 256 recording)
    unsure = min((e for e in seen if e.verdict == UNSURE), default=None, key=_grows_allocation)
    if unsure is not None:
        return Choice(unsure.mode, "chosen", f"the {describe(unsure.mode)} recorder keeps what every CTA runs "
                                             f"(occupancy at the kernel's block size, spills where CTAs record "
                                             f"nothing); SASS cannot decide the rest: "
                                             f"{'; '.join((*unsure.doubts, *per_trip(spec.sites)))}; measure decides",
                      tuple(seen), notes=tuple(notes), verdict=UNSURE)
    first = seen[0]
    return Choice(first.mode, "fallback", f"no recorder keeps the clean kernel; {describe(first.mode)}, the first "
                                        "candidate, records it as another kernel: check-sass says how",
                  tuple(seen), tuple(f"recorder {describe(first.mode)}: {p}" for p in first.problems), tuple(notes),
                  verdict=ANOTHER)


def per_trip(sites) -> list[str]:
    """The doubt no SASS reading removes: a site that records every trip of a loop makes each trip
    of a recording CTA pay its probe, and whether that lengthens the kernel (a recording CTA in the
    last wave, a loop bound by issue) is the grid's and the loop's. Copies whose SASS kept the clean
    kernel recorded such loops within target 2 times in 4 on the H200 (flashinfer's SiLU-and-mul and
    merge-states within, the CuTe SM80 GEMM's k-loop at +1.6% and the shared-memory GEMM's at +2.7%
    of their 1% beyond: docs/realkernels.md, docs/cost.md; the latter as slow with no CTA recording,
    docs/design.md), so such a copy is unsure, not kept.
    `sites`: the spec's (each with name, position and every)."""
    dense = every_trip(sites)
    if not dense:
        return []
    return [f"site{'s' if len(dense) > 1 else ''} {', '.join(dense)} record{'' if len(dense) > 1 else 's'} every "
            "trip of a loop: each trip of a recording CTA pays a probe, and whether that lengthens the kernel SASS "
            "cannot weigh"]


def _registers_only(e: Evidence) -> bool:
    """The candidate's one problem is the CTAs an SM holds, through registers alone (no spill): the
    same recorder held to the clean kernel's allocation may keep them."""
    regs, ctas = e.registers, e.ctas_per_sm
    return (bool(regs.clean) and _grows_allocation(e) and len(e.problems) == 1 and None not in (ctas.clean, ctas.copy)
            and ctas.copy < ctas.clean and e.spills.copy <= e.spills.clean)


def _grows_allocation(e: Evidence) -> bool:
    regs = e.registers
    return None not in (regs.clean, regs.copy) and allocated_registers(regs.copy) > allocated_registers(regs.clean)


def _chosen(ev: Evidence, seen: list[Evidence], notes: list[str], trips: list[str], every_cta: bool) -> Choice:
    """The candidate whose SASS keeps the clean kernel, or where every CTA records the first with no
    problem (rule 3); unsure where a site records every trip of a loop (per_trip) or SASS doubts the
    rest (a held copy's spills, rule 2; where every CTA records, what the copy changes)."""
    regs, ctas = ev.registers, ev.ctas_per_sm
    allocated = (f"its copy is allocated {allocated_registers(regs.copy)} registers ({regs.copy} used; the clean "
                 f"kernel {regs.clean})")
    if every_cta and ev.doubts:  # its doubts say what the copy changes
        kept = f"the {describe(ev.mode)} recorder records every CTA with no problem SASS shows: {allocated}"
    else:
        occupancy = f", {ctas.copy} CTAs per SM as the clean kernel" if ctas.copy else ""
        kept = (f"the {describe(ev.mode)} recorder keeps the clean kernel: {allocated}{occupancy}, every clean loop "
                "and its loads in flight")
    if ev.doubts or trips:
        return Choice(ev.mode, "chosen", f"{kept}; SASS cannot decide the rest: {'; '.join((*ev.doubts, *trips))}; "
                                         "measure decides", tuple(seen), notes=tuple(notes), verdict=UNSURE)
    return Choice(ev.mode, "chosen", kept, tuple(seen), notes=tuple(notes), verdict=KEEPS)


def _cached(spec: ProbeSpec, target: Target, compute) -> Choice:
    """A choice from the cache when the same spec, tool and build inputs made it (Target.key) and it
    is one the tool could have chosen (_check_cached); the cache is `.atrex/cache/` of the project
    (written by apply) or the folder CACHE_ENV names. An entry that fails the check, or a project
    cache folder reached through a link, is said on stderr and the choice is computed again."""
    key = target.key()
    for folder in _cache_dirs(spec) if key else ():
        path = folder / f"choice-{key}.json"
        if path.is_file():
            try:
                return _check_cached(json.loads(path.read_text()), key, spec, target)
            except (OSError, ValueError) as e:
                sys.stderr.write(f"atrex: the cached recorder choice {path} is not used ({e}); choosing again\n")
    return replace(compute(), key=key)


def _check_cached(obj, key: str, spec: ProbeSpec, target: Target) -> Choice:
    """The cached choice `obj`, or ValueError saying why it is not one the tool could have made for
    this key: a mode that is not a candidate of this spec (ranked, requested_mode), registers held to
    other than the clean kernel's allocation, a verdict that is not its evidence's."""
    def check(ok: bool, what: str) -> None:
        if not ok:
            raise ValueError(what)

    check(isinstance(obj, dict) and obj.get("key") == key, "not a chosen recorder stored under this key")
    try:
        got = _of_entry(obj, key)
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise ValueError(f"not a recorder choice: {type(e).__name__} {e}") from None
    check(got.how == "chosen", "not a chosen recorder stored under this key")
    mode, warps = got.mode, got.mode.warps
    check(mode.path == BufferPath.GLOBAL or (type(warps) is int and 0 < warps <= 32
                                              and warps == (spec.capture.warps or warps)),
          f"rings sized for {warps!r} warps")
    check(mode.path in ranked(spec, warps, target.not_uniform, target.barrier_loop)[0]
          and mode == replace(requested_mode(spec, mode.path, warps), max_registers=mode.max_registers,
                              held=mode.held),
          f"recorder {describe(mode)} with {mode.event_bytes}-byte events is not a candidate of this spec")
    held = {allocated_registers(e.registers.clean) for e in got.evidence
            if e.mode == replace(mode, max_registers=0, held=())}
    check(mode.max_registers == 0 or mode.max_registers in held,
          f"registers held to {mode.max_registers}, not the clean kernel's allocation")
    mine = [e for e in got.evidence if e.mode == mode]
    given = UNSURE if len(mine) == 1 and mine[0].verdict == KEEPS and per_trip(spec.sites) else mine[0].verdict if mine else None
    check(len(mine) == 1 and given == got.verdict, "a verdict its evidence does not give")
    return got


def _entry(choice: Choice) -> dict:
    """A cache entry: the choice's record (the manifest's), with its whole mode, its warnings and
    the key it is valid for."""
    return {**choice.to_json(), "mode": choice.mode.to_json(), "warnings": list(choice.warnings), "key": choice.key}


def _of_entry(obj: dict, key: str) -> Choice:
    """The choice a cache entry (_entry) holds; KeyError, TypeError or ValueError where it is not one."""
    return Choice.from_json(obj, RecorderMode.of_json(obj["mode"]), tuple(obj["warnings"]), key)


def _cache_dirs(spec: ProbeSpec) -> list[Path]:
    """Where cached choices are read: the folder CACHE_ENV names, then the project's .atrex/cache/,
    refused (said on stderr) when it or .atrex is a link: it may lead out of the project."""
    dirs = []
    if os.environ.get(CACHE_ENV):
        dirs.append(Path(os.environ[CACHE_ENV]))
    try:
        dirs.append(inside(spec.root, spec.root / ".atrex" / "cache"))
    except AtrexError as e:
        sys.stderr.write(f"atrex: the recorder-choice cache is not read: {e.message}\n")
    return dirs


def remember(spec: ProbeSpec, choice: Choice) -> None:
    """Keep a computed choice: apply calls this once its snapshot is written, so a failed apply
    writes no cache entry either. In the folder CACHE_ENV names, else the project's .atrex/cache/
    (inside the project tree, no link on the way). A cache that cannot be written is computed again
    next time: apply does not fail for it."""
    if not choice.key or choice.how != "chosen":
        return
    data = (json.dumps(_entry(choice), indent=2) + "\n").encode()
    try:
        if os.environ.get(CACHE_ENV):
            write_atomic(Path(os.environ[CACHE_ENV]) / f"choice-{choice.key}.json", data)
        else:
            write_atomic(spec.root / ".atrex" / "cache" / f"choice-{choice.key}.json", data, spec.root)
    except (OSError, AtrexError):
        pass

