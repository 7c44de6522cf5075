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
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import CaptureError
from .layout import (FORMAT_VERSION, HEADER_BYTES, HEADER_DTYPE, MAGIC, MAX_GROUPS, OWNER_DTYPE, build_header,
                     selected_warps, thread_level)

TAG_VALID = np.uint32(0x80000000)
ROLES = ("thread", "lane0", "warpgroup", "cta", "predicate")
CAPTURE_NAME = re.compile(r"^(?P<kernel>[^/]+)-launch(?P<seq>[0-9]{1,19})\.atrex$")
SIDECAR_TYPES = {"workload": str, "device": dict, "device.uuid": str}  # optional fields the checks read

EVENT_COLUMNS = ("owner", "site", "seq", "t_ns", "cycles", "payload")  # stored per event
OWNER_COLUMNS = ("group", "cta_x", "cta_y", "cta_z", "warp", "lane", "sm")  # per owner, gathered on demand


@dataclass
class Launch:
    """One launch's canonical events (columnar) plus what decode saw about its owners.

    `events` holds the per-event columns, in owner-then-sequence order; columns that are the same
    for all of an owner's events (its CTA, warp, lane, SM, group) live once per owner and are
    gathered by column(), which keeps decode at memory speed."""
    name: str
    meta: dict  # sidecar + header facts
    events: dict[str, np.ndarray]
    owners: dict[str, np.ndarray]  # per owner: group, claims, attempted, expected, cta, thread, smid, exp_cta, ...
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def n_events(self) -> int:
        return int(self.events["site"].size)

    def column(self, name: str) -> np.ndarray:
        """Any canonical column by name: EVENT_COLUMNS directly, OWNER_COLUMNS gathered per event."""
        if name in self.events:
            return self.events[name]
        return self.owners["col_" + name][self.events["owner"]]


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


def header_mismatches(h: np.void, meta: dict, manifest: dict) -> list[str]:
    """Header fields that differ from the header a recorder of this manifest writes for the
    sidecar's launch geometry (layout.build_header), so that a buffer edited with its CRC
    recomputed (grid, flags, header size, a group's limit or owner base, capacity) is refused."""
    cap = manifest["capture"]
    # an IKeT capture is sized to its fullest owner (cutedsl/normalize.py), not to the spec's capacity
    capacity = int(h["capacity"]) if manifest["backend"] == "cutedsl" else cap["capacity"]
    want = build_header(manifest["groups"], meta["grid"], meta["block"], capacity, cap["event_bytes"],
                        bool(cap.get("clock")), bytes(h["source_id"]).hex(), int(h["launch_seq"]))[0]
    return [f for f in HEADER_DTYPE.names if f != "tail" and not np.array_equal(h[f], want[f])]


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
    for k, kind in SIDECAR_TYPES.items():  # parents before children, so each parent is an object here
        *parents, leaf = k.split(".")
        obj = meta
        for p in parents:
            obj = obj.get(p, {})
        if leaf in obj and not isinstance(obj[leaf], kind):
            raise CaptureError(f"sidecar field {k!r} must be a {'JSON object' if kind is dict else 'string'}, "
                               f"not {type(obj[leaf]).__name__}", path=str(side_path),
                               hint="the sidecar was edited or written by another tool; capture again")
    if meta.get("crc32") != zlib.crc32(raw):
        raise CaptureError("checksum mismatch: the file was altered or torn after it was written", path=where)
    dims = [meta.get("grid"), meta.get("block")]
    if not all(isinstance(d, list) and len(d) == 3 and all(
            isinstance(v, int) and not isinstance(v, bool) and 1 <= v < 1 << 32 for v in d) for d in dims):
        raise CaptureError("sidecar grid and block must each be three integers >= 1", path=str(side_path))
    n_owners, cap, words = int(h["n_owners"]), int(h["capacity"]), int(h["event_bytes"]) // 4
    grid, block = h["grid"].astype(np.int64), h["block"].astype(np.int64)
    groups = h["groups"][: int(h["n_groups"])]
    if len(groups) != len(manifest["groups"]) or any(
            int(g["role"]) != mg["role_code"] or int(g["cta_stride"]) != mg["cta_stride"]
            or int(g["warp_mask"]) != mg["warp_mask"] for g, mg in zip(groups, manifest["groups"])):
        raise CaptureError("owner groups in the buffer differ from the manifest's", path=where)
    wrong = header_mismatches(h, meta, manifest)
    if wrong:
        raise CaptureError(f"launch header fields {', '.join(wrong)} differ from the manifest's plan for the launch "
                           "geometry in the sidecar", path=where,
                           hint="the buffer was edited, or comes from another build; capture again")

    own = np.frombuffer(raw, dtype=OWNER_DTYPE, count=n_owners, offset=HEADER_BYTES)
    gid = np.repeat(np.arange(len(groups)), groups["n_owners"].astype(np.int64))
    exp = [_expected_owners(g, grid, block) for g in groups]
    cat = {k: np.concatenate([e[k] for e in exp]) if exp else np.zeros(0) for k in exp[0]}
    owners = {"group": gid, "claims": own["claims"].astype(np.int64), "attempted": own["attempted"].astype(np.int64),
              "smid": own["smid"].astype(np.int64), "cta": own["cta"].astype(np.int64),
              "thread": own["thread"].astype(np.int64), **cat}
    claimed = owners["claims"] > 0
    written = np.where(claimed, np.minimum(owners["attempted"], cap), 0)
    gx, gy = int(grid[0]), int(grid[1])
    owners.update(col_group=gid.astype(np.int16), col_cta_x=(owners["cta"] % gx).astype(np.int32),
                  col_cta_y=(owners["cta"] // gx % gy).astype(np.int32),
                  col_cta_z=(owners["cta"] // (gx * gy)).astype(np.int32),
                  col_warp=(owners["thread"] // 32).astype(np.int16), col_lane=(owners["thread"] % 32).astype(np.int16),
                  col_sm=owners["smid"].astype(np.int16))

    # Each owner's written events are a prefix of its slots: a boolean prefix mask compresses the
    # event block in one pass, and repeats build the per-event owner, sequence and time base, with
    # no per-owner or per-event loop.
    ev = np.frombuffer(raw, dtype="<u4", count=n_owners * cap * words,
                       offset=int(h["events_offset"])).reshape(n_owners * cap, words)
    total = int(written.sum())
    live = (np.arange(cap, dtype=np.int64)[None, :] < written[:, None]).ravel()
    # compress whole rows as one 8- or 16-byte scalar each (a bit-exact view): numpy's 1-D boolean
    # compress is ~10x faster than the same selection on a 2-D array
    row = np.uint64 if words == 2 else np.complex128
    rows = ev.view(row).ravel()[live].view("<u4").reshape(-1, words)
    o_idx = np.repeat(np.arange(n_owners, dtype=np.int32), written)
    s_idx = np.arange(total, dtype=np.int32) - np.repeat((np.cumsum(written) - written).astype(np.int32), written)
    tag = rows[:, words - 1]
    valid = tag >= TAG_VALID
    torn = total - int(np.count_nonzero(valid))
    stray = int(np.count_nonzero(ev[:, words - 1])) - int(np.count_nonzero(tag))
    t0 = (own["t0_hi"].astype(np.uint64) << np.uint64(32)) | own["t0_lo"].astype(np.uint64)
    # %globaltimer_lo wraps every 4.3 s: unwrap each event against its owner's full start time
    # (uint32 difference, then one in-place add onto the repeated 64-bit start)
    t_ns = np.repeat(t0, written)
    np.add(t_ns, np.subtract(rows[:, 0], np.repeat(own["t0_lo"], written)), out=t_ns, casting="unsafe")
    t_ns = t_ns.view(np.int64)
    if torn:
        o_idx, s_idx, rows, tag, t_ns = o_idx[valid], s_idx[valid], rows[valid], tag[valid], t_ns[valid]
    events = {"owner": o_idx, "site": (tag & ~TAG_VALID).view(np.int32), "seq": s_idx, "t_ns": t_ns}
    if words == 4:
        events["cycles"] = rows[:, 1].astype(np.int64)
        events["payload"] = rows[:, 2].copy()
    counts = {
        "owners": n_owners, "owners_claimed": int(claimed.sum()),
        "owners_missing": int((owners["must_claim"] & ~claimed).sum()),
        "owners_unexpected": int((claimed & ~owners["may_claim"]).sum()),
        "owners_misplaced": int((claimed & ((owners["cta"] != owners["exp_cta"])
                                            | (owners["thread"] != owners["exp_thread"]))).sum()),
        "duplicate_claims": int((owners["claims"] > 1).sum()),
        "overflow_owners": int((owners["attempted"] > cap).sum()),
        "overflow_events": int(np.maximum(owners["attempted"] - cap, 0).sum()),
        "torn_events": torn, "stray_events": stray, "events": int(o_idx.size),
    }
    meta = {**meta, "file": path.name, "launch_seq": int(h["launch_seq"]), "grid": grid.tolist(),
            "block": block.tolist(), "capacity": cap, "event_bytes": int(h["event_bytes"]), "source_id": source_id,
            "flags": int(h["flags"]), "groups": [{k: int(g[k]) for k in groups.dtype.names} for g in groups]}
    return Launch(path.stem, meta, events, owners, counts)


def capture_files(capture_dir: str | Path) -> list[Path]:
    """The folder's `<kernel>-launch<N>.atrex` files by kernel and launch number; a `.atrex` file
    named otherwise is refused rather than guessed at."""
    files = list(Path(capture_dir).glob("*.atrex"))
    for p in files:
        if not CAPTURE_NAME.match(p.name):
            raise CaptureError(f"capture file {p.name!r} is not named <kernel>-launch<N>.atrex", path=str(p),
                               hint="the recorder names its files so; rename the file or move it out of the folder")
    files.sort(key=lambda p: (CAPTURE_NAME.match(p.name)["kernel"], int(CAPTURE_NAME.match(p.name)["seq"])))
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
    np.savez_compressed(p, **{c: launch.column(c) for c in (*launch.events, *OWNER_COLUMNS)},
                        **{f"owner_{k}": v for k, v in launch.owners.items() if not k.startswith("col_")})
    (out_dir / f"{launch.name}.json").write_text(json.dumps({"meta": launch.meta, "counts": launch.counts}, indent=2))
    return p


def site_counts(launch: Launch, n_sites: int) -> np.ndarray:
    """(claimed owners, sites) matrix of events per owner per site."""
    claimed = np.nonzero(launch.owners["claims"] > 0)[0]
    m = np.zeros((launch.owners["claims"].size, n_sites), dtype=np.int64)
    known = (launch.events["site"] >= 0) & (launch.events["site"] < n_sites)  # unknown ids: site_identity's job
    np.add.at(m, (launch.events["owner"][known], launch.events["site"][known]), 1)
    return m[claimed]
