"""The raw capture format's facts, in one place for Python: the launch header and owner header
dtypes, the owner roles, the event tag, and the owner <-> slot arithmetic in both directions.

Mirrors runtime/atrex_recorder.cuh (its structs, `enum Role`, kTagValid, and the __host__
__device__ helpers role_warp_mask, owners_per_cta, ctas_selected) and atrex_capture.cuh
(fill_header); docs/format.md states the rules once, and tests/compile/test_layout_offsets.py compiles
the headers to check that both sides agree. Decode, the Python capture session, the IKeT
normalizer and the synthetic captures all read these, so none of them restates a rule.
"""
from __future__ import annotations

import math
from enum import StrEnum
from typing import Protocol, Sequence

import numpy as np

MAGIC = 0x31304C5458525441  # "ATRXTL01"
FORMAT_VERSION = 2  # what this tool writes and decode reads (2: owner headers carry the owner's end time)
HEADER_BYTES = 512
MAX_GROUPS = 8
U32 = (1 << 32) - 1  # header, owner and manifest integers are u32
MAX_BUFFER_BYTES = U32  # the device recorder addresses slots with 32-bit buffer offsets
TAG_VALID = np.uint32(0x80000000)  # an event's tag: this bit | site id (a zero slot was never written)
# A packed (4-byte) event is %globaltimer_lo | (site id + 1): the site in the low PACKED_SITE_BITS, which
# must carry no time (a tick of at least 2**PACKED_SITE_BITS ns); never zero, so zero = never written.
PACKED_SITE_BITS = 5
PACKED_SITES = (1 << PACKED_SITE_BITS) - 1  # site ids 0..30
# packed; plain {t, tag}, or {clock, t | (site id + 1)} with the clock (clock8); wide {t, clock, payload, tag}
EVENT_BYTES = (4, 8, 16)
FLAG_CLOCK, FLAG_WIDE, FLAG_PACKED = 1, 2, 4  # launch header flags


def clock8(clock: bool, event_bytes: int) -> bool:
    """Whether events of this width carry the clock in 8 bytes: {%clock, %globaltimer_lo | (site id
    + 1)}, the site packed into the timer's low bits as a packed event keeps it (so the same tick
    rule holds), the last word never zero."""
    return clock and event_bytes == 8


class Role(StrEnum):
    """Who records for an owner group. The value is the word in the spec and manifest (a str, so
    it reads and serializes as that word); `code` is its number in the launch header, `cpp` the
    enumerator of `atrex::Role`."""
    THREAD = "thread", 0
    LANE0 = "lane0", 1
    WARPGROUP = "warpgroup", 2
    CTA = "cta", 3
    PREDICATE = "predicate", 4

    def __new__(cls, word: str, code: int):
        role = str.__new__(cls, word)
        role._value_, role.code = word, code
        return role

    @property
    def cpp(self) -> str:
        return "k" + self.value.capitalize()

    @property
    def per_thread(self) -> bool:
        """32 owners per eligible warp (one per lane) instead of one."""
        return self in (Role.THREAD, Role.PREDICATE)

    @property
    def warp_filter(self) -> int:
        """The warps of a CTA the role can use: a warpgroup's first warp, the CTA's first warp, or all."""
        return {Role.WARPGROUP: 0x11111111, Role.CTA: 1}.get(self, 0xFFFFFFFF)


ROLE_NAMES = tuple(Role)


class OwnerGroup(Protocol):
    """What the slot arithmetic needs of an owner group (manifest.Group has it)."""
    role: Role
    cta_stride: int
    cta_limit: int
    warp_mask: int

HEADER_DTYPE = np.dtype([
    ("magic", "<u8"), ("version", "<u4"), ("header_bytes", "<u4"), ("source_id", "u1", 32), ("launch_seq", "<u8"),
    ("grid", "<u4", 3), ("block", "<u4", 3), ("capacity", "<u4"), ("n_groups", "<u4"), ("n_owners", "<u4"),
    ("flags", "<u4"), ("owners_offset", "<u8"), ("events_offset", "<u8"), ("total_bytes", "<u8"),
    ("owner_bytes", "<u4"), ("event_bytes", "<u4"),
    ("groups", [("role", "<u4"), ("cta_stride", "<u4"), ("cta_limit", "<u4"), ("warp_mask", "<u4"),
                ("owner_base", "<u4"), ("n_owners", "<u4")], MAX_GROUPS),
    ("tail", "u1", HEADER_BYTES - 128 - 24 * MAX_GROUPS)])
OWNER_DTYPE = np.dtype([("claims", "<u4"), ("attempted", "<u4"), ("smid", "<u4"), ("cta", "<u4"), ("thread", "<u4"),
                        ("t0_lo", "<u4"), ("t0_hi", "<u4"), ("clk0", "<u4"), ("t1_lo", "<u4"), ("t1_hi", "<u4"),
                        ("flags", "<u4"), ("pad", "<u4")])  # flags bit 0: attempted is a lower bound
OWNER_BYTES = OWNER_DTYPE.itemsize
assert HEADER_DTYPE.itemsize == HEADER_BYTES and OWNER_BYTES == 48


def full_time(own: np.ndarray, prefix: str) -> np.ndarray:
    """A full 64-bit %globaltimer stored as two u32 halves (`t0`, `t1`) in the owner header, in ns."""
    return ((own[prefix + "_hi"].astype(np.uint64) << np.uint64(32)) | own[prefix + "_lo"].astype(np.uint64)).view(np.int64)


def stamp_resolution_ns(own: np.ndarray) -> int:
    """The largest power of two (ns) that divides every start and end stamp (full %globaltimer) of the
    claimed owners in an owner table (OWNER_DTYPE rows): the timer's tick, or a multiple of it when few
    owners recorded; 0 with no stamp. A packed capture needs at least 2**PACKED_SITE_BITS: its events
    keep the site id in the bits below (the sidecar's timer_resolution_ns; decode recomputes it). An
    end stamp before its start is left out: it is no reading of the timer (validation's time_order
    names it)."""
    claimed = own["claims"] > 0
    t0, t1 = (full_time(own, p)[claimed] for p in ("t0", "t1"))
    s = np.concatenate([t0, t1[(t1 != 0) & (t1 >= t0)]]).view(np.uint64)  # no end stamp: never reached its exit
    s = s[s != 0]
    return int(np.min(s & (~s + np.uint64(1)))) if s.size else 0


def selected_warps(g: OwnerGroup, n_threads: int) -> list[int]:
    """Warps of a CTA with `n_threads` threads that hold the group's owners, in slot order."""
    n_warps = (n_threads + 31) // 32
    m = g.warp_mask & g.role.warp_filter & (0xFFFFFFFF if n_warps >= 32 else (1 << n_warps) - 1)
    return [w for w in range(32) if m >> w & 1]


def owners_per_cta(g: OwnerGroup, n_threads: int) -> int:
    return len(selected_warps(g, n_threads)) * (32 if g.role.per_thread else 1)


def ctas_selected(g: OwnerGroup, n_ctas: int) -> int:
    n = (n_ctas + g.cta_stride - 1) // g.cta_stride
    return min(n, g.cta_limit) if g.cta_limit else n


def group_owners(groups: Sequence[OwnerGroup], grid, block) -> list[int]:
    """Owners of each group for a launch geometry; groups' owner ranges follow each other. Exact
    (Python integers: a product of three u32 can pass 64 bits)."""
    n_ctas, n_threads = math.prod(map(int, grid)), math.prod(map(int, block))
    return [ctas_selected(g, n_ctas) * owners_per_cta(g, n_threads) for g in groups]


def slot_owners(g: OwnerGroup, n_owners: int, grid, block) -> tuple[np.ndarray, np.ndarray]:
    """Slot -> owner: the linear CTA and thread expected to claim each of a group's `n_owners`
    slots (a thread past the block, or a CTA past the grid, means the slot stays unclaimed)."""
    n_threads = int(np.prod(block))
    warps = np.array(selected_warps(g, n_threads), dtype=np.int64)
    per_cta = len(warps) * (32 if g.role.per_thread else 1)
    idx = np.arange(n_owners, dtype=np.int64)
    cta_rank, local = (idx // per_cta, idx % per_cta) if per_cta else (idx, idx)
    if g.role.per_thread:
        thread = warps[local // 32] * 32 + local % 32 if per_cta else local
    else:
        thread = warps[local] * 32 if per_cta else local
    return cta_rank * g.cta_stride, thread


def owner_slots(g: OwnerGroup, block, cta: np.ndarray, warp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Owner -> slot, for warp-level recording (IKeT): (slot within the group, eligible) of the
    warps at (linear CTA, warp in CTA); a warp the group does not select gets slot 0, not eligible."""
    warps = selected_warps(g, int(np.prod(block)))
    rank = np.full(32, -1)
    rank[warps] = np.arange(len(warps))
    per_cta = len(warps) * (32 if g.role.per_thread else 1)
    cta_rank = cta // g.cta_stride
    ok = (cta % g.cta_stride == 0) & (rank[warp] >= 0) & ((g.cta_limit == 0) | (cta_rank < g.cta_limit))
    return np.where(ok, cta_rank * per_cta + rank[warp], 0), ok


WARP_SLOTS = 64  # a resident group's table entries: one per SM warp slot, %warpid < 64 (kWarpSlots)


def resident_rings(g: OwnerGroup, warps: int) -> int:
    """Resident rings a group keeps per CTA: one per warp that can own its recorder in a block of
    `warps` warps (every warp for lane0, each warpgroup's first, the CTA's first)."""
    return len(selected_warps(g, 32 * warps))


SHARED_ALIGN = 128  # the rings' arrays: aligned to and sized in whole 128-byte lines (runtime: kSharedAlign)


def shared_size(n: int) -> int:
    """`n` bytes of a ring's static shared array, rounded up to whole lines as the runtime declares
    it, so that what follows it (the kernel's dynamic shared memory) keeps its alignment."""
    return -(-n // SHARED_ALIGN) * SHARED_ALIGN


def staging_bytes(events: int, warps: int, slot_bytes: int, groups: Sequence[OwnerGroup],
                  resident: bool = False, start_slots: int = 1) -> int:
    """Static shared memory the staged or resident rings take per CTA (docs/guide.md): each group keeps
    warps + 1 rings of `events` slots, the extra ring absorbing warps past `warps`; resident, each
    group keeps one ring per warp that can own it (resident_rings) of `events` (the capacity) + 1 +
    `start_slots` slots (an overflow slot, and the owner's start time and clock: two slots where the
    clock goes in 8-byte events or events are packed), one sink slot for warps that own no ring,
    and a table of WARP_SLOTS 8-byte entries, where each warp's next slot is kept between probes
    (runtime/atrex_recorder.cuh, ResidentRing); each array in whole 128-byte lines (shared_size).
    `slot_bytes`: an event's bytes (4 packed, 8, or 16 wide): a ring holds events as the buffer does."""
    if resident:
        return sum(shared_size((resident_rings(g, warps) * (events + 1 + start_slots) + 1) * slot_bytes)
                   + shared_size(WARP_SLOTS * 8) for g in groups)
    return shared_size((warps + 1) * events * slot_bytes) * len(groups)


def build_header(groups: Sequence[OwnerGroup], grid, block, capacity: int, event_bytes: int, clock: bool,
                 source_id: str, launch_seq: int) -> np.ndarray:
    """The 512-byte launch header the host writes before a launch (what fill_header does in C++)."""
    h = np.zeros(1, dtype=HEADER_DTYPE)
    base = 0
    for i, (g, n) in enumerate(zip(groups, group_owners(groups, grid, block))):
        h["groups"][0][i] = (g.role.code, g.cta_stride, g.cta_limit, g.warp_mask, base, n)
        base += n
    h["magic"], h["version"], h["header_bytes"] = MAGIC, FORMAT_VERSION, HEADER_BYTES
    h["source_id"] = np.frombuffer(bytes.fromhex(source_id), dtype=np.uint8)
    h["launch_seq"], h["grid"], h["block"] = launch_seq, list(grid), list(block)
    flags = (FLAG_CLOCK if clock else 0) | (FLAG_WIDE if event_bytes == 16 else 0) | (FLAG_PACKED if event_bytes == 4 else 0)
    h["capacity"], h["n_groups"], h["n_owners"], h["flags"] = capacity, len(groups), base, flags
    h["owners_offset"] = HEADER_BYTES
    h["events_offset"] = HEADER_BYTES + OWNER_BYTES * base
    h["total_bytes"] = HEADER_BYTES + OWNER_BYTES * base + base * capacity * event_bytes
    h["owner_bytes"], h["event_bytes"] = OWNER_BYTES, event_bytes
    return h
