"""One captured launch on disk: `<kernel>-launch<N>.atrex` (the raw buffer, layout.py) and its
`.json` sidecar (docs/format.md, "Sidecar"): how the files are named, what the sidecar restates,
and the one Python writer of the pair.

The C++ host session (runtime/atrex_timeline.cuh) writes the same pair with the same keys;
cuda/python/capture.py (kernels launched from Python) and cutedsl/normalize.py (run-iket's output) write
through write_launch, so decode cannot tell the three apart.
"""
from __future__ import annotations

import json
import re
import zlib
from pathlib import Path

import numpy as np

from .fsio import write_atomic
from .layout import FORMAT_VERSION, HEADER_BYTES, HEADER_DTYPE, OWNER_DTYPE, stamp_resolution_ns

SIDECAR_FORMAT = "atrex-timeline-capture"
FILE_NAME = re.compile(r"^(?P<kernel>[^/]+)-launch(?P<seq>[0-9]{1,19})\.atrex$")
# optional sidecar fields the checks read, with their JSON types (decode refuses another type, and a
# negative integer); parents before children
IKET_LOG_LINE_CHARS = 300  # a line of run-iket's log kept in the sidecar's iket_log.incomplete, or quoted from it
OPTIONAL_TYPES = {"workload": str, "device": dict, "device.uuid": str, "run_id": str, "timer_resolution_ns": int,
                  "iket_log": dict,
                  "iket_log.file": str, "iket_log.dropped_warp_records": int, "iket_log.max_ts_cnt_per_warp": int,
                  "iket_log.incomplete_lines": int, "iket_log.incomplete": list}
TYPE_NAMES = {str: "string", dict: "JSON object", int: "non-negative integer", list: "JSON array"}


def base_name(kernel: str, launch_seq: int) -> str:
    return f"{kernel}-launch{launch_seq}"


def raw_resolution_ns(raw: bytes) -> int:
    """layout.stamp_resolution_ns of a raw buffer's owner table (0 for a buffer too short to hold one)."""
    if len(raw) < HEADER_BYTES:
        return 0
    n = int(np.frombuffer(raw[:HEADER_BYTES], dtype=HEADER_DTYPE)[0]["n_owners"])
    n = min(n, (len(raw) - HEADER_BYTES) // OWNER_DTYPE.itemsize)
    return stamp_resolution_ns(np.frombuffer(raw, dtype=OWNER_DTYPE, count=n, offset=HEADER_BYTES))


def write_launch(out_dir: str | Path, kernel: str, launch_seq: int, raw: bytes, grid, block, source_id: str,
                 workload: str, device: dict, run_id: str, **extra) -> Path:
    """Write the raw buffer, then its sidecar (so a launch is complete only when both exist), each
    atomically. `extra`: fields this writer adds (how it captured), after the common ones.
    Returns the `.atrex` path."""
    # the names are appended, not swapped in with `with_suffix`: a method's kernel (`Softmax.kernel`)
    # has a dot that `with_suffix` would take for the suffix and cut the name at
    base = Path(out_dir) / base_name(kernel, launch_seq)
    atrex, sidecar = base.parent / (base.name + ".atrex"), base.parent / (base.name + ".json")
    side = {"format": SIDECAR_FORMAT, "version": FORMAT_VERSION, "file": atrex.name, "kernel": kernel,
            "launch_seq": launch_seq, "grid": list(grid), "block": list(block),
            "source_id": source_id, "workload": workload, "device": device, **extra,
            "timer_resolution_ns": raw_resolution_ns(raw), "run_id": run_id, "bytes": len(raw), "crc32": zlib.crc32(raw)}
    write_atomic(atrex, raw)
    write_atomic(sidecar, json.dumps(side) + "\n")
    return atrex
