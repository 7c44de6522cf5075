"""CUDA rewriter: a probe plan + a parsed source → the instrumented source.

Only insertion points change; every byte of the original stays, in order. Inserted code is marked
with `// atrex:` (whole lines) or `/* atrex: */` (inline) comments naming the site. A statement
that is the unbraced body of a control statement is wrapped in braces so an inserted probe stays
inside the same branch or loop.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from ..errors import AnchorError, SpecError
from ..fsio import sha256_bytes
from ..layout import resident_rings
from ..source_id import SOURCE_ID_PLACEHOLDER, source_id_of
from ..backend import Rewrite, SitePlacement
from ..plan import Plan
from ..spec import ProbeSpec, Site
from .anchors import resolve
from .loops import CanonicalLoop, canonical_loop, leading_loads, loop_exits
from .launches import Launch, Mirror, find_all
from .names import KernelName, select_kernel
from .source import HEADER_SUFFIXES, JUMP_KINDS, LOOP_KINDS, Kernel, Kind, SourceFile, Stmt, parse_source

CLONE_SUFFIX = "__atrex"  # the instrumented copy of kernel K is K__atrex (docs/perturbation.md)
HEADER = "atrex_timeline.cuh"
MARK = "// atrex: instrumented"
# Ordering of insertions that share an offset: text after a statement, then a block's first line,
# then a block's last line, then text before the next statement.
AFTER, BLOCK_BEGIN, BLOCK_END, BEFORE = 0, 1, 2, 3




def static_suffix(source_rel: str) -> str:
    """Suffix of the prefix's static names: in a header, `_` + 8 hex digits of its path, so two
    instrumented headers can share a translation unit; none in a .cu (its output, and so the source
    ids of existing captures, stay as they were)."""
    if not source_rel.lower().endswith(HEADER_SUFFIXES):
        return ""
    return "_" + sha256_bytes(source_rel.encode())[:8]


class _Edits:
    """Collects insertions by statement and side, then renders them with the source's layout."""

    def __init__(self, src: SourceFile):
        self.src = src
        # inserted lines end like the file's lines: CRLF in a CRLF file, so no file gets mixed endings
        self.nl = "\r\n" if src.text.count("\r\n") * 2 > src.text.count("\n") else "\n"
        self.sides: dict[Stmt, dict[str, list[tuple[str, str]]]] = {}
        self.raw: list[tuple[int, int, int, str]] = []  # offset, rank, tiebreak, text
        self.replacements: list[_Replacement] = []

    def before(self, s: Stmt, code: str, label: str):
        self.sides.setdefault(s, {"before": [], "after": []})["before"].append((code, label))

    def after(self, s: Stmt, code: str, label: str):
        self.sides.setdefault(s, {"before": [], "after": []})["after"].append((code, label))

    def insert(self, offset: int, rank: int, text: str, tiebreak: int = 0):
        self.raw.append((offset, rank, tiebreak, text))

    # -- layout helpers --
    def indent(self, off: int) -> str:
        line = self.src.lines.line_text(self.src.lines.line(off))
        return line[: len(line) - len(line.lstrip())]

    def starts_line(self, off: int) -> bool:
        return self.src.text[self.src.lines.line_start(off):off].strip() == ""

    def rest_blank(self, off: int) -> bool:
        rest = self.src.text[off:self.src.lines.line_end(off)].strip()
        return rest == "" or (rest.startswith("//") and not rest.endswith("\\"))

    def lines_of(self, items, indent: str) -> str:
        return "".join(f"{indent}{code}  // atrex: {label}{self.nl}" for code, label in items)

    @staticmethod
    def inline(items) -> str:
        return " ".join(f"{code} /* atrex: {label} */" for code, label in items)

    def block_begin(self, block: Stmt, items):
        off = block.start + 1
        first = next((c for c in block.children if c.kind != Kind.PP), None)
        inner = self.indent(first.start) if first is not None and self.starts_line(first.start) \
            else self.indent(block.start) + "  "
        if self.rest_blank(off):
            self.insert(self.src.lines.line_end(off) + 1, BLOCK_BEGIN, self.lines_of(items, inner))
        else:
            self.insert(off, BLOCK_BEGIN, " " + self.inline(items))

    def block_end(self, block: Stmt, items):
        off = block.end - 1
        if self.starts_line(off):
            first = next((c for c in block.children if c.kind != Kind.PP), None)
            inner = self.indent(first.start) if first is not None and self.starts_line(first.start) \
                else self.indent(off) + "  "
            self.insert(self.src.lines.line_start(off), BLOCK_END, self.lines_of(items, inner))
        else:
            self.insert(off, BLOCK_END, self.inline(items) + " ")

    def statement(self, s: Stmt, before, after, wrap: bool, depth: int):
        """Probes before/after statement `s`; `before` goes above the #pragma lines that lead it, indented
        like the statement itself."""
        start, end, ind = s.lead, s.end, self.indent(s.start)
        if wrap:
            opening = "{ " + "".join(self.inline([b]) + " " for b in before)
            if self.src.text.startswith("#", start):  # a directive must stay first on its line
                self.insert(self.src.lines.line_start(start), BEFORE, ind + opening + self.nl, depth)
            else:
                self.insert(start, BEFORE, opening, depth)
            self.insert(end, AFTER, "".join(" " + self.inline([a]) for a in after) + " }", -depth)
            return
        if before:
            if self.starts_line(start):
                self.insert(self.src.lines.line_start(start), BEFORE, self.lines_of(before, ind), depth)
            else:
                self.insert(start, BEFORE, self.inline(before) + " ", depth)
        if after:
            if self.rest_blank(end):
                self.insert(self.src.lines.line_end(end) + 1, AFTER, self.lines_of(after, ind), -depth)
            else:
                self.insert(end, AFTER, " " + self.inline(after), -depth)

    def replace(self, a: int, b: int, gen, inclusive: bool) -> "_Replacement":
        """Replace text[a:b] with gen(); insertions strictly inside belong to the replacement (gen
        renders them with span), those exactly at a or b too when `inclusive`."""
        self.replacements.append(_Replacement(a, b, gen, inclusive))
        return self.replacements[-1]

    def span(self, a: int, b: int, exclude: "_Replacement | None" = None) -> str:
        """text[a:b] with the insertions in [a, b] and the replacements inside it rendered."""
        inner = [r for r in self.replacements if r is not exclude and a <= r.a and r.b <= b]
        top = sorted((r for r in inner if not any(o is not r and o.a <= r.a and r.b <= o.b for o in inner)),
                     key=lambda r: r.a)
        out, pos, lo_in = [], a, True
        for r in top:
            out.append(self._plain(pos, r.a, lo_in, not r.inclusive))
            out.append(r.gen())
            pos, lo_in = r.b, not r.inclusive
        out.append(self._plain(pos, b, lo_in, True))
        return "".join(out)

    def _plain(self, a: int, b: int, lo_in: bool, hi_in: bool) -> str:
        text = self.src.text
        out, pos = [], a
        for off, _, _, ins in sorted((r for r in self.raw if (a < r[0] < b) or (r[0] == a and lo_in)
                                      or (r[0] == b and hi_in and b != a)), key=lambda r: (r[0], r[1], r[2])):
            out.append(text[pos:off])
            out.append(ins)
            pos = off
        out.append(text[pos:b])
        return "".join(out)

    def render(self, prefix: str) -> str:
        """The rewritten text; `prefix` (the recorder's definitions) goes at the top, or after a
        header's include guard."""
        for s, side in self.sides.items():
            depth = 0
            p = s.parent
            while p is not None:
                depth, p = depth + 1, p.parent
            self.statement(s, side["before"], side["after"], wrap=not s.in_block, depth=depth)
        if prefix:
            self.insert(_prefix_offset(self.src.text), -1, prefix.replace("\n", self.nl))
        return self.span(0, len(self.src.text))


_LEADING = r"(?:\s|//[^\n]*|/\*.*?\*/)*"  # whitespace and comments before a file's first directive
_ONCE_OR_GUARD = re.compile(_LEADING + r"#[ \t]*(?:pragma[ \t]+once\b|"
                            r"(?:ifndef[ \t]+|if[ \t]+!\s*defined\s*\(?\s*)(\w+)[^\n]*\n"
                            + _LEADING + r"#[ \t]*define[ \t]+\1\b)[^\n]*\n", re.S)


def _prefix_offset(text: str) -> int:
    """Where the instrumentation prefix goes: after a header's `#pragma once` or include guard
    (`#ifndef G` / `#define G`), so a translation unit that includes the header twice defines the
    recorder globals once; else at the top of the file."""
    m = _ONCE_OR_GUARD.match(text)
    return m.end() if m else 0


@dataclass(eq=False)
class _Replacement:
    a: int
    b: int
    gen: Callable[[], str]
    inclusive: bool


def _site_code(plan: Plan, site: Site, branch_free: bool = False, held: bool = False) -> str:
    """The probe statement. `branch_free`: the site runs only in recording CTAs (versioned body) or
    once per strip-mined group, so it stores unconditionally (non-writers have capacity 0: the
    store is predicated off) instead of testing `active` or a hit counter, which splits the
    compiler's basic blocks and stops it from overlapping the code around the probe. `held`: a
    resident recorder's site in a strip-mined trip, which holds the warp's slot (_strip_mine)."""
    sid = plan.spec.site_id(site.name)
    rv = f"__atrex_r{plan.group_of(site).id}"
    payload = f", static_cast<unsigned>({site.payload})" if site.payload else ""
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


def _label(plan: Plan, site: Site) -> str:
    return f"site {site.name} (id {plan.spec.site_id(site.name)}, {site.position})"


def _prefix(plan: Plan, sfx: str, runtime: str | None = None) -> str:
    """The lines put at the top of the file. With `runtime` (CUDA source inside Python: kernelpy/),
    the recorder headers' text goes in place of the #include, and the host-side statics are fenced
    off from NVRTC, which compiles no host code."""
    spec = plan.spec
    defines = ""
    if plan.wide_events:
        defines += "#define ATREX_TL_WIDE 1  // atrex: 16-byte events (payload or clock)\n"
    if spec.capture.clock:
        defines += "#define ATREX_TL_CLOCK 1  // atrex: record %clock\n"
    if spec.capture.packed:
        defines += "#define ATREX_TL_PACKED 1  // atrex: 4-byte events, the site id in the timer's low 5 bits\n"
    groups = ", ".join(
        f"{{atrex::{g.role.cpp}, {g.cta_stride}u, {g.cta_limit}u, 0x{g.warp_mask:08x}u, 0u, 0u}}"
        for g in plan.groups)
    c = spec.capture
    include = (f'#include "{HEADER}"  // atrex: recorder runtime (atrex-inject include-dir)\n' if runtime is None
               else runtime)
    host, end = ("", "") if runtime is None else (
        "#ifndef __CUDACC_RTC__  // atrex: host side of the capture (NVRTC compiles device code only)\n",
        "#endif  // atrex: host side of the capture\n")
    return (f"{MARK} from spec {spec.path.name} for kernel {spec.kernel}; `atrex-inject revert` restores it\n"
            f"{defines}{include}{host}"
            f'static const char __atrex_source_id{sfx}[] = "{SOURCE_ID_PLACEHOLDER}";  // atrex: source identity\n'
            f"static atrex::GroupDesc __atrex_groups{sfx}[] = {{{groups}}};  // atrex: owner groups\n"
            f"static atrex::host::KernelPlan __atrex_plan{sfx} = {{\"{spec.kernel}\", __atrex_source_id{sfx}, "
            f"__atrex_groups{sfx}, "
            f"{len(plan.groups)}u, {c.capacity}u, {c.skip}u, {c.count}u, 0u, nullptr, 0u, nullptr, {{0u}}"
            f"{f', {c.staging_warps}u' if c.staging_events else ''}}};  // atrex: capture plan\n{end}")


@dataclass(eq=False)
class _StripMine:
    """A canonical loop whose sampled sites record once per group of `every` iterations."""
    loop: CanonicalLoop
    every: int
    sites: list[Site]
    begin: list[tuple[str, str]]  # loop-begin probes: at the start of each group
    end: list[tuple[str, str]]  # loop-end probes: at the end of each group
    # resident recorders held for each group: group id -> the positions of its sites in this loop
    held: dict[int, list[str]] = field(default_factory=dict)
    # staged rings, dense sites: iterations per trip (each trip starts with its groups' rings
    # flushed and holds no more events than a ring has slots); 0 = not recorded in trips
    trip: int = 0
    per_iteration: dict[int, int] = field(default_factory=dict)  # trips: group id -> its sites' events an iteration
    # the trip's probes in their checked form, for the iterations after the last trip
    checked_begin: list[tuple[str, str]] = field(default_factory=list)
    checked_end: list[tuple[str, str]] = field(default_factory=list)


def _anchored_in(stmt: Stmt, site: Site, loop: Stmt) -> bool:
    """Does this site's probe run inside `loop` (at its begin/end or in its body)?"""
    if stmt is loop:
        return site.position in ("loop-begin", "loop-end")
    p = stmt.parent
    while p is not None and p is not loop:
        p = p.parent
    return p is loop


def _enclosing_loop(stmt: Stmt, site: Site) -> Stmt | None:
    if stmt.kind in LOOP_KINDS and site.position in ("loop-begin", "loop-end"):
        return stmt
    p = stmt.parent
    while p is not None and p.kind not in LOOP_KINDS:
        p = p.parent
    return p


def _plan_strip_mining(plan: Plan, anchored: dict[str, Stmt], text: str) -> tuple[dict[Stmt, _StripMine],
                                                                                   list[dict]]:
    """Which loops holding sampled sites are strip-mined, and why the others are not. With resident
    rings a loop whose sites are all dense is "strip-mined by 1" too: its warp's slot is held across
    the loop instead of being looked up in the table at each probe (a lane test and the table's
    load and store at every event). With staged rings such a loop is recorded in trips (_trip):
    its probes store without checking whether the ring is full. Where such a loop cannot be, its
    probes stay as they are, and nothing is reported."""
    spec = plan.spec
    resident = spec.capture.staging_resident
    staged = bool(spec.capture.staging_events) and not resident
    by_loop: dict[Stmt, list[Site]] = {}
    for site in spec.sites:
        stmt = anchored.get(site.name)
        if (site.every > 1 or resident or staged) and stmt is not None:
            loop = _enclosing_loop(stmt, site)
            if loop is not None:
                by_loop.setdefault(loop, []).append(site)
    chosen, refused = {}, []
    for loop, sites in by_loop.items():
        if any(s.every > 1 for s in sites):  # a sampled loop's dense sites refuse it as before
            sites = [s for s in sites if s.every > 1]
        everies = sorted({s.every for s in sites})
        others = [s.name for s in spec.sites if s.name in anchored and s not in sites
                  and _anchored_in(anchored[s.name], s, loop)]
        form = canonical_loop(loop, text)
        if len(everies) > 1:
            why = "its sampled sites have different `every` values " + ", ".join(map(str, everies))
        elif others:
            why = f"site(s) {', '.join(others)} also run inside it, every iteration or in a nested loop"
        elif isinstance(form, str):
            why = form
        elif loop.body.kind != Kind.BLOCK:
            why = "its body is not a braced block"
        elif staged and everies == [1]:
            trip, per_iteration = _trip(plan, sites, loop, anchored)
            if trip:
                chosen[loop] = _StripMine(form, 1, sites, [], [], trip=trip, per_iteration=per_iteration)
            continue
        else:
            chosen[loop] = _StripMine(form, everies[0], sites, [], [])
            continue
        if everies != [1]:
            refused.append({"sites": [s.name for s in sites], "reason": why})
    return chosen, refused


def _trip(plan: Plan, sites: list[Site], loop: Stmt, anchored: dict[str, Stmt]) -> tuple[int, dict[int, int]]:
    """Iterations per trip of a loop whose dense sites record to staged rings (0: not recorded in
    trips), as many as the fullest group's ring holds at its sites' events per iteration, and each
    group's events per iteration. Only loop-begin and loop-end sites qualify: each runs once per
    iteration (a canonical loop has no continue or break), so a trip stores a known number of
    events, and the trip's remainder repeats them with the ring checked at each event."""
    if any(anchored[s.name] is not loop or s.position not in ("loop-begin", "loop-end") for s in sites):
        return 0, {}
    per_iteration = dict(Counter(plan.group_of(s).id for s in sites))
    trip = plan.spec.capture.staging_events // max(per_iteration.values())
    return (trip, per_iteration) if trip > 1 else (0, {})


def _straight(stmt: Stmt, site: Site, loop: Stmt) -> bool:
    """Does this site's probe run in every iteration of `loop` that its warp's lanes run, with no
    `if`, `switch` or loop of the body between them?"""
    if stmt is loop:
        return site.position in ("loop-begin", "loop-end")
    p = stmt.parent
    while p is not None and p is not loop.body:
        if p.kind != Kind.BLOCK:
            return False
        p = p.parent
    return p is not None


def _not_held(plan: Plan, strip: dict[Stmt, _StripMine], anchored: dict[str, Stmt]) -> set[str]:
    """The sites of resident groups that are not held in their strip-mined loop. A held probe has no
    lane test: every lane that runs it stores the event to its warp's next slot, so a probe that
    lane 0 skips while other lanes of its warp run it (under an `if` or a `switch` of the body)
    would record, for lane 0's owner, what lane 0 did not run. Such a group's probes in that loop
    look the slot up in the table on lane 0 instead. (A loop that only some lanes of a warp enter
    at all cannot be seen here: docs/spec.md.)"""
    out: set[str] = set()
    if not plan.spec.capture.staging_resident:
        return out
    for sm in strip.values():
        crooked = {plan.group_of(s).id for s in sm.sites if not _straight(anchored[s.name], s, sm.loop.stmt)}
        out |= {s.name for s in sm.sites if plan.group_of(s).id in crooked}
    return out


def _declares_static_shared(s: Stmt) -> bool:
    words = [t.value for t in s.own]
    return s.kind == Kind.SIMPLE and "__shared__" in words and "extern" not in words


def _kernel_split(src: SourceFile, kernel: Kernel, anchored: dict[str, Stmt]) -> int | str:
    """Index of the first body statement after the common prefix (the leading statements up to the
    last static `__shared__` declaration, kept outside both copies so shared memory is allocated
    once), or why the body cannot be versioned."""
    kids = kernel.body.children
    shared = [i for i, c in enumerate(kids) if _declares_static_shared(c)]
    first = shared[-1] + 1 if shared else 0
    for c in kids:
        for s in c.walk():
            if s is not c and _declares_static_shared(s):
                return f"a static __shared__ declaration at line {src.lines.line(s.start)} is not at the body's top level"
            if any(t.value == "goto" for t in s.own):
                return f"it has a goto at line {src.lines.line(s.start)}"
    if first == len(kids):
        return "nothing follows its __shared__ declarations"
    anchored_stmts = set(anchored.values())
    for c in kids[:first]:
        for s in c.walk():
            if s in anchored_stmts:
                return f"a site is anchored at line {src.lines.line(s.start)}, before its last __shared__ declaration"
            if s.kind == Kind.RETURN:
                return f"it returns at line {src.lines.line(s.start)}, before its last __shared__ declaration"
    return first


def _guard(plan: Plan) -> str:
    """The CTA-uniform test for "this CTA records": some owner group selects this CTA. Every thread
    of a CTA takes the same side, so barriers stay matched. The copy runs only while a buffer is
    bound (the launch picks it), so the guard does not test the buffer: that test loaded
    `atrex_tl_buffer` from constant memory before every CTA's first branch, cold at the kernel's
    start (reduce_sumsq, copy launched with no CTA recording: +0.54% with it, H200 run 90). The
    leading `gridDim.x != 0u` is always true and costs a compare of a value the selection loads
    anyway; it keeps the branch's shape, without which ptxas gives layernorm's resident copy 44
    registers instead of the clean kernel's 32 (docs/perturbation.md §2)."""
    sel = list(dict.fromkeys((g.cta_stride, g.cta_limit) for g in plan.groups))
    return "gridDim.x != 0u && (" + " || ".join(f"atrex::cta_selected({a}u, {b}u)" for a, b in sel) + ")"


def rewrite(plan: Plan, text: str, version_body: bool = True, runtime: str | None = None,
            launchers: dict[str, str] | None = None) -> Rewrite:
    """The instrumented source of the plan's spec, and each launcher (rel path -> text) with its
    launches of the kernel wrapped. `version_body=False` keeps one instrumented copy of the body
    (what the SASS check compares against: versioned = that copy + the clean kernel). `runtime`:
    the recorder headers' text to embed instead of including them (see _prefix)."""
    spec = plan.spec
    if MARK in text:
        raise SpecError(f"{spec.source_rel} is already instrumented (it contains {MARK!r})", path=str(spec.path),
                        hint="revert it first: atrex-inject revert SPEC")
    bom = "\ufeff" if text.startswith("\ufeff") else ""  # kept first, before the inserted prefix
    src = parse_source(text[len(bom):], spec.source_rel, spec.declared_by)
    kernel = _kernel(spec, src)
    anchored = {site.name: resolve(spec, src, kernel, site) for site in spec.sites
                if site.anchor.kind not in ("entry", "exit")}
    split = _kernel_split(src, kernel, anchored) if version_body else "not asked for"
    versioned = isinstance(split, int)
    strip, refused = _plan_strip_mining(plan, anchored, text)
    unheld = _not_held(plan, strip, anchored)
    strip = {loop: sm for loop, sm in strip.items() if sm.every > 1 or any(s.name not in unheld for s in sm.sites)}
    mined = {s.name: sm for sm in strip.values() for s in sm.sites}
    edits = _Edits(src)
    placements = []
    entry_items, exit_items = _recorders(plan, set(mined)), []
    for site in spec.sites:
        sm = mined.get(site.name)
        held = sm is not None and (sm.trip > 0 or plan.spec.capture.staging_resident) and site.name not in unheld
        code = _site_code(plan, site, branch_free=site.name in mined or (versioned and site.every == 1), held=held)
        if held and not sm.trip:  # resident: the trip's hold and release
            mined[site.name].held.setdefault(plan.group_of(site).id, []).append(site.position)
        label, pos = _label(plan, site), site.position
        if site.anchor.kind == "entry":
            entry_items.append((code, label))
            placements.append(SitePlacement(site, spec.site_id(site.name), kernel.line))
            continue
        if site.anchor.kind == "exit":
            exit_items.append((code, label))
            placements.append(SitePlacement(site, spec.site_id(site.name), kernel.line))
            continue
        stmt = anchored[site.name]
        placements.append(SitePlacement(site, spec.site_id(site.name), src.lines.line(stmt.start)))
        if sm is not None and stmt is sm.loop.stmt and pos in ("loop-begin", "loop-end"):
            (sm.begin if pos == "loop-begin" else sm.end).append((code, label))
            if sm.trip:
                (sm.checked_begin if pos == "loop-begin" else sm.checked_end).append(
                    (_site_code(plan, site, branch_free=True), label))
        elif pos == "before":
            edits.before(stmt, code, label)
        elif pos == "after":
            if stmt.kind in JUMP_KINDS:
                raise AnchorError(f"site {site.name!r}: nothing runs after a {stmt.kind.word}",
                                  path=str(spec.path), line=site.line, hint='use position = "before"')
            edits.after(stmt, code, label)
        else:
            _loop_site(edits, stmt, pos, code, label)
    recorders = ", ".join(f"__atrex_r{g.id}" for g in plan.groups)
    exit_items.append((f"atrex::finish({recorders});", "publish event counts, every owner group"))
    if not versioned:
        edits.block_begin(kernel.body, entry_items)
    for s in kernel.body.walk():
        if s.kind == Kind.RETURN:
            for item in exit_items:
                edits.before(s, *item)
    last = kernel.body.children[-1] if kernel.body.children else None
    if last is None or last.kind != Kind.RETURN:
        edits.block_end(kernel.body, exit_items)
    for sm in strip.values():
        if sm.trip:
            _trips(edits, sm, plan)
        else:
            _strip_mine(edits, sm, set(anchored.values()))
    if versioned:
        _version_body(edits, kernel, split, _guard(plan), entry_items)
    _clone_kernel(edits, kernel, [d for d in src.declarations
                                  if (d.qualname, d.targs) == (kernel.qualname, kernel.targs)])
    sfx = static_suffix(spec.source_rel)
    files, launch_warnings = find_all(spec, src, kernel, launchers or {})
    _wrap_launches(edits, files[0].scan.captured, files[0].scan.mirrors, kernel, sfx)
    out = bom + edits.render(_prefix(plan, sfx, runtime))
    sid = source_id_of(out)
    name = f"__atrex_source_id{sfx}[]"
    out = out.replace(f'{name} = "{SOURCE_ID_PLACEHOLDER}"', f'{name} = "{sid}"', 1)
    lines = out.split("\n")
    for p in placements:
        key = f"atrex: {_label(plan, p.site)}"
        p.instrumented_line = next((i for i, l in enumerate(lines, 1) if key in l), 0)
    warnings = launch_warnings
    if not versioned:
        warnings.append(f"kernel {spec.kernel} is not versioned ({split}): every CTA runs the instrumented code, "
                        f"probes off included, so the probes may change what the compiler makes of the clean kernel")
    warnings += [f"site(s) {', '.join(r['sites'])} sample with a hit counter, not by strip-mining, because their "
                 f"loop cannot be strip-mined ({r['reason']}): the counter test can stop nvcc from unrolling that "
                 f"loop in recording CTAs" for r in refused]
    perturbation = {"clone": kernel.qualname + CLONE_SUFFIX, "versioned": versioned,
                    "not_versioned_because": None if versioned else split,
                    "strip_mined": [{"line": src.lines.line(sm.loop.stmt.start), "every": sm.every,
                                     "sites": [s.name for s in sm.sites], **({"trip": sm.trip} if sm.trip else {})}
                                    for sm in strip.values()],
                    "not_strip_mined": refused}
    others = {}
    for f in files[1:]:
        e = _Edits(f.src)
        _wrap_launches(e, f.scan.captured, f.scan.mirrors, kernel, sfx)
        others[f.src.path] = f.bom + e.render("")
    return Rewrite(out, sid, placements, [l.to_json() for f in files for l in f.scan.captured], warnings,
                   {"perturbation": perturbation}, not_captured=[n.to_json() for f in files for n in f.scan.not_captured],
                   launchers=others)


def _kernel(spec: ProbeSpec, src: SourceFile) -> Kernel:
    """The definition the spec's kernel name (and occurrence) chooses, or why none is."""
    line = spec.key_lines.get("kernel")
    kernel = select_kernel(src, KernelName.parse(spec.kernel), spec.kernel_occurrence, str(spec.path), line)
    if kernel is not None:
        return kernel
    names = ", ".join(k.label for k in src.kernels) or "none"
    via = f" (nor a use of {spec.declared_by}(name, ...) {{ ... }})" if spec.declared_by else ""
    unread = (f"; the grammar cannot read the head of the __global__ declaration(s) at line(s) "
              f"{', '.join(map(str, src.unreadable))}" if src.unreadable else "")
    raise AnchorError(f"kernel {spec.kernel!r} has no __global__ definition in {spec.source_rel}{via}{unread}",
                      path=str(spec.path), line=line, hint=f"kernels defined there: {names}; a kernel declared through a "
                                                "macro is found when the file defines that macro with __global__, "
                                                "when the macro is CUTLASS_GLOBAL, or, for a macro that takes the "
                                                "kernel's name (MACRO(name, ...) { body }), with "
                                                'declared_by = "MACRO" in the spec')


def _clone_kernel(edits: _Edits, kernel: Kernel, declarations) -> None:
    """The kernel's definition stays byte for byte what it was: the probes go into a copy of it,
    `K__atrex`, defined right after it (and declared after each declaration of K, for launches
    that come before the definition). Wrapped launches run the copy only while recording, so with
    probes off the program runs exactly the clean kernel: same SASS, same registers. The copy of an
    explicit specialization (`template <> ... gemm<128, 64>(...)`) is a plain kernel, `gemm__atrex`:
    no `gemm__atrex` template exists to specialize."""
    text, nl = edits.src.text, edits.nl
    a, b = kernel.body_start, kernel.body_end

    def head(start: int, name_span: tuple[int, int], name_end: int, end: int) -> str:
        lead = text[start:name_span[0]]
        if kernel.targs is not None:
            lead = re.sub(r"^template\s*<\s*>\s*", "", lead)
        return lead + kernel.name + CLONE_SUFFIX + text[name_end:end]

    note = (f"// atrex: {kernel.name}{CLONE_SUFFIX}, the instrumented copy of {kernel.name}, "
            f"launched in its place only while recording")
    for d in declarations:
        edits.insert(d.end, AFTER, f"{nl}{head(d.start, d.name_span, d.name_end, d.end)}  {note}",
                     1)
    holder: list[_Replacement] = []

    def gen() -> str:
        inst = edits.span(a + 1, b - 1, exclude=holder[0])
        return f"{text[a:b]}{nl}{nl}{note}{nl}{head(kernel.decl_start, kernel.name_span, kernel.name_end, a)}{{{inst}}}"

    holder.append(edits.replace(a, b, gen, inclusive=False))


def _version_body(edits: _Edits, kernel: Kernel, first: int, guard: str, entry_items) -> None:
    """Two copies of the body after its common prefix: the instrumented one for recording CTAs, the
    clean text verbatim for the others (probes off launch the clean kernel itself)."""
    body, src = kernel.body, edits.src
    kids = body.children
    prev_end = kids[first - 1].end if first > 0 else body.start + 1
    close = body.end - 1
    nice = edits.rest_blank(prev_end) and edits.starts_line(close)
    a = src.lines.line_end(prev_end) + 1 if nice else prev_end
    b = src.lines.line_start(close) if nice else close
    ind = edits.indent(kids[first].start) if edits.starts_line(kids[first].start) else edits.indent(body.start) + "  "
    why = "recording CTAs run the instrumented body; the others the clean copy (probes off: the clean kernel)"
    holder: list[_Replacement] = []

    def gen() -> str:
        inst = edits.span(a, b, exclude=holder[0])
        if nice:
            nl = edits.nl
            return (f"{ind}if ({guard}) {{  // atrex: {why}{nl}{edits.lines_of(entry_items, ind)}{inst}"
                    f"{ind}}} else {{  // atrex: the clean body, verbatim{nl}{src.text[a:b]}"
                    f"{ind}}}  // atrex: end of the clean body{nl}")
        return (f" if ({guard}) {{ /* atrex: {why} */ {edits.inline(entry_items)} {inst} }} else {{ "
                f"/* atrex: the clean body, verbatim */ {src.text[a:b]} }} ")

    holder.append(edits.replace(a, b, gen, inclusive=True))


def _strip_mine(edits: _Edits, sm: _StripMine, anchored: set) -> None:
    """for (INIT; i < E; INCR) {BODY}  ->  { INIT; for (; i < E && E - i > (N-1)*S; INCR) {probe
    {BODY'} INCR; {BODY} INCR; ... {BODY} probe} for (; i < E; INCR) {BODY} }, where BODY' holds the
    sampled sites and the other copies are the clean text: one probed iteration per group of N, the
    last iterations clean. When BODY starts with loads (loops.LeadingLoads), the group declares the
    N copies' loaded values first and each copy takes its own: nvcc keeps statements in order, so
    this is what puts the group's loads in flight together, as in its own unrolling of the clean loop.
    The loop-begin probes then come after those loads: placed before them, ptxas issued the first load,
    then the probe's store (waiting for its timer read), then the others, and the probe's registers
    were the next load's destination, so the group's loads waited for the timer (reduce_sumsq's SASS).
    A resident recorder is held at the top of each group and released at its end: its slot is in
    registers for the group's probes and in the shared table between groups (atrex_recorder.cuh);
    when its probes in the group are its loop-begin and loop-end ones, it is released right after
    the begin probes instead, with the loop-end probes' slots taken.
    N = 1 (resident, dense sites): the loop keeps its form, and the recorder is held before it and
    released after it, so an iteration's probe does not wait for the table: the lookup chain (the
    warp slot, the entry's load) delayed each iteration's load in a copy loop with one load in flight."""
    cl, n, text, nl = sm.loop, sm.every, edits.src.text, edits.nl
    loop, body = cl.stmt, cl.stmt.body
    ind = edits.indent(loop.start)
    cmp = ">" if cl.op == "<" else ">="
    lead = leading_loads(cl, text, anchored)

    def copy(k: int, probed: bool) -> str:
        if lead is None:
            # the closing brace is the loop's own end: what is inserted there (a wrap around the
            # loop, a probe after it) belongs outside the group, not in its first copy
            return edits.span(body.start, body.end - 1) + "}" if probed else text[body.start:body.end]
        rest = edits.span(lead.first.end, body.end - 1) if probed else text[lead.first.end:body.end - 1]
        decl = ", ".join(f"{name} = __atrex_v{k}_{j}" for j, (name, _) in enumerate(lead.decls))
        return f"{{ {lead.type} {decl};{rest}}}"

    def gen() -> str:
        clean = text[body.start:body.end]
        sep = f" {cl.incr};{nl}{ind}  "
        # a group whose probes in a trip are its loop-begin and loop-end ones writes its table entry
        # back right after the begin probes, its loop-end probes' slots taken, not at the trip's end
        ends = {g: ps.count("loop-end") for g, ps in sm.held.items()
                if n > 1 and set(ps) <= {"loop-begin", "loop-end"}}
        hold = "".join(f" __atrex_r{g}.hold();" for g in sorted(sm.held))
        early = "".join(f" __atrex_r{g}.release({k}u);" for g, k in sorted(ends.items()))
        release = "".join(f" __atrex_r{g}.release{'_loop' if n == 1 else ''}();" for g in sorted(sm.held)
                          if g not in ends)
        begin = (f" {edits.inline(sm.begin)}" if sm.begin else "") + early
        end = f" {edits.inline(sm.end)}" if sm.end else ""
        init = f" {cl.init};" if cl.init else ""
        loads = ""
        if lead is not None:
            idx = ", ".join(f"__atrex_i{k} = ({cl.var}) + {k} * ({cl.step})" for k in range(1, n))
            vals = " ".join(f"{lead.type} __atrex_v{k}_{j} = {expr.format(i=cl.var if k == 0 else f'__atrex_i{k}')};"
                            for k in range(n) for j, (_, expr) in enumerate(lead.decls))
            idx = f"const auto {idx};  " if idx else ""
            loads = f"{nl}{ind}  {idx}// atrex: the group's loads, issued together{nl}{ind}  {vals}"
        pad = ind if edits.src.lines.line_start(loop.lead) == loop.lead else ""  # a #pragma lead at column 0
        if loads and begin:  # the begin probes after the loads: their timer read and store overlap the loads' flight
            loads, begin = f"{loads}{nl}{ind} {begin}", ""
        names = ", ".join(s.name for s in sm.sites)
        if n == 1:  # dense sites, resident: no group, no remainder; the slot is held across the loop
            return (f"{pad}{{{init}{hold}  // atrex: the warp's ring slot held across the loop for site(s) {names}"
                    f"{nl}{ind}{text[loop.lead:loop.start]}for (; {cl.cond}; {cl.incr}) {{{begin}{loads}{nl}"
                    f"{ind}  {copy(0, True)}{end} }}{release} }}")
        return (f"{pad}{{{init}  // atrex: strip-mined by {n} for site(s) {names}: "
                f"one probed iteration per group of {n}{nl}{ind}{text[loop.lead:loop.start]}"
                f"for (; ({cl.cond}) && ({cl.bound}) - ({cl.var}) {cmp} {n - 1} * ({cl.step}); {cl.incr}) {{{hold}{begin}"
                f"{loads}{nl}{ind}  {sep.join(copy(k, k == 0) for k in range(n))}{end}{release} }}{nl}"
                f"{ind}for (; {cl.cond}; {cl.incr}) {clean}  /* atrex: the last iterations, clean */ }}")

    edits.replace(loop.lead, loop.end, gen, inclusive=False)


def _trips(edits: _Edits, sm: _StripMine, plan: Plan) -> None:
    """for (INIT; i < E; INCR) {BODY}  ->  { INIT; trips_begin; for (; i < E && E - i > (T-1)*S; ) {
    for (k = 0; k < T; ++k) { held begin probes {BODY} held end probes INCR; } flush(T x P); }
    for (; i < E; INCR) { checked begin probes {BODY} checked end probes } }: a loop whose dense
    sites record to staged rings, in trips of T iterations. The rings are copied out (the whole
    warp, coalesced) before the first trip (trips_begin, which also loads the tag's valid bit where
    ptxas cannot fold it) and after each, so a trip starts with empty rings and its T iterations'
    events fit: its probes store with no ring check, a timer read, a shared store and a pointer
    bump, where the checked probe's compare and branch made ptxas wrap every
    iteration in a convergence region (bench/probe_cost's FMA loop: 9 SASS instructions an event,
    against the global path's 7). The last iterations, fewer than T, use the checked probes, which
    need a ring with room (they store, then drain a full ring): the flush after each trip leaves
    them one. That flush is told its count, T x P (P: the group's sites per iteration). A `#pragma`
    before the loop goes to the trip's loop, whose iterations are the loop's."""
    cl, t, text, nl = sm.loop, sm.trip, edits.src.text, edits.nl
    loop, body = cl.stmt, cl.stmt.body
    ind = edits.indent(loop.start)
    cmp = ">" if cl.op == "<" else ">="

    def gen() -> str:
        begin_all = "".join(f" __atrex_r{g}.trips_begin();" for g in sorted(sm.per_iteration))
        flush_trip = "".join(f" __atrex_r{g}.flush({t * n}u);" for g, n in sorted(sm.per_iteration.items()))
        held_begin, held_end, checked_begin, checked_end = (
            f" {edits.inline(items)}" if items else "" for items in (sm.begin, sm.end, sm.checked_begin, sm.checked_end))
        init = f" {cl.init};" if cl.init else ""
        names = ", ".join(s.name for s in sm.sites)
        pad = ind if edits.src.lines.line_start(loop.lead) == loop.lead else ""
        body_text = edits.span(body.start, body.end - 1) + "}"
        return (f"{pad}{{{init}{begin_all}  // atrex: site(s) {names} recorded in trips of {t} iterations, the warp's "
                f"staging ring copied out before and after each{nl}"
                f"{ind}for (; ({cl.cond}) && ({cl.bound}) - ({cl.var}) {cmp} {t - 1} * ({cl.step}); ) {{{nl}"
                f"{ind}  {text[loop.lead:loop.start]}for (unsigned __atrex_k = 0u; __atrex_k < {t}u; ++__atrex_k) "
                f"{{{held_begin}{nl}{ind}  {body_text}{held_end} {cl.incr}; }}{flush_trip} }}{nl}"
                f"{ind}for (; {cl.cond}; {cl.incr}) {{{checked_begin} {text[body.start:body.end]}{checked_end} }}"
                f"  /* atrex: the last iterations, their probes checked */ }}")

    edits.replace(loop.lead, loop.end, gen, inclusive=False)


def _recorders(plan: Plan, mined: set[str]) -> list[tuple[str, str]]:
    items = []
    for g in plan.groups:
        pred = f", static_cast<bool>({g.predicate})" if g.predicate else ""
        c = plan.spec.capture
        if c.staging_resident:  # the group's literals: its owner is found at entry, claimed and published at exit
            kind = (f"atrex::BasicRecorder<{c.staging_events}u, {resident_rings(g, c.staging_warps)}u, {g.id}u, true, "
                    f"atrex::{g.role.cpp}, {g.cta_stride}u, {g.cta_limit}u, 0x{g.warp_mask:08x}u>")
        else:
            kind = (f"atrex::BasicRecorder<{c.staging_events}u, {c.staging_warps}u, {g.id}u>" if c.staging_events
                    else "atrex::Recorder")
        items.append((f"{kind} __atrex_r{g.id}({g.id}u{pred});", f"recorder, owner group {g.id} ({g.role})"))
    for i, s in enumerate(plan.spec.sites):
        if s.every > 1 and s.name not in mined:
            items.append((f"unsigned __atrex_n{i} = 0u;", f"hit counter for site {s.name} (every {s.every})"))
    return items


def _loop_site(edits: _Edits, loop: Stmt, pos: str, code: str, label: str) -> None:
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


def _copy_of(text: str, kernel: Kernel, named_by: tuple[int, int], name_span: tuple[int, int]) -> str:
    """The expression naming the instrumented copy where `named_by` names the kernel: `ns::k<T>`
    -> `ns::k__atrex<T>`; an explicit specialization's copy is a plain kernel, so no arguments."""
    return text[named_by[0]:name_span[1]] + CLONE_SUFFIX + (
        "" if kernel.targs is not None else text[name_span[1]:named_by[1]])


def _wrap_launches(edits: _Edits, launches: list[Launch], mirrors: list[Mirror], kernel: Kernel, sfx: str) -> None:
    """Bracket each captured launch's statement with a capture session, `{ Capture c(...); STMT
    c.finish(); }`, and have the launch pick the instrumented copy while the session records:
    `(c.on() ? K__atrex<T> : K<T>)` in place of its kernel expression (through an alias:
    `(c.on() ? K__atrex<T> : kernel)`). A declaration (`auto e = LAUNCH;`) gets no braces, so its
    name stays in scope, and a session of its own name; a `return LAUNCH;` gets no finish()
    (nothing after it runs): the session's destructor finishes it as the return leaves the braces.
    A template kernel launched with deduced template arguments (`k<<<g, b>>>(x)`) cannot be named
    in a conditional expression, so its statement is written twice: `if (c.on()) { STMT with
    k__atrex } else { STMT }`. Each call setting the kernel's attributes is repeated for the copy
    right after it."""
    text = edits.src.text
    for n, l in enumerate(launches):
        cap = "__atrex_cap" if l.braced else f"__atrex_cap{n}"
        session = (f"atrex::host::Capture {cap}(__atrex_plan{sfx}, dim3({l.grid}), dim3({l.block}), {l.stream});")
        open_ = ("{ " + session if l.braced else session, f"capture session for this launch of {kernel.label}")
        finish = "" if l.shape == "return" else f"{cap}.finish();"
        close = ((finish + " }").strip() if l.braced else finish,
                 "end of capture session" + (" (the return finishes it)" if l.shape == "return" else ""))
        if l.deduced:
            _two_branches(edits, l, cap, open_, close)
            continue
        edits.insert(l.callee[0], BEFORE, f"({cap}.on() ? {_copy_of(text, kernel, l.named_by, l.name_span)} : ")
        edits.insert(l.callee[1], AFTER, ")")
        _around(edits, l.stmt, open_, close)
    for m in mirrors:
        call = text[m.call[0]:m.arg[0]] + _copy_of(text, kernel, m.named_by, m.name_span) + text[m.arg[1]:m.call[1]]
        item = (f"(void){call};", f"the same for {kernel.name}{CLONE_SUFFIX}, the instrumented copy")
        a, b = m.stmt
        if m.unbraced:
            _around(edits, m.stmt, ("{", "braces keep the call below and its copy's in one branch"),
                    (item[0] + " }", item[1]))
        elif edits.rest_blank(b):
            edits.insert(edits.src.lines.line_end(b) + 1, AFTER, edits.lines_of([item], edits.indent(a)), 1)
        else:
            edits.insert(b, AFTER, " " + edits.inline([item]), 1)


def _two_branches(edits: _Edits, l: Launch, cap: str, open_: tuple[str, str], close: tuple[str, str]) -> None:
    """The launch's statement once with the copy's name, for `cap.on()`, and once as it is."""
    text, (a, b), n1 = edits.src.text, l.stmt, l.name_span[1]
    copy = text[a:n1] + CLONE_SUFFIX + text[n1:b]
    on = (f"if ({cap}.on()) {{", "the instrumented copy, its template arguments deduced as the kernel's")
    if edits.starts_line(a) and edits.rest_blank(b):
        ind, nl = edits.indent(a), edits.nl
        edits.insert(edits.src.lines.line_start(a), BEFORE, edits.lines_of([open_, on], ind) + ind + copy + nl
                     + edits.lines_of([("} else {", "the kernel itself")], ind), -1)
        edits.insert(edits.src.lines.line_end(b) + 1, AFTER,
                     edits.lines_of([("}", "end of the kernel's branch"), close], ind), 1)
    else:
        edits.insert(a, BEFORE, f"{edits.inline([open_, on])} {copy} }} else {{ ", -1)
        edits.insert(b, AFTER, " } " + edits.inline([close]), 1)


def _around(edits: _Edits, stmt: tuple[int, int], open_: tuple[str, str], close: tuple[str, str]) -> None:
    """`open_` before the statement and `close` after it: on lines of their own when the statement
    has its lines to itself, else inline."""
    a, b = stmt
    if edits.starts_line(a) and edits.rest_blank(b):
        ind = edits.indent(a)
        edits.insert(edits.src.lines.line_start(a), BEFORE, edits.lines_of([open_], ind), -1)
        edits.insert(edits.src.lines.line_end(b) + 1, AFTER, edits.lines_of([close], ind), 1)
    else:
        edits.insert(a, BEFORE, edits.inline([open_]) + " ", -1)
        edits.insert(b, AFTER, " " + edits.inline([close]), 1)
