"""Decode and export throughput on a SYNTHETIC 10M-event capture (not device data).

    python bench/decode_export_speed.py [--events 10000000] [--repeat 3]

Writes a format-v1 buffer with atrex_inject.synthetic (8 warp owners per CTA, two alternating sites
forming one interval, 8-byte events), then times (warm, median) decode_file (goal >= 50 M events/s),
validate's per-launch checks, summary, and the Perfetto encoding of every event (--all; goal >= 2 M
events/s). One table.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from atrex_inject.decode import decode_file
from atrex_inject.export import trace_bytes
from atrex_inject.selection import choose, in_memory
from atrex_inject.summary import summarize_launch
from atrex_inject.synthetic import KERNEL, write_capture
from atrex_inject.validate import validate_capture


def best(fn, repeat):
    """Median of `repeat` timed calls after one untimed warm-up call (first-touch page faults)."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        m = write_capture(d, a.events, per_owner=1220)
        f = d / f"{KERNEL}-launch0.atrex"
        t_dec, launch = best(lambda: decode_file(f, m), a.repeat)
        n = launch.n_events
        t_val, rep = best(lambda: validate_capture(d, m), 1)
        t_sum, _ = best(lambda: summarize_launch(launch, m), a.repeat)
        t_exp, data = best(lambda: trace_bytes(choose([in_memory(launch)], m, everything=True), m), 1)
        size = f.stat().st_size
    print(f"{'stage':<34}{'events':>12}{'seconds':>10}{'M events/s':>12}")
    for name, t in (("decode (file -> canonical events)", t_dec), ("validate (decode + all checks)", t_val),
                    ("summary (intervals + marks)", t_sum), ("export (.pftrace encoding)", t_exp)):
        print(f"{name:<34}{n:>12,}{t:>10.3f}{n / t / 1e6:>12.1f}")
    print(f"synthetic buffer: {size / 1e6:.0f} MB; trace {len(data) / 1e6:.0f} MB; "
          f"verdict {rep['verdict']}")


if __name__ == "__main__":
    main()
