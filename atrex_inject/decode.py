"""Raw capture files → canonical events, one launch at a time (never merged).

A capture folder holds `<kernel>-launch<N>.atrex` (the device buffer, docs/format.md) and its
`.json` sidecar. decode() checks the buffer's identity against the manifest (magic, format
version, source id, sizes) and refuses a foreign, stale or short buffer with a CaptureError.
What it cannot judge alone (overflow, duplicate claims, unwritten slots, owners outside the
geometry) it counts and hands to the validator.

Everything per event is numpy: the event block is viewed as an (owners, capacity, words) array,
masked by each owner's written count, and flattened in owner-then-sequence order.
"""
from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import CaptureError
from .layout import (FORMAT_VERSION, HEADER_BYTES, HEADER_DTYPE, MAGIC, MAX_GROUPS, OWNER_DTYPE, selected_warps,
                     thread_level)

TAG_VALID = np.uint32(0x80000000)
ROLES = ("thread", "lane0", "warpgroup", "cta", "predicate")

EVENT_COLUMNS = ("owner", "group", "cta_x", "cta_y", "cta_z", "warp", "lane", "sm", "site", "seq", "t_ns", "cycles",
                 "payload")


@dataclass
class Launch:
    """One launch's canonical events (columnar) plus what decode saw about its owners."""
    name: str
    meta: dict  # sidecar + header facts
    events: dict[str, np.ndarray]
    owners: dict[str, np.ndarray]  # per owner: group, claims, attempted, expected, cta, thread, smid, exp_cta, ...
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def n_events(self) -> int:
        return int(self.events["site"].size)


def _expected_owners(g, grid, block) -> dict[str, np.ndarray]:
    """Who owns each slot of a group, from the launch geometry (mirrors atrex_timeline.cuh)."""
    role = int(g["role"])
    n_threads = int(block[0] * block[1] * block[2])
    n_ctas = int(grid[0] * grid[1] * grid[2])
    warps = np.array(selected_warps(role, int(g["warp_mask"]), n_threads), dtype=np.int64)
    per_thread = thread_level(role)
    per_cta = len(warps) * (32 if per_thread else 1)
    n = int(g["n_owners"])
    idx = np.arange(n, dtype=np.int64)
    cta_rank, local = (idx // per_cta, idx % per_cta) if per_cta else (idx, idx)
    if per_thread:
        thread = warps[local // 32] * 32 + local % 32 if per_cta else local
    else:
        thread = warps[local] * 32 if per_cta else local
    cta = cta_rank * int(g["cta_stride"])
    must = (thread < n_threads) & (cta < n_ctas)
    if role == 4:
        must = np.zeros(n, dtype=bool)  # an explicit predicate may leave any owner unclaimed
    return {"exp_cta": cta, "exp_thread": thread, "must_claim": must, "may_claim": (thread < n_threads) & (cta < n_ctas)}


def read_header(raw: bytes, where: str) -> np.void:
    if len(raw) < HEADER_BYTES:
        raise CaptureError(f"truncated: {len(raw)} bytes, shorter than the {HEADER_BYTES}-byte launch header", path=where)
    h = np.frombuffer(raw[:HEADER_BYTES], dtype=HEADER_DTYPE)[0]
    if int(h["magic"]) != MAGIC:
        raise CaptureError(f"not an atrex capture (magic 0x{int(h['magic']):016x})", path=where)
    if int(h["version"]) != FORMAT_VERSION:
        raise CaptureError(f"format version {int(h['version'])}; this decoder reads version {FORMAT_VERSION}",
                           path=where, hint="decode with the atrex-inject version that wrote it")
    if len(raw) != int(h["total_bytes"]):
        raise CaptureError(f"truncated: {len(raw)} bytes, the header says {int(h['total_bytes'])}", path=where)
    n_groups = int(h["n_groups"])
    ev_bytes = int(h["event_bytes"])
    sizes_ok = (1 <= n_groups <= MAX_GROUPS and ev_bytes in (8, 16) and int(h["owner_bytes"]) == 32
                and int(h["owners_offset"]) == HEADER_BYTES
                and int(h["events_offset"]) == HEADER_BYTES + 32 * int(h["n_owners"])
                and int(h["total_bytes"]) == int(h["events_offset"]) + int(h["n_owners"]) * int(h["capacity"]) * ev_bytes
                and int(h["groups"]["n_owners"][:n_groups].sum()) == int(h["n_owners"]))
    if not sizes_ok:
        raise CaptureError("inconsistent launch header (group/owner/event sizes do not add up)", path=where)
    return h


def decode_file(path: str | Path, manifest: dict) -> Launch:
    path = Path(path)
    where = str(path)
    raw = path.read_bytes()
    h = read_header(raw, where)
    source_id = bytes(h["source_id"]).hex()
    if source_id != manifest["source"]["source_id"]:
        raise CaptureError(f"source id {source_id[:16]}… is not the manifest's {manifest['source']['source_id'][:16]}…: "
                           "the buffer comes from another instrumented source", path=where,
                           hint="capture again after `atrex-inject apply`, or decode with that build's manifest")
    side_path = path.with_suffix(".json")
    try:
        meta = json.loads(side_path.read_text())
    except (OSError, ValueError):
        raise CaptureError(f"no readable sidecar {side_path.name}: the capture did not finish", path=where) from None
    if not isinstance(meta, dict) or meta.get("source_id") != source_id or meta.get("launch_seq") != int(h["launch_seq"]):
        raise CaptureError("sidecar does not describe this buffer (source id or launch sequence differ)", path=where)
    if meta.get("crc32") != zlib.crc32(raw):
        raise CaptureError("checksum mismatch: the file was altered or torn after it was written", path=where)
    n_owners, cap, words = int(h["n_owners"]), int(h["capacity"]), int(h["event_bytes"]) // 4
    grid, block = h["grid"].astype(np.int64), h["block"].astype(np.int64)
    groups = h["groups"][: int(h["n_groups"])]
    if len(groups) != len(manifest["groups"]) or any(
            int(g["role"]) != mg["role_code"] or int(g["cta_stride"]) != mg["cta_stride"]
            or int(g["warp_mask"]) != mg["warp_mask"] for g, mg in zip(groups, manifest["groups"])):
        raise CaptureError("owner groups in the buffer differ from the manifest's", path=where)

    own = np.frombuffer(raw, dtype=OWNER_DTYPE, count=n_owners, offset=HEADER_BYTES)
    gid = np.repeat(np.arange(len(groups)), groups["n_owners"].astype(np.int64))
    exp = [_expected_owners(g, grid, block) for g in groups]
    cat = {k: np.concatenate([e[k] for e in exp]) if exp else np.zeros(0) for k in exp[0]}
    owners = {"group": gid, "claims": own["claims"].astype(np.int64), "attempted": own["attempted"].astype(np.int64),
              "smid": own["smid"].astype(np.int64), "cta": own["cta"].astype(np.int64),
              "thread": own["thread"].astype(np.int64), **cat}
    claimed = owners["claims"] > 0
    written = np.where(claimed, np.minimum(owners["attempted"], cap), 0)

    ev = np.frombuffer(raw, dtype="<u4", count=n_owners * cap * words,
                       offset=int(h["events_offset"])).reshape(n_owners, cap, words)
    seq = np.arange(cap)
    live = seq[None, :] < written[:, None]  # (owners, cap)
    tag = ev[:, :, words - 1]
    torn = live & ((tag & TAG_VALID) == 0)
    stray = ~live & (tag != 0)
    keep = live & ~torn
    o_idx, s_idx = np.nonzero(keep)  # row-major: owner, then sequence
    t_lo = ev[o_idx, s_idx, 0]
    t0 = (own["t0_hi"].astype(np.uint64) << np.uint64(32)) | own["t0_lo"].astype(np.uint64)
    t_ns = t0[o_idx] + ((t_lo - own["t0_lo"][o_idx]).astype(np.uint32)).astype(np.uint64)
    cta = owners["cta"][o_idx]
    gx, gy = int(grid[0]), int(grid[1])
    thread = owners["thread"][o_idx]
    events = {
        "owner": o_idx.astype(np.int32), "group": gid[o_idx].astype(np.int16),
        "cta_x": (cta % gx).astype(np.int32), "cta_y": (cta // gx % gy).astype(np.int32),
        "cta_z": (cta // (gx * gy)).astype(np.int32),
        "warp": (thread // 32).astype(np.int16), "lane": (thread % 32).astype(np.int16),
        "sm": owners["smid"][o_idx].astype(np.int16), "site": (tag[o_idx, s_idx] & ~TAG_VALID).astype(np.int32),
        "seq": s_idx.astype(np.int32), "t_ns": t_ns.astype(np.int64),
        "cycles": (ev[o_idx, s_idx, 1].astype(np.int64) if words == 4 else np.zeros(o_idx.size, np.int64)),
        "payload": (ev[o_idx, s_idx, 2].astype(np.uint32) if words == 4 else np.zeros(o_idx.size, np.uint32)),
    }
    counts = {
        "owners": n_owners, "owners_claimed": int(claimed.sum()),
        "owners_missing": int((owners["must_claim"] & ~claimed).sum()),
        "owners_unexpected": int((claimed & ~owners["may_claim"]).sum()),
        "owners_misplaced": int((claimed & ((owners["cta"] != owners["exp_cta"])
                                            | (owners["thread"] != owners["exp_thread"]))).sum()),
        "duplicate_claims": int((owners["claims"] > 1).sum()),
        "overflow_owners": int((owners["attempted"] > cap).sum()),
        "overflow_events": int(np.maximum(owners["attempted"] - cap, 0).sum()),
        "torn_events": int(torn.sum()), "stray_events": int(stray.sum()), "events": int(o_idx.size),
    }
    meta = {**meta, "file": path.name, "launch_seq": int(h["launch_seq"]), "grid": grid.tolist(),
            "block": block.tolist(), "capacity": cap, "event_bytes": int(h["event_bytes"]), "source_id": source_id,
            "flags": int(h["flags"]), "groups": [{k: int(g[k]) for k in groups.dtype.names} for g in groups]}
    return Launch(path.stem, meta, events, owners, counts)


def capture_files(capture_dir: str | Path) -> list[Path]:
    files = sorted(Path(capture_dir).glob("*.atrex"), key=lambda p: (p.stem.rsplit("-launch", 1)[0],
                                                                      int(p.stem.rsplit("launch", 1)[-1] or 0)))
    if not files:
        raise CaptureError(f"no *.atrex capture files in {capture_dir}",
                           hint="run the instrumented program with ATREX_TIMELINE_OUT set to this folder")
    return files


def decode_dir(capture_dir: str | Path, manifest: dict) -> list[Launch]:
    return [decode_file(p, manifest) for p in capture_files(capture_dir)]


def save(launch: Launch, out_dir: str | Path) -> Path:
    """Canonical events as `<launch>.npz` (columns, plus per-owner arrays prefixed `owner_`) + `.json` meta."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    p = out_dir / f"{launch.name}.npz"
    np.savez_compressed(p, **launch.events, **{f"owner_{k}": v for k, v in launch.owners.items()})
    (out_dir / f"{launch.name}.json").write_text(json.dumps({"meta": launch.meta, "counts": launch.counts}, indent=2))
    return p


def site_counts(launch: Launch, n_sites: int) -> np.ndarray:
    """(claimed owners, sites) matrix of events per owner per site."""
    claimed = np.nonzero(launch.owners["claims"] > 0)[0]
    m = np.zeros((launch.owners["claims"].size, n_sites), dtype=np.int64)
    np.add.at(m, (launch.events["owner"], launch.events["site"].clip(0, n_sites - 1)), 1)
    return m[claimed]
