"""The package's shape, checked: the import graph of atrex_inject flows one way (no cycle, counting
imports inside functions and those made only for type checking), between modules and between
packages alike, and the C++ aggregate the rewriter fills by position is filled in the order its
struct declares."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from atrex_inject.assets import asset_dir
from atrex_inject.cuda.probes import KERNEL_PLAN_FIELDS

PACKAGE = Path(__file__).resolve().parents[2] / "atrex_inject"


def _modules() -> dict[str, Path]:
    out = {}
    for p in PACKAGE.rglob("*.py"):
        parts = p.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, wherever the import statement stands."""
    mods = _modules()
    graph = {m: set() for m in mods}
    for m, path in mods.items():
        pkg = m.split(".") if path.name == "__init__.py" else m.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = pkg[:len(pkg) - node.level + 1] if node.level else []
                mod = ".".join(base + (node.module.split(".") if node.module else []))
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[m] |= {t for t in targets if t in mods and t != m}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def packages() -> list[str]:
    """atrex_inject and every package under it, nested ones included."""
    return sorted(m for m, p in _modules().items() if p.name == "__init__.py")


def package_graph(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The import graph one level below `package`: each of its subpackages one node (all the
    modules under it), each of its own modules a node; an edge where anything under one node
    imports anything under another. A cycle here that the module graph lacks is two packages
    using each other through different modules, which a module-level check cannot see."""
    def node(m: str) -> str | None:
        if not m.startswith(package + "."):
            return None
        return ".".join(m.split(".")[:package.count(".") + 2])

    out: dict[str, set[str]] = {}
    for m, targets in graph.items():
        a = node(m)
        if a is None:
            continue
        out.setdefault(a, set())
        for t in targets:
            b = node(t)
            if b is not None and b != a:
                out[a].add(b)
                out.setdefault(b, set())
    return out


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_no_import_cycle_between_packages():
    graph = import_graph()
    found = {p: c for p in packages() if (c := cycles(package_graph(graph, p)))}
    assert found == {}, f"packages that import each other (package: cycles below it): {found}"


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = import_graph()
    graph["atrex_inject.registry"].add("atrex_inject.spec")  # spec imports registry: a cycle
    assert ["atrex_inject.registry", "atrex_inject.spec"] in cycles(graph)


@pytest.mark.parametrize("package,planted,cycle", [
    ("atrex_inject", [("cuda.names", "cutedsl.ranges"), ("cutedsl.check", "cuda.ptx")], {"cuda", "cutedsl"}),
    ("atrex_inject.cuda", [("cuda.probes", "cuda.python.literal")], {"cuda.probes", "cuda.python"}),  # nested
])
def test_the_package_cycle_finder_finds_a_planted_cycle(package, planted, cycle):
    """Two packages (or a package and a module beside it) using each other through modules that
    form no cycle themselves."""
    graph = import_graph()
    for a, b in planted:
        graph[f"atrex_inject.{a}"].add(f"atrex_inject.{b}")
    assert cycles(graph) == []
    found = cycles(package_graph(graph, package))
    assert any({f"atrex_inject.{n}" for n in cycle} <= set(c) for c in found), found


def test_kernel_plan_is_filled_in_its_declared_order():
    text = (asset_dir("runtime") / "atrex_capture.cuh").read_text()
    body = re.search(r"struct KernelPlan \{(.*?)\n\};", text, re.S).group(1)
    declared = []
    for line in body.splitlines():
        code = line.split("//")[0].strip()
        if code.endswith(";"):
            names = code.rstrip(";").split("=")[0]
            declared += [re.sub(r"\[.*\]", "", n).strip().split()[-1].lstrip("*") for n in names.split(",")]
    assert declared[:len(KERNEL_PLAN_FIELDS)] == list(KERNEL_PLAN_FIELDS)


# the decoder's reader: the one place that reads a launch's metadata by key and names its owner
# columns (`col_<name>`); everything else reads the typed view (Launch.meta, Launch.owner_column)
META_READERS = {"decode.py", "launchmeta.py"}
KEYED = re.compile(r"""\bmeta\[|\bmeta\.get\(|["']col_""")
READ_BY = [PACKAGE, PACKAGE.parent / "scripts", PACKAGE.parent / "bench", PACKAGE.parent / "examples"]


def test_launch_metadata_is_read_through_its_typed_view():
    found = [f"{p.relative_to(PACKAGE.parent)}:{i}: {line.strip()}"
             for root in READ_BY for p in sorted(root.rglob("*.py"))
             if not (p.parent == PACKAGE and p.name in META_READERS)
             for i, line in enumerate(p.read_text().splitlines(), 1) if KEYED.search(line)]
    assert found == [], "launch metadata or owner columns read by key outside decode's reader:\n" + "\n".join(found)


# packages (and modules) whose checks register with validation instead of being known to it
ROUTES = ("atrex_inject.cuda", "atrex_inject.cutedsl", "atrex_inject.measure")


def test_validate_imports_no_route():
    graph = import_graph()
    seen, todo = set(), ["atrex_inject.validate"]
    while todo:  # what validate imports, however indirectly
        for t in graph[todo.pop()] - seen:
            seen.add(t)
            todo.append(t)
    routes = sorted(m for m in seen if any(m == r or m.startswith(r + ".") for r in ROUTES))
    assert routes == [], f"validate imports route modules: {routes}"


def test_every_registered_rule_counts_under_a_named_check():
    """The routes' rules (registry.CHECK_MODULES) register with validation: each counts under a
    named check of the report, in a scope validate runs, and each route's part is there."""
    from atrex_inject.checks import registered
    from atrex_inject.validate import CHECKS, CORE

    routes = registered()
    rules = CORE.rules + routes.rules
    assert all(r.check in CHECKS and r.scope in ("launch", "capture") for r in rules)
    assert {r.check for r in routes.rules} == {"overflow", "truncation", "cross_launch_mixing"}  # IKeT's log
    assert ".py" in routes.source_ids and len(routes.notes) == 1  # Python launches
    assert [a.name for a in routes.artifacts] == ["measurement"]  # measure
