"""SYNTHETIC captures (not device data) at sizes no committed fixture has, for benchmarks and tests.

The buffer is laid out by the real layout code (build_header, OWNER_DTYPE) and written with its
sidecar by the writer of Python captures (launchfile.write_launch), so decode, validate, summary
and export read it exactly as they read one from the GPU. Its shape follows the probe-cost FMA loop with every warp recording (8 warps per CTA, lane 0
writes): each owner records `iter_begin`/`iter_end` pairs, one interval `iter_begin -> iter_end`,
with durations that differ by owner (a per-warp speed) and by iteration (noise), so owner selection
has a distribution to choose from, and times in whole 32 ns ticks, as an H200's %globaltimer reads.
Everything it writes says synthetic: the kernel, the manifest's question, the sidecar's workload
and device.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .launchfile import write_launch
from .layout import OWNER_DTYPE, TAG_VALID, Role, build_header
from .manifest import FileRef, Manifest, PlacedSite, SourceIdentity
from .plan import CaptureSettings, Group
from .spec import Anchor, Interval

KERNEL = "synthetic_fma"
SOURCE_ID = "5e" * 32
RUN_ID = "5e" * 16
WARPS = 8
T0 = 1_790_000_000_000_000_000  # a %globaltimer-like start (ns), a multiple of its tick
TICK = 32  # %globaltimer's resolution on an H200 (ns)
GROUP = Group(0, Role.LANE0, 1, 0, 0xFFFFFFFF)


def manifest(capacity: int, event_bytes: int = 8) -> Manifest:
    """The manifest of a synthetic capture: two lane0 sites, one interval; nothing was applied, so
    its hashes are zeros."""
    names = ("iter_begin", "iter_end")
    sites = tuple(PlacedSite(i, n, Role.LANE0, 0, "loop-begin" if i == 0 else "loop-end",
                             Anchor("loop", "synthetic"), None, 1, 0, 0) for i, n in enumerate(names))
    return Manifest(
        backend="cuda", name="synthetic", question="SYNTHETIC capture (not device data)", kernel=KERNEL,
        source=SourceIdentity("synthetic.cu", "0" * 64, "0" * 64, SOURCE_ID), clean_copy="clean/synthetic.cu",
        patch=FileRef("instrumented.patch", "0" * 64), capture=CaptureSettings(capacity=capacity, event_bytes=event_bytes),
        groups=(GROUP,), sites=sites, intervals=(Interval(*names, 0, 1),), expect={},
        applied_utc="1970-01-01T00:00:00Z")


def write_capture(out_dir: str | Path, events: int, per_owner: int = 2048, seed: int = 0, packed: bool = False,
                  tick: int = TICK, launch_seq: int = 0) -> Manifest:
    """Write `<kernel>-launch<launch_seq>.atrex` + sidecar + manifest.json holding about `events`
    events (`per_owner` per warp, rounded to whole CTAs of 8 warps), 8-byte or `packed` 4-byte ones,
    the timer read in steps of `tick` ns; returns the manifest. Calls with other launch_seq (and
    seed) into one folder write several launches of one run."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cap = max(2, per_owner - per_owner % 2)
    ctas = max(1, round(events / (cap * WARPS)))
    n = ctas * WARPS
    rng = np.random.default_rng(seed)
    event_bytes = 4 if packed else 8
    h = build_header([GROUP], (ctas, 1, 1), (WARPS * 32, 1, 1), cap, event_bytes, False, SOURCE_ID, launch_seq)
    own = np.zeros(n, dtype=OWNER_DTYPE)
    o = np.arange(n)
    start = T0 + (o // WARPS // 132) * 50_000 + rng.integers(0, 2_000, n) // tick * tick  # waves of 132 CTAs
    own["claims"], own["attempted"], own["smid"] = 1, cap, o // WARPS % 132
    own["cta"], own["thread"] = o // WARPS, o % WARPS * 32
    own["t0_lo"], own["t0_hi"] = start & 0xFFFFFFFF, start >> 32
    speed = rng.lognormal(0.0, 0.15, n)[:, None]  # per warp
    step = (rng.gamma(8.0, 40.0, (n, cap)) * speed).astype(np.int64) + 32  # ns between events
    t = start[:, None] + np.cumsum(step, axis=1) // tick * tick  # what %globaltimer reads
    own["t1_lo"], own["t1_hi"] = t[:, -1] & 0xFFFFFFFF, t[:, -1] >> 32  # the owner exits at its last event
    site = (np.arange(cap) % 2)[None, :]
    if packed:  # as the recorder packs them (atrex::packed): the timer's low bits | site id + 1
        ev = ((t & 0xFFFFFFFF) | (site + 1)).astype("<u4")
    else:
        ev = np.empty((n, cap, 2), dtype="<u4")
        ev[:, :, 0] = t & 0xFFFFFFFF
        ev[:, :, 1] = TAG_VALID | site
    write_launch(out_dir, KERNEL, launch_seq, h.tobytes() + own.tobytes() + ev.tobytes(), [ctas, 1, 1], [WARPS * 32, 1, 1],
                 SOURCE_ID, "synthetic", {"name": "none (SYNTHETIC capture)", "uuid": "GPU-synthetic"}, RUN_ID)
    m = manifest(cap, event_bytes)
    (out_dir / "manifest.json").write_text(m.dumps())
    return m
