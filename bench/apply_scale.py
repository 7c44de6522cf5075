"""Does apply scale linearly with the source's size, and where does the time go?

    python bench/apply_scale.py [--mb 1 2 4 8] [--limit-s 30]

For each size, a fresh process builds a synthetic .cu of that many MB (bench/apply_speed.py's
kernel text repeated), times the CUDA front end alone over it (parse_source: lexing the whole
file with the grammar's terminals, matching brackets, finding kernels and launches), then the
whole apply (that front end again, then rewrite, patch, manifest, atomic writes), and reports
the apply's CPU seconds and its own peak memory. "rest s" is apply minus the front end: the
snapshot machinery's share. On a shared machine wall seconds grow with the load average (printed
per row); CPU seconds much less. The issue's goal is a 50 MB source in under 30 s and 1 GB.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def one(mb: float) -> dict:
    sys.path.insert(0, str(HERE))
    from apply_speed import KERNEL, timed_apply

    from atrex_inject.cuda.source import parse_source

    parse_source("__global__ void warm() {}")
    unit = [KERNEL.format(i=i) for i in range(1000)]
    parts, size, i = ["#include <cuda_runtime.h>\n"], 0, 0
    while size < mb * 1e6:
        parts.append(unit[i % 1000].replace(f"k{i % 1000}", f"k{i}").replace(f"launch{i % 1000}", f"launch{i}"))
        size += len(parts[-1])
        i += 1
    text = "".join(parts)
    del parts
    load = os.getloadavg()[0]
    parse_s, apply_s, apply_cpu_s = timed_apply(text, "k7")
    return {"mb": len(text) / 1e6, "parse_s": parse_s, "apply_s": apply_s, "apply_cpu_s": apply_cpu_s, "load": load,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--limit-s", type=float, default=30.0, help="goal for the largest size, scaled to 50 MB")
    ap.add_argument("--child", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        print(json.dumps(one(a.child)))
        return
    print(f"{'MB':>7} {'parse s':>8} {'apply s':>8} {'rest s':>7} {'MB/s':>6} {'apply CPU s':>12} {'peak MB':>8} "
          f"{'load':>5}")
    rows = []
    for mb in a.mb:
        out = subprocess.run([sys.executable, __file__, "--child", str(mb)], capture_output=True, text=True,
                             check=True).stdout
        r = json.loads(out)
        rows.append(r)
        print(f"{r['mb']:>7.1f} {r['parse_s']:>8.2f} {r['apply_s']:>8.2f} {r['apply_s'] - r['parse_s']:>7.2f} "
              f"{r['mb'] / r['apply_s']:>6.2f} {r['apply_cpu_s']:>12.2f} {r['peak_mb']:>8.0f} {r['load']:>5.1f}")
    last = rows[-1]
    print(f"extrapolated to 50 MB at the largest size's rate: {50 / last['mb'] * last['apply_s']:.0f} s "
          f"({50 / last['mb'] * last['apply_cpu_s']:.0f} s CPU; goal {a.limit_s:.0f} s), "
          f"{50 / last['mb'] * last['peak_mb']:.0f} MB peak (goal 1024 MB)")


if __name__ == "__main__":
    main()
