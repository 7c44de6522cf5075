"""Per-event cost of the probes, every warp recording (run on the GPU host): an FMA-bound loop and
a memory-bound copy, one event per iteration, site at loop-begin and at loop-end, the FMA loop at
1024 and 2048 iterations. Each loop is measured clean, with a hand-written lane-0 store (what a
probe macro does), with the store floor (every lane storing one 4-byte value to a per-warp shared
slot, the least a store-based probe can cost), and instrumented from fma.toml / copy.toml with the
recorder the tool chose (`default`) and with each recorder it can run (`global`, `staged`,
`resident`; resident rings of the FMA loop's 2048 events a warp do not fit a CTA's shared memory).

`build WORK` compiles every build into WORK (nvcc; the recorder choice compiles its candidates,
so it runs where nvcc is, the GPU host or not); `run WORK` runs them interleaved for several
rounds in one session (each binary a fresh process timing `reps` launches of every kernel),
validates the first captured launch of each instrumented build, and prints the overhead of each
against the same run's clean kernel:

    python3 bench/probe_cost/run.py build WORK
    python3 bench/probe_cost/run.py run WORK [--rounds 2] [--reps 21] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from atrex_inject import snapshot
from atrex_inject.manifest import load as load_manifest
from atrex_inject.spec import with_recorder
from atrex_inject.validate import validate_dir

HERE = Path(__file__).resolve().parent
NVCC = ["nvcc", "-O3", "-gencode=arch=compute_90a,code=sm_90a"]
FMA_ITERATIONS = (1024, 2048)  # the FMA loop's trip counts (the program's second argument)
SITES = ("loop-begin", "loop-end")
# loop -> (the program's timing fields: instrumented kernel, hand-written, floor), recorders it runs
LOOPS = {"fma": (("fma_loop_ms", "fma_manual_ms", "fma_floor_ms"), ("default", "global", "staged")),
         "copy": (("copy_loop_ms", "copy_manual_ms", "copy_floor_ms"), ("default", "global", "staged", "resident"))}
WARPS = 8  # both kernels launch 256-thread blocks


def builds() -> list[tuple[str, str, str, str]]:
    """(name, loop, site, recorder) of each instrumented build: `fma.loop-end.staged`, ..."""
    return [(f"{loop}.{site}.{rec}", loop, site, rec) for loop, (_, recs) in LOOPS.items() for site in SITES
            for rec in recs]


def _spec(work: Path, loop: str, site: str, recorder: str) -> Path:
    """The loop's spec with its site at `site`, under its build's name, with the recorder (default:
    the spec's own, auto)."""
    base = work / f"{loop}.toml"
    text = base.read_text().replace('position = "loop-begin"', f'position = "{site}"')
    name = f"{loop}_{site.replace('-', '_')}"
    text = re.sub(r'(?m)^name = "[^"]+"', f'name = "bench_{name}"', text, count=1)
    spec = work / f"{name}.toml"
    spec.write_text(text)
    return spec if recorder == "default" else with_recorder(spec, recorder)


def build(work: Path) -> None:
    """The clean binary and each instrumented one into WORK, with a plan.json naming them and the
    recorder each runs: applied and reverted one at a time (apply holds the project's lock),
    compiled in parallel."""
    work.mkdir(parents=True, exist_ok=True)
    for f in ("probe_cost.cu", "timing.cuh", "fma.toml", "copy.toml"):
        shutil.copy(HERE / f, work / f)
    (work / ".git").mkdir(exist_ok=True)  # marks the project root for the specs' paths
    plan = {"clean": {"binary": "clean"}}
    for name, loop, site, rec in builds():
        spec = _spec(work, loop, site, rec)
        m = snapshot.apply(spec, root=work).manifest
        shutil.copy(work / "probe_cost.cu", work / f"{name}.cu")
        (work / f"{name}.manifest.json").write_text(m.dumps())
        snapshot.revert(spec, root=work)
        plan[name] = {"binary": name, "loop": loop, "site": site, "recorder": rec, "chosen": m.recorder["recorder"]}
    inc = snapshot.runtime_header().parent

    def compile_one(name: str) -> None:
        src = work / ("probe_cost.cu" if name == "clean" else f"{name}.cu")
        subprocess.run([*NVCC, f"-I{inc}", f"-I{work}", "-o", work / name, src], check=True)

    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        list(pool.map(compile_one, plan))
    (work / "plan.json").write_text(json.dumps(plan, indent=2) + "\n")


def _run_one(binary: Path, reps: int, iters: int, capture: Path | None) -> dict:
    env = dict(os.environ)
    if capture:
        capture.mkdir(parents=True, exist_ok=True)
        env["ATREX_TIMELINE_OUT"] = str(capture)
    out = subprocess.run([binary, str(reps), str(iters)], check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def run(work: Path, rounds: int, reps: int) -> dict:
    """Every build at every FMA trip count, `rounds` times (odd rounds in reverse order), then the
    rows: per loop, site and trip count, each column's overhead against the clean kernel."""
    plan = json.loads((work / "plan.json").read_text())
    samples: dict[tuple[str, int], list[dict]] = {(k, n): [] for k in plan for n in FMA_ITERATIONS}
    order = list(samples)
    for r in range(rounds):
        for k, n in (order if r % 2 == 0 else order[::-1]):
            cap = work / f"cap_{k}_{n}" if k != "clean" and r == 0 else None
            samples[k, n].append(_run_one(work / plan[k]["binary"], reps, n, cap))
    checks = {}
    for k in plan:
        if k == "clean":
            continue
        report, launches = validate_dir(work / f"cap_{k}_{FMA_ITERATIONS[0]}", load_manifest(work / f"{k}.manifest.json"))
        checks[k] = {"verdict": report["verdict"], "events": sum(l.n_events for l in launches),
                     "failed": [c["name"] for c in report["checks"] if not c["ok"]]}
    med = lambda k, n, f: statistics.median(s[f] for s in samples[k, n])  # noqa: E731
    rows = []
    for loop, ((kernel, manual, floor), recs) in LOOPS.items():
        for n in (FMA_ITERATIONS if loop == "fma" else FMA_ITERATIONS[:1]):
            base = med("clean", n, kernel)
            for site in SITES:
                row = {"loop": loop, "site": site, "iterations": n if loop == "fma" else None, "base_ms": base,
                       "hand_written": med("clean", n, manual) / base - 1, "floor": med("clean", n, floor) / base - 1}
                for rec in recs:
                    key = f"{loop}.{site}.{rec}"
                    row["default_recorder" if rec == "default" else f"{rec}_capture"] = (
                        plan[key]["chosen"] if rec == "default" else checks[key])
                    row[rec] = med(key, n, kernel) / base - 1
                row["default_capture"] = checks[f"{loop}.{site}.default"]
                rows.append(row)
    return {"rows": rows, "samples": {f"{k}@{n}": v for (k, n), v in samples.items()}, "captures": checks}


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:+.2f}%"


def print_rows(rows: list[dict]) -> None:
    cols = ("default", "global", "staged", "resident", "hand_written", "floor")
    print(f"{'loop':<6}{'site':<12}{'iters':>6}{'chosen':>10}" + "".join(f"{c:>14}" for c in cols))
    for r in rows:
        print(f"{r['loop']:<6}{r['site']:<12}{r['iterations'] or '-':>6}{r['default_recorder']:>10}"
              + "".join(f"{_pct(r.get(c)):>14}" for c in cols))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="compile every build into WORK")
    b.add_argument("work", type=Path)
    r = sub.add_parser("run", help="run WORK's builds and print the table")
    r.add_argument("work", type=Path)
    r.add_argument("--rounds", type=int, default=2)
    r.add_argument("--reps", type=int, default=21)
    r.add_argument("--json", type=Path)
    a = ap.parse_args()
    if a.cmd == "build":
        build(a.work)
        return 0
    res = run(a.work, a.rounds, a.reps)
    print_rows(res["rows"])
    for k, c in res["captures"].items():
        print(f"capture {k}: {c['verdict']}, {c['events']} events" + (f", failed: {c['failed']}" if c["failed"] else ""))
    if a.json:
        a.json.write_text(json.dumps(res, indent=2) + "\n")
    return 0 if all(c["verdict"] == "valid" for c in res["captures"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
