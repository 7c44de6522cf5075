"""Property: for random valid specs on the examples and on a deliberately tricky source,
apply -> revert is byte-exact and the instrumented file compiles for sm_90a."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atrex_inject import snapshot
from atrex_inject.cuda.anchors import candidates
from atrex_inject.cuda.source import parse_source
from atrex_inject.spec import Anchor, Site
from conftest import REPO, sha

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")

SOURCES = [("examples/cuda/reduce_sumsq.cu", "reduce_sumsq"), ("examples/cuda/gemm_mma.cu", "gemm_bf16"),
           ("tests/sources/tricky.cu", "tricky")]
POS = {"call": ["before", "after"], "stmt": ["before", "after"], "ptx": ["before", "after"],
       "loop": ["before", "after", "loop-begin", "loop-end"]}


def _anchor_options(rel: str, kernel: str) -> list[tuple[str, str, int]]:
    """(kind, pattern, occurrence) for every placeable anchor of the kernel."""
    src = parse_source((REPO / rel).read_text())
    k = src.kernel(kernel)
    out = []
    for kind in POS:
        _, every = candidates(k, Site("x", Anchor(kind, "\0"), "before"))
        for m in every:
            pattern = {"call": m.what.removeprefix("call "), "ptx": m.what.removeprefix("ptx "),
                       "loop": m.stmt.text[:24], "stmt": m.stmt.text[:24]}[kind]
            hits, _ = candidates(k, Site("x", Anchor(kind, pattern), "before"))
            occ = [h.stmt for h in hits].index(m.stmt) + 1
            out.append((kind, pattern, occ, m.stmt.kind))
    return out


OPTIONS = {rel: _anchor_options(rel, k) for rel, k in SOURCES}


@st.composite
def specs(draw, rel: str):
    opts = OPTIONS[rel]
    n = draw(st.integers(1, 5))
    lines = []
    for i in range(n):
        kind, pattern, occ, stmt_kind = draw(st.sampled_from(opts + [("entry", "", 0, ""), ("exit", "", 0, "")]))
        if kind in ("entry", "exit"):
            anchor, pos = f"{{ {kind} = true }}", kind
        else:
            positions = [p for p in POS[kind] if not (p == "after" and stmt_kind in
                                                      ("return_stmt", "break_stmt", "continue_stmt"))]
            pos = draw(st.sampled_from(positions))
            esc = pattern.replace("\\", "\\\\").replace('"', '\\"')
            anchor = f'{{ {kind} = "{esc}", occurrence = {occ} }}'
        role = draw(st.sampled_from(["lane0", "thread", "warpgroup", "cta", "predicate"]))
        extra = 'predicate = "threadIdx.x % 64 == 0"\n' if role == "predicate" else ""
        if draw(st.booleans()):
            extra += f"every = {draw(st.integers(2, 5))}\n"
        if draw(st.booleans()):
            extra += f"ctas = {{ stride = {draw(st.integers(1, 4))} }}\n"
        if draw(st.booleans()):
            extra += f"payload = \"{draw(st.sampled_from(['threadIdx.x', 'blockIdx.x', '7']))}\"\n"
        lines.append(f'[[site]]\nname = "s{i}"\nanchor = {anchor}\nposition = "{pos}"\nrole = "{role}"\n{extra}')
    return "\n".join(lines)


@pytest.mark.long
@pytest.mark.parametrize("rel,kernel", SOURCES, ids=[k for _, k in SOURCES])
def test_random_specs_round_trip_and_compile(tmp_path_factory, host_checked, rel, kernel):
    """Random sites on each source apply, compile with nvcc and revert byte for byte. The spec names
    its recorder (the global path) so that each example costs one compile, not the recorder choice's
    several: what the choice makes of a spec is tests/compile/test_recorder_choice.py's question.
    The compile is apply's own (hostcheck: the instrumented text whole, host side included, with the
    spec's flags; a text that does not compile where the clean one does is refused), asserted to
    have run clean rather than repeated here (conftest.host_checked: the texts it passed, no warning)."""
    @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
    @given(body=specs(rel))
    def check(body):
        root = tmp_path_factory.mktemp("prop")
        (root / ".git").mkdir()
        src = root / Path(rel).name
        shutil.copy(REPO / rel, src)
        if rel.startswith("examples"):
            shutil.copy(REPO / "examples/cuda/harness.cuh", root / "harness.cuh")
        spec = root / "p.toml"
        spec.write_text(f'version = 1\nname = "p"\nquestion = "q"\nbackend = "cuda"\nsource = "{src.name}"\n'
                        f'kernel = "{kernel}"\n\n[capture]\nrecorder = "global"\n\n{body}')
        clean = src.read_bytes()
        snapshot.apply(spec)
        # compiled whole by nvcc (or found compiled in the build cache), no warning
        assert src.read_bytes().decode() in host_checked
        snapshot.revert(spec)
        assert src.read_bytes() == clean
        assert sha(src) == sha(REPO / rel)

    check()
