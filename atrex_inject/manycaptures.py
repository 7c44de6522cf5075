"""`summary` and `export` of several captures on one axis (captureset.Timeline): each capture's
launches summarized as `summary` does alone, placed on the axis; one Perfetto trace with a
process per device and kernel, its launches as tracks under it, every event on the axis.

A capture read alone keeps its own path (summary.summarize_capture, export.export_capture), whose
output is unchanged; this module is what the commands call with several folders or a parent one.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from . import causality
from .captureset import GLOBALTIMER, Member, Timeline
from .checks import Check
from .decode import PART_EVENTS, decode_parts, open_capture
from .errors import AtrexError
from .export import TrackGroup, write_trace
from .progress import step
from .selection import DEFAULT_BUDGET, choose
from .summary import render_text, summarize_file


def _axis_words(tl: Timeline) -> str:
    if tl.axis == GLOBALTIMER:
        return f"one device's %globaltimer ({tl.members[0].device_uuid}): the captures' times as recorded"
    return "the host clock (" + ", ".join(sorted({m.alignment.host_clock for m in tl.members})) + \
        "), each device's %globaltimer moved onto it by its calibration (clock.json)"


def _placed(tl: Timeline, m: Member, launch: dict, origin: int) -> dict:
    """A launch's summary with where it starts on the axis (ns after the timeline's first launch)
    and the alignment's error there."""
    t = np.array([launch["t_first_ns"]], dtype=np.int64)
    at = int(tl.on_axis_times(m, t)[0])
    return {**launch, "axis_start_ns": at - origin, "axis_error_ns": tl.error_ns(m, t)}


def summarize_timeline(tl: Timeline, fixed_cost: str | None = None) -> dict:
    """`atrex-inject summary` of several captures: {"axis", "devices", "captures": [{folder, spec,
    kernel, device, ..., "launches": [summary per launch, with axis_start_ns and axis_error_ns]}]}."""
    if fixed_cost is not None and not any(_has(m, fixed_cost) for m in tl.members):
        raise AtrexError(f"--fixed-cost {fixed_cost!r} is not an interval of any of the captures' specs",
                         hint="name an interval one of them defines (each capture that defines it takes it off)")
    per = []
    for m in tl.members:
        launches = []
        for f in m.files:
            step(f"summarizing {m.folder.name}/{f.name}")
            launches.append(summarize_file(f, m.manifest, PART_EVENTS, fixed_cost if _has(m, fixed_cost) else None))
        per.append(launches)
    starts = [int(tl.on_axis_times(m, np.array([l["t_first_ns"]]))[0]) for m, ls in zip(tl.members, per) for l in ls]
    origin = min(starts)
    out = tl.to_json()
    out["axis_words"] = _axis_words(tl)
    for c, m, launches in zip(out["captures"], tl.members, per):
        c["launches"] = [_placed(tl, m, l, origin) for l in launches]
    scratch = Check("causality")  # validate judges them; the summary measures them
    out["handoffs"] = [h for own in (True, False) for h in causality.check_timeline(tl, scratch, own)[0]]
    return out


def _has(m: Member, interval: str | None) -> bool:
    return interval is not None and interval in {iv.name for iv in m.manifest.intervals}


def render_timeline_text(r: dict) -> str:
    lines = [f"{len(r['captures'])} captures on one axis: {r['axis_words']}"]
    for c in r["captures"]:
        lines.append(f"capture {c['folder']}: spec {c['spec']}, kernel {c['kernel']}, device {c['device_name']} "
                     f"{c['device']}")
        for l in c["launches"]:
            err = f" ± {l['axis_error_ns']:.0f} ns" if l["axis_error_ns"] else ""
            lines.append(f"  {l['launch']} starts {l['axis_start_ns'] / 1e3:.1f} us{err} after the first launch")
            lines += ["  " + x for x in render_text(l).split("\n")]
    for h in r["handoffs"]:
        q = h["handoff_ns"]
        lines.append(f"handoff {h['causality']} ({h['producer']} -> {h['consumer']}, key {h['key']}): {h['matched']} "
                     f"consumer events observed a recorded producer event, {h['unmatched']} did not; from the latest "
                     f"producer event: min {q['min']}, median {q['median']}, p90 {q['p90']}, max {q['max']} ns "
                     f"(± {h['bound_ns']:.0f} ns); {h['violations']} beyond the bound (validate: causality)")
    return "\n".join(lines)


def export_timeline(tl: Timeline, perfetto: str | Path | None, png: str | Path | None, owners: str | None = None,
                    ctas: str | None = None, trace_window: str | None = None, everything: bool = False,
                    budget: int = DEFAULT_BUDGET) -> dict:
    """`atrex-inject export --perfetto` of several captures: one trace, a process per device and
    kernel (TrackGroup), each launch a track under it, every event on the axis; owners chosen over
    all launches together (selection.choose). The picture is of one launch: refused here."""
    if png:
        raise AtrexError("--png draws one launch of one capture", hint="give one capture folder for the picture")
    if not perfetto:
        raise AtrexError("nothing to export", hint="give --perfetto FILE")
    sources, manifests, groups, pids = [], [], [], {}
    for m in tl.members:
        key = (m.device_uuid, m.manifest.kernel)
        pid = pids.setdefault(key, len(pids) + 1)
        for f in m.files:
            c = open_capture(f, m.manifest)  # checked once
            sources.append(lambda c=c, m=m: (tl.on_axis(m, p) for p in decode_parts(c, m.manifest, PART_EVENTS)))
            manifests.append(m.manifest)
            groups.append(TrackGroup(pid, f"{m.device_name} {m.device_uuid} · {m.manifest.kernel}".strip()))
    step("choosing the owners the trace holds (reading every launch)")
    choices = choose(sources, manifests, owners, ctas, trace_window, everything, budget)
    step(f"writing the Perfetto trace {perfetto}")
    path = write_trace(choices, manifests, perfetto, groups)
    return {**tl.to_json(), "axis_words": _axis_words(tl), "perfetto": str(path),
            "selection": [{**c.to_json(), "capture": str(m.folder)} for c, m in
                          zip(choices, [m for m in tl.members for _ in m.files])]}
