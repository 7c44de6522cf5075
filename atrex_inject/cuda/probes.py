"""The probes' C++: the prefix put at the top of the file (recorder header, source identity, owner
groups, capture plan), each group's recorder, and each site's probe statement, all read from the
plan's recorder mode (plan.RecorderMode)."""
from __future__ import annotations

import re

from ..fsio import sha256_bytes
from ..layout import resident_rings
from ..plan import Plan
from ..source_id import SOURCE_ID_PLACEHOLDER
from ..spec import Site
from .edits import Edits
from .loops import loop_exits
from .source import HEADER_SUFFIXES, JUMP_KINDS, Kind, SourceFile, Stmt

HEADER = "atrex_timeline.cuh"
MARK = "// atrex: instrumented"
# atrex::host::KernelPlan's members in declaration order (runtime/atrex_capture.cuh; a test reads the
# struct and checks this order): the prefix fills the aggregate by name here, positionally there
KERNEL_PLAN_FIELDS = ("kernel", "source_id_hex", "groups", "n_groups", "capacity", "capture_skip", "capture_count",
                      "launches", "scratch", "scratch_bytes", "bound", "scratch_dims", "staging_warps")


# the runtime's functions the inserted code calls by name (recorders, capture sessions, the guard)
CALLED = frozenset({"finish", "on", "rec", "rec_active", "rec_every", "rec_held", "hold", "release", "release_loop",
                    "flush", "trips_begin", "stage", "put", "cta_selected"})
_DEFINE = re.compile(r"\s*#\s*define\s+(\w+)")


def macro_clash(src: SourceFile) -> tuple[str, int] | None:
    """(name, line) of a macro the file defines with the name of a function the inserted code calls
    (`#define finish() ...`): the preprocessor would expand that call into the user's text."""
    toks = src.tokens.toks
    for i in toks.indices({"PREPROC"}):
        m = _DEFINE.match(toks[i].value)
        if m and m.group(1) in CALLED:
            return m.group(1), src.lines.line(toks[i].start_pos + len(toks[i].value) - len(toks[i].value.lstrip()))
    return None


def static_suffix(source_rel: str) -> str:
    """Suffix of the prefix's static names: in a header, `_` + 8 hex digits of its path, so two
    instrumented headers can share a translation unit; none in a .cu (its output, and so the source
    ids of existing captures, stay as they were)."""
    if not source_rel.lower().endswith(HEADER_SUFFIXES):
        return ""
    return "_" + sha256_bytes(source_rel.encode())[:8]


def site_code(plan: Plan, site: Site, branch_free: bool = False, held: bool = False, grouped: bool = False) -> str:
    """The probe statement. `branch_free`: the site runs only in recording CTAs (versioned body) or
    once per strip-mined group, so it stores unconditionally (non-writers have capacity 0: the
    store is predicated off) instead of testing `active` or a hit counter, which splits the
    compiler's basic blocks and stops it from overlapping the code around the probe. `held`: a
    resident recorder's site in a strip-mined trip, which holds the warp's slot (strip_mine), or a
    staged one's in a trip (trips); `grouped`: in a trip's group of iterations, whose events its
    recorder keeps in registers until the group's end (sampling.trips)."""
    sid = plan.spec.site_id(site.name)
    rv = f"__atrex_r{plan.group_of(site).id}"
    payload = f", static_cast<unsigned>({site.payload})" if site.payload else ""
    if grouped:
        return f"{rv}.stage(__atrex_h{plan.group_of(site).id}, {sid}u{payload});"
    if held:
        return f"{rv}.rec_held({sid}u{payload});"
    if branch_free:
        return f"{rv}.rec({sid}u{payload});"
    if site.every > 1:
        return f"{rv}.rec_every(__atrex_n{sid}, {site.every}u, {sid}u{payload});"
    g = plan.group_of(site)
    if g.cta_stride > 1 or g.cta_limit or g.warp_mask != 0xFFFFFFFF or g.predicate:
        return f"{rv}.rec_active({sid}u{payload});"
    return f"{rv}.rec({sid}u{payload});"


def site_label(plan: Plan, site: Site) -> str:
    return f"site {site.name} (id {plan.spec.site_id(site.name)}, {site.position})"


def prefix(plan: Plan, sfx: str, runtime: str | None = None) -> str:
    """The lines put at the top of the file. With `runtime` (CUDA source inside Python: python/),
    the recorder headers' text goes in place of the #include, and the host-side statics are fenced
    off from NVRTC, which compiles no host code."""
    spec, mode, c = plan.spec, plan.mode, plan.spec.capture
    defines = ""
    if mode.wide:
        defines += "#define ATREX_TL_WIDE 1  // atrex: 16-byte events (payload or clock)\n"
    if c.clock:
        defines += "#define ATREX_TL_CLOCK 1  // atrex: record %clock\n"
    if mode.packed:
        defines += "#define ATREX_TL_PACKED 1  // atrex: 4-byte events, the site id in the timer's low 5 bits\n"
    groups = ", ".join(
        f"{{atrex::{g.role.cpp}, {g.cta_stride}u, {g.cta_limit}u, 0x{g.warp_mask:08x}u, 0u, 0u}}"
        for g in plan.groups)
    include = (f'#include "{HEADER}"  // atrex: recorder runtime (atrex-inject include-dir)\n' if runtime is None
               else runtime)
    host, end = ("", "") if runtime is None else (
        "#ifndef __CUDACC_RTC__  // atrex: host side of the capture (NVRTC compiles device code only)\n",
        "#endif  // atrex: host side of the capture\n")
    members = {"kernel": f'"{spec.kernel}"', "source_id_hex": f"__atrex_source_id{sfx}", "groups": f"__atrex_groups{sfx}",
               "n_groups": f"{len(plan.groups)}u", "capacity": f"{c.capacity}u", "capture_skip": f"{c.skip}u",
               "capture_count": f"{c.count}u", "launches": "0u", "scratch": "nullptr", "scratch_bytes": "0u",
               "bound": "nullptr", "scratch_dims": "{0u}"}
    if mode.warps:  # rings: launches with more warps than they were sized for are refused
        members["staging_warps"] = f"{mode.warps}u"
    kernel_plan = ", ".join(members[f] for f in KERNEL_PLAN_FIELDS if f in members)
    return (f"{MARK} from spec {spec.path.name} for kernel {spec.kernel}; `atrex-inject revert` restores it\n"
            f"{defines}{include}{host}"
            f'static const char __atrex_source_id{sfx}[] = "{SOURCE_ID_PLACEHOLDER}";  // atrex: source identity\n'
            f"static atrex::GroupDesc __atrex_groups{sfx}[] = {{{groups}}};  // atrex: owner groups\n"
            f"static atrex::host::KernelPlan __atrex_plan{sfx} = {{{kernel_plan}}};  // atrex: capture plan\n{end}")


def recorders(plan: Plan, mined: set[str]) -> list[tuple[str, str]]:
    """Each owner group's recorder, constructed at the kernel's (or its recording body's) top, of
    the mode's class: atrex::Recorder on the global path, a BasicRecorder with the ring's size as
    template arguments on the others; and a hit counter per site sampled without strip-mining."""
    items = []
    mode = plan.mode
    for g in plan.groups:
        pred = f", static_cast<bool>({g.predicate})" if g.predicate else ""
        if mode.resident:  # the group's literals: its owner is found at entry, claimed and published at exit
            kind = (f"atrex::BasicRecorder<{mode.ring}u, {resident_rings(g, mode.warps)}u, {g.id}u, true, "
                    f"atrex::{g.role.cpp}, {g.cta_stride}u, {g.cta_limit}u, 0x{g.warp_mask:08x}u>")
        else:
            kind = (f"atrex::BasicRecorder<{mode.ring}u, {mode.warps}u, {g.id}u>" if mode.staged
                    else "atrex::Recorder")
        items.append((f"{kind} __atrex_r{g.id}({g.id}u{pred});", f"recorder, owner group {g.id} ({g.role})"))
    for i, s in enumerate(plan.spec.sites):
        if s.every > 1 and s.name not in mined:
            items.append((f"unsigned __atrex_n{i} = 0u;", f"hit counter for site {s.name} (every {s.every})"))
    return items


def loop_site(edits: Edits, loop: Stmt, pos: str, code: str, label: str) -> None:
    body = loop.body
    if pos == "loop-begin":
        if body.kind == Kind.BLOCK:
            edits.block_begin(body, [(code, label)])
        else:
            edits.before(body, code, label)
        return
    for s in loop_exits(loop):
        edits.before(s, code, label)
    if body.kind == Kind.BLOCK:
        last = body.children[-1] if body.children else None
        if last is None or last.kind not in JUMP_KINDS:
            edits.block_end(body, [(code, label)])
    elif body.kind not in JUMP_KINDS:
        edits.after(body, code, label)
