"""CuTe DSL rewriter: libcst transforms that insert NVIDIA IKeT calls into one @cute.kernel.

IKeT records per warp, so every site is warp-level. A site that is in no interval becomes
`iket.mark(name[, payload])`; an interval `a -> b` becomes a token range named after `a`:
`__atrex_tok_k = iket.sentinel_token("a")` at kernel entry (so the token may be carried across
loop iterations), `__atrex_tok_k = iket.range_start("a")` at `a` and `iket.range_end(__atrex_tok_k)`
at `b`. Roles other than lane0 and CTA/warp subsets wrap a mark in a warp-uniform `if`.
`from cutlass.cute.experimental import iket` is added after the module's imports (under an alias
when the source binds `iket` otherwise, e.g. a local import in the kernel, which would make every
probe above it read an unbound local). Only the insertion points change; libcst keeps every other byte.
"""
from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider, ScopeProvider

from ..anchoring import Candidate, call_matches, pick, squash
from ..errors import AnchorError, SourceParseError, SpecError
from ..fsio import sha256_bytes
from ..backend import Rewrite, SitePlacement
from ..plan import Plan
from ..spec import ProbeSpec, Site
from .ranges import interval_ends

MARK = "# atrex: instrumented"
MAX_NATIVE_DUMP_NAMES = 30  # more unique event names switch IKeT to EXTENDED_NATIVE_DUMP
WARP = "{cute}.arch.make_warp_uniform({cute}.arch.warp_idx())"
CTA = ("({cute}.arch.block_idx()[0] + {cute}.arch.grid_dim()[0] * ({cute}.arch.block_idx()[1] + "
       "{cute}.arch.grid_dim()[1] * {cute}.arch.block_idx()[2]))")
PROBE_NAMES = {"iket": "cutlass.cute.experimental", "cute": "cutlass"}  # name the probes use -> its module


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


class _Kernels(cst.CSTVisitor):
    """@cute.kernel functions with their qualified names (`Class.kernel`): methods of two classes
    may share a name."""

    def __init__(self):
        self.scope: list[str] = []
        self.found: list[tuple[str, cst.FunctionDef]] = []

    def visit_ClassDef(self, node):
        self.scope.append(node.name.value)

    def leave_ClassDef(self, node):
        self.scope.pop()

    def visit_FunctionDef(self, node):
        self.scope.append(node.name.value)
        if _is_kernel(node):
            self.found.append((".".join(self.scope), node))

    def leave_FunctionDef(self, node):
        self.scope.pop()


def _find_kernel(spec: ProbeSpec, module: cst.Module) -> cst.FunctionDef:
    """The kernel whose qualified name is `spec.kernel` or ends with `.` + it; several is refused."""
    v = _Kernels()
    module.visit(v)
    hits = [(q, k) for q, k in v.found if q == spec.kernel or q.endswith("." + spec.kernel)]
    if len(hits) == 1:
        return hits[0][1]
    names = ", ".join(q for q, _ in (hits or v.found)) or "none"
    if hits:
        raise AnchorError(f"kernel {spec.kernel!r} names {len(hits)} @cute.kernel definitions in {spec.source_rel}: "
                          f"{names}", path=str(spec.path), hint="qualify it with its class, e.g. "
                                                                f"kernel = {hits[0][0]!r}")
    raise AnchorError(f"kernel {spec.kernel!r} has no @cute.kernel definition in {spec.source_rel}",
                      path=str(spec.path), hint=f"kernels there: {names}")


def _imports(node: cst.CSTNode, name: str, module: str) -> bool:
    """`node` binds `name` to `module`.`name` (`from module import name` or `import module.name as name`)."""
    if isinstance(node, cst.ImportFrom) and not node.relative and isinstance(node.names, (list, tuple)):
        return (node.module is not None and _dotted(node.module) == module
                and any(_dotted(a.name) == name and (a.asname is None or _dotted(a.asname.name) == name)
                        for a in node.names))
    return isinstance(node, cst.Import) and any(
        _dotted(a.name) == f"{module}.{name}" and a.asname is not None and _dotted(a.asname.name) == name
        for a in node.names)


def _probe_names(scopes) -> dict[str, str]:
    """The name each probe module goes by: its own where every binding of it is a module-level import
    of that module (or there is none), else `_atrex_<name>` (one underscore: a class body would mangle
    two), so a local `import iket` or an unrelated `cute` cannot shadow the probes."""
    out = {}
    for name, module in PROBE_NAMES.items():
        safe = all(isinstance(s, cst.metadata.GlobalScope) and _imports(a.node, name, module)
                   for s in set(scopes.values()) if s is not None for a in s.assignments[name])
        out[name] = name if safe else f"_atrex_{name}"
    return out


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
            body += self._leave(u, o.body[-1]) if isinstance(o, cst.SimpleStatementLine) else [u]
            body += self._stmts(self.plan.after.get(id(o), []))
        return updated.with_changes(body=body)

    def leave_SimpleStatementSuite(self, original, updated):
        """`if c: continue` with probes before its `continue`: the suite becomes an indented block."""
        if id(original.body[-1]) not in self.plan.before:
            return updated
        line = cst.SimpleStatementLine(body=updated.body, trailing_whitespace=updated.trailing_whitespace)
        return cst.IndentedBlock(body=self._leave(line, original.body[-1]))

    def _leave(self, line: cst.SimpleStatementLine, last) -> list[cst.BaseStatement]:
        """Probes before a line's closing `return`/`continue`/`break` (`last`, original) go right before it:
        after the statements ahead of it on its line (`x = 1; continue`), which keep their own line."""
        codes = self.plan.before.get(id(last), [])
        if not codes:
            return [line]
        *head, tail = line.body
        out = []
        if head:
            head[-1] = head[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
            out.append(line.with_changes(body=head, trailing_whitespace=cst.TrailingWhitespace()))
            line = cst.SimpleStatementLine(body=[tail], trailing_whitespace=line.trailing_whitespace)
        return out + self._stmts(codes) + [line]

    def _loop(self, original, updated):
        begin, end = self.plan.begin.get(id(original), []), self.plan.end.get(id(original), [])
        if not begin and not end:
            return updated
        block = updated.body
        if isinstance(block, cst.SimpleStatementSuite):  # `for i in r: x[i] = 0`: the probes need lines
            block = cst.IndentedBlock(body=[cst.SimpleStatementLine(body=block.body,
                                                                   trailing_whitespace=block.trailing_whitespace)])
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


def _site_code(spec: ProbeSpec, s: Site, starts: dict, ends: dict, names: dict[str, str]) -> list[str]:
    sid = spec.site_id(s.name)
    label = f"  # atrex: site {s.name} (id {sid}, {s.position})"
    pay = f", {s.payload}" if s.payload else ""
    out = []
    if s.name in ends:
        out.append(f"{names['iket']}.range_end(__atrex_tok_{ends[s.name]}{pay}){label}")
    if s.name in starts:
        out.append(f'__atrex_tok_{starts[s.name]} = {names["iket"]}.range_start("{s.name}"{pay}){label}')
    if not out:
        out.append(f'{names["iket"]}.mark("{s.name}"{pay}){label}')
    warp, conds = WARP.format(**names), []
    if s.role == "warpgroup":
        conds.append(f"{warp} % 4 == 0")
    if s.role == "cta":
        conds.append(f"{warp} == 0")
    if s.warps is not None:
        conds.append(f"{warp} in ({', '.join(map(str, s.warps))},)")
    if s.cta_stride > 1:
        conds.append(f"{CTA.format(**names)} % {s.cta_stride} == 0")
    if conds:
        body = "\n".join("    " + c for c in out)
        return [f"if {' and '.join(conds)}:  # atrex: who records site {s.name}\n{body}\n"]
    return [c + "\n" for c in out]


def rewrite(plan: Plan, text: str) -> Rewrite:
    """The instrumented source; the spec passed the backend's check (IKeT's rules) when it was read."""
    spec = plan.spec
    if MARK in text:
        raise SpecError(f"{spec.source_rel} is already instrumented (it contains {MARK!r})", path=str(spec.path),
                        hint="revert it first: atrex-inject revert SPEC")
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as e:
        raise SourceParseError(f"not valid Python: {e.message}", path=spec.source_rel, line=e.raw_line) from None
    starts, ends = interval_ends(spec)
    names_used = {s.name for s in spec.sites if s.name not in ends}
    warnings = []
    if len(names_used) > MAX_NATIVE_DUMP_NAMES:
        warnings.append(f"{len(names_used)} unique IKeT event names: more than {MAX_NATIVE_DUMP_NAMES} switches IKeT "
                        "from NATIVE_DUMP to the costlier EXTENDED_NATIVE_DUMP method")
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    pos = wrapper.resolve(PositionProvider)
    scopes = wrapper.resolve(ScopeProvider)
    names = _probe_names(scopes)
    kernel = _find_kernel(spec, module)
    collector = _Statements()
    kernel.visit(collector)
    lines = text.splitlines()
    plan, placements = _Plan(), []
    for k, iv in enumerate(spec.intervals):
        plan.entry.append(f'__atrex_tok_{k} = {names["iket"]}.sentinel_token("{iv.start}")'
                          f'  # atrex: range token for {iv.name}\n')
    for s in spec.sites:
        codes = _site_code(spec, s, starts, ends, names)
        if s.anchor.kind in ("entry", "exit"):
            (plan.entry if s.anchor.kind == "entry" else plan.exit).extend(codes)
            line = pos[kernel].start.line
            if s.anchor.kind == "exit":
                for r in _leaving(kernel.body, (cst.Return,)):
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
                    for x in _leaving(node.body, (cst.Continue, cst.Break)):
                        plan.add(plan.before, x, c)
        placements.append(SitePlacement(s, spec.site_id(s.name), line))
    out = wrapper.module.visit(_Insert(plan, kernel))
    probes = "".join(plan.entry + plan.exit + [c for d in (plan.before, plan.after, plan.begin, plan.end)
                                               for cs in d.values() for c in cs])
    out = _add_imports(out, [f"from {mod} import {n}" + ("" if names[n] == n else f" as {names[n]}")
                             for n, mod in PROBE_NAMES.items()  # needed, and not already imported as such
                             if f"{names[n]}." in probes and (names[n] != n or not scopes[module].assignments[n])])
    new = f"{MARK} from spec {spec.path.name} for kernel {spec.kernel}; `atrex-inject revert` restores it\n" + out.code
    for p in placements:
        key = f"# atrex: site {p.site.name} (id {p.site_id}"
        p.instrumented_line = next((i for i, l in enumerate(new.splitlines(), 1) if key in l), 0)
    iket = {"names": sorted(names_used),
            "ranges": [{"name": iv.start, "start_site": spec.site_id(iv.start), "end_site": spec.site_id(iv.end)}
                       for iv in spec.intervals],
            "marks": {s.name: spec.site_id(s.name) for s in spec.sites
                      if s.name not in ends and s.name not in starts}}
    return Rewrite(new, sha256_bytes(new.encode()), placements, [], warnings=warnings, backend_data={"iket": iket})


def _add_imports(module: cst.Module, imports: list[str]) -> cst.Module:
    """Module-level imports after the module's last top-level import, where libcst's AddImportsVisitor
    puts them; that helper also merges into, or counts as present, an import inside a function, which
    leaves the probes of a kernel importing `iket` itself without a module-level one."""
    if not imports:
        return module
    body = list(module.body)
    at = next((i + 1 for i in reversed(range(len(body))) if isinstance(body[i], cst.SimpleStatementLine)
               and any(isinstance(b, (cst.Import, cst.ImportFrom)) for b in body[i].body)), 0)
    if not at and body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
            and isinstance(body[0].body[0].value, cst.SimpleString):
        at = 1  # after the docstring
    rest = body[at:]
    if rest and (not rest[0].leading_lines or rest[0].leading_lines[0].comment is not None):
        rest[0] = rest[0].with_changes(leading_lines=(cst.EmptyLine(), *rest[0].leading_lines))
    return module.with_changes(body=body[:at] + [cst.parse_statement(i + "\n") for i in imports] + rest)


def _leaving(body: cst.BaseSuite, kinds: tuple) -> list[cst.CSTNode]:
    """The `return`s of a kernel body, or the `continue`/`break`s of a loop body (a nested loop's are its own,
    bar those of its `else`), found as statements wherever they sit, also in a one-line `if c: continue`."""
    found = []

    class V(cst.CSTVisitor):
        def on_visit(self, node):
            if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                return False
            if isinstance(node, kinds):
                found.append(node)
            if cst.Return not in kinds and isinstance(node, (cst.For, cst.While)):
                if node.orelse:
                    node.orelse.visit(self)
                return False
            return True

    body.visit(V())
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
