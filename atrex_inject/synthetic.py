"""SYNTHETIC captures (not device data) at sizes no committed fixture has, for benchmarks and tests.

The buffer is laid out by the real layout code (build_header, OWNER_DTYPE) and checksummed like a
device capture, so decode, validate, summary and export read it exactly as they read one from the
GPU. Its shape follows the probe-cost FMA loop with every warp recording (8 warps per CTA, lane 0
writes): each owner records `iter_begin`/`iter_end` pairs, one interval `iter_begin -> iter_end`,
with durations that differ by owner (a per-warp speed) and by iteration (noise), so owner selection
has a distribution to choose from, and times in whole 32 ns ticks, as an H200's %globaltimer reads.
Everything it writes says synthetic: the kernel, the manifest's question, the sidecar's workload
and device.
"""
from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np

from .layout import OWNER_DTYPE, build_header

KERNEL = "synthetic_fma"
SOURCE_ID = "5e" * 32
WARPS = 8
T0 = 1_790_000_000_000_000_000  # a %globaltimer-like start (ns), a multiple of its tick
TICK = 32  # %globaltimer's resolution on an H200 (ns)
GROUP = {"id": 0, "role": "lane0", "role_code": 1, "cta_stride": 1, "cta_limit": 0, "warp_mask": 0xFFFFFFFF,
         "predicate": None}


def manifest(capacity: int) -> dict:
    sites = [{"id": i, "name": n, "role": "lane0", "group": 0, "position": "loop-begin" if i == 0 else "loop-end",
              "anchor": {"kind": "loop", "pattern": "synthetic", "occurrence": None}, "payload": None, "every": 1,
              "source_line": 0, "instrumented_line": 0} for i, n in enumerate(("iter_begin", "iter_end"))]
    return {"format": "atrex-manifest", "version": 1, "backend": "cuda", "name": "synthetic",
            "question": "SYNTHETIC capture (not device data)", "kernel": KERNEL,
            "source": {"path": "synthetic.cu", "source_id": SOURCE_ID, "clean_sha256": "0" * 64,
                       "instrumented_sha256": "0" * 64},
            # the fields snapshot.check_manifest requires of every manifest; nothing was applied
            "clean_copy": "clean/synthetic.cu", "patch": {"path": "instrumented.patch", "sha256": "0" * 64},
            "applied_utc": "1970-01-01T00:00:00Z",
            "capture": {"capacity": capacity, "clock": False, "skip": 0, "count": 1, "event_bytes": 8,
                        "staging": None},
            "groups": [GROUP], "sites": sites,
            "intervals": [{"name": "iter_begin -> iter_end", "start": "iter_begin", "end": "iter_end"}], "expect": {}}


def write_capture(out_dir: str | Path, events: int, per_owner: int = 2048, seed: int = 0) -> dict:
    """Write `<kernel>-launch0.atrex` + sidecar + manifest.json holding about `events` events
    (`per_owner` per warp, rounded to whole CTAs of 8 warps); returns the manifest."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cap = max(2, per_owner - per_owner % 2)
    ctas = max(1, round(events / (cap * WARPS)))
    n = ctas * WARPS
    rng = np.random.default_rng(seed)
    h = build_header([GROUP], (ctas, 1, 1), (WARPS * 32, 1, 1), cap, 8, False, SOURCE_ID, 0)
    own = np.zeros(n, dtype=OWNER_DTYPE)
    o = np.arange(n)
    start = T0 + (o // WARPS // 132) * 50_000 + rng.integers(0, 2_000, n) // TICK * TICK  # waves of 132 CTAs
    own["claims"], own["attempted"], own["smid"] = 1, cap, o // WARPS % 132
    own["cta"], own["thread"] = o // WARPS, o % WARPS * 32
    own["t0_lo"], own["t0_hi"] = start & 0xFFFFFFFF, start >> 32
    speed = rng.lognormal(0.0, 0.15, n)[:, None]  # per warp
    step = (rng.gamma(8.0, 40.0, (n, cap)) * speed).astype(np.int64) + 32  # ns between events
    t = start[:, None] + np.cumsum(step, axis=1) // TICK * TICK  # what %globaltimer reads
    ev = np.empty((n, cap, 2), dtype="<u4")
    ev[:, :, 0] = t & 0xFFFFFFFF
    ev[:, :, 1] = 0x80000000 | (np.arange(cap) % 2)[None, :]
    raw = h.tobytes() + own.tobytes() + ev.tobytes()
    name = f"{KERNEL}-launch0"
    (out_dir / f"{name}.atrex").write_bytes(raw)
    (out_dir / f"{name}.json").write_text(json.dumps(
        {"format": "atrex-timeline-capture", "version": 1, "file": f"{name}.atrex", "kernel": KERNEL, "launch_seq": 0,
         "grid": [ctas, 1, 1], "block": [WARPS * 32, 1, 1], "source_id": SOURCE_ID, "workload": "synthetic",
         "device": {"name": "none (SYNTHETIC capture)", "uuid": "GPU-synthetic"}, "bytes": len(raw),
         "crc32": zlib.crc32(raw)}))
    m = manifest(cap)
    (out_dir / "manifest.json").write_text(json.dumps(m, indent=2))
    return m
