"""Named intervals `start -> end` and marks, recomputed from canonical events (docs/summary.md):
per interval count, quantiles, per SM and per owner; per site its offsets from the launch's first
event. Instances come from intervals.pairs (the pairing rule); everything is numpy over the
launch's event columns.
"""
from __future__ import annotations

import math

import numpy as np

from .decode import PART_EVENTS, Launch, capture_files, decode_parts
from .intervals import pairs
from .manifest import Manifest

QUANTILES = {"min": 0.0, "p10": 0.10, "median": 0.50, "p90": 0.90, "max": 1.0}
FEW_TICKS = 10  # a median under this many timer ticks is mostly quantization: flagged


def timer_tick_ns(t_ns: np.ndarray) -> int | None:
    """The timer's resolution as the data shows it: the gcd of the timestamps' offsets from the
    first one (32 ns for %globaltimer on an H200). Durations are multiples of it."""
    t = np.asarray(t_ns, dtype=np.int64)
    tick = int(np.gcd.reduce(t - t.min())) if t.size else 0
    return tick or None


def stats(x: np.ndarray) -> dict:
    """Count and QUANTILES (inverted CDF: the ceil(q n)-th smallest value, no interpolation). Sorts
    `x` partially in place: callers pass an array they own."""
    if x.size == 0:
        return {"count": 0, **{k: None for k in QUANTILES}}
    at = [max(int(np.ceil(q * x.size)) - 1, 0) for q in QUANTILES.values()]
    x.partition(sorted(set(at)))
    return {"count": int(x.size), **{k: float(x[i]) for k, i in zip(QUANTILES, at)}}


def _grouped(keys: np.ndarray, values: np.ndarray) -> list[dict]:
    """Per key: count and median of integer values (keys sorted). Key and value are packed into one
    integer, as narrow as their bits allow (uint32 or int64), and sorted once: several times faster
    and smaller than a lexsort of the two, which remains for what does not fit in 63 bits."""
    if keys.size == 0:
        return []
    lo_v = int(values.min())
    shift = (int(values.max()) - lo_v).bit_length()
    key_bits = int(keys.max()).bit_length()
    if int(keys.min()) >= 0 and key_bits <= 23 and shift + key_bits <= 63:  # bincount needs small keys
        per_key = np.bincount(keys)  # sorted, each key's values are a run of this length
        uniq = np.flatnonzero(per_key)
        counts = per_key[uniq]
        packed = keys.astype(np.uint32 if shift + key_bits <= 32 else np.int64)  # (key << shift) + value - lo_v,
        packed <<= shift                                                        # built in place (uint32: exact
        np.add(packed, values, out=packed, casting="unsafe")                    # modulo 2**32)
        packed -= np.asarray(lo_v).astype(packed.dtype)
        packed.sort()

        def value(i):
            return (packed[i] & ((1 << shift) - 1)).astype(np.int64) + lo_v
    else:
        order = np.lexsort((values, keys))
        k, v = keys[order].astype(np.int64), values[order].astype(np.int64)
        run = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
        uniq, counts = k[run], np.diff(np.r_[run, k.size])

        def value(i):
            return v[i]
    first = np.cumsum(counts) - counts
    med = (value(first + (counts - 1) // 2) + value(first + counts // 2)) / 2
    return [{"key": int(a), "count": int(c), "median": float(m)} for a, c, m in zip(uniq, counts, med)]


class Summarizer:
    """One launch's summary from its owner-range parts (decode.decode_parts) in one pass, so a
    capture larger than memory is summarized part by part. Per part, per-owner medians are final;
    for the launch-wide statistics it keeps only each interval instance's duration and SM and each
    mark's time (as uint32 ns, durations and offsets from the part's first mark, while they fit)."""

    def __init__(self, manifest: Manifest):
        self.manifest = manifest
        n = len(manifest.intervals)
        self.dur: list[list] = [[] for _ in range(n)]
        self.sm: list[list] = [[] for _ in range(n)]
        self.per_owner: list[list] = [[] for _ in range(n)]
        self.marks: dict[int, list] = {s.id: [] for s in manifest.sites}  # (part's first t, offsets)
        self.launch = None
        self.events = self.owners = 0
        self.t_min, self.t_max = None, None
        self.tick, self.t_ref = 0, None  # gcd of every time's offset from t_ref, the first part's first time

    def add(self, part: Launch) -> None:
        ev = part.events
        self.launch, self.events = part, self.events + part.n_events
        self.owners += int((part.owners["claims"] > 0).sum())
        if ev["t_ns"].size:
            lo, hi = int(ev["t_ns"].min()), int(ev["t_ns"].max())
            self.t_min = lo if self.t_min is None else min(self.t_min, lo)
            self.t_max = hi if self.t_max is None else max(self.t_max, hi)
            # timer_tick_ns of the whole launch, part by part: the gcd of each part's own tick and
            # its first time's offset from the first part's (gcds of differences need no common origin)
            if self.t_ref is None:
                self.t_ref = lo
            self.tick = math.gcd(self.tick, timer_tick_ns(ev["t_ns"]) or 0, lo - self.t_ref)
        for k, iv in enumerate(self.manifest.intervals):
            p = pairs(part, iv.start_id, iv.end_id)
            d = p["dur"]
            self.dur[k].append(d.astype(np.uint32) if d.size and 0 <= d.min() and d.max() < 1 << 32 else d)
            self.sm[k].append(p["sm"])
            self.per_owner[k] += _grouped(p["owner"].astype(np.int64) + part.owner_base, p["dur"])
        for sid, kept in self.marks.items():
            t = ev["t_ns"][ev["site"] == sid]
            if t.size:
                base = int(t.min())
                t -= base
                kept.append((base, t.astype(np.uint32) if int(t.max()) < 1 << 32 else t))

    def result(self) -> dict:
        t_launch = self.t_min or 0
        tick = self.tick or None
        intervals = []
        for k, iv in enumerate(self.manifest.intervals):
            dur = _drain(self.dur[k], np.result_type(np.uint32, *self.dur[k]))
            per_sm = _grouped(_drain(self.sm[k], np.int16), dur)
            st = stats(dur)
            intervals.append({"name": iv.name, "unit": "ns", **st,
                              "median_ticks": st["median"] / tick if tick and st["count"] else None,
                              "per_sm": per_sm, "per_owner": self.per_owner[k]})
        wide = self.t_max is None or self.t_max - t_launch >= 1 << 32
        marks = []
        for s in self.manifest.sites:
            bases, offsets = zip(*self.marks[s.id]) if self.marks[s.id] else ((), ())
            self.marks[s.id] = []
            t = _drain(list(offsets), np.int64 if wide else np.uint32, [b - t_launch for b in bases])
            marks.append({"site": s.name, "id": s.id, "offset_unit": "ns since the launch's first event",
                          **stats(t)})
        return {"launch": self.launch.name, "launch_seq": self.launch.meta["launch_seq"], "events": self.events,
                "owners": self.owners, "t_first_ns": t_launch, "timer_tick_ns": tick,
                "span_ns": self.t_max - t_launch if self.t_max is not None else 0,
                "intervals": intervals, "marks": marks}


def _drain(pieces: list[np.ndarray], dtype, adds: list[int] | None = None) -> np.ndarray:
    """One array from `pieces`, adding adds[i] to piece i; each piece is dropped once copied, so
    the pieces and the whole never both exist in full."""
    out = np.empty(sum(p.size for p in pieces), dtype=dtype)
    at = 0
    for i in range(len(pieces)):
        seg = out[at:at + pieces[i].size]
        seg[...] = pieces[i]
        if adds:
            seg += adds[i]
        at += seg.size
        pieces[i] = None
    pieces.clear()
    return out


def summarize_launch(launch: Launch, manifest: Manifest) -> dict:
    s = Summarizer(manifest)
    s.add(launch)
    return s.result()


def summarize_file(path, manifest: Manifest, part_events: int | None = None) -> dict:
    """Summary of one raw capture file, decoded `part_events` events at a time (None: at once)."""
    s = Summarizer(manifest)
    for part in decode_parts(path, manifest, part_events):
        s.add(part)
    return s.result()


def summarize_capture(capture_dir, manifest: Manifest) -> dict:
    """`atrex-inject summary`: {"launches": [summary per launch file]}, each streamed in parts of
    PART_EVENTS events, so a capture larger than memory is summarized."""
    return {"launches": [summarize_file(f, manifest, PART_EVENTS) for f in capture_files(capture_dir)]}


def render_text(summary: dict) -> str:
    def flag(r: dict) -> str:
        few = r.get("median_ticks") is not None and r["median_ticks"] < FEW_TICKS
        return f"  median {r['median_ticks']:.0f} ticks: quantized" if few else ""

    def table(title: str, rows: list[dict], key: str) -> list[str]:
        head = [f"  {title:<32}{'count':>8}" + "".join(f"{k:>10}" for k in QUANTILES) + "  (us)"]
        return head + [f"  {r[key]:<32}{r['count']:>8}" + "".join(
            f"{r[k] / 1e3:>10.3f}" if r[k] is not None else f"{'-':>10}" for k in QUANTILES) + flag(r) for r in rows]

    tick = summary.get("timer_tick_ns")
    return "\n".join([f"{summary['launch']}: {summary['events']} events from {summary['owners']} owners, "
                      f"span {summary['span_ns'] / 1e3:.1f} us, timer tick "
                      + (f"{tick} ns (durations are multiples of it)" if tick else "unknown (fewer than 2 times)"),
                      *table("interval", summary["intervals"], "name"),
                      *table("mark (offset from first event)", summary["marks"], "site")])
