"""IKeT's per-event figure in the same run as ours (GPU host, CuTe DSL bundle installed), on the loop
shapes of bench/probe_cost: runs iket_loops.py clean and with --probe under run-iket,
ABBA-interleaved for --rounds rounds, each run a fresh process timing every shape at every trip
count (one process for all shapes: each run under run-iket pays IKeT's tracker run and start-up
once), and writes, for bench/perturbation/run.py fold, {"rows": [{"shape", "iterations",
"overhead", "clean_ms", "iket_ms", "samples"}], "processes", "loop"}. run-iket holds every launch
of a process in device memory, each at the most events a warp records in any, so
scripts/gpu-perturbation.sh runs it once a trip count.

    python3 bench/perturbation/iket.py [--rounds 1] [--shapes fma,...] [--iters 1024,2048] --json iket.json
"""
import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from measuring import device  # noqa: E402

HERE = Path(__file__).resolve().parent
SHAPES = "fma,fma_dep,copy,smem,mma"  # iket_loops.py's, bench/probe_cost's


def sample(probe: bool, out: Path, shapes: str, iters: str) -> list[dict]:
    """One process's runs; its IKeT output folder (every launch's trace) removed after it."""
    cmd = [sys.executable, str(HERE / "iket_loops.py"), "--shapes", shapes, "--iters", iters]
    if probe:
        cmd = [sys.executable, "-m", "iket.cli.main", "-o", str(out), "profile", "--postprocess", "none", "--", *cmd,
               "--probe"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    shutil.rmtree(out, ignore_errors=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return json.loads(lines[-1])["runs"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--shapes", default=SHAPES)
    ap.add_argument("--iters", default="1024,2048", help="the trip counts (bench/probe_cost's TRIPS)")
    ap.add_argument("--json", type=Path, required=True)
    a = ap.parse_args()
    clean, probed = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for probe in (False, True, True, False) if r % 2 == 0 else (True, False, False, True):
                n = len(clean) + len(probed)
                (probed if probe else clean).append(sample(probe, Path(tmp) / f"iket-{n}", a.shapes, a.iters))
    rows = []
    for k, run in enumerate(clean[0]):
        c = [s[k]["median_ms"] for s in clean]
        i = [s[k]["median_ms"] for s in probed]
        rows.append({"shape": run["shape"], "iterations": run["iterations"], "overhead": statistics.median(i) /
                     statistics.median(c) - 1, "clean_ms": statistics.median(c), "iket_ms": statistics.median(i),
                     "samples": {"clean": c, "iket": i}})
        r = rows[-1]
        print(f"IKeT per event, {run['shape']} at {run['iterations'] or 'its data'} iterations: "
              f"{100 * r['overhead']:+.2f}% (clean {r['clean_ms']:.4f} ms, iket {r['iket_ms']:.4f} ms)")
    res = {"date": time.strftime("%Y-%m-%d"), "device": device(), "rows": rows,
           "processes": {"clean": len(clean), "iket": len(probed)},
           "loop": "bench/probe_cost's loop shapes in CuTe DSL (iket_loops.py), one iket.mark per iteration"}
    a.json.write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
