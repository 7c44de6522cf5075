"""Which loops the rewriter strip-mines and which kernels it versions, and the refusals it reports
(docs/design.md). Each case is a small kernel written here; the rewritten sources compile
for sm_90a and revert byte for byte."""
from __future__ import annotations

import shutil

import pytest

from atrex_inject import snapshot
from atrex_inject.cuda.loops import canonical_loop, leading_loads
from atrex_inject.cuda.source import parse_source
from conftest import compiles_whole

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def _loop(body: str):
    text = f"__global__ void k(const float* __restrict__ x, float* y, int n, int s) {{\n{body}\n}}\n"
    k = parse_source(text).kernel("k")
    return next(st for st in k.body.walk() if st.kind.endswith("_stmt") and st.kind in
                ("for_stmt", "while_stmt", "do_stmt")), text


@pytest.mark.parametrize("body,why", [
    ("for (int i = 0; i < n; i += s) { y[i] = x[i]; }", None),
    ("for (int i = threadIdx.x; i <= n; ++i) { y[i] = x[i]; }", None),
    ("int i = 0; for (; i < n; i++) { y[i] = x[i]; }", None),
    ("while (n > 0) { --n; }", "it is a while loop"),
    ("for (int i = 0; i < n; i *= 2) { y[i] = x[i]; }", "its increment is not"),
    ("for (int i = 0; i < min(n, 4); ++i) { y[i] = x[i]; }", "is not a plain expression"),
    ("for (int i = 0; i < n; ++i) { if (x[i] < 0) break; y[i] = x[i]; }", "its body has a break"),
    ("for (int i = 0; i < n; ++i) { if (x[i] < 0) return; y[i] = x[i]; }", "its body has a return"),
    ("for (int i = 0; i < n; ++i) { n -= 1; }", "its body may change n"),
    ("for (int i = 0; i < n; ++i) { i += 2; }", "its body may change i"),
    ("for (int i = 0; i < n; ++i) { __shared__ float t[4]; t[0] = x[i]; }", "static __shared__"),
    ("for (int i = 0; i < n; ++i) { for (int j = 0; j < 4; ++j) { if (j) break; } }", None),
])
def test_canonical_loops(body, why):
    loop, text = _loop(body)
    got = canonical_loop(loop, text)
    if why is None:
        assert not isinstance(got, str), got
    else:
        assert isinstance(got, str) and why in got, got


@pytest.mark.parametrize("body,hoisted", [
    ("for (int i = 0; i < n; i += s) { float v = x[i]; acc += v * v; }", ("float", (("v", "x[{i}]"),))),
    ("for (int i = 0; i < n; i += s) { const float a = x[i], b = x[i + 1]; acc += a * b; }",
     ("const float", (("a", "x[{i}]"), ("b", "x[{i} + 1]")))),
    ("for (int i = 0; i < n; i += s) { float v = x[i]; y[i] = v; }", None),  # the rest stores
    ("for (int i = 0; i < n; i += s) { float v = __ldg(&x[i]); acc += v; }", None),  # a call
    ("for (int i = 0; i < n; i += s) { acc += x[i]; }", None),  # no leading declaration
])
def test_leading_loads(body, hoisted):
    loop, text = _loop("float acc = 0.f;\n" + body + "\ny[0] = acc;")
    got = leading_loads(canonical_loop(loop, text), text, set())
    assert (None if got is None else (got.type, got.decls)) == hoisted


KERNELS = """
__global__ void nested_shared(const float* __restrict__ x, float* y, int n) {
  float acc = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    acc += x[i];
  }
  if (threadIdx.x < 32) {
    __shared__ float t[32];
    t[threadIdx.x] = acc;
    y[threadIdx.x] = t[threadIdx.x];
  }
}
"""

SPEC = """version = 1
name = "{name}"
question = "q"
backend = "cuda"
source = "k.cu"
kernel = "nested_shared"

[[site]]
name = "it"
anchor = {{ loop = "for (int i" }}
position = "loop-begin"
every = {every}
"""


@pytest.mark.parametrize("every", [1, 4])
def test_a_kernel_that_cannot_be_versioned_says_why_and_still_compiles(tmp_path, every):
    (tmp_path / ".git").mkdir()
    src = tmp_path / "k.cu"
    src.write_text(KERNELS)
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(name="s", every=every))
    res = snapshot.apply(spec)
    p = res.manifest.to_json()["perturbation"]
    assert not p["versioned"] and p["not_versioned_because"].startswith("a static __shared__ declaration at line 8")
    assert any("is not versioned" in w for w in res.manifest.warnings)
    assert p["strip_mined"] == ([{"line": 4, "every": 4, "sites": ["it"]}] if every == 4 else [])
    compiles_whole(src)
    snapshot.revert(spec)
    assert src.read_text() == KERNELS


def test_a_loop_that_cannot_be_strip_mined_keeps_its_counter_and_says_why(tmp_path):
    (tmp_path / ".git").mkdir()
    src = tmp_path / "k.cu"
    src.write_text(KERNELS.replace("acc += x[i];", "acc += x[i];\n    if (acc > 1e9f) break;"))
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(name="s", every=4))
    res = snapshot.apply(spec)
    p = res.manifest.to_json()["perturbation"]
    assert p["strip_mined"] == [] and p["not_strip_mined"] == [{"sites": ["it"], "reason": "its body has a break"}]
    assert "rec_every(__atrex_n0, 4u, 0u)" in src.read_text()
    compiles_whole(src)
    snapshot.revert(spec)


def test_apply_says_how_the_clean_code_is_kept(tmp_path):
    """The CLI prints whether the body is versioned, which loops are strip-mined, and the warnings."""
    from typer.testing import CliRunner

    from atrex_inject.cli import app

    (tmp_path / ".git").mkdir()
    src = tmp_path / "k.cu"
    src.write_text(KERNELS)
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(name="s", every=4))
    r = CliRunner().invoke(app, ["apply", str(spec)])
    assert r.exit_code == 0, r.output
    assert "body NOT versioned: a static __shared__ declaration at line 8" in r.output
    assert "loop at line 4 strip-mined by 4 for it" in r.output
    assert "warning: kernel nested_shared is not versioned" in r.output
    assert CliRunner().invoke(app, ["revert", str(spec)]).exit_code == 0 and src.read_text() == KERNELS
    # a dense site with staging rings: the loop is recorded in trips of the ring's events
    spec.write_text(SPEC.format(name="s", every=1).replace("\n[[site]]", "[capture]\nrecorder = 'staged'\nring = 16\nwarps = 8\n\n[[site]]"))
    r = CliRunner().invoke(app, ["apply", str(spec)])
    assert r.exit_code == 0, r.output
    assert "loop at line 4 recorded in trips of 16 iterations (probes unchecked) for it" in r.output
    assert CliRunner().invoke(app, ["revert", str(spec)]).exit_code == 0 and src.read_text() == KERNELS


NESTED = """
__global__ void tile(const float* __restrict__ x, float* y) {
  float acc = 0.f;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      acc += x[i * 4 + j];
    }
  y[threadIdx.x] = acc;
}
"""


def test_a_strip_mined_loop_that_is_an_unbraced_loop_body_stays_inside_its_wrap(tmp_path):
    """A probe before the inner loop wraps it in braces (it is the outer loop's unbraced body); the
    wrap's closing brace sits at the inner loop's end and must close after the strip-mined groups
    and the clean remainder, not inside the group's first copy (found by test_property)."""
    (tmp_path / ".git").mkdir()
    src = tmp_path / "k.cu"
    src.write_text(NESTED)
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.replace("nested_shared", "tile").replace("for (int i", "for (int j").format(name="s", every=2)
                    + '\n[[site]]\nname = "b"\nanchor = { loop = "for (int j" }\nposition = "before"\n')
    snapshot.apply(spec)
    out = src.read_text()
    compiles_whole(src)
    copy = out[out.index("tile__atrex("):]
    assert copy.index("the last iterations, clean */ }") < copy.rindex("}", 0, copy.index("y[threadIdx.x] = acc;"))
    snapshot.revert(spec)
    assert src.read_text() == NESTED
