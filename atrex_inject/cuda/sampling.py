"""Loops whose sites are sampled or held: strip-mining (`every = N`: one probed iteration per
group of N, the group's loads issued together), resident recorders held across a loop, and staged
rings recorded in trips. Which loops qualify is decided here (sample_loops); the transforms
write themselves as replacements of the loop's text (strip_mine, trips)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..errors import AnchorError
from ..plan import Plan
from ..spec import Site
from .edits import Edits
from .loops import CanonicalLoop, canonical_loop, leading_loads
from .source import LOOP_KINDS, Kernel, Kind, SourceFile, Stmt, asm_unscoped


@dataclass(eq=False)
class StripMine:
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
    # trips: iterations per group of the trip's loop, whose events lane 0 stores together at its end
    # (_grouping); 0 = each event stored where it is taken
    group: int = 0
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


@dataclass
class Sampling:
    """The loops of a rewrite that are transformed, and why the others are not."""
    loops: dict[Stmt, StripMine]  # loop -> its transform
    refused: list[dict]  # {"sites", "reason"}: sampled sites left to a hit counter
    unheld: set[str]  # sites of resident groups whose probes look their slot up (not_held)

    @property
    def mined(self) -> dict[str, StripMine]:
        """Site name -> the transform of the loop it is sampled or held in."""
        return {s.name: sm for sm in self.loops.values() for s in sm.sites}


def sample_loops(plan: Plan, anchored: dict[str, Stmt], src: SourceFile, kernel: Kernel) -> Sampling:
    """The loops to strip-mine, hold or record in trips (_plan_sampling), without those of a
    resident group that only held probes would justify and none can have (not_held)."""
    loops, refused = _plan_sampling(plan, anchored, src, kernel)
    unheld = not_held(plan, loops, anchored)
    loops = {loop: sm for loop, sm in loops.items() if sm.every > 1 or any(s.name not in unheld for s in sm.sites)}
    return Sampling(loops, refused, unheld)


def _plan_sampling(plan: Plan, anchored: dict[str, Stmt], src: SourceFile,
                   kernel: Kernel) -> tuple[dict[Stmt, StripMine], list[dict]]:
    """Which loops holding sampled sites are strip-mined, and why the others are not. With resident
    rings a loop whose sites are all dense is "strip-mined by 1" too: its warp's slot is held across
    the loop instead of being looked up in the table at each probe (a lane test and the table's
    load and store at every event). With staged rings such a loop is recorded in trips (_trip):
    its probes store without checking whether the ring is full. Where such a loop cannot be, its
    probes stay as they are, and nothing is reported."""
    spec = plan.spec
    resident, staged = plan.mode.resident, plan.mode.staged
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
        form = canonical_loop(loop, src.text)
        twice = asm_unscoped(loop, src.lines, kernel.macros)  # each transform writes the body more than once
        if len(everies) > 1:
            why = "its sampled sites have different `every` values " + ", ".join(map(str, everies))
        elif others:
            why = f"site(s) {', '.join(others)} also run inside it, every iteration or in a nested loop"
        elif isinstance(form, str):
            why = form
        elif loop.body.kind != Kind.BLOCK:
            why = "its body is not a braced block"
        elif twice:
            why = twice
        elif staged and everies == [1]:
            trip, per_iteration = _trip(plan, sites, loop, anchored)
            if trip:
                chosen[loop] = StripMine(form, 1, sites, [], [], trip=trip, per_iteration=per_iteration,
                                         group=_grouping(trip, per_iteration, loop, plan.mode.event_bytes))
            continue
        else:
            chosen[loop] = StripMine(form, everies[0], sites, [], [])
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
    trip = plan.mode.ring // max(per_iteration.values())
    return (trip, per_iteration) if trip > 1 else (0, {})


GROUP_BYTES = 16  # the fullest recorder group's events in one group of a trip's iterations (_grouping)


def _grouping(trip: int, per_iteration: dict[int, int], loop: Stmt, event_bytes: int) -> int:
    """Iterations per group of a trip's loop (0: none). A group holds GROUP_BYTES of the fullest
    recorder group's events (four packed ones), which lane 0 stores at the group's end with one
    16-byte store (BasicRecorder::stage and put) where each event stored on its own took a store
    from every lane, and a loop over shared memory pays for a shared store in its bandwidth
    (bench/probe_cost's barrier loop). One store: ptxas put two predicated stores under a branch,
    a convergence region in the loop. Every recorder group's share must be whole slots in one
    store (1, 2 or 4 words); a loop with its own #pragma keeps its events stored one by one, as the
    user unrolls it."""
    fullest, events = max(per_iteration.values()), GROUP_BYTES // event_bytes
    if loop.lead != loop.start or events % fullest:
        return 0
    n = events // fullest
    return n if trip % n == 0 and all(n * p * event_bytes // 4 in (1, 2, 4) for p in per_iteration.values()) else 0


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


def not_held(plan: Plan, strip: dict[Stmt, StripMine], anchored: dict[str, Stmt]) -> set[str]:
    """The sites of resident groups that are not held in their strip-mined loop. A held probe has no
    lane test: every lane that runs it stores the event to its warp's next slot, so a probe that
    lane 0 skips while other lanes of its warp run it (under an `if` or a `switch` of the body)
    would record, for lane 0's owner, what lane 0 did not run. Such a group's probes in that loop
    look the slot up in the table on lane 0 instead. (A loop that only some lanes of a warp enter
    at all cannot be seen here: docs/spec.md.)"""
    out: set[str] = set()
    if not plan.mode.resident:
        return out
    for sm in strip.values():
        crooked = {plan.group_of(s).id for s in sm.sites if not _straight(anchored[s.name], s, sm.loop.stmt)}
        out |= {s.name for s in sm.sites if plan.group_of(s).id in crooked}
    return out


def strip_mine(edits: Edits, sm: StripMine, anchored: set) -> None:
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


TRIP_UNROLL = 4  # iterations of a trip's loop unrolled together where the loop brings no #pragma (trips)


def trips(edits: Edits, sm: StripMine, plan: Plan) -> None:
    """for (INIT; i < E; INCR) {BODY}  ->  { INIT; trips_begin; for (; i < E && E - i > (T-1)*S; ) {
    for (e = trip_end(T x P); in_trip(e); ) { Held h; for (u = 0; u < G; ++u) { staged begin probes {BODY}
    staged end probes INCR; } put(h); } flush(T x P); }
    for (; i < E; INCR) { checked begin probes {BODY} checked end probes } }: a loop whose dense
    sites record to staged rings, in trips of T iterations. The rings are copied out (the whole
    warp, coalesced) before the first trip (trips_begin, which also loads the tag's valid bit where
    ptxas cannot fold it) and after each, so a trip starts with empty rings and its T iterations'
    events fit: its probes store with no ring check, a timer read, a shared store and a pointer
    bump, where the checked probe's compare and branch made ptxas wrap every
    iteration in a convergence region (bench/probe_cost's FMA loop: 9 SASS instructions an event,
    against the global path's 7). The last iterations, fewer than T, use the checked probes, which
    need a ring with room (they store, then drain a full ring): the flush after each trip leaves
    them one. That flush is told its count, T x P (P: the group's sites per iteration). The trip's
    loop runs until the first group's ring pointer, which its held probes bump, reaches the slot T x P
    events on: no counter of its own. A `#pragma` before the loop goes to the trip's loop, whose
    iterations are the loop's; without one the trip's loop runs groups of G iterations (_grouping:
    16 bytes of the fullest recorder group's events), each unrolled whole (`for (u = 0; u < G; ++u)`
    under `#pragma unroll`), its held probes keeping their events in registers (stage) and lane 0
    storing them at the group's end (put), so the pointer bump and the loop's own test and branch
    run once per group; how far the loop of groups is unrolled, nvcc and ptxas decide. Where the
    sites allow no grouping, the trip's loop is unrolled by TRIP_UNROLL where that divides T (an
    H200, every warp recording, 2048 iterations: the dependent FMA chain's loop-end event +7.35% in
    trips, +2.48% unrolled, NVIDIA IKeT's +5.45%; unrolled by two, a barrier loop paid more: 0977d4b)."""
    cl, t, text, nl = sm.loop, sm.trip, edits.src.text, edits.nl
    loop, body = cl.stmt, cl.stmt.body
    ind = edits.indent(loop.start)
    cmp = ">" if cl.op == "<" else ">="

    def gen() -> str:
        begin_all = "".join(f" __atrex_r{g}.trips_begin();" for g in sorted(sm.per_iteration))
        flush_trip = "".join(f" __atrex_r{g}.flush({t * n}u);" for g, n in sorted(sm.per_iteration.items()))
        g0, n0 = min(sm.per_iteration.items())
        held_begin, held_end, checked_begin, checked_end = (
            f" {edits.inline(items)}" if items else "" for items in (sm.begin, sm.end, sm.checked_begin, sm.checked_end))
        init = f" {cl.init};" if cl.init else ""
        names = ", ".join(s.name for s in sm.sites)
        pad = ind if edits.src.lines.line_start(loop.lead) == loop.lead else ""
        body_text = edits.span(body.start, body.end - 1) + "}"
        iteration = f"{held_begin}{nl}{ind}  {body_text}{held_end} {cl.incr};"
        u = sm.group
        if u:  # the trip's loop runs groups of u iterations, each ended by its recorders' stores
            held = "".join(f" atrex::Held<{u * n}u> __atrex_h{g};" for g, n in sorted(sm.per_iteration.items()))
            put = "".join(f" __atrex_r{g}.put(__atrex_h{g});" for g in sorted(sm.per_iteration))
            iteration = (f"{held}  // atrex: a group of {u} iteration(s), its events stored at its end{nl}{ind}  "
                         f"#pragma unroll{nl}{ind}  for (unsigned __atrex_u = 0u; __atrex_u < {u}u; ++__atrex_u) "
                         f"{{{iteration} }}{put}")
        lead = text[loop.lead:loop.start] or (
            f"#pragma unroll {TRIP_UNROLL}{nl}{ind}  " if not u and t % TRIP_UNROLL == 0 else "")
        return (f"{pad}{{{init}{begin_all}  // atrex: site(s) {names} recorded in trips of {t} iterations, the warp's "
                f"staging ring copied out before and after each{nl}"
                f"{ind}for (; ({cl.cond}) && ({cl.bound}) - ({cl.var}) {cmp} {t - 1} * ({cl.step}); ) {{{nl}"
                f"{ind}  {lead}for (const unsigned __atrex_e = __atrex_r{g0}.trip_end({t * n0}u); "
                f"__atrex_r{g0}.in_trip(__atrex_e); ) "
                f"{{{iteration} }}{flush_trip} }}{nl}"
                f"{ind}for (; {cl.cond}; {cl.incr}) {{{checked_begin} {text[body.start:body.end]}{checked_end} }}"
                f"  /* atrex: the last iterations, their probes checked */ }}")

    edits.replace(loop.lead, loop.end, gen, inclusive=False)


def interval_spans(plan: Plan, sampling: Sampling, anchored: dict[str, Stmt], src: SourceFile) -> dict[str, int]:
    """Iterations each interval spans where a strip-mined loop samples both its ends (name -> N, for
    N > 1), or AnchorError for an interval whose ends the strip-mining puts in different iterations
    of no fixed count. In a group of N iterations the loop-begin probes run at the top of its first
    iteration, the body's probes in that first iteration, and the loop-end probes at the end of its
    last: begin -> body and body -> later body stay within one iteration; begin -> end spans the
    group, N iterations; end -> begin is the step from one group to the next; body -> end would
    span the rest of the first iteration and N - 1 more, and any other order the next group's."""
    spec = plan.spec
    loop_of = {s.name: sm for sm in sampling.loops.values() if sm.every > 1 for s in sm.sites}
    spans: dict[str, int] = {}
    for iv in spec.intervals:
        sm = loop_of.get(iv.start)
        if sm is None or loop_of.get(iv.end) is not sm:
            continue
        a, b = (_phase(spec.sites[i], anchored, sm.loop.stmt) for i in (iv.start_id, iv.end_id))
        if (a[0], b[0]) == (0, 2):
            spans[iv.name] = sm.every
        elif (a[0], b[0]) == (2, 0) or (a < b and b[0] != 2):
            continue
        else:
            raise AnchorError(f"interval {iv.name!r}: `every = {sm.every}` strip-mines the loop at {spec.source_rel}:"
                              f"{src.lines.line(sm.loop.stmt.start)} into groups of {sm.every} iterations and records {iv.start!r} "
                              f"{_WHEN[a[0]]} and {iv.end!r} {_WHEN[b[0]]}, so the interval would span "
                              f"{'the rest of one iteration and the group after it' if b[0] == 2 else 'into the next group'}",
                              path=str(spec.path), line=spec.line_of("intervals"),
                              hint="end it in the same iteration (a site in the loop's body, after its start), or time "
                                   "the whole group (loop-begin -> loop-end), or sample with a hit counter by giving "
                                   "the two sites different `every`")
    return spans


_WHEN = {0: "at the top of each group", 1: "in each group's first iteration", 2: "at the end of each group"}


def _phase(site: Site, anchored: dict[str, Stmt], loop: Stmt) -> tuple[int, int]:
    """Where in a strip-mined group a site's probe runs: (0, 0) the loop-begin probes, (1, offset)
    the body's, in source order, (2, 0) the loop-end probes."""
    stmt = anchored[site.name]
    if stmt is loop:
        return (0, 0) if site.position == "loop-begin" else (2, 0)
    return 1, stmt.end if site.position == "after" else stmt.start
