"""Where a resident owner's exit spends its time (run on the GPU host): builds an example with its spec
plus resident rings and the `exit_clock` runtime of variants.py (the committed exit, its phases timed
with %clock), runs it once with a capture, and prints per owner group and warp the phases' cycles:

    reads   from the exit call to every group's reads returned (table entry, header constants)
    copies  from there to the last ring copy issued
    headers from there to the headers issued (the end time is read in this phase)
    total   from the owner's last event (its exit probe) to its end time, in ns (the 32 ns timer)

for each of --variants (variants.py names whose runtime has exit_clock's phase clocks: exit_clock,
warm_consts_clock), and, with --samples N, each one's overhead and the spec's with resident rings,
each against the clean build, N+N fresh processes, alternating.

    python3 bench/perturbation/exit_phases.py [--example reduce_sumsq] [--variants exit_clock] [--samples 0]
        [--rounds 1] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from atrex_inject.decode import capture_files, decode_parts, open_capture
from atrex_inject.manifest import load as load_manifest


def _load_variants():
    """bench/perturbation/variants.py, loaded from its file (this folder's iket.py would shadow `iket`)."""
    spec = importlib.util.spec_from_file_location("atrex_bench_perturbation_variants",
                                                  Path(__file__).with_name("variants.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


variants = _load_variants()
run = variants.run


def phases(capture: Path, manifest) -> dict[str, np.ndarray]:
    """Per claimed owner: group, warp, the three phases in cycles, and its last event to its end time
    in ns. The file is opened once: the owner table (with the clocks in clk0 and pad) and the events."""
    c = open_capture(capture, manifest)
    events = next(decode_parts(c, manifest)).events
    last = np.zeros(len(c.own), dtype=np.int64)
    np.maximum.at(last, events["owner"], events["t_ns"])
    claimed = c.own["claims"] > 0
    clk0 = c.own["clk0"][claimed].astype(np.int64)
    return {"group": c.owners["group"][claimed], "warp": c.own["thread"][claimed].astype(np.int64) // 32,
            "reads": clk0 & 0xFFFF, "copies": clk0 >> 16, "headers": c.own["pad"][claimed].astype(np.int64),
            "total_ns": (c.owners["t1"] - last)[claimed]}


def summary(p: dict[str, np.ndarray]) -> list[dict]:
    """Medians per owner group, the CTA's warp 0 (its last) apart from warps 1-7."""
    out = []
    for g in np.unique(p["group"]).tolist():
        for first in (False, True):
            sel = (p["group"] == g) & ((p["warp"] == 0) == first)
            if sel.any():
                out.append({"group": g, "warp": "0" if first else "1-7", "owners": int(sel.sum()),
                            **{f: float(np.median(p[f][sel])) for f in ("reads", "copies", "headers", "total_ns")},
                            "max_total_ns": int(p["total_ns"][sel].max())})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--example", default="reduce_sumsq", choices=sorted(variants.KERNELS))
    ap.add_argument("--variants", default="exit_clock")
    ap.add_argument("--samples", type=int, default=0, help="also measure the overhead, N+N processes (multiple of 4)")
    ap.add_argument("--rounds", type=int, default=1, help="measurements of every arm, one after the other")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    clocked = [f"{v}-resident" for v in a.variants.split(",") if v]
    names = ["spec-resident", *clocked]
    with tempfile.TemporaryDirectory() as tmp:
        work = run.workspace(Path(tmp))
        bins, regs = variants.build(work, a.example, names)
        result = {"example": a.example, "device": run._device(), "registers": regs, "variants": {}, "overhead": []}
        for v in clocked:
            cap = work / f"cap-{v}"
            cap.mkdir()
            subprocess.run([str(bins[v]), "--warmup", str(run.EXAMPLES[a.example][0]), "--iters", "3"], check=True,
                           env=dict(os.environ, ATREX_TIMELINE_OUT=str(cap)), capture_output=True)
            result["variants"][v] = {"phases": summary(phases(capture_files(cap)[0], load_manifest(
                work / f"manifest-{a.example}-{v}.json")))}
        for _ in range(a.rounds if a.samples else 0):
            result["overhead"] += [run.arm(work, a.example, bins, n, a.samples) for n in names]
    print(f"{a.example}, resident exit phases (median cycles; total: exit probe to end time, ns); registers {regs}")
    print(f"{'variant':<26}{'group':>6}{'warp':>6}{'owners':>8}{'reads':>8}{'copies':>8}{'headers':>9}{'total ns':>10}"
          f"{'max ns':>8}")
    for v, d in result["variants"].items():
        for s in d["phases"]:
            print(f"{v:<26}{s['group']:>6}{s['warp']:>6}{s['owners']:>8}{s['reads']:>8.0f}{s['copies']:>8.0f}"
                  f"{s['headers']:>9.0f}{s['total_ns']:>10.0f}{s['max_total_ns']:>8}")
    for r in result["overhead"]:
        print(f"  {r['arm']:<22}{run._pct(r['overhead']):>9} {run._ci(r['ci95']):>20}")
    if a.json:
        a.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
