"""Buffer layout arithmetic shared by decode and the Python capture session.

Mirrors the __host__ __device__ helpers of runtime/atrex_recorder.cuh (role_warp_mask,
owners_per_cta, ctas_selected, fill_header); docs/format.md states the rules once.
"""
from __future__ import annotations

import numpy as np

MAGIC = 0x31304C5458525441  # "ATRXTL01"
FORMAT_VERSION = 1
HEADER_BYTES = 512
OWNER_BYTES = 32
MAX_GROUPS = 8
ROLE_CODES = {"thread": 0, "lane0": 1, "warpgroup": 2, "cta": 3, "predicate": 4}

HEADER_DTYPE = np.dtype([
    ("magic", "<u8"), ("version", "<u4"), ("header_bytes", "<u4"), ("source_id", "u1", 32), ("launch_seq", "<u8"),
    ("grid", "<u4", 3), ("block", "<u4", 3), ("capacity", "<u4"), ("n_groups", "<u4"), ("n_owners", "<u4"),
    ("flags", "<u4"), ("owners_offset", "<u8"), ("events_offset", "<u8"), ("total_bytes", "<u8"),
    ("owner_bytes", "<u4"), ("event_bytes", "<u4"),
    ("groups", [("role", "<u4"), ("cta_stride", "<u4"), ("cta_limit", "<u4"), ("warp_mask", "<u4"),
                ("owner_base", "<u4"), ("n_owners", "<u4")], MAX_GROUPS),
    ("tail", "u1", HEADER_BYTES - 128 - 24 * MAX_GROUPS)])
OWNER_DTYPE = np.dtype([("claims", "<u4"), ("attempted", "<u4"), ("smid", "<u4"), ("cta", "<u4"), ("thread", "<u4"),
                        ("t0_lo", "<u4"), ("t0_hi", "<u4"), ("clk0", "<u4")])
assert HEADER_DTYPE.itemsize == HEADER_BYTES and OWNER_DTYPE.itemsize == OWNER_BYTES


def role_warp_mask(role: int, n_warps: int) -> int:
    """Warps of a CTA eligible for a role, before the density mask."""
    valid = 0xFFFFFFFF if n_warps >= 32 else (1 << n_warps) - 1
    return valid & {2: 0x11111111, 3: 1}.get(role, 0xFFFFFFFF)


def thread_level(role: int) -> bool:
    return role in (ROLE_CODES["thread"], ROLE_CODES["predicate"])


def selected_warps(role: int, warp_mask: int, n_threads: int) -> list[int]:
    m = warp_mask & role_warp_mask(role, (n_threads + 31) // 32)
    return [w for w in range(32) if m >> w & 1]


def owners_per_cta(role: int, warp_mask: int, n_threads: int) -> int:
    return len(selected_warps(role, warp_mask, n_threads)) * (32 if thread_level(role) else 1)


def ctas_selected(cta_stride: int, cta_limit: int, n_ctas: int) -> int:
    n = (n_ctas + cta_stride - 1) // cta_stride
    return min(n, cta_limit) if cta_limit else n


def group_owners(groups: list[dict], grid, block) -> list[int]:
    """Owners of each manifest group for a launch geometry; groups' owner ranges follow each other."""
    n_ctas, n_threads = int(np.prod(grid)), int(np.prod(block))
    return [ctas_selected(g["cta_stride"], g["cta_limit"], n_ctas) * owners_per_cta(g["role_code"], g["warp_mask"],
                                                                                  n_threads) for g in groups]


def build_header(groups: list[dict], grid, block, capacity: int, event_bytes: int, clock: bool, source_id: str,
                 launch_seq: int) -> np.ndarray:
    """The 512-byte launch header the host writes before a launch (what fill_header does in C++)."""
    h = np.zeros(1, dtype=HEADER_DTYPE)
    base = 0
    for i, (g, n) in enumerate(zip(groups, group_owners(groups, grid, block))):
        h["groups"][0][i] = (g["role_code"], g["cta_stride"], g["cta_limit"], g["warp_mask"], base, n)
        base += n
    h["magic"], h["version"], h["header_bytes"] = MAGIC, FORMAT_VERSION, HEADER_BYTES
    h["source_id"] = np.frombuffer(bytes.fromhex(source_id), dtype=np.uint8)
    h["launch_seq"], h["grid"], h["block"] = launch_seq, list(grid), list(block)
    flags = (1 if clock else 0) | (2 if event_bytes == 16 else 0)  # bit0: clock recorded, bit1: 16-byte events
    h["capacity"], h["n_groups"], h["n_owners"], h["flags"] = capacity, len(groups), base, flags
    h["owners_offset"] = HEADER_BYTES
    h["events_offset"] = HEADER_BYTES + OWNER_BYTES * base
    h["total_bytes"] = HEADER_BYTES + OWNER_BYTES * base + base * capacity * event_bytes
    h["owner_bytes"], h["event_bytes"] = OWNER_BYTES, event_bytes
    return h
