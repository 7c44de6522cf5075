"""IKeT's per-event figure in the same run as ours (GPU host, CuTe DSL bundle installed): runs
iket_fma.py clean and with --probe under run-iket, ABBA-interleaved for --rounds rounds, each run a
fresh process, and writes {"overhead", "clean_ms", "iket_ms", "samples"} for bench/perturbation/run.py.

    python3 bench/perturbation/iket.py [--rounds 2] --json iket.json
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def sample(probe: bool, work: Path, i: int, iters: int) -> float:
    cmd = [sys.executable, str(HERE / "iket_fma.py"), "--iters", str(iters)]
    if probe:
        cmd = [sys.executable, "-m", "iket.cli.main", "-o", str(work / f"iket-{i}"), "profile", "--postprocess",
               "none", "--", *cmd, "--probe"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return json.loads(lines[-1])["median_ms"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=1024, help="the FMA loop's trip count (bench/probe_cost's FMA_ITERATIONS)")
    ap.add_argument("--json", type=Path, required=True)
    a = ap.parse_args()
    clean, probed = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for probe in (False, True, True, False) if r % 2 == 0 else (True, False, False, True):
                (probed if probe else clean).append(sample(probe, Path(tmp), len(clean) + len(probed), a.iters))
    c, k = statistics.median(clean), statistics.median(probed)
    res = {"overhead": k / c - 1, "clean_ms": c, "iket_ms": k, "samples": {"clean": clean, "iket": probed},
           "iterations": a.iters,
           "loop": f"fma: 8 CTAs x 256 threads per SM, {a.iters} x 128 FMA per thread, one iket.mark per iteration"}
    a.json.write_text(json.dumps(res, indent=2) + "\n")
    print(f"IKeT per-event, FMA loop of {a.iters} iterations: {100 * res['overhead']:+.2f}% (clean {c:.4f} ms, iket {k:.4f} ms, "
          f"{len(clean)}+{len(probed)} processes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
