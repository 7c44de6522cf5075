"""IKeT's decoded run-iket output -> format-2 capture files, so the CuTe DSL route shares decode,
validation, summary, export and measurement with the CUDA route.

run-iket writes `iket_pid_<pid>.trace.json` (its decoded JSON): per launch `markers` (location,
name index, timestamp[, payload]), `ranges` (start/end timestamps and locations) and
`warpLifetimes`, with a shared `locationTable` (CTA id, SM, warp) and `stringTable`. Launches
of other kernels in the process are dropped (the target's are known by name as check-iket knows
its entry: a method's by its class too); the target kernel's launches are numbered in
order and never merged; the launches of one trace (one process) share a run id. A mark becomes
an event of its site; a range `a` becomes a start event of site `a` and an end event of the
interval's end site. Owners are the (CTA, warp) locations in
each site group's slots (docs/format.md); each warp lifetime claims its owner (two lifetimes of one
(CTA, warp) are a duplicate claim) and bounds its events: an event outside it refuses the trace.
Where the spec records the first CTA only (IKeT's selection, backend.py), its groups hold that
CTA's warps alone: an event of another CTA refuses the trace, naming it (a lifetime of a warp no
group holds claims nothing).
IKeT reports warp records it dropped (a warp past maxTsCntPerWarp), and trace data it could not
collect, only in its log: its decoded JSON has no drop counter. Given run-iket's log (what
`atrex-inject capture` keeps), normalize_run reads it (iketlog.py) and every launch's sidecar
carries what it says about the target kernel as `iket_log`, which validation counts under
overflow (dropped records) and truncation (incomplete trace) (checks.py); without a log nothing
is added.
"""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np

from ..errors import CaptureError
from ..launchfile import write_launch
from .runiket import FIRST_CTA, SELECT_NAME, selects_first_cta
from .check import compiled_from
from .iketlog import read_log
from ..layout import (HEADER_BYTES, MAX_BUFFER_BYTES, OWNER_BYTES, OWNER_DTYPE, TAG_VALID, build_header,
                      group_owners, owner_slots)
from ..manifest import Manifest

MALFORMED = (KeyError, TypeError, IndexError, ValueError, AttributeError, OverflowError)


def launches_of(trace: dict, kernel: str) -> list[dict]:
    """The trace's launches of the spec's kernel, by IKeT's kernel name (the entry's): check-iket's
    rule (check.compiled_from), so of a method its class's only, where every kernel of a package is a
    method named `kernel` (quack, FlashAttention-4)."""
    return [l for l in trace.get("launches", [])
            if isinstance(l.get("kernelName"), str) and compiled_from(l["kernelName"], kernel)]


def _at(table: list, i, what: str):
    """table[i] for an index IKeT could have written; anything else is a malformed trace."""
    if not (isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(table)):
        raise ValueError(f"{what} index {i!r} is outside the string table")
    return table[i]


def _check_lifetimes(ev: np.ndarray, life_loc, life_t0, life_t1, n_loc: int, where, site_name, seq: int) -> None:
    """IKeT's own record of each warp's life bounds its events: an event of a warp outside every one of
    that warp's lifetimes (or of a warp with none) was not recorded by that warp in this launch."""
    lo = np.full(n_loc, np.iinfo(np.int64).max)
    hi = np.full(n_loc, np.iinfo(np.int64).min)
    np.minimum.at(lo, life_loc, life_t0)
    np.maximum.at(hi, life_loc, life_t1)
    loc, ts = ev[:, 0], ev[:, 2]
    out = np.flatnonzero((ts < lo[loc]) | (ts > hi[loc]))
    if out.size:
        i = out[0]
        span = f"[{lo[loc[i]]}, {hi[loc[i]]}]" if hi[loc[i]] >= lo[loc[i]] else "none recorded"
        raise CaptureError(f"launch {seq}: IKeT recorded {out.size} events outside their warp's lifetime; first: "
                           f"{where(int(loc[i]))}, site {site_name(int(ev[i, 1]))!r} at {int(ts[i])} ns, lifetime "
                           f"{span}", hint="the trace mixes launches or was edited: capture again with run-iket")


def _not_selected(launch: dict, seq: int, manifest: Manifest, ev: np.ndarray, where, site_name) -> None:
    """Refuse events of warps the spec does not record (`ev`, rows of normalize_launch): of a CTA
    other than the first where the spec selects it (IKeT was not given, or did not apply, its
    selection), or of a warp a role or `warps` leaves out (a trace of another instrumented source)."""
    first = f"{len(ev)} event(s) of warps the spec does not record; first: {where(int(ev[0, 0]))}, site " \
            f"{site_name(int(ev[0, 1]))!r}"
    if not selects_first_cta(manifest.groups):
        raise CaptureError(f"launch {seq}: IKeT recorded {first}", hint="the trace comes from another instrumented "
                           "source than this manifest's: apply the spec, rerun and capture again")
    active = launch.get("singleClusterActive")
    applied = "" if active is None else f" (IKeT's trace says singleClusterActive = {active} for this launch)"
    raise CaptureError(f"launch {seq}: IKeT recorded {first}: the spec records the first CTA only ({FIRST_CTA}), "
                       f"IKeT's selection of cluster 0,0,0{applied}",
                       hint="run by hand, run-iket needs that selection: capture through `atrex-inject capture`, "
                            f"which passes it (--enabled-cluster-config {SELECT_NAME}); where capture passed it, IKeT "
                            "did not apply it to this kernel, or the kernel is launched with clusters (its first "
                            "cluster holds several CTAs): remove ctas.limit from the spec there")


def _fits(seq: int, grid, block, n_owner: int, owner_event_bytes: int) -> None:
    """Refuse a launch whose buffer would be larger than any the recorder writes (a damaged grid or
    block in the trace would otherwise have numpy allocate it)."""
    size = HEADER_BYTES + n_owner * (OWNER_BYTES + owner_event_bytes)
    if size > MAX_BUFFER_BYTES:
        raise CaptureError(f"launch {seq}: grid {list(grid)} x block {list(block)} gives {n_owner} owners, a "
                           f"{size}-byte buffer, over the recorder's 4 GiB", hint="the trace's launch geometry is "
                           "damaged, or the spec's densities select too many warps: capture again, or lower them")


def normalize_launch(trace: dict, launch: dict, seq: int, manifest: Manifest) -> tuple[bytes, tuple, tuple, str]:
    """One launch of the target kernel as format-2 bytes: (raw buffer, grid, block, IKeT's kernel name)."""
    names = trace["stringTable"]
    loc = trace["locationTable"]
    grid = (launch["gridDimX"], launch["gridDimY"], launch["gridDimZ"])
    block = (launch["blockDimX"], launch["blockDimY"], launch["blockDimZ"])
    iket = manifest.iket
    ranges = {r.name: r for r in iket.ranges}
    # a site that ends one interval and starts the next (`a -> b`, `b -> c`) runs `range_end` then
    # `range_start` at one place: one execution of the site, two IKeT records. The end's is kept (the
    # site's moment; the start after it is the probe's own cost), so the site is one event as the
    # CUDA recorder writes it
    ends = {r.end_site for r in iket.ranges}
    rows = []  # (location index, site id, timestamp, payload)
    for mk in launch.get("markers", []):
        site = iket.marks.get(_at(names, mk["markerNameIdx"], "marker name"))
        if site is not None:
            rows.append((mk["locIdx"], site, mk["timestamp"], int(mk.get("payload", 0)) & 0xFFFFFFFF))
    for rg in launch.get("ranges", []):
        r = ranges.get(_at(names, rg["rangeNameIdx"], "range name"))
        if r is not None:
            start_loc, end_loc = rg["warpLocIdxs"]
            if r.start_site not in ends:
                rows.append((start_loc, r.start_site, rg["startTs"], int(rg.get("startPayload", 0)) & 0xFFFFFFFF))
            rows.append((end_loc, r.end_site, rg["endTs"], int(rg.get("endPayload", 0)) & 0xFFFFFFFF))
    ev = np.array(rows, dtype=np.int64).reshape(-1, 4)
    loc_xyz = np.array([l["ctaId"] for l in loc], dtype=np.int64).reshape(-1, 3)
    loc_cta = loc_xyz[:, 0] + grid[0] * (loc_xyz[:, 1] + grid[1] * loc_xyz[:, 2])
    loc_warp = np.array([l["warpId"] for l in loc], dtype=np.int64)
    loc_sm = np.array([l["smId"] for l in loc], dtype=np.int64)
    life = launch.get("warpLifetimes", [])
    life_loc = np.array([w["locIdx"] for w in life], dtype=np.int64)
    life_t0 = np.array([w["startTs"] for w in life], dtype=np.int64)
    if np.any((ev[:, 0] < 0) | (ev[:, 0] >= len(loc))) or np.any((life_loc < 0) | (life_loc >= len(loc))):
        raise ValueError("a location index is outside the location table")
    n_warps = -(-int(np.prod(block)) // 32)
    used = np.unique(np.r_[ev[:, 0], life_loc])  # the locations this launch uses
    outside = used[((loc_xyz[used] < 0) | (loc_xyz[used] >= np.array(grid))).any(axis=1)
                   | (loc_warp[used] < 0) | (loc_warp[used] >= n_warps)]
    if outside.size:
        i = int(outside[0])
        raise CaptureError(f"launch {seq}: IKeT location {i} names CTA {tuple(loc_xyz[i].tolist())} warp "
                           f"{int(loc_warp[i])}, outside grid {list(grid)} x block {list(block)} ({n_warps} warps)",
                           hint="the trace was damaged or mixes launches: capture again with run-iket")
    where = lambda i: f"CTA {tuple(loc[i]['ctaId'])} warp {loc[i]['warpId']}"  # noqa: E731
    site_name = lambda sid: manifest.sites[sid].name  # noqa: E731

    groups = manifest.groups
    sizes = group_owners(groups, grid, block)
    bases, n_owner = np.cumsum([0, *sizes])[:-1], sum(sizes)
    _fits(seq, grid, block, n_owner, 0)
    # each event's owner: its warp's slot in its site's group
    e_loc, e_site = ev[:, 0], ev[:, 1]
    e_group = np.array(manifest.site_group, dtype=np.int64)[e_site] if ev.size else np.zeros(0, np.int64)
    owner = np.zeros(e_loc.size, dtype=np.int64)
    for gi, g in enumerate(groups):
        sel = np.flatnonzero(e_group == gi)
        slot, ok = owner_slots(g, block, loc_cta[e_loc[sel]], loc_warp[e_loc[sel]])
        if not ok.all():
            _not_selected(launch, seq, manifest, ev[sel[~ok]], where, site_name)
        owner[sel] = bases[gi] + slot
    life_t1 = np.array([w["endTs"] for w in life], dtype=np.int64)
    _check_lifetimes(ev, life_loc, life_t0, life_t1, len(loc), where, site_name, seq)
    order = np.lexsort((ev[:, 2], owner))
    owner, ev = owner[order], ev[order]
    counts = np.bincount(owner, minlength=n_owner)
    cap = max(1, int(counts.max()) if counts.size else 1)
    words = manifest.capture.event_bytes // 4
    _fits(seq, grid, block, n_owner, cap * words * 4)
    wide = words == 4
    events = np.zeros((n_owner, cap, words), dtype="<u4")
    starts = np.cumsum(counts) - counts
    k = np.arange(owner.size) - starts[owner]
    tag = (int(TAG_VALID) | ev[:, 1]).astype(np.uint32)
    events[owner, k, 0] = (ev[:, 2] & 0xFFFFFFFF).astype(np.uint32)
    events[owner, k, words - 1] = tag
    if wide:
        events[owner, k, 2] = ev[:, 3].astype(np.uint32)

    own = np.zeros(n_owner, dtype=OWNER_DTYPE)
    t0 = np.full(n_owner, np.iinfo(np.int64).max, dtype=np.int64)
    t1 = np.zeros(n_owner, dtype=np.int64)
    claims = np.zeros(n_owner, dtype=np.int64)
    for gi, g in enumerate(groups):  # every warp lifetime claims its slot in each group the warp belongs to
        slot, ok = owner_slots(g, block, loc_cta[life_loc], loc_warp[life_loc])
        o = bases[gi] + slot[ok]
        np.add.at(claims, o, 1)  # a second lifetime of one (CTA, warp) is a duplicate claim
        own["smid"][o] = loc_sm[life_loc[ok]]
        own["cta"][o] = loc_cta[life_loc[ok]]
        own["thread"][o] = loc_warp[life_loc[ok]] * 32
        np.minimum.at(t0, o, life_t0[ok])  # events lie within lifetimes (checked above): the owner's start
        np.maximum.at(t1, o, life_t1[ok])  # ... and its end
    own["claims"] = claims
    t0 = np.where(t0 == np.iinfo(np.int64).max, 0, t0)
    own["t0_lo"], own["t0_hi"] = t0 & 0xFFFFFFFF, t0 >> 32
    own["t1_lo"], own["t1_hi"] = t1 & 0xFFFFFFFF, t1 >> 32
    own["attempted"] = counts
    hdr = build_header(groups, grid, block, cap, words * 4, manifest.capture.clock, manifest.source.source_id, seq)
    return hdr.tobytes() + own.tobytes() + events.tobytes(), grid, block, launch["kernelName"]


def _load(trace_json: Path):
    try:
        return json.loads(Path(trace_json).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CaptureError(f"cannot read run-iket's decoded trace: {getattr(e, 'strerror', None) or e}",
                           path=str(trace_json), hint="recapture with run-iket `--postprocess json`") from None


def normalize_trace(trace_json: Path, manifest: Manifest, out_dir: Path, workload: str = "", device: dict | None = None,
                    ) -> list[Path]:
    return normalize_loaded(_load(trace_json), trace_json, manifest, out_dir, workload, device)


def normalize_loaded(trace: dict, trace_json: Path, manifest: Manifest, out_dir: Path, workload: str,
                     device: dict | None, iket_log: dict | None = None) -> list[Path]:
    """The target kernel's launches of one decoded trace as capture files; `iket_log`: what run-iket's
    log says about them (iketlog.read_log), restated in every sidecar (it names no launch)."""
    if manifest.iket is None:
        raise CaptureError(f"manifest of spec {manifest.name!r} has no IKeT name map (backend {manifest.backend!r})",
                           hint="normalize run-iket's output with the manifest of a cutedsl spec")
    run_id = uuid.uuid4().hex  # one decoded trace is one process: one run
    try:
        launches = launches_of(trace, manifest.kernel)
        files = [normalize_launch(trace, launch, seq, manifest) for seq, launch in enumerate(launches)]
    except MALFORMED as e:  # external JSON: any field missing, mistyped or out of range
        raise CaptureError(f"not a run-iket decoded trace this normalizer reads ({type(e).__name__}: {e})",
                           path=str(trace_json), hint="recapture with run-iket `--postprocess json` "
                                                      "(nvidia-cutlass-dsl 4.8.1 writes the format read here)") from None
    if not launches:
        raise CaptureError(f"no launch of kernel {manifest.kernel!r} in {trace_json}",
                           hint="is the instrumented source the one that ran?")
    logged = {} if iket_log is None else {"iket_log": iket_log}
    # written only once every launch normalized: nothing partial
    return [write_launch(out_dir, manifest.kernel, seq, raw, grid, block, manifest.source.source_id, workload,
                         device or {}, run_id, capture="run-iket", iket_kernel=kernel, **logged)
            for seq, (raw, grid, block, kernel) in enumerate(files)]


def _launches_kernel(trace, kernel: str) -> bool:
    try:
        return bool(launches_of(trace, kernel))
    except MALFORMED:
        return False  # normalize_loaded says what is wrong with it


def normalize_run(iket_dir: Path, manifest: Manifest, out_dir: Path, workload: str, log: Path | None = None,
                  ) -> list[Path]:
    """After `run-iket profile`: normalize the decoded trace of the one process that launched the kernel
    (several would reuse launch numbers in one folder: one capture folder holds one run), with what
    run-iket's `log` says about lost trace data, when given."""
    from ..gpu import device_info
    facts = None if log is None else read_log(log, manifest.kernel)
    traces = sorted(Path(iket_dir).glob("iket_pid_*.trace.json"))
    if not traces:
        raise CaptureError(f"run-iket left no decoded trace in {iket_dir}",
                           hint="run-iket needs `--postprocess json` or `all`; see its log")
    loaded = [(t, _load(t)) for t in traces]
    ran = [(t, d) for t, d in loaded if _launches_kernel(d, manifest.kernel)] or loaded[:1]
    if len(ran) > 1:
        raise CaptureError(f"{len(ran)} processes launched kernel {manifest.kernel!r} "
                           f"({', '.join(t.name for t, _ in ran)})", path=str(iket_dir),
                           hint="capture one process per folder (launch the kernel from a single process)")
    (t, d), = ran
    return normalize_loaded(d, t, manifest, out_dir, workload, device_info(), facts)
