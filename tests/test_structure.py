"""The package's shape, checked: the import graph of atrex_inject flows one way (no cycle, counting
imports inside functions and those made only for type checking), and the C++ aggregate the
rewriter fills by position is filled in the order its struct declares."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from atrex_inject.assets import asset_dir
from atrex_inject.cuda.probes import KERNEL_PLAN_FIELDS

PACKAGE = Path(__file__).resolve().parent.parent / "atrex_inject"


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


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = import_graph()
    graph["atrex_inject.registry"].add("atrex_inject.spec")  # spec imports registry: a cycle
    assert ["atrex_inject.registry", "atrex_inject.spec"] in cycles(graph)


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
