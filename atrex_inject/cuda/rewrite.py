"""CUDA rewriter: a probe plan + a parsed source -> the instrumented source.

Only insertion points change; every byte of the original stays, in order. Inserted code is marked
with `// atrex:` (whole lines) or `/* atrex: */` (inline) comments naming the site. A statement
that is the unbraced body of a control statement is wrapped in braces so an inserted probe stays
inside the same branch or loop. rewrite() is the pipeline; each step lives in its own module:
edits.py (insertions and their layout), probes.py (the prefix, recorders and probe statements),
sampling.py (strip-mined, held and trip-recorded loops), clone.py (the instrumented copy and its
versioned body), wrap.py (capture sessions around launches).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..backend import Rewrite, SitePlacement
from ..errors import AnchorError, SpecError
from ..plan import Plan
from ..linemap import with_directives
from ..source_id import SOURCE_ID_PLACEHOLDER, source_id_of
from ..spec import ProbeSpec, Site
from .anchors import resolve
from .clone import CLONE_SUFFIX, clone_kernel, default_arguments, guard, kernel_split, versioned_body
from .edits import Edits
from .launches import find_all, sized_at_launch
from .names import KernelName, select_kernel
from .probes import MARK, loop_site, macro_clash, prefix, recorders, site_code, site_label, static_suffix
from .scope import hidden, locals_of, parameters, point
from .sampling import Sampling, interval_spans, sample_loops, strip_mine, trips
from .uniform import barrier_loop, not_uniform
from .wrap import wrap_launches
from .source import JUMP_KINDS, Kernel, Kind, SourceFile, Stmt, parse_source

Item = tuple[str, str]  # (code, label) of one inserted statement


def rewrite(plan: Plan, text: str, runtime: str | None = None, launchers: dict[str, str] | None = None) -> Rewrite:
    """The instrumented source of the plan's spec, and each launcher (rel path -> text) with its
    launches of the kernel wrapped. `runtime`: the recorder headers' text to embed instead of
    including them (probes.prefix)."""
    spec = plan.spec
    if MARK in text:
        raise SpecError(f"{spec.source_rel} is already instrumented (it contains {MARK!r})", path=str(spec.path),
                        hint="revert it first: atrex-inject revert SPEC")
    src = parse_source(text, spec.source_rel, spec.backend_keys.declared_by)  # a UTF-8 BOM is set aside here, once (src.bom)
    kernel = _kernel(spec, src)
    clash = macro_clash(src)
    if clash:
        raise SpecError(f"the macro {clash[0]!r} defined here has the name of a function of the recorder runtime "
                        "that the inserted code calls: the preprocessor would expand that call",
                        path=str(spec.source), line=clash[1],
                        hint=f"rename the macro (or #undef {clash[0]} where it is no longer used, before the kernel "
                             "and its launches), then apply again")
    anchored = {site.name: resolve(spec, src, kernel, site) for site in spec.sites
                if site.anchor.kind not in ("entry", "exit")}
    split = kernel_split(src, kernel, anchored)
    versioned = isinstance(split, int)
    _refuse_hidden(spec, src, kernel, anchored, kernel.body.children[split].start if versioned else kernel.body.start + 1)
    sampling = sample_loops(plan, anchored, src, kernel)
    spans = interval_spans(plan, sampling, anchored, src)
    edits = Edits(src)
    placed = _place_sites(plan, edits, kernel, anchored, sampling, versioned)
    _place_entry_exits(edits, kernel, placed, versioned)
    for sm in sampling.loops.values():
        trips(edits, sm, plan) if sm.trip else strip_mine(edits, sm, set(anchored.values()))
    if versioned:
        versioned_body(edits, kernel, split, guard(plan), placed.entry)
    decls = [d for d in src.declarations if (d.qualname, d.targs) == (kernel.qualname, kernel.targs)]
    clone_kernel(edits, kernel, decls, plan.mode)
    defaults = default_arguments(src, [(kernel.name_end, kernel.body_start), *((d.name_end, d.end) for d in decls)])
    sfx = static_suffix(spec.source_rel)
    files, warnings = find_all(spec, src, kernel, launchers or {})
    _refuse_undeclared_copy(spec, kernel, decls, [*files[0].scan.captured, *files[0].scan.mirrors])
    wrap_launches(edits, files[0].scan.captured, files[0].scan.mirrors, kernel, sfx, defaults)
    out, sid = _render(edits, prefix(plan, sfx, runtime), sfx)
    if runtime is None:  # a .cu file: the compiler names its clean lines (a CUDA string in Python: python/)
        out = with_directives(text, out, spec.source_rel)
    lines = out.split("\n")
    for p in placed.placements:
        key = f"atrex: {site_label(plan, p.site)}"
        p.instrumented_line = next((i for i, l in enumerate(lines, 1) if key in l), 0)
    if not versioned:
        warnings.append(f"kernel {spec.kernel} is not versioned ({split}): every CTA runs the instrumented code, "
                        f"probes off included, so the probes may change what the compiler makes of the clean kernel")
    warnings += [f"site(s) {', '.join(r['sites'])} sample with a hit counter, not by strip-mining, because their "
                 f"loop cannot be strip-mined ({r['reason']}): the counter test can stop nvcc from unrolling that "
                 f"loop in recording CTAs" for r in sampling.refused]
    perturbation = {"clone": kernel.qualname + CLONE_SUFFIX, "versioned": versioned,
                    "not_warp_uniform": not_uniform(kernel, src.text, anchored, spec.sites, src.lines),
                    "barrier_loop": barrier_loop(kernel, anchored, spec.sites, src.lines),
                    "sized_at_launch": sized_at_launch(src, kernel, [m for f in files for m in f.scan.mirrors]),
                    "not_versioned_because": None if versioned else split,
                    "strip_mined": [{"line": src.lines.line(sm.loop.stmt.start), "every": sm.every,
                                     "sites": [s.name for s in sm.sites], **({"trip": sm.trip} if sm.trip else {})}
                                    for sm in sampling.loops.values()],
                    "not_strip_mined": sampling.refused}
    others = {}
    for f in files[1:]:
        e = Edits(f.src)
        wrap_launches(e, f.scan.captured, f.scan.mirrors, kernel, sfx, defaults)
        others[f.src.path] = with_directives(f.src.bom + f.src.text, _render(e, "", sfx)[0], f.src.path)
    return Rewrite(out, sid, placed.placements, [l.to_json() for f in files for l in f.scan.captured], warnings,
                   {"perturbation": perturbation}, not_captured=[n.to_json() for f in files for n in f.scan.not_captured],
                   launchers=others, spans=spans)


@dataclass
class _Placed:
    """What placing the sites produced: the recorders and probes that open the kernel (or its
    recording body), the probes run at each exit, and each site's line."""
    entry: list[Item]
    exit: list[Item]
    placements: list[SitePlacement]


def _place_sites(plan: Plan, edits: Edits, kernel: Kernel, anchored: dict[str, Stmt], sampling: Sampling,
                 versioned: bool) -> _Placed:
    """Each site's probe statement, at its anchor: entry and exit probes collected for the kernel's
    first line and its exits, probes of a sampled loop handed to that loop's transform, the others
    inserted before, after or inside their statement."""
    spec, mined = plan.spec, sampling.mined
    placed = _Placed(recorders(plan, set(mined)), [], [])
    for site in spec.sites:
        sm = mined.get(site.name)
        held = sm is not None and (sm.trip > 0 or plan.mode.resident) and site.name not in sampling.unheld
        code = site_code(plan, site, branch_free=site.name in mined or (versioned and site.every == 1), held=held,
                         grouped=held and sm.group > 0)
        if held and not sm.trip:  # resident: the trip's hold and release
            sm.held.setdefault(plan.group_of(site).id, []).append(site.position)
        label, pos, sid = site_label(plan, site), site.position, spec.site_id(site.name)
        if site.anchor.kind in ("entry", "exit"):
            (placed.entry if site.anchor.kind == "entry" else placed.exit).append((code, label))
            placed.placements.append(SitePlacement(site, sid, kernel.line))
            continue
        stmt = anchored[site.name]
        placed.placements.append(SitePlacement(site, sid, edits.src.lines.line(stmt.start)))
        if sm is not None and stmt is sm.loop.stmt and pos in ("loop-begin", "loop-end"):
            (sm.begin if pos == "loop-begin" else sm.end).append((code, label))
            if sm.trip:
                (sm.checked_begin if pos == "loop-begin" else sm.checked_end).append(
                    (site_code(plan, site, branch_free=True), label))
        elif pos == "before":
            edits.before(stmt, code, label)
        elif pos == "after":
            _refuse_after_jump(spec, site, stmt)
            edits.after(stmt, code, label)
        else:
            loop_site(edits, stmt, pos, code, label)
    names = ", ".join(f"__atrex_r{g.id}" for g in plan.groups)
    placed.exit.append((f"atrex::finish({names});", "publish event counts, every owner group"))
    return placed


def _refuse_hidden(spec: ProbeSpec, src: SourceFile, kernel: Kernel, anchored: dict[str, Stmt], entry: int) -> None:
    """A payload or predicate naming a local of the kernel that is not in scope where it is pasted
    (scope.py): a site's payload at its probe, a predicate at the recorders (`entry`)."""
    locals_, params = locals_of(kernel, src.lines), parameters(kernel)
    for site in spec.sites:
        kind = site.anchor.kind
        at = (entry if kind == "entry" else kernel.body.end - 1 if kind == "exit" else
              point(anchored[site.name], site.position))
        for what, expr, where in (("payload", site.payload, at), ("predicate", site.predicate, entry)):
            loc = hidden(expr, where, locals_, params) if expr else None
            if loc is None:
                continue
            place = ("the kernel's entry, where the recorders are made" if where == entry else
                     "the kernel's exits" if kind == "exit" else
                     f"{site.position} line {src.lines.line(anchored[site.name].start)}")
            raise AnchorError(f"site {site.name!r}: its {what} {expr!r} names {loc.name!r}, a local declared at "
                              f"{spec.source_rel}:{loc.line}, which is not in scope where the {what} goes ({place})",
                              path=str(spec.path), line=site.line,
                              hint=f"write the {what} with names in scope there (the kernel's parameters, threadIdx, "
                                   "blockIdx, and locals declared above it in an enclosing block), or move the site")


def _refuse_undeclared_copy(spec: ProbeSpec, kernel: Kernel, decls, uses) -> None:
    """The copy is declared after each declaration of the kernel in this file and defined after its
    definition: a launch (or attribute call) above both, through a declaration in a header, would
    name a copy not yet declared."""
    for u in uses:
        if u.stmt[0] < kernel.decl_start and not any(d.end <= u.stmt[0] for d in decls):
            raise SpecError(f"kernel {kernel.label} is used at line {u.line} before its definition at line "
                            f"{kernel.line}, and {spec.source_rel} declares it nowhere above that use (a header "
                            "does): the instrumented copy would not be declared there", path=str(spec.source),
                            line=u.line, hint=f"declare the kernel in {spec.source_rel} above line {u.line} (its "
                                              "head and `;`), or define it above its launches, then apply again")


def _refuse_after_jump(spec: ProbeSpec, site: Site, stmt: Stmt) -> None:
    if stmt.kind in JUMP_KINDS:
        raise AnchorError(f"site {site.name!r}: nothing runs after a {stmt.kind.word}",
                          path=str(spec.path), line=site.line, hint='use position = "before"')


def _place_entry_exits(edits: Edits, kernel: Kernel, placed: _Placed, versioned: bool) -> None:
    """The recorders and entry probes at the body's top (a versioned body opens its recording side
    with them instead: clone.versioned_body), and the exit probes and the recorders' finish before
    every `return` of the body and at its end."""
    if not versioned:
        edits.block_begin(kernel.body, placed.entry)
    for s in kernel.body.walk():
        if s.kind == Kind.RETURN:
            for item in placed.exit:
                edits.before(s, *item)
    last = kernel.body.children[-1] if kernel.body.children else None
    if last is None or last.kind != Kind.RETURN:
        edits.block_end(kernel.body, placed.exit)


def _render(edits: Edits, text_prefix: str, sfx: str) -> tuple[str, str]:
    """The rewritten file (its BOM first, before the inserted prefix), and its source id written
    into the prefix's placeholder (source_id.py)."""
    out = edits.src.bom + edits.render(text_prefix)
    sid = source_id_of(out)
    name = f"__atrex_source_id{sfx}[]"
    return out.replace(f'{name} = "{SOURCE_ID_PLACEHOLDER}"', f'{name} = "{sid}"', 1), sid


def _kernel(spec: ProbeSpec, src: SourceFile) -> Kernel:
    """The definition the spec's kernel name (and occurrence) chooses, or why none is."""
    line = spec.line_of("kernel")
    kernel = select_kernel(src, KernelName.parse(spec.kernel), spec.kernel_occurrence, str(spec.path), line)
    if kernel is not None:
        return kernel
    names = ", ".join(k.label for k in src.kernels) or "none"
    via = f" (nor a use of {spec.backend_keys.declared_by}(name, ...) {{ ... }})" if spec.backend_keys.declared_by else ""
    unread = (f"; the grammar cannot read the head of the __global__ declaration(s) at line(s) "
              f"{', '.join(map(str, src.unreadable))}" if src.unreadable else "")
    raise AnchorError(f"kernel {spec.kernel!r} has no __global__ definition in {spec.source_rel}{via}{unread}",
                      path=str(spec.path), line=line, hint=f"kernels defined there: {names}; a kernel declared through a "
                                                "macro is found when the file defines that macro with __global__, "
                                                "when the macro is CUTLASS_GLOBAL, or, for a macro that takes the "
                                                "kernel's name (MACRO(name, ...) { body }), with "
                                                'declared_by = "MACRO" in the spec')