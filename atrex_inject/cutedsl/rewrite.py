"""CuTe DSL rewriter: libcst transforms that insert NVIDIA IKeT calls into one @cute.kernel.

IKeT records per warp, so every site is warp-level. A site that is in no interval becomes
`iket.mark(name[, payload])`; an interval `a -> b` becomes a token range named after `a`:
`__atrex_tok_k = iket.sentinel_token("a")` at kernel entry (so the token may be carried across
loop iterations), `__atrex_tok_k = iket.range_start("a")` at `a` and `iket.range_end(__atrex_tok_k)`
at `b`. Roles other than lane0 and CTA/warp subsets wrap a mark in a warp-uniform `if`.
`from cutlass.cute.experimental import iket` is added with libcst's import helper. Only the
insertion points change; libcst keeps every other byte.
"""
from __future__ import annotations

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import MetadataWrapper, PositionProvider

from ..anchoring import Candidate, call_matches, pick, squash
from ..errors import AnchorError, SourceParseError, SpecError
from ..fsio import sha256_bytes
from ..plan import Rewrite, SitePlacement
from ..spec import ProbeSpec, Site

MARK = "# atrex: instrumented"
MAX_NATIVE_DUMP_NAMES = 30  # more unique event names switch IKeT to EXTENDED_NATIVE_DUMP
WARP = "cute.arch.make_warp_uniform(cute.arch.warp_idx())"
CTA = "(cute.arch.block_idx()[0] + cute.arch.grid_dim()[0] * (cute.arch.block_idx()[1] + cute.arch.grid_dim()[1] * cute.arch.block_idx()[2]))"


def _dotted(e: cst.BaseExpression) -> str | None:
    if isinstance(e, cst.Name):
        return e.value
    if isinstance(e, cst.Attribute):
        base = _dotted(e.value)
        return f"{base}.{e.attr.value}" if base else e.attr.value
    return None


def _is_kernel(fn: cst.FunctionDef) -> bool:
    return any((_dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or "")
               .split(".")[-1] == "kernel" for d in fn.decorators)


class _Calls(cst.CSTVisitor):
    def __init__(self):
        self.names: list[str] = []

    def visit_Call(self, node: cst.Call) -> None:
        n = _dotted(node.func)
        if n:
            self.names.append(n)


class _Statements(cst.CSTVisitor):
    """Statements of one function, in source order, not descending into nested functions."""

    def __init__(self):
        self.stmts: list[cst.CSTNode] = []
        self.depth = 0

    def visit_FunctionDef(self, node):
        self.depth += 1
        return self.depth == 1

    def leave_FunctionDef(self, node):
        self.depth -= 1

    def on_visit(self, node):
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) and not isinstance(
                node, cst.FunctionDef):
            self.stmts.append(node)
        return super().on_visit(node)


class _Plan:
    """Insertions keyed by original statement nodes (identity), filled before the transform."""

    def __init__(self):
        self.before: dict[int, list[str]] = {}
        self.after: dict[int, list[str]] = {}
        self.begin: dict[int, list[str]] = {}  # loop body start
        self.end: dict[int, list[str]] = {}  # loop body end
        self.entry: list[str] = []
        self.exit: list[str] = []

    @staticmethod
    def add(d: dict, node, code: str) -> None:
        d.setdefault(id(node), []).append(code)


class _Insert(cst.CSTTransformer):
    def __init__(self, plan: _Plan, kernel: cst.FunctionDef):
        self.plan, self.kernel = plan, kernel

    @staticmethod
    def _stmts(codes: list[str]) -> list[cst.BaseStatement]:
        return [cst.parse_statement(c) for c in codes]

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        body = []
        for o, u in zip(original.body, updated.body):
            body += self._stmts(self.plan.before.get(id(o), []))
            body.append(u)
            body += self._stmts(self.plan.after.get(id(o), []))
        return updated.with_changes(body=body)

    def _loop(self, original, updated):
        begin, end = self.plan.begin.get(id(original), []), self.plan.end.get(id(original), [])
        if not begin and not end:
            return updated
        block = updated.body
        if isinstance(block, cst.SimpleStatementSuite):  # `for i in r: x[i] = 0`: the probes need lines
            block = cst.IndentedBlock(body=[cst.SimpleStatementLine(body=block.body)])
        last = original.body.body[-1] if original.body.body else None
        if isinstance(last, cst.SimpleStatementLine):
            last = last.body[-1]
        terminal = isinstance(last, (cst.Continue, cst.Break, cst.Return))
        body = self._stmts(begin) + list(block.body) + ([] if terminal else self._stmts(end))
        return updated.with_changes(body=block.with_changes(body=body))

    leave_For = _loop
    leave_While = _loop

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        if original is not self.kernel:
            return updated
        body = list(updated.body.body)
        head = 1 if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(
            body[0].body[0], cst.Expr) and isinstance(body[0].body[0].value, cst.SimpleString) else 0
        last = original.body.body[-1]
        ends = isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], cst.Return)
        body = body[:head] + self._stmts(self.plan.entry) + body[head:] + ([] if ends else self._stmts(self.plan.exit))
        return updated.with_changes(body=updated.body.with_changes(body=body))


def _check(spec: ProbeSpec) -> tuple[dict[str, int], dict[str, int], list[str]]:
    """IKeT's rules, at apply time: (interval starting at site, interval ending at site, warnings)."""
    starts, ends, warnings = {}, {}, []
    where = str(spec.path)
    for k, iv in enumerate(spec.intervals):
        for d, n, what in ((starts, iv.start, "starts"), (ends, iv.end, "ends")):
            if n in d:
                raise SpecError(f"site {n!r} {what} two intervals; an IKeT range token belongs to one range",
                                path=where, hint="add a second site at the same place for the second interval")
            d[n] = k
    by = {s.name: s for s in spec.sites}
    for s in spec.sites:
        if s.anchor.kind == "ptx":
            raise SpecError(f"site {s.name!r}: ptx anchors apply to the cuda backend", path=where, line=s.line)
        if s.role in ("thread", "predicate"):
            raise SpecError(f"site {s.name!r}: role {s.role!r} is per thread; IKeT records per warp", path=where,
                            line=s.line, hint="use lane0, warpgroup or cta")
        if s.every > 1:
            raise SpecError(f"site {s.name!r}: `every` is not supported on the cutedsl backend", path=where,
                            line=s.line)
        dense = s.role == "lane0" and s.cta_stride == 1 and not s.cta_limit and s.warps is None
        if (s.name in starts or s.name in ends) and not dense:
            raise SpecError(f"site {s.name!r} is an interval end and must be warp-uniform: role lane0, all CTAs "
                            "and warps (range tokens cannot cross a role's `if`)", path=where, line=s.line)
        if s.cta_limit:
            raise SpecError(f"site {s.name!r}: ctas.limit is not supported on the cutedsl backend", path=where,
                            line=s.line)
    for iv in spec.intervals:
        if bool(by[iv.start].payload) != bool(by[iv.end].payload):
            raise SpecError(f"interval {iv.name!r}: IKeT needs the same payload shape on both ends "
                            "(both sites with a payload, or neither)", path=where)
    names = {s.name for s in spec.sites if s.name not in ends}
    if len(names) > MAX_NATIVE_DUMP_NAMES:
        warnings.append(f"{len(names)} unique IKeT event names: more than {MAX_NATIVE_DUMP_NAMES} switches IKeT "
                        "from NATIVE_DUMP to the costlier EXTENDED_NATIVE_DUMP method")
    return starts, ends, warnings


def _site_code(spec: ProbeSpec, s: Site, starts: dict, ends: dict) -> list[str]:
    sid = spec.site_id(s.name)
    label = f"  # atrex: site {s.name} (id {sid}, {s.position})"
    pay = f", {s.payload}" if s.payload else ""
    out = []
    if s.name in ends:
        out.append(f"iket.range_end(__atrex_tok_{ends[s.name]}{pay}){label}")
    if s.name in starts:
        out.append(f'__atrex_tok_{starts[s.name]} = iket.range_start("{s.name}"{pay}){label}')
    if not out:
        out.append(f'iket.mark("{s.name}"{pay}){label}')
    conds = []
    if s.role == "warpgroup":
        conds.append(f"{WARP} % 4 == 0")
    if s.role == "cta":
        conds.append(f"{WARP} == 0")
    if s.warps is not None:
        conds.append(f"{WARP} in ({', '.join(map(str, s.warps))},)")
    if s.cta_stride > 1:
        conds.append(f"{CTA} % {s.cta_stride} == 0")
    if conds:
        body = "\n".join("    " + c for c in out)
        return [f"if {' and '.join(conds)}:  # atrex: who records site {s.name}\n{body}\n"]
    return [c + "\n" for c in out]


def rewrite(spec: ProbeSpec, text: str) -> Rewrite:
    if MARK in text:
        raise SpecError(f"{spec.source_rel} is already instrumented (it contains {MARK!r})", path=str(spec.path),
                        hint="revert it first: atrex-inject revert SPEC")
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as e:
        raise SourceParseError(f"not valid Python: {e.message}", path=spec.source_rel, line=e.raw_line) from None
    starts, ends, warnings = _check(spec)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    pos = wrapper.resolve(PositionProvider)
    kernels = [n for n in pos if isinstance(n, cst.FunctionDef) and _is_kernel(n)]
    kernel = next((k for k in kernels if k.name.value == spec.kernel), None)
    if kernel is None:
        raise AnchorError(f"kernel {spec.kernel!r} has no @cute.kernel definition in {spec.source_rel}",
                          path=str(spec.path), hint=f"kernels there: {', '.join(k.name.value for k in kernels) or 'none'}")
    collector = _Statements()
    kernel.visit(collector)
    lines = text.splitlines()
    plan, placements = _Plan(), []
    for k, iv in enumerate(spec.intervals):
        plan.entry.append(f'__atrex_tok_{k} = iket.sentinel_token("{iv.start}")  # atrex: range token for {iv.name}\n')
    for s in spec.sites:
        codes = _site_code(spec, s, starts, ends)
        if s.anchor.kind in ("entry", "exit"):
            (plan.entry if s.anchor.kind == "entry" else plan.exit).extend(codes)
            line = pos[kernel].start.line
            if s.anchor.kind == "exit":
                for r in collector.stmts:
                    if isinstance(r, cst.SimpleStatementLine) and isinstance(r.body[-1], cst.Return):
                        for c in codes:
                            plan.add(plan.before, r, c)
        else:
            node = _resolve(spec, s, collector.stmts, pos, lines, module)
            line = pos[node].start.line
            for c in codes:
                if s.position == "before":
                    plan.add(plan.before, node, c)
                elif s.position == "after":
                    plan.add(plan.after, node, c)
                elif s.position == "loop-begin":
                    plan.add(plan.begin, node, c)
                else:
                    plan.add(plan.end, node, c)
                    for x in _loop_exits(node):
                        plan.add(plan.before, x, c)
        placements.append(SitePlacement(s, spec.site_id(s.name), line))
    out = wrapper.module.visit(_Insert(plan, kernel))
    context = CodemodContext()
    AddImportsVisitor.add_needed_import(context, "cutlass.cute.experimental", "iket")
    out = AddImportsVisitor(context).transform_module(out)
    new = f"{MARK} from spec {spec.path.name} for kernel {spec.kernel}; `atrex-inject revert` restores it\n" + out.code
    for p in placements:
        key = f"# atrex: site {p.site.name} (id {p.site_id}"
        p.instrumented_line = next((i for i, l in enumerate(new.splitlines(), 1) if key in l), 0)
    iket = {"names": sorted({s.name for s in spec.sites if s.name not in ends}),
            "ranges": [{"name": iv.start, "start_site": spec.site_id(iv.start), "end_site": spec.site_id(iv.end)}
                       for iv in spec.intervals],
            "marks": {s.name: spec.site_id(s.name) for s in spec.sites
                      if s.name not in ends and s.name not in starts}}
    return Rewrite(new, sha256_bytes(new.encode()), placements, [], warnings=warnings, backend_data={"iket": iket})


def _loop_exits(loop) -> list[cst.CSTNode]:
    """continue/break statements of this loop, not of a nested one."""
    found = []

    class V(cst.CSTVisitor):
        def visit_For(self, node):
            return node is loop

        def visit_While(self, node):
            return node is loop

        def visit_FunctionDef(self, node):
            return False

        def visit_SimpleStatementLine(self, node):
            if isinstance(node.body[-1], (cst.Continue, cst.Break)):
                found.append(node)

    loop.visit(V())
    return found


def _resolve(spec, site, stmts, pos, lines, module):
    kind, pat = site.anchor.kind, site.anchor.pattern
    hits, every = [], []

    def cand(node, what):
        ln = pos[node].start.line
        return Candidate(node, what, ln, lines[ln - 1].strip())

    for n in stmts:
        if kind == "call":
            v = _Calls()
            for part in _own_parts(n):
                part.visit(v)
            for callee in v.names:
                c = cand(n, f"call {callee}")
                every.append(c)
                if call_matches(callee, pat):
                    hits.append(c)
        elif kind == "loop" and isinstance(n, (cst.For, cst.While)):
            header = (f"for {module.code_for_node(n.target)} in {module.code_for_node(n.iter)}"
                      if isinstance(n, cst.For) else f"while {module.code_for_node(n.test)}")
            c = cand(n, f"{'for' if isinstance(n, cst.For) else 'while'} loop")
            every.append(c)
            if squash(pat) in squash(header):
                hits.append(c)
        elif kind == "stmt" and isinstance(n, cst.SimpleStatementLine):
            c = cand(n, "statement")
            every.append(c)
            if squash(pat) in squash("".join(module.code_for_node(b) for b in n.body)):
                hits.append(c)
    return pick(spec, site, spec.kernel, hits, every)


def _own_parts(n) -> list[cst.CSTNode]:
    """The parts of a statement that belong to it rather than to nested statements."""
    if isinstance(n, cst.SimpleStatementLine):
        return list(n.body)
    if isinstance(n, cst.For):
        return [n.iter]
    if isinstance(n, (cst.While, cst.If)):
        return [n.test]
    if isinstance(n, cst.With):
        return [i.item for i in n.items]
    return []
