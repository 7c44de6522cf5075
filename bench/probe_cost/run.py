"""Per-event cost of the probes by loop shape, every warp recording (run on the GPU host). What a
probe costs depends on what its instructions compete with, so each shape of SHAPES (a kernel of
probe_cost.cu) stresses another resource: issue slots (independent FMA chains), latency (one
dependent FMA chain), memory bandwidth (a grid-stride copy), shared memory and a CTA barrier
(__syncthreads() each iteration), the tensor pipe (mma.sync in registers). One event per
iteration, the site at loop-begin and at loop-end, shapes with a trip count at 1024 and 2048
iterations. Each is measured clean, instrumented with the recorder the tool chose (`default`) and
with each recorder it can run (`global`, `staged`, `resident`; a recorder apply refuses, resident
rings of 2048 events a warp that do not fit a CTA's shared memory, is left out with apply's
reason); the FMA and copy loops also with a hand-written lane-0 store (what a probe macro does)
and with the store floor (every lane storing one 4-byte value to a per-warp shared slot, the
least a store-based probe can cost). NVIDIA IKeT runs in the same call on the same loops written in
CuTe DSL (iket_loops.py, an `iket.mark` an iteration where the site is), clean and under run-iket,
interleaved with the tool's builds, where the CuTe DSL and IKeT are installed (`--iket`).

`build WORK` applies and compiles every build into WORK (nvcc; the recorder choice compiles its
candidates, so it runs where nvcc is, the GPU host or not) and reads from each build's SASS
(cuobjdump) the instructions its probe adds per event (sass_added), and with --iket the same of
IKeT's event, compiled as run-iket compiles it (iket_sass; before run-iket patches the module it
loads); `run WORK` runs the builds interleaved for several rounds in one session (each binary a
fresh process timing `reps` launches of its shape's kernels, queued back to back, at every trip
count; IKeT's, a process a trip count timing every shape, clean and under run-iket), validates the
first captured launch of each instrumented build, and prints the overhead of each against the same
run's clean kernel (IKeT's against its clean CuTe DSL loop):

    python3 bench/probe_cost/run.py build WORK [--iket]
    python3 bench/probe_cost/run.py plan WORK     (what a build made elsewhere adds, as build prints it)
    python3 bench/probe_cost/run.py run WORK [--rounds 3] [--reps 21] [--iket] [--json OUT.json]

The results file (--json; bench/perturbation/run.py fold reads its rows):
    rows      one per shape, trip count and site: loop (the shape), what (its line), site, iterations (null: the
              copy's, set by its data), base_ms (the clean kernel's median), hand_written and floor
              (overheads, null where the shape has none), default_recorder (the tool's choice); per
              recorder run (default, global, staged, resident): its overhead under its name,
              <recorder>_capture ({verdict, events, failed}: the first captured launch validated)
              and sass[<recorder>] ({added, kinds, loop, clean_loop}: sass_added); refused
              {recorder: apply's reason}; with --iket: iket (IKeT's overhead, its mark where the
              site is: iket_mark, top for loop-begin, bottom for loop-end), iket_base_ms (the clean
              CuTe DSL loop's median) and sass["iket"] (iket_sass: its event's added instructions,
              and each clean loop's instructions an iteration, CuTe DSL's and nvcc's); rounds
              ({column: [overhead, ...]}, by_round: each round's against the same round's clean run,
              the spread the medians hide)
    samples   each process's JSON line (probe_cost.cu's), by build (<shape>.clean for the clean binary;
              <shape>.iket_<mark>, IKeT's processes' runs of that shape: none, top, bottom)
    captures  each instrumented build's validation
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from atrex_inject import sass, snapshot
from atrex_inject.errors import SpecError
from atrex_inject.manifest import load as load_manifest
from atrex_inject.spec import with_recorder
from atrex_inject.validate import validate_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from measuring import device  # noqa: E402

HERE = Path(__file__).resolve().parent
HARNESS = HERE.parents[1] / "examples" / "cuda" / "harness.cuh"  # the timing probe_cost.cu includes
IKET_LOOPS = HERE / "iket_loops.py"
NVCC = ["nvcc", "-O3", "-gencode=arch=compute_90a,code=sm_90a"]
TRIPS = (1024, 2048)  # trip counts of the shapes that have one (the program's arguments)
SITES = ("loop-begin", "loop-end")
IKET_MARKS = {"loop-begin": "top", "loop-end": "bottom"}  # where IKeT's mark is for each site (iket_loops.py)
RECORDERS = ("default", "global", "staged", "resident")


class Shape(NamedTuple):
    kernel: str  # the kernel instrumented (probe_cost.cu)
    anchor: str  # its loop, as the spec's anchor finds it
    work: tuple[str, int]  # an iteration's work in SASS (opcode family, instructions): a trip's iterations
    iterations: tuple[int, ...]  # trip counts; () where the data sets it
    capacity: int  # events a warp records, one an iteration
    what: str


SHAPES = {
    "fma": Shape("fma_loop", "for (int i = 0; i < iters", ("FFMA", 128), TRIPS, 2048,
                 "four independent FMA chains, 128 FMA a thread an iteration"),
    "fma_dep": Shape("fma_dep_loop", "for (int i = 0; i < iters", ("FFMA", 128), TRIPS, 2048,
                     "one dependent FMA chain, 128 FMA a thread an iteration"),
    "copy": Shape("copy_loop", "for (long i", ("LDG", 1), (), 128,
                  "grid-stride float4 copy, 512 bytes a warp an iteration"),
    "smem": Shape("smem_loop", "for (int i = 0; i < iters", ("BAR", 1), TRIPS, 2048,
                  "a shared-memory store, __syncthreads() and eight shared loads an iteration"),
    "mma": Shape("mma_loop", "for (int i = 0; i < iters", ("HMMA", 16), TRIPS, 2048,
                 "16 mma.sync bf16 m16n8k16 a warp an iteration, accumulating in registers"),
}
SPEC = """# atrex probe in probe_cost.cu's {kernel}: one event per iteration, lane 0 per warp.
version = 1
name = "bench_{name}"
question = "probe cost at one probe per iteration of {what}"
backend = "cuda"
source = "probe_cost.cu"
kernel = "{kernel}"

[capture]
capacity = {capacity}
warps = 8            # the kernels' 256-thread blocks (they declare no __launch_bounds__): the rings' size
skip = 0
count = 1            # the first launch is written; later ones record into the reused scratch buffer

[[site]]
name = "iter"
anchor = {{ loop = "{anchor}" }}
position = "{site}"
"""


def builds() -> list[tuple[str, str, str, str]]:
    """(name, shape, site, recorder) of each instrumented build: `fma.loop-end.staged`, ..."""
    return [(f"{s}.{site}.{rec}", s, site, rec) for s in SHAPES for site in SITES for rec in RECORDERS]


def _spec(work: Path, shape: str, site: str, recorder: str) -> Path:
    """The shape's spec with its site at `site`, under its build's name, with the recorder (default:
    none named, the tool chooses)."""
    s = SHAPES[shape]
    name = f"{shape}_{site.split('-')[1]}"  # with `_<recorder>` and bench_, within a spec name's 32 characters
    spec = work / f"{name}.toml"
    spec.write_text(SPEC.format(name=name, kernel=s.kernel, what=s.what, capacity=s.capacity, anchor=s.anchor,
                                site=site))
    return spec if recorder == "default" else with_recorder(spec, recorder)


def _kinds(ops) -> Counter:
    """Opcode families: `CS2R.32` is CS2R, a branch (`BRA>address`) BRA."""
    return Counter(o.split(">")[0].split(".")[0] for o in ops)


def _iterations(n: float) -> str:
    return f"{n:g} iteration" + ("" if n == 1 else "s")


def iteration_mix(loops: list[sass.Loop], work: tuple[str, int], trip: int) -> tuple[dict[str, float], str]:
    """The instructions one iteration of the hottest of `loops` executes, by family, and which loop
    that is. Among the outermost loops doing the shape's work, the one that runs most iterations a
    trip (the unrolled body over its remainder loop; the strip-mined trip over the last
    iterations); a trip's iterations are its work instructions over an iteration's. A loop around
    another (a staged ring's trip of `trip` iterations, the per-iteration loop inside) spreads its
    own instructions over those iterations."""
    family, per = work
    doing = [l for l in loops if l.count(family)]
    inside = {l: [i for i in doing if i != l and l.start <= i.start and i.end <= l.end] for l in doing}
    outer = [l for l in doing if not any(l in v for v in inside.values())]

    def mix(l: sass.Loop) -> tuple[dict[str, float], float, str]:
        k = _kinds(l.ops)
        where = f"0x{l.start:04x}-0x{l.end:04x}: {len(l.ops)} instructions"
        if not inside[l]:
            n = l.count(family) / per
            return {f: c / n for f, c in k.items()}, n, f"{where}, {_iterations(n)} a trip"
        (i,) = inside[l]
        if not trip:
            raise ValueError(f"loop {where} holds loop 0x{i.start:04x}-0x{i.end:04x}: no strip-mined trip says "
                             "how often it runs")
        n_in = i.count(family) / per
        body = _kinds(i.ops)
        own = k - body
        m = {f: own[f] / trip + body[f] / n_in for f in own | body}
        return m, trip, (f"{where}, a trip of {trip} iterations around 0x{i.start:04x}-0x{i.end:04x} "
                         f"({len(i.ops)} instructions, {_iterations(n_in)} a trip)")

    if not outer:
        raise ValueError(f"no loop does the shape's work ({family})")
    m, _, where = max((mix(l) for l in outer), key=lambda t: t[1])
    return m, where


def sass_added(clean: list[sass.Insn], copy: list[sass.Insn], work: tuple[str, int], trip: int) -> dict:
    """What the probe adds to an iteration of the loop, from the SASS: the clean kernel's hottest
    loop (found by its backward branch) against the instrumented copy's recording side's hottest
    loop that reads the timer, each iteration's instructions by family (iteration_mix), the copy's
    less the clean kernel's: `added` the net count an event (one an iteration), `kinds` each
    family's change (negative where the probe cost the loop some of its unrolling: fewer branches
    and counter updates an iteration), `loop` and `clean_loop` the loops read."""
    return _difference(iteration_mix(sass.loops(clean), work, 0),
                       iteration_mix(sass.probed(copy, sass.sides(copy)[1]), work, trip))


def _difference(clean: tuple[dict[str, float], str], probed: tuple[dict[str, float], str]) -> dict:
    """A probed loop's iteration mix less the clean loop's (iteration_mix's results): `added`,
    `kinds` (each family's change, the largest first), `loop` and `clean_loop`."""
    (c, clean_loop), (i, loop) = clean, probed
    kinds = {f: round(i.get(f, 0) - c.get(f, 0), 2) for f in sorted(set(c) | set(i))}
    kinds = dict(sorted(((f, d) for f, d in kinds.items() if d), key=lambda t: (-t[1], t[0])))
    return {"added": round(sum(i.values()) - sum(c.values()), 2), "kinds": kinds, "loop": loop,
            "clean_loop": clean_loop}


def iket_available() -> bool:
    """The CuTe DSL, and IKeT's run-iket with it, can be imported."""
    return importlib.util.find_spec("cutlass") is not None and importlib.util.find_spec("iket") is not None


def _cute_cubins(folder: Path, keep_marks: bool) -> dict[tuple[str, str], list[sass.Insn]]:
    """Every loop of iket_loops.py compiled for sm_90a (no GPU), with each mark (none, top, bottom),
    iket's marks kept as run-iket's compiler option keeps them (`keep_marks`) or stripped as the CuTe
    DSL strips them by default: each kernel's SASS by (shape, mark)."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "CUTE_DSL_COMPILER_OPT"}
    env.update(CUTE_DSL_ARCH="sm_90a", CUTE_DSL_KEEP="cubin", CUTE_DSL_DUMP_DIR=str(folder),
               **({"CUTE_DSL_COMPILER_OPT": "iket"} if keep_marks else {}))
    p = subprocess.run([sys.executable, str(IKET_LOOPS), "--compile-only"], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"iket_loops.py --compile-only failed ({p.returncode}):\n{p.stderr[-3000:]}")
    out = {}
    for shape in SHAPES:
        for mark in ("none", *IKET_MARKS.values()):
            (cubin,) = folder.glob(f"cutlass_loop_{shape}_FakeTensor*_{mark}.sm_90a.cubin")
            out[shape, mark] = next(iter(sass.disassemble(cubin).values()))
    return out


def iket_sass(work: Path, clean: dict[str, list[sass.Insn]]) -> dict[str, dict[str, dict]]:
    """What IKeT's event adds to each shape's loop at each mark (top, bottom), as iteration_mix
    reads it: the loop compiled with its mark kept (run-iket's compile; run-iket then patches the
    module it loads, which this does not see) against the same loop compiled clean; with each clean
    loop's instructions an iteration, the CuTe DSL's (`cute_clean`) and nvcc's (`cuda_clean`: the
    tool's clean loop), so that the table shows the two sides time the same loop."""
    plain, marked = _cute_cubins(work / "cute-clean", False), _cute_cubins(work / "cute-iket", True)
    out = {}
    for shape, s in SHAPES.items():
        cute = iteration_mix(sass.loops(plain[shape, "none"]), s.work, 0)
        cuda, _ = iteration_mix(sass.loops(sass.function(clean, s.kernel)), s.work, 0)
        out[shape] = {mark: {**_difference(cute, iteration_mix(sass.loops(marked[shape, mark]), s.work, 0)),
                             "cute_clean": round(sum(cute[0].values()), 2), "cuda_clean": round(sum(cuda.values()), 2)}
                      for mark in IKET_MARKS.values()}
    return out


def build(work: Path, shapes=tuple(SHAPES), sites=SITES, recorders=RECORDERS, iket: bool = False) -> None:
    """The clean binary and each instrumented one into WORK, with a plan.json naming them, the
    recorder each runs and what its probe adds to the loop's SASS (sass_added), and with `iket`
    what IKeT's event adds (iket_sass): applied and reverted one at a time (apply holds the
    project's lock), compiled in parallel. A recorder named that apply refuses is in the plan with
    apply's reason, unbuilt."""
    work.mkdir(parents=True, exist_ok=True)
    for f in (HERE / "probe_cost.cu", HARNESS):
        shutil.copy(f, work / f.name)
    (work / ".git").mkdir(exist_ok=True)  # marks the project root for the specs' paths
    plan = {"clean": {"binary": "clean"}}
    for name, shape, site, rec in builds():
        if shape not in shapes or site not in sites or rec not in recorders:
            continue
        spec = _spec(work, shape, site, rec)
        entry = {"shape": shape, "site": site, "recorder": rec}
        try:
            m = snapshot.apply(spec, root=work).manifest
        except SpecError as e:
            if rec == "default":
                raise
            plan[name] = {**entry, "refused": e.message}
            continue
        shutil.copy(work / "probe_cost.cu", work / f"{name}.cu")
        (work / f"{name}.manifest.json").write_text(m.dumps())
        snapshot.revert(spec, root=work)
        trip = max((s.trip for s in m.perturbation.strip_mined), default=0)  # a staged ring's trip, 0 for none
        plan[name] = {**entry, "binary": name, "chosen": m.recorder.mode.path.value, "copy": m.perturbation.clone,
                      "trip": trip}
    inc = snapshot.runtime_header().parent
    built = [k for k, p in plan.items() if "binary" in p]

    def compile_one(name: str) -> None:
        src = work / ("probe_cost.cu" if name == "clean" else f"{name}.cu")
        subprocess.run([*NVCC, f"-I{inc}", f"-I{work}", "-o", work / name, src], check=True)

    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        list(pool.map(compile_one, built))
    clean = sass.disassemble(work / "clean")
    for k in built:
        if k == "clean":
            continue
        p, shape = plan[k], SHAPES[plan[k]["shape"]]
        copy = sass.function(sass.disassemble(work / k), p["copy"])
        p["sass"] = sass_added(sass.function(clean, shape.kernel), copy, shape.work, p["trip"])
    if iket:
        plan["iket"] = {"sass": iket_sass(work, clean)}
    (work / "plan.json").write_text(json.dumps(plan, indent=2) + "\n")


def capture_folder(work: Path, key: str, binary: str, round_: int, tmp: Path) -> Path | None:
    """Where a process of the build `key` writes its capture: an instrumented build records in every
    round (without a capture folder its probes are off and it runs the clean kernel, so a round
    without one would time the clean kernel under the recorder's name), into WORK/cap_<key> in the
    first round, whose capture is validated, and into a scratch folder after; the clean binary
    writes none."""
    if binary == "clean":
        return None
    return work / f"cap_{key}" if round_ == 0 else tmp / f"cap_{key}_{round_}"


def _run_one(binary: Path, reps: int, shape: str, capture: Path | None) -> dict:
    env = dict(os.environ)
    if capture:
        capture.mkdir(parents=True, exist_ok=True)
        env["ATREX_TIMELINE_OUT"] = str(capture)
    argv = [binary, str(reps), shape, *map(str, SHAPES[shape].iterations)]
    out = subprocess.run(argv, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def _iket_one(marked: bool, reps: int, trip: int, shapes: list[str], tmp: Path) -> list[dict]:
    """One process of iket_loops.py timing `shapes` at one trip count (the copy's is its data's):
    clean, or under run-iket with the mark at the top and at the bottom of each iteration, each
    timed. run-iket holds every launch of a process in device memory, each at the most events a
    warp records in any, so a process times one trip count. Its runs; its IKeT output folder (every
    launch's trace) removed after it."""
    cmd = [sys.executable, str(IKET_LOOPS), "--reps", str(reps), "--shapes", ",".join(shapes), "--iters", str(trip)]
    if marked:
        cmd = [sys.executable, "-m", "iket.cli.main", "-o", str(tmp / "iket"), "profile", "--postprocess", "none",
               "--", *cmd, "--marks", ",".join(IKET_MARKS.values())]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    shutil.rmtree(tmp / "iket", ignore_errors=True)
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    if p.returncode != 0 or not lines:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return json.loads(lines[-1])["runs"]


def run(work: Path, rounds: int, reps: int, iket: bool = False) -> dict:
    """Each shape's clean run and builds, `rounds` times (odd rounds in reverse order), each process
    timing every trip count of its shape; with `iket`, IKeT's processes in the same rounds, clean and
    under run-iket, a process a trip count (the copy in the first); then the rows: per shape, trip
    count and site, each column's overhead against the clean kernel, IKeT's against the clean
    CuTe DSL loop."""
    plan = json.loads((work / "plan.json").read_text())
    shapes = [s for s in SHAPES if any(p.get("shape") == s for p in plan.values())]
    jobs = []  # (sample key, binary, shape), each shape's clean run beside its builds
    for s in shapes:
        jobs += [(f"{s}.clean", "clean", s)]
        jobs += [(k, k, s) for k, p in plan.items() if p.get("shape") == s and "binary" in p]
    if iket:  # (kind, probed, trip count): IKeT's clean and marked processes, side by side
        trips = sorted({n for s in shapes for n in SHAPES[s].iterations}) or [TRIPS[0]]  # the copy alone: one process
        jobs += [("iket", probe, n) for n in trips for probe in (False, True)]
    samples: dict[str, list[dict]] = {key: [] for key, _, _ in jobs if key != "iket"}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for key, binary, s in (jobs if r % 2 == 0 else jobs[::-1]):
                if key == "iket":  # s: the trip count; the copy's data sets its own, timed once a round
                    which = [x for x in shapes if SHAPES[x].iterations or s == min(trips)]
                    for got in _iket_one(binary, reps, s, which, Path(tmp)):
                        samples.setdefault(f"{got['shape']}.iket_{got['mark']}", []).append(
                            {"runs": [{"iterations": got["iterations"], "loop_ms": got["median_ms"]}]})
                    continue
                cap = capture_folder(work, key, binary, r, Path(tmp))
                samples[key].append(_run_one(work / binary, reps, s, cap))
                if cap and r:  # a later round's capture is not validated: only its recording is timed
                    shutil.rmtree(cap, ignore_errors=True)
    checks = {}
    for key, binary, _ in jobs:
        if key != "iket" and binary != "clean":
            report, launches = validate_dir(work / f"cap_{key}", load_manifest(work / f"{key}.manifest.json"))
            checks[key] = {"verdict": report["verdict"], "events": sum(l.n_events for l in launches),
                           "failed": [c["name"] for c in report["checks"] if not c["ok"]]}

    def med(key: str, n: int | None, field: str) -> float | None:
        values = _runs(samples, key, n, field)
        return None if not values or None in values else statistics.median(values)

    rows = []
    for s in shapes:
        for n in SHAPES[s].iterations or (None,):
            base = med(f"{s}.clean", n, "loop_ms")
            ref = {c: med(f"{s}.clean", n, f"{c}_ms") for c in ("hand_written", "floor")}
            for site in SITES:
                row = {"loop": s, "what": SHAPES[s].what, "site": site, "iterations": n, "base_ms": base,
                       **{c: None if v is None else v / base - 1 for c, v in ref.items()},
                       "default_recorder": plan[f"{s}.{site}.default"]["chosen"], "sass": {}}
                for rec in RECORDERS:
                    key = f"{s}.{site}.{rec}"
                    if "refused" in plan[key]:
                        row.setdefault("refused", {})[rec] = plan[key]["refused"]
                        continue
                    row[rec] = med(key, n, "loop_ms") / base - 1
                    row[f"{rec}_capture"] = checks[key]
                    row["sass"][rec] = plan[key]["sass"]
                if iket:  # IKeT's mark where the site is: the top of an iteration, or its bottom
                    row["iket_mark"] = IKET_MARKS[site]
                    row["iket_base_ms"] = med(f"{s}.iket_none", n, "loop_ms")
                    row["iket"] = med(f"{s}.iket_{row['iket_mark']}", n, "loop_ms") / row["iket_base_ms"] - 1
                    if "iket" in plan:
                        row["sass"]["iket"] = plan["iket"]["sass"][s][row["iket_mark"]]
                row["rounds"] = by_round(samples, row)
                rows.append(row)
    return {"rows": rows, "samples": samples, "captures": checks}


def _runs(samples: dict[str, list[dict]], key: str, n: int | None, field: str = "loop_ms") -> list:
    """`field` of each of `key`'s processes at trip count `n` (the copy's: None), in round order."""
    return [x[field] for s in samples.get(key, []) for x in s["runs"] if x["iterations"] == n]


def by_round(samples: dict[str, list[dict]], row: dict) -> dict[str, list[float]]:
    """Each measured column's overhead round by round, against the same round's clean run (IKeT's
    against the same round's clean CuTe DSL process): a process a build a round, so a sample list's
    runs at one trip count are in round order. The medians of a row pool the rounds; these show how
    far apart they are."""
    def ratios(key: str, base: str) -> list[float]:
        a, b = _runs(samples, key, row["iterations"]), _runs(samples, base, row["iterations"])
        return [x / y - 1 for x, y in zip(a, b)] if a and len(a) == len(b) and None not in a + b else []

    loop, site = row["loop"], row["site"]
    out = {rec: ratios(f"{loop}.{site}.{rec}", f"{loop}.clean") for rec in RECORDERS if rec in row}
    if "iket_mark" in row:
        out["iket"] = ratios(f"{loop}.iket_{row['iket_mark']}", f"{loop}.iket_none")
    return {k: v for k, v in out.items() if v}


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:+.2f}%"


def print_plan(plan: dict) -> None:
    """The SASS each build's probe adds an event, by family."""
    for shape, at in plan.get("iket", {}).get("sass", {}).items():
        for mark, p in at.items():
            kinds = ", ".join(f"{f} {d:+g}" for f, d in p["kinds"].items())
            print(f"{f'{shape}.iket.{mark}':<28}{'iket':>10}{p['added']:>+8.2f}  {kinds} (clean loop an iteration: "
                  f"CuTe DSL {p['cute_clean']:g}, nvcc {p['cuda_clean']:g})")
    for k, p in plan.items():
        if k != "iket" and "sass" in p:
            kinds = ", ".join(f"{f} {d:+g}" for f, d in p["sass"]["kinds"].items())
            print(f"{k:<28}{p['chosen']:>10}{p['sass']['added']:>+8.2f}  {kinds}")
        elif "refused" in p:
            print(f"{k:<28}{'refused':>10}  {p['refused'][:90]}")


def print_rows(rows: list[dict]) -> None:
    """Each row's overheads, and the SASS the tool's choice adds an event."""
    cols = ("default", "global", "staged", "resident", "hand_written", "floor", "iket")
    print(f"{'loop':<9}{'site':<12}{'iters':>6}{'chosen':>10}{'SASS':>8}" + "".join(f"{c:>14}" for c in cols))
    for r in rows:
        print(f"{r['loop']:<9}{r['site']:<12}{r['iterations'] or '-':>6}{r['default_recorder']:>10}"
              f"{r['sass']['default']['added']:>+8.2f}" + "".join(f"{_pct(r.get(c)):>14}" for c in cols))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="compile every build into WORK and print what each probe adds to the SASS")
    b.add_argument("work", type=Path)
    b.add_argument("--iket", action="store_true", help="also read IKeT's event in the same loops' SASS (CuTe DSL)")
    sub.add_parser("plan", help="print what each of WORK's builds adds to the SASS (a build made elsewhere)").add_argument(
        "work", type=Path)
    r = sub.add_parser("run", help="run WORK's builds and print the table")
    r.add_argument("work", type=Path)
    r.add_argument("--rounds", type=int, default=3)
    r.add_argument("--reps", type=int, default=21)
    r.add_argument("--iket", action="store_true", help="also run IKeT on the same loops (CuTe DSL, run-iket)")
    r.add_argument("--json", type=Path)
    a = ap.parse_args()
    if getattr(a, "iket", False) and not iket_available():
        print("--iket: the CuTe DSL and IKeT (nvidia-cutlass-dsl) are not installed here", file=sys.stderr)
        return 2
    if a.cmd == "plan" and not (a.work / "plan.json").is_file():
        print(f"{a.work}: no plan.json (make one with: python3 bench/probe_cost/run.py build {a.work})", file=sys.stderr)
        return 2
    if a.cmd in ("build", "plan"):
        if a.cmd == "build":
            build(a.work, iket=a.iket)
        print_plan(json.loads((a.work / "plan.json").read_text()))
        return 0
    res = run(a.work, a.rounds, a.reps, a.iket)
    print_rows(res["rows"])
    for k, c in res["captures"].items():
        failed = f", failed: {c['failed']}" if c["failed"] else ""
        print(f"capture {k}: {c['verdict']}, {c['events']} events{failed}")
    if a.json:
        a.json.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "device": device(), **res}, indent=2) + "\n")
    return 0 if all(c["verdict"] == "valid" for c in res["captures"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
