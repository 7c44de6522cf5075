"""Probe-cost benchmark (run on the GPU host): no probe vs. hand-written minimal probe vs. atrex
probes inserted from a spec, in an FMA-bound loop and a memory-bound copy.

Builds six binaries: clean (which also holds the hand-written probe kernels), and fma_loop /
copy_loop instrumented from fma.toml / copy.toml, each as written (events stored straight to
global memory) and with shared-memory staging added to its [capture] table, and copy_loop with
resident staging (every event kept in shared memory until exit; the FMA loop's 1024 events a warp
would need 64 KiB of static shared memory per CTA, more than a CTA may declare). Runs them
interleaved for several rounds in one session, validates the first captured launch of each
instrumented binary, and prints overhead % and added issue cycles per probe (4 schedulers per
SM), all relative to the same run's baseline. `--packed` adds each instrumented build again with
`packed = true` (4-byte events: the site id in the timer's low bits), as the `*_packed` columns.

    python bench/probe_cost/run.py [--rounds 3] [--reps 21] [--staging 32] [--packed] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from atrex_inject import snapshot
from atrex_inject.spec import staged_copy
from atrex_inject.validate import validate_dir

HERE = Path(__file__).resolve().parent
NVCC = ["nvcc", "-O3", "-gencode=arch=compute_90a,code=sm_90a"]
LOOPS = {"fma": ("fma_loop_ms", "fma_manual_ms", "fma_floor_ms"), "copy": ("copy_loop_ms", "copy_manual_ms",
                                                                          "copy_floor_ms")}
WARPS = 8  # both kernels launch 256-thread blocks
# (loop, staging kind): as written (global memory), staged rings, resident rings
VARIANTS = (("fma", ""), ("fma", "staged"), ("copy", ""), ("copy", "staged"), ("copy", "resident"))
KINDS = ("", "staged", "resident")  # as written (the `atrex` column), staged, resident


def _key(loop: str, kind: str, packed: bool) -> str:
    """A build's name: `copy`, `copy_staged`, `copy_resident_packed`, ..."""
    return "_".join(k for k in (loop, kind, "packed" if packed else "") if k)


COLUMNS = [_key("", kind or "atrex", p) for p in (False, True) for kind in KINDS]  # atrex, ..., resident_packed


def build(work: Path, staging: int, packed: bool) -> tuple[dict[str, Path], dict[str, dict]]:
    """The clean binary and each instrumented one: applied, copied and reverted one at a time (apply
    holds the project's lock), compiled in parallel."""
    bins = {"clean": work / "clean"}
    manifests, sources = {}, {"clean": work / "probe_cost.cu"}
    for (loop, kind), pack in [(v, p) for p in ((False, True) if packed else (False,)) for v in VARIANTS]:
        key = _key(loop, kind, pack)
        spec = work / f"{loop}.toml"
        if kind or pack:
            spec = staged_copy(spec, staging if kind == "staged" else None, WARPS if kind else 0, packed=pack)
        manifests[key] = snapshot.apply(spec, root=work).manifest
        bins[key], sources[key] = work / f"inst_{key}", work / f"inst_{key}.cu"
        shutil.copy(work / "probe_cost.cu", sources[key])
        snapshot.revert(spec, root=work)
    inc = snapshot.runtime_header().parent
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: subprocess.run([*NVCC, f"-I{inc}", f"-I{work}", "-o", bins[k], sources[k]], check=True),
                      bins))
    return bins, manifests


def run(binary: Path, reps: int, capture: Path | None) -> dict:
    env = dict(os.environ)
    if capture:
        capture.mkdir(parents=True, exist_ok=True)
        env["ATREX_TIMELINE_OUT"] = str(capture)
    out = subprocess.run([binary, str(reps)], check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--staging", type=int, default=32, help="events per warp ring in the staged variants")
    ap.add_argument("--packed", action="store_true", help="also measure every instrumented build with 4-byte events")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for f in ("probe_cost.cu", "timing.cuh", "fma.toml", "copy.toml"):
            shutil.copy(HERE / f, work / f)
        (work / ".git").mkdir()  # marks the project root for the specs' paths
        bins, manifests = build(work, a.staging, a.packed)
        samples: dict[str, list[dict]] = {k: [] for k in bins}
        order = list(bins)
        for r in range(a.rounds):
            for k in (order if r % 2 == 0 else order[::-1]):
                samples[k].append(run(bins[k], a.reps, work / f"cap_{k}" if k != "clean" else None))
        checks = {}
        for k, m in manifests.items():
            report, launches = validate_dir(work / f"cap_{k}", m)
            checks[k] = {"verdict": report["verdict"], "events": sum(l.n_events for l in launches),
                         "failed": [c["name"] for c in report["checks"] if not c["ok"]]}
    med = lambda k, f: statistics.median(s[f] for s in samples[k])  # noqa: E731
    s0 = samples["clean"][0]
    cyc = lambda dt_ms, probes: dt_ms * 1e-3 * s0["clock_khz"] * 1e3 * s0["sms"] * 4 / probes  # noqa: E731
    rows = []
    for loop, (base_f, man_f, floor_f) in LOOPS.items():
        base, man = med("clean", base_f), med("clean", man_f)
        probes = s0[f"probes_{loop}"]
        row = {"loop": loop, "base_ms": base, "manual_ms": man, "manual_pct": 100 * (man / base - 1),
               "floor_pct": 100 * (med("clean", floor_f) / base - 1),
               "manual_cycles_per_probe": cyc(man - base, probes),
               "spread_base_pct": 100 * (max(s[base_f] for s in samples["clean"]) /
                                         min(s[base_f] for s in samples["clean"]) - 1)}
        for kind, pack in ((k, p) for p in (False, True) for k in KINDS):
            key, col = _key(loop, kind, pack), _key("", kind or "atrex", pack)
            if key not in samples:
                continue
            t = med(key, base_f)
            row |= {f"{col}_ms": t, f"{col}_pct": 100 * (t / base - 1), f"{col}_cycles_per_probe": cyc(t - base, probes),
                    f"{col}_capture": checks[key]}
        rows.append(row)
    cols = [c for c in COLUMNS if any(f"{c}_pct" in r for r in rows)]
    print(f"{'loop':<6}{'base ms':>10}{'floor %':>9}{'manual %':>10}" + "".join(f"{c + ' %':>18}" for c in cols)
          + f"{'man cyc/pr':>11}{'atx cyc/pr':>11}{'stg cyc/pr':>11}{'base spread %':>14}")
    for r in rows:
        print(f"{r['loop']:<6}{r['base_ms']:>10.4f}{r['floor_pct']:>+9.2f}{r['manual_pct']:>+10.2f}"
              + "".join(f"{r[c + '_pct']:>+18.2f}" if c + "_pct" in r else f"{'-':>18}" for c in cols)
              + f"{r['manual_cycles_per_probe']:>11.2f}{r['atrex_cycles_per_probe']:>11.2f}"
              f"{r['staged_cycles_per_probe']:>11.2f}{r['spread_base_pct']:>14.2f}")
    for k, c in checks.items():
        print(f"capture {k}: {c['verdict']}, {c['events']} events" + (f", failed: {c['failed']}" if c["failed"] else ""))
    print(f"copy bandwidth {s0['copy_gbps']:.0f} GB/s; {s0['sms']} SMs at {s0['clock_khz'] / 1e6:.2f} GHz; "
          f"{a.rounds} rounds x {a.reps} reps, median; staging {a.staging} events x {WARPS} warps")
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "samples": samples}, indent=2))
    return 0 if all(c["verdict"] == "valid" for c in checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
