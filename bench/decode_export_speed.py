"""Decode and export throughput on a SYNTHETIC 10M-event capture (not device data).

    python bench/decode_export_speed.py [--events 10000000] [--repeat 3]

Builds a format-v1 buffer in memory (8192 warp owners, two alternating sites forming one interval,
8-byte events), writes it with its sidecar, then times (warm, median) decode_file (goal >= 50 M events/s),
validate's per-launch checks, summary, and the Perfetto encoding (goal >= 2 M events/s). One table.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

from atrex_inject.decode import decode_file
from atrex_inject.export import trace_bytes
from atrex_inject.layout import HEADER_BYTES, OWNER_DTYPE, build_header
from atrex_inject.summary import summarize_launch
from atrex_inject.validate import validate_capture


def synthetic(dirpath: Path, events: int) -> dict:
    grid, block = (1024, 1, 1), (256, 1, 1)
    owners = 1024 * 8
    cap = events // owners
    source_id = "ab" * 32
    groups = [{"role": "lane0", "role_code": 1, "cta_stride": 1, "cta_limit": 0, "warp_mask": 0xFFFFFFFF}]
    h = build_header(groups, grid, block, cap, 8, False, source_id, 0)
    own = np.zeros(owners, dtype=OWNER_DTYPE)
    o = np.arange(owners)
    own["claims"], own["attempted"], own["smid"] = 1, cap, o // 8 % 132
    own["cta"], own["thread"] = o // 8, (o % 8) * 32
    t0 = np.uint64(1_790_000_000_000_000_000)
    own["t0_lo"], own["t0_hi"] = int(t0 & np.uint64(0xFFFFFFFF)), int(t0 >> np.uint64(32))
    ev = np.zeros((owners, cap, 2), dtype="<u4")
    ev[:, :, 0] = (int(t0 & np.uint64(0xFFFFFFFF)) + 64 + np.arange(cap)[None, :] * 96 + o[:, None] * 7) & 0xFFFFFFFF
    ev[:, :, 1] = 0x80000000 | (np.arange(cap) % 2)[None, :]
    raw = h.tobytes() + own.tobytes() + ev.tobytes()
    assert len(raw) == int(h["total_bytes"][0]) and len(h.tobytes()) == HEADER_BYTES
    (dirpath / "synth-launch0.atrex").write_bytes(raw)
    (dirpath / "synth-launch0.json").write_text(json.dumps(
        {"source_id": source_id, "launch_seq": 0, "crc32": zlib.crc32(raw), "workload": "synthetic",
         "device": {"uuid": "GPU-synthetic"}}))
    return {"kernel": "synth", "source": {"source_id": source_id},
            "groups": [{**groups[0], "id": 0, "predicate": None}],
            "sites": [{"id": 0, "name": "a", "group": 0}, {"id": 1, "name": "b", "group": 0}],
            "intervals": [{"name": "a -> b", "start": "a", "end": "b"}], "expect": {}}


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
        m = synthetic(d, a.events)
        f = d / "synth-launch0.atrex"
        t_dec, launch = best(lambda: decode_file(f, m), a.repeat)
        n = launch.n_events
        t_val, rep = best(lambda: validate_capture(d, m), 1)
        t_sum, _ = best(lambda: summarize_launch(launch, m), a.repeat)
        t_exp, data = best(lambda: trace_bytes([launch], m), 1)
        size = f.stat().st_size
    print(f"{'stage':<34}{'events':>12}{'seconds':>10}{'M events/s':>12}")
    for name, t in (("decode (file -> canonical events)", t_dec), ("validate (decode + all checks)", t_val),
                    ("summary (intervals + marks)", t_sum), ("export (.pftrace encoding)", t_exp)):
        print(f"{name:<34}{n:>12,}{t:>10.3f}{n / t / 1e6:>12.1f}")
    print(f"synthetic buffer: {size / 1e6:.0f} MB; trace {len(data) / 1e6:.0f} MB; "
          f"verdict {rep['verdict']}")


if __name__ == "__main__":
    main()
