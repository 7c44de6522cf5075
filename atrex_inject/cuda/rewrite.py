"""CUDA rewriter: a probe plan + a parsed source → the instrumented source.

Only insertion points change; every byte of the original stays, in order. Inserted code is marked
with `// atrex:` (whole lines) or `/* atrex: */` (inline) comments naming the site. A statement
that is the unbraced body of a control statement is wrapped in braces so an inserted probe stays
inside the same branch or loop.
"""
from __future__ import annotations

import re

from ..errors import AnchorError, SpecError
from ..fsio import sha256_bytes
from ..plan import Plan, Rewrite, SitePlacement, make_plan
from ..spec import ProbeSpec, Site
from .anchors import resolve
from .source import LOOP_KINDS, SourceFile, Stmt, parse_source

SOURCE_ID_PLACEHOLDER = "0" * 64
HEADER = "atrex_timeline.cuh"
MARK = "// atrex: instrumented"
ROLE_ENUM = {"thread": "kThread", "lane0": "kLane0", "warpgroup": "kWarpgroup", "cta": "kCta", "predicate": "kPredicate"}
# Ordering of insertions that share an offset: text after a statement, then a block's first line,
# then a block's last line, then text before the next statement.
AFTER, BLOCK_BEGIN, BLOCK_END, BEFORE = 0, 1, 2, 3


def source_id_of(text: str) -> str:
    """The identity a capture carries: the instrumented source with its own id zeroed, hashed."""
    m = re.search(r'__atrex_source_id\[\] = "([0-9a-f]{64})"', text)
    body = text if m is None else text[:m.start(1)] + SOURCE_ID_PLACEHOLDER + text[m.end(1):]
    return sha256_bytes(body.encode())


class _Edits:
    """Collects insertions by statement and side, then renders them with the source's layout."""

    def __init__(self, src: SourceFile):
        self.src = src
        self.sides: dict[Stmt, dict[str, list[tuple[str, str]]]] = {}
        self.raw: list[tuple[int, int, int, str]] = []  # offset, rank, tiebreak, text

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

    @staticmethod
    def lines_of(items, indent: str) -> str:
        return "".join(f"{indent}{code}  // atrex: {label}\n" for code, label in items)

    @staticmethod
    def inline(items) -> str:
        return " ".join(f"{code} /* atrex: {label} */" for code, label in items)

    def block_begin(self, block: Stmt, items):
        off = block.start + 1
        first = next((c for c in block.children), None)
        inner = self.indent(first.start) if first is not None and self.starts_line(first.start) \
            else self.indent(block.start) + "  "
        if self.rest_blank(off):
            self.insert(self.src.lines.line_end(off) + 1, BLOCK_BEGIN, self.lines_of(items, inner))
        else:
            self.insert(off, BLOCK_BEGIN, " " + self.inline(items))

    def block_end(self, block: Stmt, items):
        off = block.end - 1
        if self.starts_line(off):
            first = block.children[0] if block.children else None
            inner = self.indent(first.start) if first is not None and self.starts_line(first.start) \
                else self.indent(off) + "  "
            self.insert(self.src.lines.line_start(off), BLOCK_END, self.lines_of(items, inner))
        else:
            self.insert(off, BLOCK_END, self.inline(items) + " ")

    def statement(self, start: int, end: int, before, after, wrap: bool, depth: int):
        if wrap:
            opening = "{ " + "".join(self.inline([b]) + " " for b in before)
            if self.src.text.startswith("#", start):  # a directive must stay first on its line
                self.insert(self.src.lines.line_start(start), BEFORE, self.indent(start) + opening + "\n", depth)
            else:
                self.insert(start, BEFORE, opening, depth)
            self.insert(end, AFTER, "".join(" " + self.inline([a]) for a in after) + " }", -depth)
            return
        if before:
            if self.starts_line(start):
                self.insert(self.src.lines.line_start(start), BEFORE, self.lines_of(before, self.indent(start)), depth)
            else:
                self.insert(start, BEFORE, self.inline(before) + " ", depth)
        if after:
            if self.rest_blank(end):
                self.insert(self.src.lines.line_end(end) + 1, AFTER, self.lines_of(after, self.indent(start)), -depth)
            else:
                self.insert(end, AFTER, " " + self.inline(after), -depth)

    def render(self, prefix: str) -> str:
        for s, side in self.sides.items():
            depth = 0
            p = s.parent
            while p is not None:
                depth, p = depth + 1, p.parent
            self.statement(s.lead, s.end, side["before"], side["after"], wrap=not s.in_block, depth=depth)
        text = self.src.text
        out, pos = [prefix], 0
        for off, _, _, ins in sorted(self.raw, key=lambda r: (r[0], r[1], r[2])):
            out.append(text[pos:off])
            out.append(ins)
            pos = off
        out.append(text[pos:])
        return "".join(out)


def _site_code(plan: Plan, site: Site) -> str:
    sid = plan.spec.site_id(site.name)
    rv = f"__atrex_r{plan.group_of(site).id}"
    payload = f", static_cast<unsigned>({site.payload})" if site.payload else ""
    if site.every > 1:
        return f"{rv}.rec_every(__atrex_n{sid}, {site.every}u, {sid}u{payload});"
    g = plan.group_of(site)
    if g.cta_stride > 1 or g.cta_limit or g.warp_mask != 0xFFFFFFFF or g.predicate:
        return f"{rv}.rec_active({sid}u{payload});"
    return f"{rv}.rec({sid}u{payload});"


def _label(plan: Plan, site: Site) -> str:
    return f"site {site.name} (id {plan.spec.site_id(site.name)}, {site.position})"


def _loop_exits(loop: Stmt) -> list[Stmt]:
    """continue/break statements that leave an iteration of this loop (not of a nested one)."""
    found = []

    def visit(s: Stmt, in_switch: bool):
        for c in s.children:
            if c.kind in LOOP_KINDS:
                continue
            if c.kind == "continue_stmt" or (c.kind == "break_stmt" and not in_switch):
                found.append(c)
            visit(c, in_switch or c.kind == "switch_stmt")

    visit(loop, False)
    return found


def _prefix(plan: Plan, src_rel: str) -> str:
    spec = plan.spec
    defines = ""
    if plan.wide_events:
        defines += "#define ATREX_TL_WIDE 1  // atrex: 16-byte events (payload or clock)\n"
    if spec.capture.clock:
        defines += "#define ATREX_TL_CLOCK 1  // atrex: record %clock\n"
    groups = ", ".join(
        f"{{atrex::{ROLE_ENUM[g.role]}, {g.cta_stride}u, {g.cta_limit}u, 0x{g.warp_mask:08x}u, 0u, 0u}}"
        for g in plan.groups)
    c = spec.capture
    return (f"{MARK} from spec {spec.path.name} for kernel {spec.kernel}; `atrex-inject revert` restores it\n"
            f"{defines}"
            f'#include "{HEADER}"  // atrex: recorder runtime (atrex-inject include-dir)\n'
            f'static const char __atrex_source_id[] = "{SOURCE_ID_PLACEHOLDER}";  // atrex: source identity\n'
            f"static atrex::GroupDesc __atrex_groups[] = {{{groups}}};  // atrex: owner groups\n"
            f"static atrex::host::KernelPlan __atrex_plan = {{\"{spec.kernel}\", __atrex_source_id, __atrex_groups, "
            f"{len(plan.groups)}u, {c.capacity}u, {c.skip}u, {c.count}u, 0u, nullptr, 0u, nullptr, {{0u}}"
            f"{f', {c.staging_warps}u' if c.staging_events else ''}}};  // atrex: capture plan\n")


def rewrite(spec: ProbeSpec, text: str) -> Rewrite:
    if MARK in text:
        raise SpecError(f"{spec.source_rel} is already instrumented (it contains {MARK!r})", path=str(spec.path),
                        hint="revert it first: atrex-inject revert SPEC")
    src = parse_source(text, spec.source_rel)
    kernel = src.kernel(spec.kernel)
    if kernel is None:
        names = ", ".join(k.name for k in src.kernels) or "none"
        raise AnchorError(f"kernel {spec.kernel!r} has no __global__ definition in {spec.source_rel}",
                          path=str(spec.path), hint=f"kernels defined there: {names}")
    plan = make_plan(spec)
    edits = _Edits(src)
    placements = []
    entry_items, exit_items = _recorders(plan), []
    for site in spec.sites:
        code, label = _site_code(plan, site), _label(plan, site)
        pos = site.position
        if site.anchor.kind == "entry":
            entry_items.append((code, label))
            placements.append(SitePlacement(site, spec.site_id(site.name), kernel.line))
            continue
        if site.anchor.kind == "exit":
            exit_items.append((code, label))
            placements.append(SitePlacement(site, spec.site_id(site.name), kernel.line))
            continue
        stmt = resolve(spec, src, kernel, site)
        placements.append(SitePlacement(site, spec.site_id(site.name), src.lines.line(stmt.start)))
        if pos == "before":
            edits.before(stmt, code, label)
        elif pos == "after":
            if stmt.kind in ("return_stmt", "break_stmt", "continue_stmt"):
                raise AnchorError(f"site {site.name!r}: nothing runs after a {stmt.kind.removesuffix('_stmt')}",
                                  path=str(spec.path), line=site.line, hint='use position = "before"')
            edits.after(stmt, code, label)
        else:
            _loop_site(edits, stmt, pos, code, label)
    exit_items += [(f"__atrex_r{g.id}.finish();", f"publish event count, owner group {g.id}") for g in plan.groups]
    edits.block_begin(kernel.body, entry_items)
    for s in kernel.body.walk():
        if s.kind == "return_stmt":
            for item in exit_items:
                edits.before(s, *item)
    last = kernel.body.children[-1] if kernel.body.children else None
    if last is None or last.kind != "return_stmt":
        edits.block_end(kernel.body, exit_items)
    launches = _wrap_launches(edits, src, spec.kernel)
    out = edits.render(_prefix(plan, spec.source_rel))
    sid = source_id_of(out)
    out = out.replace(f'__atrex_source_id[] = "{SOURCE_ID_PLACEHOLDER}"', f'__atrex_source_id[] = "{sid}"', 1)
    lines = out.splitlines()
    for p in placements:
        key = f"atrex: {_label(plan, p.site)}"
        p.instrumented_line = next((i for i, l in enumerate(lines, 1) if key in l), 0)
    return Rewrite(out, sid, placements, launches)


def _recorders(plan: Plan) -> list[tuple[str, str]]:
    items = []
    for g in plan.groups:
        pred = f", static_cast<bool>({g.predicate})" if g.predicate else ""
        c = plan.spec.capture
        kind = (f"atrex::BasicRecorder<{c.staging_events}u, {c.staging_warps}u, {g.id}u>" if c.staging_events
                else "atrex::Recorder")
        items.append((f"{kind} __atrex_r{g.id}({g.id}u{pred});", f"recorder, owner group {g.id} ({g.role})"))
    for i, s in enumerate(plan.spec.sites):
        if s.every > 1:
            items.append((f"unsigned __atrex_n{i} = 0u;", f"hit counter for site {s.name} (every {s.every})"))
    return items


def _loop_site(edits: _Edits, loop: Stmt, pos: str, code: str, label: str) -> None:
    body = loop.body
    if pos == "loop-begin":
        if body.kind == "block":
            edits.block_begin(body, [(code, label)])
        else:
            edits.before(body, code, label)
        return
    for s in _loop_exits(loop):
        edits.before(s, code, label)
    if body.kind == "block":
        last = body.children[-1] if body.children else None
        if last is None or last.kind not in ("continue_stmt", "break_stmt", "return_stmt"):
            edits.block_end(body, [(code, label)])
    elif body.kind not in ("continue_stmt", "break_stmt", "return_stmt"):
        edits.after(body, code, label)


def _wrap_launches(edits: _Edits, src: SourceFile, kernel: str) -> list[dict]:
    out = []
    for l in src.launches:
        if l.kernel != kernel:
            continue
        open_ = (f"{{ atrex::host::Capture __atrex_cap(__atrex_plan, dim3({l.grid}), dim3({l.block}), {l.stream});",
                 f"capture session for this launch of {kernel}")
        close = ("__atrex_cap.finish(); }", "end of capture session")
        if edits.starts_line(l.start) and edits.rest_blank(l.end):
            ind = edits.indent(l.start)
            edits.insert(edits.src.lines.line_start(l.start), BEFORE, edits.lines_of([open_], ind), -1)
            edits.insert(edits.src.lines.line_end(l.end) + 1, AFTER, edits.lines_of([close], ind), 1)
        else:
            edits.insert(l.start, BEFORE, edits.inline([open_]) + " ", -1)
            edits.insert(l.end, AFTER, " " + edits.inline([close]), 1)
        out.append({"line": l.line, "via": l.via, "grid": l.grid, "block": l.block, "stream": l.stream})
    return out
