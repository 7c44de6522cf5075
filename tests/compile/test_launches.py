"""Every launch of the instrumented kernel is captured or reported as not captured (issue 12):
launch shapes, kernels by qualified name, template arguments, occurrence, and a kernel in a header
launched from a .cu the spec lists as a launcher. Sources in tests/sources/launches/ compile with
nvcc for sm_90a before and after apply; revert restores every file byte for byte."""
from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

from atrex_inject import manifest
from atrex_inject.cuda.source import Kind, cuda_parser, parse_source
from atrex_inject.lark_loader import grammar_text
from atrex_inject.validate import validate_capture
from atrex_inject.linemap import without_directives

from conftest import REPO, cli, compiles_whole, refused, tree_hashes

SOURCES = REPO / "tests" / "sources" / "launches"
FIX = REPO / "tests" / "fixtures" / "h200"


def project(tmp_path: Path, source: str, kernel: str, *files: str, extra: str = "") -> Path:
    """A project holding tests/sources/launches/<files> and a spec on `source`; returns the spec. It
    names its recorder (the global path): how launches are captured does not depend on it, and apply
    then builds no candidates (tests/compile/test_recorder_choice.py is the choice's)."""
    (tmp_path / ".git").mkdir()
    for f in {source, *files}:
        shutil.copy(SOURCES / f, tmp_path / f)
    spec = tmp_path / "s.toml"
    spec.write_text(f'version = 1\nname = "s"\nquestion = "q"\nbackend = "cuda"\nsource = "{source}"\n'
                    f"kernel = {kernel}\n{extra}\n[capture]\nrecorder = \"global\"\n\n"
                    "[[site]]\nname = \"a\"\nanchor = { entry = true }\n")
    return spec


def apply_json(spec: Path) -> dict:
    code, out = cli("apply", spec, "--json")
    assert code == 0, out
    return json.loads(out)


def reverts_exact(spec: Path, before: dict[str, str]) -> None:
    code, out = cli("revert", spec)
    assert code == 0, out
    after = {k: v for k, v in tree_hashes(spec.parent).items() if not k.startswith(".atrex") and not k.endswith(".o")}
    assert after == before


def user_files(root: Path) -> dict[str, str]:
    return {k: v for k, v in tree_hashes(root).items() if not k.startswith(".atrex") and not k.endswith(".o")}


def around(text: str, needle: str) -> tuple[str, str, str]:
    """(line before, the line holding needle, line after) of the instrumented text, its #line
    directives aside (linemap.py)."""
    lines = without_directives(text).split("\n")
    i = next(i for i, l in enumerate(lines) if needle in l)
    return lines[i - 1].strip(), lines[i].strip(), lines[i + 1].strip()


def test_every_launch_shape_is_captured_or_reported(tmp_path):
    spec = project(tmp_path, "shapes.cu", '"scale"')
    before = user_files(tmp_path)
    r = apply_json(spec)
    src = tmp_path / "shapes.cu"
    text = src.read_text()
    compiles_whole(src)
    got = [(l["line"], l["via"], l["shape"], l["macro"]) for l in r["launches"]]
    assert got == [(38, "cudaLaunchKernelEx", "return", None), (45, "cudaLaunchKernelEx", "statement", "CHECK"),
                   (46, "cudaLaunchKernelEx", "declaration", None), (49, "cudaLaunchKernel", "statement", "CHECK"),
                   (54, "<<<>>>", "statement", None), (55, "<<<>>>", "statement", "CUDA_CHECK"),
                   (56, "<<<>>>", "statement", None), (58, "<<<>>>", "statement", None),
                   (59, "<<<>>>", "statement", None), (64, "<<<>>>", "return", None)]
    assert [l["grid"] for l in r["launches"]][3:5] == ["dim3(2)", "dim3(gx, 1)"]
    assert r["launches"][4]["stream"] == "stream"
    missed = [(n["line"], n["via"]) for n in r["not_captured"]]
    assert missed == [(67, "cudaLaunchKernel"), (68, "cuLaunchKernel"), (69, "macro LAUNCH_SCALE"), (70, "pointer")]
    assert "inside the header of `if (...)`" in r["not_captured"][0]["reason"]
    assert "macro LAUNCH_SCALE (defined at line 17)" in r["not_captured"][2]["reason"]
    # the error-check macro is bracketed from outside, the session finished after it
    assert around(text, "CHECK(cudaLaunchKernelEx(")[0].startswith("{ atrex::host::Capture __atrex_cap(__atrex_plan, ")
    assert around(text, "CHECK(cudaLaunchKernelEx(")[2].startswith("__atrex_cap.finish(); }")
    # a returned launch: no finish() after the return (the session's destructor finishes it)
    b, _, a = around(text, "return cudaLaunchKernelEx(")
    assert b.startswith("{ atrex::host::Capture") and a.startswith("}  // atrex: end of capture session (the return")
    # a declaration stays in its scope: no braces, a session of its own name
    b, _, a = around(text, "cudaError_t err = cudaLaunchKernelEx(")
    assert b.startswith("atrex::host::Capture __atrex_cap2(") and a.startswith("__atrex_cap2.finish();")
    assert "if (gx > 1) { atrex::host::Capture __atrex_cap(" in text
    _, line, _ = around(text, "void run_void_return")
    assert line.index("{ atrex::host::Capture") < line.index(
        "return (__atrex_cap.on() ? scale__atrex<float, 4> : scale<float, 4>)<<<1, 32>>>(p); }")
    # each launch picks the instrumented copy while its session records, whatever names the kernel
    assert "CHECK(cudaLaunchKernelEx(&cfg, (__atrex_cap.on() ? scale__atrex<float, 4> : scale<float, 4>), p));" in text
    assert "err = cudaLaunchKernelEx(&cfg, (__atrex_cap2.on() ? scale__atrex<float, 4> : scale<float, 4>), p);" in text
    assert "cudaLaunchKernel((void*)(__atrex_cap.on() ? scale__atrex<float, 4> : scale<float, 4>), dim3(2)" in text
    assert "(__atrex_cap.on() ? scale__atrex<float, (N >> 1)> : scale<float, (N >> 1)>)<<<dim3(gx, 1)" in text
    assert text.count("__atrex_cap.on() ? scale__atrex<") + text.count("__atrex_cap2.on() ? scale__atrex<") == 10
    assert "(void)cudaFuncSetAttribute(scale__atrex<float, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 0);" in text
    code, out = cli("status", spec)
    assert "launches: 10 captured, 4 not captured" in out and "NOT captured  shapes.cu:68 cuLaunchKernel" in out
    reverts_exact(spec, before)
    compiles_whole(src)


def test_apply_prints_each_launch_not_captured_and_what_to_do(tmp_path):
    spec = project(tmp_path, "shapes.cu", '"scale"')
    code, out = cli("apply", spec)
    assert code == 0, out
    assert "launches: 10 captured, 4 not captured" in out
    assert "captured      shapes.cu:45 cudaLaunchKernelEx (statement in CHECK(...))" in out
    assert re.search(r"NOT captured  shapes.cu:67 cudaLaunchKernel: the launch is inside the header of `if \(\.\.\.\)`"
                     r"\n +to capture it: make the launch a statement of its own", out)


def test_template_arguments_in_the_kernel_name_choose_the_launches(tmp_path):
    """`scale<float, 4>` captures only launches written with those arguments; the others are listed."""
    spec = project(tmp_path, "shapes.cu", '"scale<float, 4>"')
    r = apply_json(spec)
    assert 54 not in [l["line"] for l in r["launches"]] and len(r["launches"]) == 9
    n = next(n for n in r["not_captured"] if n["line"] == 54)
    assert "scale<float,(N>>1)>" in n["reason"] and "not the spec's <float,4>" in n["reason"]
    compiles_whole(tmp_path / "shapes.cu")


def test_a_launch_whose_template_arguments_end_in_triple_angle_is_captured(tmp_path):
    """`tagged<4, Tag<Tag<int>>><<<...>>>`: the lexer's `>>>` closes no launch there."""
    spec = project(tmp_path, "shapes.cu", '"tagged"')
    before = user_files(tmp_path)
    r = apply_json(spec)
    assert [(l["line"], l["via"]) for l in r["launches"]] == [(61, "<<<>>>")]
    text = (tmp_path / "shapes.cu").read_text()
    b, line, _ = around(text, "tagged__atrex<4, Tag<Tag<int>>>")
    assert b.startswith("{ atrex::host::Capture") and line == (
        "(__atrex_cap.on() ? tagged__atrex<4, Tag<Tag<int>>> : tagged<4, Tag<Tag<int>>>)<<<1, 32>>>(p);")
    compiles_whole(tmp_path / "shapes.cu")
    reverts_exact(spec, before)


@pytest.mark.parametrize("kernel,lines", [("slow::step", [13, 17]), ("fast::step", [12, 21]),
                                          ("::slow::step", [13, 17])])
def test_two_kernels_of_one_name_are_told_apart_by_namespace(tmp_path, kernel, lines):
    spec = project(tmp_path, "twosteps.cu", f'"{kernel}"')
    before = user_files(tmp_path)
    r = apply_json(spec)
    assert [l["line"] for l in r["launches"]] == lines and r["not_captured"] == []
    text = (tmp_path / "twosteps.cu").read_text()
    ns = {n: text.split(f"namespace {n} {{")[1].split("}  // namespace")[0] for n in ("fast", "slow")}
    chosen = kernel.strip(":").split("::")[0]
    assert "atrex: site a" in ns[chosen] and "atrex:" not in ns[{"fast": "slow", "slow": "fast"}[chosen]]
    compiles_whole(tmp_path / "twosteps.cu")
    reverts_exact(spec, before)


def test_an_ambiguous_kernel_name_is_refused_listing_the_candidates(tmp_path):
    spec = project(tmp_path, "twosteps.cu", '"step"')
    refused(spec, "s.toml:6: kernel 'step' names 2 __global__ definitions in twosteps.cu: fast::step (line 5), "
                  "slow::step (line 8)", 'write the qualified name', "occurrence")


IF_ELSE = ("#if USE_FAST\n__global__ void k(float* x) { x[0] = 1.f; }\n#else\n"
           "__global__ void k(float* x) { x[0] = 2.f; }\n#endif\nvoid run(float* x) { k<<<1, 32>>>(x); }\n")


def test_occurrence_chooses_one_of_several_definitions(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.cu").write_text(IF_ELSE)
    shutil.copytree(tmp_path / "src", tmp_path / "p")
    (tmp_path / "p" / ".git").mkdir()
    spec = tmp_path / "p" / "s.toml"
    spec.write_text('version = 1\nname = "s"\nquestion = "q"\nbackend = "cuda"\nsource = "k.cu"\n'
                    'kernel = { name = "k", occurrence = 2 }\n[[site]]\nname = "a"\nanchor = { entry = true }\n')
    r = apply_json(spec)
    text = (tmp_path / "p" / "k.cu").read_text()
    assert "x[0] = 1.f; }\n#else" in text and text.index("site a") > text.index("#else")
    assert any("k has 2 definitions (lines 2, 4)" in w for w in r["warnings"])
    assert [l["line"] for l in r["launches"]] == [6]
    code, _ = cli("revert", spec)
    assert code == 0 and (tmp_path / "p" / "k.cu").read_text() == IF_ELSE
    spec.write_text(spec.read_text().replace("occurrence = 2", "occurrence = 3"))
    refused(spec, "kernel 'k': occurrence 3 but 2 definition(s) match in k.cu", "1 to 2")


def test_a_specialization_is_chosen_by_its_template_arguments(tmp_path):
    source = ("template <int M, int N> __global__ void gemm(float* x) { x[0] = M; }\n"
              "template <> __global__ void gemm<128, 64>(float* x) { x[0] = -1.f; }\n"
              "void run(float* x) {\n  gemm<128,64><<<1, 32>>>(x);\n  gemm<64, 32><<<1, 32>>>(x);\n}\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / "g.cu").write_text(source)
    spec = tmp_path / "s.toml"
    spec.write_text('version = 1\nname = "s"\nquestion = "q"\nbackend = "cuda"\nsource = "g.cu"\n'
                    'kernel = "gemm<128, 64>"\n[[site]]\nname = "a"\nanchor = { entry = true }\n')
    r = apply_json(spec)
    text = (tmp_path / "g.cu").read_text()
    assert "template <> __global__ void gemm<128, 64>(float* x) { x[0] = -1.f; }\n" in text  # left as it was
    assert text.index("site a") > text.index("\n__global__ void gemm__atrex(float* x) {")  # a plain kernel
    assert "(__atrex_cap.on() ? gemm__atrex : gemm<128,64>)<<<1, 32>>>(x);" in text
    assert [l["line"] for l in r["launches"]] == [4]
    assert [n["line"] for n in r["not_captured"]] == [5]
    compiles_whole(tmp_path / "g.cu")
    cli("revert", spec)
    spec.write_text(spec.read_text().replace('"gemm<128, 64>"', '"gemm<1, 2>"'))
    r = apply_json(spec)  # the primary template, launches with <1, 2> only: none here
    assert r["launches"] == [] and [n["line"] for n in r["not_captured"]] == [4, 5]
    assert any("no launch of gemm is captured" in w for w in r["warnings"])


def test_a_kernel_in_a_header_is_captured_through_its_launchers(tmp_path):
    """saxpy.cuh holds the kernel, main.cu launches it with CUDA_CHECK(cudaLaunchKernelEx(...)):
    without launchers apply says that nothing is captured and how to fix it; with them both files
    are rewritten, main.cu compiles, and revert restores both byte for byte."""
    spec = project(tmp_path, "saxpy.cuh", '"ops::saxpy"', "main.cu")
    r = apply_json(spec)
    assert r["launches"] == [] and any("no launch of ops::saxpy is captured in saxpy.cuh" in w
                                       and 'launchers = ["main.cu"]' in w for w in r["warnings"])
    assert cli("revert", spec)[0] == 0
    spec.write_text(spec.read_text().replace('kernel = "ops::saxpy"\n',
                                             'kernel = "ops::saxpy"\nlaunchers = ["main.cu"]\n'))
    before = user_files(tmp_path)
    r = apply_json(spec)
    assert [(l["file"], l["line"], l["macro"]) for l in r["launches"]] == [("main.cu", 22, "CUDA_CHECK")]
    assert r["launchers"] == ["main.cu"] and r["warnings"] == []
    main = (tmp_path / "main.cu").read_text()
    b, _, a = around(main, "CUDA_CHECK(cudaLaunchKernelEx(")
    assert re.match(r"\{ atrex::host::Capture __atrex_cap\(__atrex_plan_[0-9a-f]{8}, ", b) and a.startswith(
        "__atrex_cap.finish(); }")
    compiles_whole(tmp_path / "main.cu")
    m = json.loads((tmp_path / ".atrex" / "s" / "manifest.json").read_text())
    assert [e["path"] for e in m["launchers"]] == ["main.cu"]
    code, out = cli("diff", spec)
    assert "diff --git a/saxpy.cuh b/saxpy.cuh" in out and "diff --git a/main.cu b/main.cu" in out
    code, out = cli("status", spec, "--json")
    assert json.loads(out)["launchers"] == [{"path": "main.cu", "state": "instrumented"}]
    # an edit to the launcher: revert refuses and restores nothing, then restores both once it is undone
    edited = main.replace("std::printf(\"done\\n\");", "std::printf(\"done!\\n\");")
    (tmp_path / "main.cu").write_text(edited)
    code, out = cli("revert", spec)
    assert code == 2 and "main.cu changed since apply" in out and "nothing was restored" in out
    assert "atrex: instrumented" in (tmp_path / "saxpy.cuh").read_text()
    (tmp_path / "main.cu").write_text(main)
    code, out = cli("revert", spec)
    assert code == 0 and "restored saxpy.cuh, main.cu" in out
    assert user_files(tmp_path) == before


def test_launches_in_two_translation_units_are_refused(tmp_path):
    spec = project(tmp_path, "saxpy.cuh", '"ops::saxpy"', "main.cu", extra='launchers = ["main.cu", "main2.cu"]\n')
    shutil.copy(tmp_path / "main.cu", tmp_path / "main2.cu")
    refused(spec, "s.toml:7: launches of ops::saxpy would be captured in 2 translation units (main.cu, main2.cu)",
            "list one .cu file in launchers")


@pytest.mark.parametrize("line,needles", [
    ('launchers = ["saxpy.cuh"]', ["s.toml:7", "launcher 'saxpy.cuh' is the spec's source"]),
    ('launchers = ["main.cu", "main.cu"]', ["s.toml:7", "launcher 'main.cu' is listed twice"]),
    ("launchers = [3]", ["s.toml:7", "launchers must list file paths"]),
    ('launchers = ["nowhere.cu"]', ["s.toml:7", "source file 'nowhere.cu' does not exist"]),
    ('kernel = "gemm<"', ["s.toml:6", "kernel 'gemm<' is not a kernel name"]),
    ('kernel = "a::"', ["s.toml:6", "is not a kernel name"]),
    ('kernel = { name = "k", nth = 2 }', ["s.toml:6", "unknown key 'nth'"]),
    ('kernel = { name = "k", occurrence = 0 }', ["s.toml:6", "between 1 and"]),
    ("kernel = 3", ["s.toml:6", "kernel must be a name or a table"]),
])
def test_bad_kernel_and_launchers_keys_are_refused_at_their_line(tmp_path, line, needles):
    spec = project(tmp_path, "saxpy.cuh", '"ops::saxpy"', "main.cu")
    text = spec.read_text()
    text = re.sub(r"^kernel = .*$", line, text, flags=re.M) if line.startswith("kernel") else text.replace(
        'kernel = "ops::saxpy"\n', f'kernel = "ops::saxpy"\n{line}\n')
    spec.write_text(text)
    refused(spec, *needles)


def test_validate_notes_the_launches_not_captured():
    m = manifest.load(FIX / "gemm_mma" / "manifest.json")
    assert "launch or may launch" not in " ".join(validate_capture(FIX / "gemm_mma", m)["notes"])
    m = dataclasses.replace(m, not_captured=({"file": "gemm_mma.cu", "line": 140, "via": "cuLaunchKernel",
                                              "reason": "a driver launch", "hint": "h"},))
    notes = validate_capture(FIX / "gemm_mma", m)["notes"]
    assert any("1 place(s) in the sources launch or may launch gemm_bf16 without a capture session" in n
               and "gemm_mma.cu:140 cuLaunchKernel (a driver launch)" in n for n in notes)


def test_statement_kinds_are_the_grammars_rule_names():
    """Renaming a statement rule in grammars/cuda.lark must fail here, not silently in three modules."""
    rules = set(re.findall(r"^(\w+):", grammar_text("cuda.lark"), re.M))
    assert {k.value for k in Kind} <= rules
    kinds = {s.kind for s in parse_source(IF_ELSE).kernels[0].body.walk()}
    assert kinds <= set(Kind) and Kind.BLOCK in kinds


def test_the_launch_functions_are_terminals_of_the_grammar():
    toks = list(cuda_parser().lex("cudaLaunchKernelEx cudaLaunchKernel cuLaunchKernel cudaLaunchKernelExtra"))
    assert [t.type for t in toks] == ["LAUNCH_EX", "LAUNCH_FUNC", "CU_LAUNCH", "WORD"]


def test_a_failed_launcher_write_gives_every_file_its_clean_bytes_back(tmp_path, monkeypatch):
    """apply writes the source, then the launcher: when the launcher's write fails, the source
    (already instrumented) is written back clean and the workspace removed."""
    from atrex_inject import snapshot
    spec = project(tmp_path, "saxpy.cuh", '"ops::saxpy"', "main.cu", extra='launchers = ["main.cu"]\n')
    before = user_files(tmp_path)
    real = snapshot.write_atomic

    def failing(path, data, root=None):
        if Path(path).name == "main.cu" and ".atrex" not in Path(path).parts:
            raise OSError(28, "No space left on device")
        return real(path, data, root)

    monkeypatch.setattr(snapshot, "write_atomic", failing)
    code, out = cli("apply", spec)
    assert code == 2 and "apply failed while writing main.cu" in out and "saxpy.cuh, main.cu are unchanged" in out
    assert user_files(tmp_path) == before and not (tmp_path / ".atrex" / "s").exists()


def test_dry_run_lists_the_launches_and_writes_nothing(tmp_path):
    spec = project(tmp_path, "saxpy.cuh", '"ops::saxpy"', "main.cu", extra='launchers = ["main.cu"]\n')
    before = tree_hashes(tmp_path)
    code, out = cli("apply", "--dry-run", spec)
    assert code == 0 and "captured      main.cu:22 cudaLaunchKernelEx (statement in CUDA_CHECK(...))" in out
    assert tree_hashes(tmp_path) == before


MACRO_KERNEL = """\
#include <cstdio>
#define DEFINE_K(name, ...) \\
  template <__VA_ARGS__>    \\
  __global__ void name(float* x)
#define FATAL printf("unsupported\\n");
DEFINE_K(k, int N) {
#if defined(SUPPORTED)
  x[0] = N;
#else
  FATAL
#endif
}
void run(float* x) { k<4><<<1, 32>>>(x); }
"""


def test_a_kernel_declared_by_a_macro_the_file_defines_takes_the_name_from_its_argument(tmp_path):
    """`DEFINE_K(k, int N) { ... }` with DEFINE_K defined here with __global__ (flash-attention's
    pattern): the kernel is `k`, found without declared_by; a macro statement right before `#endif`
    and `}` ends its statement."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "m.cu").write_text(MACRO_KERNEL)
    spec = tmp_path / "s.toml"
    spec.write_text('version = 1\nname = "s"\nquestion = "q"\nbackend = "cuda"\nsource = "m.cu"\nkernel = "k"\n'
                    '[[site]]\nname = "a"\nanchor = { stmt = "FATAL" }\n')
    r = apply_json(spec)
    assert [s["source_line"] for s in r["sites"]] == [10] and [l["line"] for l in r["launches"]] == [13]
    text = (tmp_path / "m.cu").read_text()
    assert "DEFINE_K(k__atrex, int N) {" in text and "(__atrex_cap.on() ? k__atrex<4> : k<4>)<<<1, 32>>>(x);" in text
    compiles_whole(tmp_path / "m.cu")
    assert cli("revert", spec)[0] == 0 and (tmp_path / "m.cu").read_text() == MACRO_KERNEL


def test_launches_through_a_local_alias_are_captured_and_attribute_calls_repeated_for_the_copy(tmp_path):
    """flash-attention/flashinfer style: `auto kernel = &attend<T, kThreads>;`, its
    cudaFuncSetAttribute (under an unbraced if), then `kernel<<<...>>>` and
    cudaLaunchKernel((void*)kernel, ...). The launches pick the copy named as the alias's
    initializer names the kernel; each attribute call is repeated for the copy (it launches with
    more than 48 KiB of dynamic shared memory otherwise); passing the alias on is reported."""
    spec = project(tmp_path, "alias.cu", '"attend"')
    before = user_files(tmp_path)
    r = apply_json(spec)
    assert [(l["line"], l["via"], l["alias"]) for l in r["launches"]] == [(26, "<<<>>>", "kernel"),
                                                                          (28, "cudaLaunchKernel", "kernel")]
    assert [(n["line"], n["via"]) for n in r["not_captured"]] == [(35, "pointer")]
    assert "held in `kernel` (line 34)" in r["not_captured"][0]["reason"]
    text = (tmp_path / "alias.cu").read_text()
    assert ("(__atrex_cap.on() ? attend__atrex<T, kThreads> : kernel)<<<(n + kThreads - 1) / kThreads, kThreads, "
            "smem, stream>>>(out, in, n);") in text
    assert "cudaLaunchKernel((void*)(__atrex_cap.on() ? attend__atrex<T, kThreads> : kernel), dim3(1)" in text
    b, line, a = around(text, "CUDA_CALL(cudaFuncSetAttribute(kernel,")
    assert b.startswith("{  // atrex:") and a.startswith(
        "(void)cudaFuncSetAttribute(attend__atrex<T, kThreads>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem); }")
    assert around(text, "CUDA_CALL(cudaFuncSetAttribute(attend<float, 128>")[2].startswith(
        "(void)cudaFuncSetAttribute(attend__atrex<float, 128>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);")
    compiles_whole(tmp_path / "alias.cu")
    reverts_exact(spec, before)


SWITCHED = """\
#include <cuda_runtime.h>
#define SWITCH(cond, NAME, ...) \\
  if (cond) { constexpr bool NAME = true; __VA_ARGS__ } else { constexpr bool NAME = false; __VA_ARGS__ }
template <bool B> __global__ void k(float* x) { x[threadIdx.x] = B; }
void run(float* x, bool flag, size_t smem) {
  SWITCH(flag, kFlag,
         auto kernel = k<kFlag>;
         cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
         kernel<<<1, 32, smem>>>(x););
}
void run_picked(float* x, bool flag) {
  auto kernel = k<true>;
  if (!flag) kernel = k<false>;
  kernel<<<1, 32>>>(x);
}
"""


def test_a_launch_ending_a_statement_in_a_macro_argument_and_a_reassigned_alias(tmp_path):
    """TransformerEngine's SWITCH macros take statements as arguments: the launch there is
    bracketed inside the argument. A variable assigned twice may hold either instantiation at the
    launch: that launch is reported, not captured with a guess."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "t.cu").write_text(SWITCHED)
    spec = tmp_path / "s.toml"
    spec.write_text('version = 1\nname = "s"\nquestion = "q"\nbackend = "cuda"\nsource = "t.cu"\nkernel = "k"\n'
                    '[[site]]\nname = "a"\nanchor = { entry = true }\n')
    r = apply_json(spec)
    assert [(l["line"], l["alias"]) for l in r["launches"]] == [(9, "kernel")]
    assert [(n["line"], n["via"]) for n in r["not_captured"]] == [(13, "pointer"), (14, "<<<>>>")]
    assert "`kernel` holds k but is assigned again (line 13)" in r["not_captured"][1]["reason"]
    text = (tmp_path / "t.cu").read_text()
    assert ("{ atrex::host::Capture __atrex_cap(__atrex_plan, dim3(1), dim3(32), 0); /* atrex: capture session for "
            "this launch of k */ (__atrex_cap.on() ? k__atrex<kFlag> : kernel)<<<1, 32, smem>>>(x); "
            "__atrex_cap.finish(); } /* atrex: end of capture session */);") in text
    assert "(void)cudaFuncSetAttribute(k__atrex<kFlag>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);" in text
    compiles_whole(tmp_path / "t.cu")
    assert cli("revert", spec)[0] == 0 and (tmp_path / "t.cu").read_text() == SWITCHED


DEDUCED = """\
#include <cuda_runtime.h>
template <typename T, typename U>
__global__ void axpy(T a, const U* x, U* y) { y[threadIdx.x] += a * x[threadIdx.x]; }
void run(float a, const float* x, float* y, cudaStream_t s) {
  axpy<<<1, 32, 0, s>>>
      (a, x,
       y);
  if (a > 0) axpy<<<1, 32>>>(a, x, y);
}
"""


def test_a_template_kernel_launched_with_deduced_arguments_gets_its_statement_twice(tmp_path):
    """`(c.on() ? axpy__atrex : axpy)` names no instantiation (CuTe's tutorials launch this way), so
    the statement is written once with the copy, once as it is, and the session picks."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "d.cu").write_text(DEDUCED)
    spec = tmp_path / "s.toml"
    spec.write_text('version = 1\nname = "s"\nquestion = "q"\nbackend = "cuda"\nsource = "d.cu"\nkernel = "axpy"\n'
                    '[[site]]\nname = "a"\nanchor = { entry = true }\n')
    r = apply_json(spec)
    assert [(l["line"], l["deduced"]) for l in r["launches"]] == [(5, True), (8, True)]
    lines = without_directives((tmp_path / "d.cu").read_text()).split("\n")
    i = lines.index("  axpy__atrex<<<1, 32, 0, s>>>")
    assert lines[i - 1].startswith("  if (__atrex_cap.on()) {  // atrex:") and lines[i + 1:i + 4] == [
        "      (a, x,", "       y);", "  } else {  // atrex: the kernel itself"]
    assert lines[i + 4:i + 7] == ["  axpy<<<1, 32, 0, s>>>", "      (a, x,", "       y);"]
    assert "axpy__atrex<<<1, 32>>>(a, x, y); } else { axpy<<<1, 32>>>(a, x, y); } __atrex_cap.finish(); }" in lines[i + 9]
    compiles_whole(tmp_path / "d.cu")
    assert cli("revert", spec)[0] == 0 and (tmp_path / "d.cu").read_text() == DEDUCED


def test_a_kernel_declared_before_its_definition_gets_a_declared_copy_that_compiles_whole(tmp_path):
    """The copy is declared after the kernel's declaration, its note a comment (the `//` was once
    dropped, leaving prose after the semicolon that nvcc refused); with a sampled loop site and a
    launch between declaration and definition, the instrumented file compiles and reverts exactly."""
    spec = project(tmp_path, "declared.cu", '"step"', extra=(
        '[[site]]\nname = "it"\nanchor = { loop = "for (int i" }\nposition = "loop-begin"\nevery = 4\n'
        "ctas = { stride = 8 }"))
    before = user_files(tmp_path)
    apply_json(spec)
    src = tmp_path / "declared.cu"
    compiles_whole(src)
    assert ("__global__ void step__atrex(float* x, int n);  // atrex: step__atrex, the instrumented copy of step, "
            "launched in its place only while recording") in src.read_text().split("\n")
    reverts_exact(spec, before)


@pytest.mark.parametrize("source, kernel, why", [
    ("alias.cu", "attend", "attend declares `extern __shared__` (line 13)"),
    ("shapes.cu", "scale", "the program sets scale's attributes at run time (shapes.cu:71)"),
    ("shapes.cu", "tagged", None)])
def test_the_rewrite_says_when_a_kernels_occupancy_is_sized_at_launch(tmp_path, source, kernel, why):
    """Dynamic shared memory (`extern __shared__`) or attributes set at run time make how many CTAs
    an SM holds the launch's: the copy's facts say why, and the SASS judgment then doubts static
    shared memory a copy adds (tests/compile/test_recorder_choice.py)."""
    from atrex_inject.cuda.rewrite import rewrite
    from atrex_inject.plan import make_plan
    from atrex_inject.spec import load_spec

    spec = load_spec(project(tmp_path, source, f'"{kernel}"'))
    assert rewrite(make_plan(spec), (tmp_path / source).read_text()).copy.sized_at_launch == why
