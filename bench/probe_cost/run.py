"""Probe-cost benchmark (run on the GPU host): no probe vs. hand-written minimal probe vs. atrex
probe inserted from a spec, in an FMA-bound loop and a memory-bound copy.

Builds three binaries (clean, fma_loop instrumented from fma.toml, copy_loop instrumented from
copy.toml), runs them interleaved for several rounds in one session, and prints overhead % and
added issue cycles per probe (4 schedulers per SM), all relative to the same run's baseline.

    python bench/probe_cost/run.py [--rounds 3] [--reps 21] [--json OUT.json]
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
from pathlib import Path

from atrex_inject import snapshot
from atrex_inject.decode import decode_dir

HERE = Path(__file__).resolve().parent
NVCC = ["nvcc", "-O3", "-gencode=arch=compute_90a,code=sm_90a"]


def build(work: Path) -> dict[str, Path]:
    bins = {"clean": work / "clean"}
    subprocess.run([*NVCC, "-o", bins["clean"], work / "probe_cost.cu"], check=True)
    inc = snapshot.runtime_header().parent
    for name in ("fma", "copy"):
        snapshot.apply(work / f"{name}.toml", root=work)
        bins[name] = work / f"inst_{name}"
        subprocess.run([*NVCC, f"-I{inc}", "-o", bins[name], work / "probe_cost.cu"], check=True)
        shutil.copy(work / ".atrex" / f"bench_{name}" / "manifest.json", work / f"manifest_{name}.json")
        snapshot.revert(work / f"{name}.toml", root=work)
    return bins


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
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for f in ("probe_cost.cu", "fma.toml", "copy.toml"):
            shutil.copy(HERE / f, work / f)
        (work / ".git").mkdir()  # marks the project root for the specs' paths
        bins = build(work)
        samples: dict[str, list[dict]] = {k: [] for k in bins}
        order = list(bins)
        for r in range(a.rounds):
            for k in (order if r % 2 == 0 else order[::-1]):
                samples[k].append(run(bins[k], a.reps, work / f"cap_{k}" if k != "clean" else None))
        events = {k: sum(l.n_events for l in decode_dir(work / f"cap_{k}",
                                                        json.loads((work / f"manifest_{k}.json").read_text())))
                  for k in ("fma", "copy")}
    med = lambda k, f: statistics.median(s[f] for s in samples[k])  # noqa: E731
    s0 = samples["clean"][0]
    cyc = lambda dt_ms, probes: dt_ms * 1e-3 * s0["clock_khz"] * 1e3 * s0["sms"] * 4 / probes  # noqa: E731
    rows = []
    for kind, base_f, man_f, inst in (("fma", "fma_loop_ms", "fma_manual_ms", "fma"),
                                      ("copy", "copy_loop_ms", "copy_manual_ms", "copy")):
        base, man, atx = med("clean", base_f), med("clean", man_f), med(inst, base_f)
        probes = s0[f"probes_{kind}"]
        rows.append({"loop": kind, "base_ms": base, "manual_ms": man, "atrex_ms": atx,
                     "manual_pct": 100 * (man / base - 1), "atrex_pct": 100 * (atx / base - 1),
                     "manual_cycles_per_probe": cyc(man - base, probes), "atrex_cycles_per_probe": cyc(atx - base, probes),
                     "spread_base_pct": 100 * (max(s[base_f] for s in samples["clean"]) /
                                               min(s[base_f] for s in samples["clean"]) - 1),
                     "events_decoded_first_launch": events[inst]})
    print(f"{'loop':<6}{'base ms':>10}{'manual ms':>11}{'atrex ms':>10}{'manual %':>10}{'atrex %':>9}"
          f"{'man cyc/pr':>11}{'atx cyc/pr':>11}{'base spread %':>14}")
    for r in rows:
        print(f"{r['loop']:<6}{r['base_ms']:>10.4f}{r['manual_ms']:>11.4f}{r['atrex_ms']:>10.4f}{r['manual_pct']:>+10.2f}"
              f"{r['atrex_pct']:>+9.2f}{r['manual_cycles_per_probe']:>11.2f}{r['atrex_cycles_per_probe']:>11.2f}"
              f"{r['spread_base_pct']:>14.2f}")
    print(f"copy bandwidth {s0['copy_gbps']:.0f} GB/s; {s0['sms']} SMs at {s0['clock_khz'] / 1e6:.2f} GHz; "
          f"{a.rounds} rounds x {a.reps} reps, median")
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "samples": samples}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
