"""What apply writes compiles, host side included, or apply refuses it (exit 2, nothing written).

Each case is a source or spec shape whose rewrite once compiled to the device only (the recorder
choice builds `-cubin`) or was not compiled at all (an explicit recorder, no nvcc), yet failed in
nvcc's full build: each is now repaired (applied with an explicit recorder, compiled whole for
sm_90a, reverted byte for byte) or refused at the line to change, nothing written. hostcheck.py,
apply's last check where nvcc is available, is tested on a planted fault."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from atrex_inject import hostcheck
from atrex_inject.errors import AtrexError
from atrex_inject.linemap import without_directives
from atrex_inject.spec import load_spec
from conftest import cli, compiles_whole, tree_hashes

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


def project(tmp_path: Path, source: str, sites: str, recorder: str = "global", name: str = "k.cu") -> Path:
    """A project holding `name` and spec s.toml on kernel k with `sites`; returns the spec."""
    (tmp_path / ".git").mkdir(parents=True)
    (tmp_path / name).write_text(source)
    spec = tmp_path / "s.toml"
    spec.write_text(f'version = 1\nname = "s"\nquestion = "q"\nbackend = "cuda"\nsource = "{name}"\nkernel = "k"\n'
                    f'[capture]\nrecorder = "{recorder}"\n\n{sites}')
    return spec


def applied_and_compiled(spec: Path, name: str = "k.cu") -> str:
    """Apply (exit 0), compile the instrumented file whole, revert byte for byte; its text."""
    before = tree_hashes(spec.parent)
    code, out = cli("apply", spec)
    assert code == 0, out
    text = (spec.parent / name).read_text()
    compiles_whole(spec.parent / name)
    code, out = cli("revert", spec)
    assert code == 0, out
    assert {k: v for k, v in tree_hashes(spec.parent).items() if not k.startswith(".atrex")} == \
           {k: v for k, v in before.items() if not k.startswith(".atrex")}
    return text


DEFAULTS = """\
__global__ void k(float* x, int n = 4) {
  if (threadIdx.x < n) x[threadIdx.x] = 1.f;
}
void run(float* p) {
  k<<<1, 32>>>(p);
}
"""


@needs_nvcc
@pytest.mark.parametrize("recorder", ["global", "auto"])
def test_a_launch_leaving_out_a_default_argument_gets_its_statement_twice(tmp_path, recorder):
    """`(on ? k__atrex : k)<<<1, 32>>>(p)` calls a pointer, which has no default arguments: the launch
    is written once with the copy and once as it is, and the session picks."""
    spec = project(tmp_path, DEFAULTS, '[[site]]\nname = "a"\nanchor = { entry = true }\n', recorder)
    lines = without_directives(applied_and_compiled(spec)).split("\n")  # #line aside (linemap.py)
    i = lines.index("  k__atrex<<<1, 32>>>(p);")
    assert lines[i - 1] == "  if (__atrex_cap.on()) {  // atrex: the instrumented copy, its default arguments given as the kernel's"
    assert lines[i + 1:i + 3] == ["  } else {  // atrex: the kernel itself", "  k<<<1, 32>>>(p);"]


@needs_nvcc
def test_apply_refuses_an_instrumented_text_that_does_not_compile_where_the_clean_one_does(tmp_path):
    """SYNTHETIC: a planted fault in the instrumented text (the launch's default argument left out, as
    the conditional launch once did): the check names nvcc's error and the instrumented line."""
    spec = project(tmp_path, DEFAULTS, '[[site]]\nname = "a"\nanchor = { entry = true }\n')
    broken = DEFAULTS.replace("  k<<<1, 32>>>(p);", "  (true ? k : k)<<<1, 32>>>(p);")
    with pytest.raises(AtrexError) as e:
        hostcheck.check(load_spec(spec), DEFAULTS, broken)
    assert e.value.message == ("the instrumented k.cu does not compile while the clean one does: nvcc says error: "
                               "too few arguments to function at line 5 of the instrumented text ('(true ? k : k)"
                               "<<<1, 32>>>(p);'); nothing was written")
    assert e.value.path == str(spec)
    assert hostcheck.check(load_spec(spec), DEFAULTS, DEFAULTS) == []
    # a clean text that does not compile on its own cannot judge the rewrite: a warning, no refusal
    bad = DEFAULTS + "int broken = ;\n"
    [warning] = hostcheck.check(load_spec(spec), bad, broken + "int broken = ;\n")
    assert warning == ("the instrumented source was not compiled as a whole (host side included): the clean "
                       "source does not compile on its own with -O3 -gencode=arch=compute_90a,code=sm_90a -std=c++17 "
                       "(error: expected an expression); pass your build's flags with --nvcc-flag or [build] "
                       "nvcc_flags")


@needs_nvcc
def test_rewrites_that_differ_in_their_source_id_alone_are_compiled_once(tmp_path, monkeypatch):
    """The source id (a digest of the whole instrumented file) changes with any edit outside the
    kernel's text, and no code reads it: the second text is the first's cache entry."""
    spec = project(tmp_path, DEFAULTS, '[[site]]\nname = "a"\nanchor = { entry = true }\n')
    compiles = []
    real = hostcheck._compile
    monkeypatch.setattr(hostcheck, "_compile", lambda *a, **k: compiles.append(a[2]) or real(*a, **k))
    for digest in ("1" * 64, "2" * 64):
        text = f'static const char __atrex_source_id[] = "{digest}";\n{DEFAULTS}'
        assert hostcheck.check(load_spec(spec), DEFAULTS, text) == []
    assert compiles == ["instrumented"]


UNSCOPED_PTX = r"""
__global__ void k(float* x, int n) {
  int v = threadIdx.x;
  asm volatile(".reg .pred p;\n\tsetp.ne.s32 p, %0, 0;\n" :: "r"(v));
#pragma unroll 1
  for (int i = 0; i < n; ++i) {
    asm volatile("{ .reg .b32 t;\n\tmov.b32 t, %0; }\n" :: "r"(i));
    asm volatile("LOOP_TOP:\n" ::);
    x[i] = 1.f;
  }
}
"""


@needs_nvcc
def test_ptx_declared_outside_braces_is_written_once_per_function(tmp_path):
    """A `.reg` (or a label) at the top level of an asm's PTX is declared twice by two copies of it
    in one function: the body is not versioned, the loop not strip-mined, each saying why."""
    spec = project(tmp_path, UNSCOPED_PTX, '[[site]]\nname = "a"\nanchor = { stmt = "x[i] = 1.f" }\nevery = 4\n')
    code, out = cli("apply", spec, "--dry-run", "--json")
    warnings = "\n".join(json.loads(out)["warnings"])
    assert ("kernel k is not versioned (the asm at line 4 declares `.reg .pred p;` outside braces in its PTX, which "
            "two copies in one function would declare twice (put its PTX in `{ }` to allow it))") in warnings
    assert ("because their loop cannot be strip-mined (the asm at line 8 declares `LOOP_TOP:` outside braces in its "
            "PTX") in warnings
    text = applied_and_compiled(spec)
    assert text.count('asm volatile(".reg .pred p;') == 2 and "strip-mined" not in text


@pytest.mark.parametrize("define", ["#define finish() do {} while (0)", "#define on() 1", "#define rec(x) x"])
def test_a_macro_named_as_a_runtime_call_is_refused_at_its_line(tmp_path, define):
    """A function-like macro with the name of a call the inserted code makes (`__atrex_cap.finish()`,
    `atrex::finish(r)`) would be expanded there: refused at the macro's line, nothing written."""
    source = f"{define}\n__global__ void k(float* x) {{\n  x[0] = 1.f;\n}}\nvoid run(float* p) {{ k<<<1, 32>>>(p); }}\n"
    spec = project(tmp_path, source, '[[site]]\nname = "a"\nanchor = { stmt = "x[0] = 1.f" }\n')
    before = tree_hashes(tmp_path)
    code, out = cli("apply", spec, "--json")
    name = define.split()[1].split("(")[0]
    assert code == 2 and json.loads(out) == {
        "error": f"the macro {name!r} defined here has the name of a function of the recorder runtime that the "
                 "inserted code calls: the preprocessor would expand that call",
        "path": str(tmp_path / "k.cu"), "line": 1,
        "hint": f"rename the macro (or #undef {name} where it is no longer used, before the kernel and its launches), "
                "then apply again"}
    assert tree_hashes(tmp_path) == before


EXTERN = """\
__global__ void k(float* x, int n) {
  x[0] = 1.f;
}
void run(float* p) {
  { extern __global__ void k(float* x, int n); k<<<1, 32>>>(p, 2); }
}
"""


@needs_nvcc
def test_a_block_scope_declaration_followed_by_a_launch_gets_its_copy_inline(tmp_path):
    """The copy's declaration after `extern __global__ void k(...);` once ended in a `//` note that
    swallowed the launch after it on that line (and the capture session's closing brace)."""
    spec = project(tmp_path, EXTERN, '[[site]]\nname = "a"\nanchor = { stmt = "x[0] = 1.f" }\n')
    line = next(l for l in applied_and_compiled(spec).split("\n") if "extern" in l)
    assert line.startswith("  { extern __global__ void k(float* x, int n); extern __global__ void k__atrex(float* x, int n); "
                           "/* atrex: k__atrex, the instrumented copy of k, launched in its place only while recording"
                           " */ { atrex::host::Capture __atrex_cap(")


@needs_nvcc
def test_a_launch_above_the_definition_declared_only_in_a_header_is_refused(tmp_path):
    """The copy is declared after the kernel's declarations in this file: a launch above the
    definition that only a header declares would name an undeclared copy. Refused at the launch."""
    source = '#include "k.cuh"\nvoid run(float* p) { k<<<1, 32>>>(p, 2); }\n__global__ void k(float* x, int n) {\n  x[0] = 1.f;\n}\n'
    spec = project(tmp_path, source, '[[site]]\nname = "a"\nanchor = { stmt = "x[0] = 1.f" }\n')
    (tmp_path / "k.cuh").write_text("__global__ void k(float* x, int n);\n")
    before = tree_hashes(tmp_path)
    code, out = cli("apply", spec, "--json")
    assert code == 2 and json.loads(out) == {
        "error": "kernel k is used at line 2 before its definition at line 3, and k.cu declares it nowhere above that "
                 "use (a header does): the instrumented copy would not be declared there",
        "path": str(tmp_path / "k.cu"), "line": 2,
        "hint": "declare the kernel in k.cu above line 2 (its head and `;`), or define it above its launches, then "
                "apply again"}
    assert tree_hashes(tmp_path) == before
    (tmp_path / "k.cu").write_text("__global__ void k(float* x, int n);\n" + source)  # declared here: it compiles
    applied_and_compiled(spec)


SCOPES = """\
__global__ void k(float* x, int n) {
  const int tid = threadIdx.x;
  for (int i = 0; i < n; ++i) {
    float y = x[i];
    x[i] = y * 2.f;
  }
  x[tid] += 1.f;
}
"""


@pytest.mark.parametrize("site,said", [
    ('anchor = { loop = "for" }\nposition = "after"\npayload = "i"',
     "its payload 'i' names 'i', a local declared at k.cu:3, which is not in scope where the payload goes (after line 3)"),
    ('anchor = { stmt = "float y" }\npayload = "y"',
     "its payload 'y' names 'y', a local declared at k.cu:4, which is not in scope where the payload goes (before line 4)"),
    ('anchor = { stmt = "x[i] = y" }\nrole = "predicate"\npredicate = "tid < 4"',
     "its predicate 'tid < 4' names 'tid', a local declared at k.cu:2, which is not in scope where the predicate goes "
     "(the kernel's entry, where the recorders are made)"),
])
def test_a_payload_or_predicate_out_of_its_scope_is_refused_at_the_site(tmp_path, site, said):
    """A payload naming the loop's counter after the loop, or a local before its declaration; a
    predicate (evaluated where the recorders are made) naming a local: refused naming both lines."""
    spec = project(tmp_path, SCOPES, f'[[site]]\nname = "a"\n{site}\n')
    code, out = cli("apply", spec, "--json")
    err = json.loads(out)
    assert code == 2 and err["error"] == f"site 'a': {said}" and (err["path"], err["line"]) == (str(spec), 10)


@needs_nvcc
@pytest.mark.parametrize("site", ['anchor = { loop = "for" }\nposition = "loop-end"\npayload = "i + y"',
                                  'anchor = { stmt = "x[tid]" }\npayload = "tid"',
                                  'anchor = { stmt = "x[i] = y" }\nrole = "predicate"\npredicate = "n > threadIdx.x"'])
def test_a_payload_or_predicate_in_scope_is_applied(tmp_path, site):
    applied_and_compiled(project(tmp_path, SCOPES, f'[[site]]\nname = "a"\n{site}\n'))
