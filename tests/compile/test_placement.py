"""Placement on real-code shapes (issue 13): each probe lands exactly where the spec says, checked
by line and enclosing statement, or apply refuses with exit 2, the reason, and every file unchanged."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from atrex_inject.cuda.anchors import candidates
from atrex_inject.cuda.probes import static_suffix
from atrex_inject.cuda.source import parse_source
from atrex_inject.manifest import load as load_manifest
from atrex_inject.source_id import source_id_of
from atrex_inject.spec import Anchor, Site
from conftest import cli, compiles_whole, nvcc_compile, refused, tree_hashes

HAS_NVCC = shutil.which("nvcc") is not None


def site(anchor: str, position: str = "before", name: str = "a") -> str:
    return f'[[site]]\nname = "{name}"\nanchor = {{ {anchor} }}\nposition = "{position}"\n'


def make_project(tmp_path: Path, source: str | bytes, *sites: str, kernel: str = "k") -> Path:
    """A project holding k.cu and spec s.toml; returns the spec. The spec names its recorder (the
    global path): where a probe lands does not depend on it, and apply then builds no candidates
    (what the recorder choice makes of a kernel is tests/compile/test_recorder_choice.py's)."""
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / ".git").mkdir()
    src = tmp_path / "k.cu"
    src.write_bytes(source if isinstance(source, bytes) else source.encode())
    spec = tmp_path / "s.toml"
    spec.write_text(f'version = 1\nname = "s"\nquestion = "q"\nbackend = "cuda"\nsource = "k.cu"\n'
                    f'kernel = "{kernel}"\n\n[capture]\nrecorder = "global"\n\n' + "\n".join(sites))
    return spec


def applied(spec: Path, compile_it: bool = True) -> list[str]:
    """Apply (it must succeed), check it compiles, revert byte-exact; the instrumented lines."""
    src = spec.parent / "k.cu"
    clean = src.read_bytes()
    code, out = cli("apply", spec)
    assert code == 0, out
    lines = src.read_bytes().decode().split("\n")
    if compile_it and HAS_NVCC:
        compiles_whole(src)
    code, out = cli("revert", spec)
    assert code == 0 and src.read_bytes() == clean, out
    return lines


def probe_line(lines: list[str], name: str = "a") -> int:
    """0-based index of the (first) line holding site `name`'s probe."""
    return next(i for i, l in enumerate(lines) if f"atrex: site {name} (" in l)


PRAGMA_AFTER_COMMENT = """\
__global__ void k(float* x, int n) {
  float acc = 0.f;  // accumulator
#pragma unroll
  for (int i = 0; i < 4; ++i) acc += x[i];
  if (n > 8)  // big
#pragma unroll
    for (int i = 0; i < 4; ++i) acc += x[i];
  x[0] = acc;
}
"""


def test_before_a_pragma_led_loop_goes_above_the_pragma_not_into_the_comment(tmp_path):
    spec = make_project(tmp_path, PRAGMA_AFTER_COMMENT, site('loop = "for", occurrence = 1'))
    lines = applied(spec)
    i = probe_line(lines)
    assert lines[i - 1] == "  float acc = 0.f;  // accumulator"
    assert lines[i] == "  __atrex_r0.rec(0u);  // atrex: site a (id 0, before)"
    assert lines[i + 1:i + 3] == ["#pragma unroll", "  for (int i = 0; i < 4; ++i) acc += x[i];"]


def test_before_a_pragma_led_unbraced_body_opens_its_brace_on_a_line_of_its_own(tmp_path):
    spec = make_project(tmp_path, PRAGMA_AFTER_COMMENT, site('loop = "for", occurrence = 2'))
    lines = applied(spec)
    i = probe_line(lines)
    assert lines[i - 1] == "  if (n > 8)  // big"
    assert lines[i].startswith("    { __atrex_r0.rec(0u);")
    assert lines[i + 1:i + 3] == ["#pragma unroll", "    for (int i = 0; i < 4; ++i) acc += x[i]; }"]


@pytest.mark.parametrize("define,use", [('#define UNROLL _Pragma("unroll")', "UNROLL"),
                                        ("", '_Pragma("unroll")'),
                                        ("", "CUTLASS_PRAGMA_UNROLL")])  # defined in a CUTLASS header
def test_before_a_loop_led_by_a_pragma_macro_goes_above_the_macro(tmp_path, define, use):
    source = (f"{define}\n__global__ void k(float* x) {{\n"
              f"  float acc = 0.f;\n  {use}\n  for (int i = 0; i < 4; ++i) acc += x[i];\n  x[0] = acc;\n}}\n")
    spec = make_project(tmp_path, source, site('loop = "for"'))
    lines = applied(spec, compile_it=use != "CUTLASS_PRAGMA_UNROLL")
    i = probe_line(lines)
    assert lines[i - 1:i + 3] == ["  float acc = 0.f;", "  __atrex_r0.rec(0u);  // atrex: site a (id 0, before)",
                                  f"  {use}", "  for (int i = 0; i < 4; ++i) acc += x[i];"]


def test_a_kernel_defined_under_if_and_else_is_refused_naming_both_definitions(tmp_path):
    source = ("#if USE_FAST\n__global__ void k(float* x) { x[0] = 1.f; }\n#else\n"
              "__global__ void k(float* x) { x[0] = 2.f; }\n#endif\n")
    spec = make_project(tmp_path, source, site('stmt = "x[0]"'))
    refused(spec, "k.cu:4: kernel 'k' has 2 __global__ definitions in k.cu (lines 2, 4)",
            "atrex-inject instruments exactly one definition")


CALLS = """\
__device__ float k(float v) { return v; }
__device__ float g(float v) { return v; }
__global__ void kern(float* x, int steps) {
  int k = 0;
  while (k < steps) { x[k] = g(x[k]); ++k; }
  for (int j = 0; j < steps; ++j) x[j] = ::k(x[j]);
}
"""


def test_a_comparison_is_not_a_template_call(tmp_path):
    src = parse_source(CALLS)
    _, every = candidates(src.kernel("kern"), Site("x", Anchor("call", "\0"), "before"))
    assert [(src.lines.line(m.stmt.start), m.what) for m in every] == [(5, "call g"), (6, "call k")]
    spec = make_project(tmp_path, CALLS, site('call = "k"', "after"), kernel="kern")
    lines = applied(spec)
    i = probe_line(lines)
    assert lines[i].startswith("  for (int j = 0; j < steps; ++j) { x[j] = ::k(x[j]); __atrex_r0.rec(0u);")


LAMBDA = """\
template <class F> __device__ void dispatch(F f) { f(0); }
__global__ void k(float* x, int n) {
  float acc = 0.f;
  dispatch([&](int s) {
    for (int i = 0; i < n; ++i) {
      acc += x[i];
    }
    x[s] = acc;
  });
  x[1] = acc;
}
"""


@pytest.mark.parametrize("anchor,line", [('stmt = "x[s] = acc"', 8), ('loop = "for (int i"', 5),
                                         ('call = "f"', None)])
def test_an_anchor_inside_a_lambda_is_refused_with_the_placeable_candidates(tmp_path, anchor, line):
    spec = make_project(tmp_path, LAMBDA, site(anchor))
    if line is None:  # `f(0)` is in another function: nothing matches, and the lambda's calls are no candidates
        out = refused(spec, "matches nothing in kernel 'k'; the kernel's call candidates are:",
                      "1. k.cu:4: call dispatch: dispatch([&](int s) {")
        assert "2." not in out
        return
    out = refused(spec, f"matches inside a lambda at k.cu:{line}; a probe cannot be placed inside a lambda body "
                        "(it would land before or after the whole statement at line 4)")
    if anchor.startswith("stmt"):
        assert "1. k.cu:3: statement: float acc = 0.f;" in out and "3. k.cu:10: statement: x[1] = acc;" in out
    else:
        assert "the kernel has no placeable loop candidate" in out


def test_the_statement_holding_a_lambda_is_still_placeable(tmp_path):
    spec = make_project(tmp_path, LAMBDA, site('call = "dispatch"'), site('stmt = "x[1]"', "after", "b"))
    lines = applied(spec)
    i = probe_line(lines)
    assert lines[i + 1] == "  dispatch([&](int s) {"
    j = probe_line(lines, "b")
    assert lines[j - 1] == "  x[1] = acc;"


CRLF = """\
#define TWICE(x) \\
  do { (x); (x); } while (0)  /* { */
// a comment continued \\
   onto a line with a } brace
__global__ void k(float* x, int n) {
  float acc = 0.f;  // accumulator
#pragma unroll 4
  for (int i = 0; i < n; ++i) {
    acc += x[i];
  }
  TWICE(acc += 1.f);
  x[0] = acc;
}
""".replace("\n", "\r\n")


def test_a_crlf_file_with_continued_directives_and_comments_gets_crlf_lines(tmp_path):
    spec = make_project(tmp_path, CRLF, site("entry = true", "entry", "in"), site('loop = "for"', "before"),
                   site('loop = "for"', "loop-begin", "it") + "every = 4\n", site("exit = true", "exit", "out"))
    lines = applied(spec)
    text = "\n".join(lines)
    assert text.count("\n") == text.count("\r\n") > CRLF.count("\n")  # every line, inserted or not, ends in CRLF
    i = probe_line(lines)
    assert lines[i - 1:i + 1] == ["  float acc = 0.f;  // accumulator\r",
                                  "  __atrex_r0.rec(1u);  // atrex: site a (id 1, before)\r"]
    assert lines[i + 1].startswith("  { int i = 0;  // atrex: strip-mined by 4")
    assert lines[i + 2] == "  #pragma unroll 4\r"


def test_a_utf8_bom_stays_first_and_placement_is_unchanged(tmp_path):
    plain = PRAGMA_AFTER_COMMENT.encode()
    spec = make_project(tmp_path, b"\xef\xbb\xbf" + plain, site('loop = "for", occurrence = 1'))
    lines = applied(spec)
    assert lines[0].startswith("\ufeff// atrex: instrumented from spec s.toml")
    m = load_manifest(next((tmp_path / ".atrex" / "history").glob("s-*")) / "manifest.json")
    assert m.sites[0].source_line == 4
    shutil.rmtree(tmp_path / ".atrex")
    (tmp_path / "k.cu").write_bytes(plain)
    without = applied(spec, compile_it=False)
    assert without[0] == lines[0].removeprefix("\ufeff") and without[3:] == lines[3:]  # [2]: the source id


SAMPLED_LOOP = """\
__global__ void k(const float* __restrict__ x, float* out, int n) {
  float acc = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    acc += x[i];
  }
  out[threadIdx.x] = acc;
}
"""


def test_a_utf8_bom_source_with_a_strip_mined_loop_compiles_and_reverts(tmp_path):
    """The strip-mined loop is written from offsets into the text after the BOM (cuda/source.py sets
    it aside once): with a BOM the rewritten loop is the same as without, and it compiles."""
    every = '[[site]]\nname = "a"\nanchor = { loop = "for" }\nposition = "loop-begin"\nevery = 4\n'
    spec = make_project(tmp_path, b"\xef\xbb\xbf" + SAMPLED_LOOP.encode(), every)
    lines = applied(spec)
    assert lines[0].startswith("\ufeff// atrex: instrumented")
    loop = next(l for l in lines if "strip-mined by 4" in l)
    assert "(i < n) && (n) - (i) > 3 * (blockDim.x)" in "".join(lines)
    shutil.rmtree(tmp_path / ".atrex")
    (tmp_path / "k.cu").write_bytes(SAMPLED_LOOP.encode())
    assert loop in applied(spec, compile_it=False)


def test_dry_run_shows_each_landing_with_its_lines_and_writes_nothing(tmp_path):
    spec = make_project(tmp_path, PRAGMA_AFTER_COMMENT, site('loop = "for", occurrence = 2'),
                   site("exit = true", "exit", "x"))
    before = tree_hashes(tmp_path)
    code, out = cli("apply", "--dry-run", spec)
    assert code == 0, out
    assert "dry run, nothing written: k.cu would get +" in out
    # (instrumented lines count the #line directive after the recorder's prefix)
    assert "site 0 a (before), anchored at k.cu:7, lands at:\n  k.cu:25 (instrumented)\n" in out
    assert "       24 |   if (n > 8)  // big\n  >    25 |     { __atrex_r0.rec(0u);" in out
    code, out = cli("apply", "--dry-run", "--json", spec)
    r = json.loads(out)
    assert r["dry_run"] and not r["applied"]
    a, x = r["sites"]
    assert [land["line"] for land in a["lands"]] == [25] and a["source_line"] == 7
    assert [c["line"] for c in a["lands"][0]["context"]] == list(range(22, 29))
    assert x["lands"][0]["context"][3]["text"] == "  __atrex_r0.rec(1u);  // atrex: site x (id 1, exit)"
    assert tree_hashes(tmp_path) == before and not (tmp_path / ".atrex").exists()
    refused(make_project(tmp_path / "bad", LAMBDA, site('stmt = "x[s]"')), "matches inside a lambda")


@pytest.mark.parametrize("spec_path", sorted((Path(__file__).parents[2] / "examples" / "specs").glob("*.toml")),
                         ids=lambda p: p.stem)
def test_dry_run_of_every_example_lands_every_site(project, spec_path):
    spec = project / "examples" / "specs" / spec_path.name
    before = tree_hashes(project)
    code, out = cli("apply", "--dry-run", "--json", spec)
    assert code == 0, out
    assert all(s["lands"] for s in json.loads(out)["sites"])
    assert tree_hashes(project) == before


@pytest.mark.parametrize("guard,end", [("#pragma once\n", ""), ("#ifndef K_CUH\n#define K_CUH\n", "#endif\n")])
def test_the_prefix_goes_inside_a_header_s_guard_so_a_double_include_compiles(tmp_path, guard, end):
    header = f"// k.cuh\n{guard}__global__ void k(float* x) {{\n  x[0] = 1.f;\n}}\n{end}"
    spec = make_project(tmp_path, header, site('stmt = "x[0]"'))
    spec.write_text(spec.read_text().replace("k.cu", "k.cuh"))
    (tmp_path / "k.cu").rename(tmp_path / "k.cuh")
    (tmp_path / "other.cuh").write_text('#pragma once\n#include "k.cuh"\n')
    (tmp_path / "main.cu").write_text('#include "k.cuh"\n#include "other.cuh"\n#include "k.cuh"\n')
    code, out = cli("apply", spec)
    assert code == 0, out
    lines = (tmp_path / "k.cuh").read_text().split("\n")
    assert lines[:len(guard.split("\n"))] == ["// k.cuh", *guard.split("\n")[:-1]]
    assert lines[len(guard.split("\n"))].startswith("// atrex: instrumented from spec s.toml")
    if HAS_NVCC:
        proc = nvcc_compile(tmp_path / "main.cu", tmp_path / "main.o")
        assert proc.returncode == 0, proc.stderr


def test_two_instrumented_headers_share_a_translation_unit(tmp_path):
    """The prefix's static names carry a per-header suffix, so two headers instrumented by two specs
    (one included twice) compile in one .cu; each keeps a source id that source_id_of recomputes."""
    (tmp_path / ".git").mkdir()
    clean = {}
    for name, guard, end in [("a", "#pragma once\n", ""), ("b", "#ifndef B_CUH\n#define B_CUH\n", "#endif\n")]:
        clean[name] = (f"{guard}__global__ void k{name}(float* x) {{\n  x[0] = 1.f;\n}}\n"
                       f"inline void launch_{name}(float* x) {{\n  k{name}<<<1, 32>>>(x);\n}}\n{end}")
        (tmp_path / f"{name}.cuh").write_text(clean[name])
        (tmp_path / f"s{name}.toml").write_text(
            f'version = 1\nname = "s{name}"\nquestion = "q"\nbackend = "cuda"\nsource = "{name}.cuh"\n'
            f'kernel = "k{name}"\n\n' + site('stmt = "x[0]"'))
    (tmp_path / "main.cu").write_text('#include "a.cuh"\n#include "b.cuh"\n#include "a.cuh"\n'
                                      "void run(float* x) { launch_a(x); launch_b(x); }\n")
    for name in "ab":
        code, out = cli("apply", tmp_path / f"s{name}.toml")
        assert code == 0, out
        text = (tmp_path / f"{name}.cuh").read_text()
        sfx = static_suffix(f"{name}.cuh")
        assert len(sfx) == 9 and f"__atrex_cap(__atrex_plan{sfx}," in text
        assert f'__atrex_source_id{sfx}[] = "{source_id_of(text)}"' in text
    assert static_suffix("a.cuh") != static_suffix("b.cuh")
    if HAS_NVCC:
        proc = nvcc_compile(tmp_path / "main.cu", tmp_path / "main.o")
        assert proc.returncode == 0, proc.stderr
    for name in "ab":
        code, out = cli("revert", tmp_path / f"s{name}.toml")
        assert code == 0 and (tmp_path / f"{name}.cuh").read_text() == clean[name], out


@pytest.mark.parametrize("define,decl", [("#define KERNEL_ATTRS __global__ __launch_bounds__(128)\n", "KERNEL_ATTRS"),
                                         ("", "CUTLASS_GLOBAL")])  # defined in a CUTLASS header
def test_a_kernel_declared_through_a_macro_is_found(tmp_path, define, decl):
    source = f"{define}{decl} void k(float* x) {{\n  x[0] = 1.f;\n}}\n"
    spec = make_project(tmp_path, source, site('stmt = "x[0]"'))
    lines = applied(spec, compile_it=decl != "CUTLASS_GLOBAL")
    i = probe_line(lines)
    assert lines[i + 1] == "  x[0] = 1.f;" and lines[i - 3] == f"{decl} void k__atrex(float* x) {{"
    assert f"{decl} void k(float* x) {{\n  x[0] = 1.f;\n}}\n" in "\n".join(lines)  # the kernel itself, untouched


DEFS = """#pragma once
#define DEFINE_SCALE_KERNEL(name, ...) __global__ void name(__VA_ARGS__)
"""
MACRO_KERNEL = """#include "defs.h"

DEFINE_SCALE_KERNEL(scale, float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    x[i] *= 2.f;
  }
}
"""


def test_a_kernel_declared_by_a_macro_defined_elsewhere_is_found_with_declared_by(tmp_path):
    """`MACRO(name, ...) { body }` with MACRO defined in a header the file does not define it in: refused
    with the way out, then found when the spec names the macro (declared_by); compiles; revert exact."""
    from atrex_inject import snapshot
    from atrex_inject.errors import AnchorError

    (tmp_path / ".git").mkdir()
    (tmp_path / "defs.h").write_text(DEFS)
    src = tmp_path / "k.cu"
    src.write_text(MACRO_KERNEL)
    spec = tmp_path / "s.toml"
    body = ('version = 1\nname = "s"\nquestion = "q"\nbackend = "cuda"\nsource = "k.cu"\nkernel = "scale"\n{extra}'
            '[[site]]\nname = "go"\nanchor = { entry = true }\n'
            '[[site]]\nname = "it"\nanchor = { loop = "for (int i" }\nposition = "loop-begin"\n')
    spec.write_text(body.replace("{extra}", ""))
    with pytest.raises(AnchorError, match="declared_by"):
        snapshot.apply(spec)
    assert src.read_text() == MACRO_KERNEL
    spec.write_text(body.replace("{extra}", 'declared_by = "DEFINE_SCALE_KERNEL"\n'))
    res = snapshot.apply(spec)
    text = src.read_text()
    assert [s.source_line for s in res.manifest.sites] == [3, 4]
    assert text.index("__atrex_r0.rec(1u)") > text.index("for (int i = threadIdx.x")  # inside the loop
    compiles_whole(src)
    snapshot.revert(spec)
    assert src.read_text() == MACRO_KERNEL


GOTO_LOOP = """\
__global__ void k(float* x, int n) {
  int i = 0;
again:
  x[i] += 1.f;
  if (++i < n) goto again;
  i = 0;
next: twice: x[i] *= 2.f;
  if (++i < n) goto next;
}
"""


def test_before_a_labelled_statement_goes_below_its_label_so_every_goto_runs_it(tmp_path):
    spec = make_project(tmp_path, GOTO_LOOP, site('stmt = "x[i] += 1.f"'), site('stmt = "x[i] *= 2.f"', name="b"))
    lines = applied(spec)
    i = probe_line(lines)
    assert lines[i - 1:i + 2] == ["again:", "  __atrex_r0.rec(0u);  // atrex: site a (id 0, before)",
                                  "  x[i] += 1.f;"]
    assert lines[probe_line(lines, "b")] == "next: twice: __atrex_r0.rec(1u); /* atrex: site b (id 1, before) */ x[i] *= 2.f;"
    code, out = cli("apply", "--dry-run", "--json", spec)
    assert code == 0 and [x["source_line"] for x in json.loads(out)["sites"]] == [4, 7]
