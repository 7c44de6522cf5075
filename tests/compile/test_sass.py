"""SASS check of the probe path: one default probe (lane0, 8-byte event) adds at most 7 instructions and
none of ATOM/RED (atomics) or LDL/STL (local memory). Disassembled with cuobjdump from the
nvidia-cuda-cuobjdump wheel. The count is recorded in bench/RESULTS.md."""
from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import nvcc_compile

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")

KERNEL = """
#include "atrex_timeline.cuh"
__global__ void k(float* x, int n) {
  atrex::Recorder r(0u);
  float a = x[threadIdx.x];
  a = a * 1.5f + 2.0f;
  PROBE
  a = a * 0.5f + 1.0f;
  x[threadIdx.x] = a;
  atrex::finish(r);
}
"""


def _cuobjdump() -> str:
    import nvidia.cu13  # the wheel's namespace

    bin_dir = Path(list(nvidia.cu13.__path__)[0]) / "bin"
    return str(bin_dir / "cuobjdump")


def _sass(tmp: Path, probe: str, kernel: str = KERNEL) -> list[str]:
    src = tmp / f"k{len(probe)}.cu"
    src.write_text(kernel.replace("PROBE", probe))
    cubin = src.with_suffix(".cubin")
    proc = nvcc_compile(src, cubin, ["-cubin", "-O3"])
    assert proc.returncode == 0, proc.stderr
    env = dict(os.environ, PATH=str(Path(_cuobjdump()).parent) + os.pathsep + os.environ["PATH"])
    out = subprocess.run([_cuobjdump(), "-sass", str(cubin)], capture_output=True, text=True, env=env, check=True)
    return [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", out.stdout)]


def probe_delta(tmp: Path, kernel: str = KERNEL, call: str = "rec") -> tuple[int, list[str]]:
    """Marginal SASS of one probe (the recorder method `call`): two probes minus one (the first also
    pays one-off setup). Returns (net instruction count without NOP padding, the instructions the
    second probe adds)."""
    one = collections.Counter(o for o in _sass(tmp, f"r.{call}(3u); a = a * 0.75f + 0.25f;", kernel) if o != "NOP")
    two = collections.Counter(o for o in _sass(tmp, f"r.{call}(3u); a = a * 0.75f + 0.25f; r.{call}(4u);", kernel)
                              if o != "NOP")
    return sum(two.values()) - sum(one.values()), sorted((two - one).elements())


def test_probe_path_instructions(tmp_path):
    net, ops = probe_delta(tmp_path)
    assert not [o for o in ops if o.startswith(("ATOM", "RED", "LDL", "STL"))], ops
    assert any(o.startswith("STG") for o in ops), ops  # the event store itself
    assert any(o.startswith("CS2R") or o.startswith("S2R") for o in ops), ops  # the timer read
    # timer read, compare, 64-bit address (constant-bank base + 32-bit offset: 2), store, increment, tag
    assert 2 <= net <= 7, ops


def test_a_build_is_kept_by_content_and_read_back_without_compiling(tmp_path, monkeypatch):
    """With a build cache (sass.BUILD_CACHE_ENV), a second build of the same source and headers from
    another folder reads the first back without compiling (nvcc only lists the files it reads);
    editing a header beside the source compiles again."""
    from atrex_inject import sass
    cache = tmp_path / "cache"
    monkeypatch.setenv(sass.BUILD_CACHE_ENV, str(cache))
    text = "#include \"h.cuh\"\n__global__ void k(float* x) { x[threadIdx.x] *= SCALE; }\n"
    builds = []
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "h.cuh").write_text("#define SCALE 2.0f\n" if name != "c" else "#define SCALE 3.0f\n")
        (tmp_path / name / "k.cu").write_text(text)
        builds.append(sass.build(tmp_path / name / "k.cu", [str(tmp_path / name)], ["-arch=sm_90a"]))
    assert builds[0] == builds[1] and len(list(cache.glob("build-*.json"))) == 2
    assert builds[2].funcs != builds[0].funcs  # another header: compiled, not read back

    run = sass.subprocess.run

    def no_compile(cmd, *a, **k):
        assert "-cubin" not in cmd, "nvcc compiled"
        return run(cmd, *a, **k)
    monkeypatch.setattr(sass.subprocess, "run", no_compile)
    assert sass.build(tmp_path / "a" / "k.cu", [str(tmp_path / "a")], ["-arch=sm_90a"]) == builds[0]


def test_a_build_whose_line_directives_name_no_file_is_kept_by_content(tmp_path, monkeypatch):
    """An instrumented source names its clean file in `#line` directives, relative to the project's
    root: nvcc -M lists the name though nothing reads it, and from the build's folder it names no
    file. The build is kept all the same and read back from another folder without compiling;
    another name is another build."""
    from atrex_inject import sass
    cache = tmp_path / "cache"
    monkeypatch.setenv(sass.BUILD_CACHE_ENV, str(cache))
    body = "__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n"
    builds = []
    for name, line in (("a", "src/k.cu"), ("b", "src/k.cu"), ("c", "other/k.cu")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "k.cu").write_text(f'#line 1 "{line}"\n{body}')
        builds.append(sass.build(tmp_path / name / "k.cu", [], ["-arch=sm_90a"], cwd=tmp_path / name))
    assert builds[0] == builds[1] and len(list(cache.glob("build-*.json"))) == 2

    run = sass.subprocess.run

    def no_compile(cmd, *a, **k):
        assert "-cubin" not in cmd, "nvcc compiled"
        return run(cmd, *a, **k)
    monkeypatch.setattr(sass.subprocess, "run", no_compile)
    assert sass.build(tmp_path / "c" / "k.cu", [], ["-arch=sm_90a"], cwd=tmp_path / "c") == builds[2]


def test_a_header_compiled_through_a_unit_is_kept_by_the_header_s_content(tmp_path, monkeypatch):
    """A header source is compiled through a one-line unit that includes it from the unit's own
    folder: two headers of one name and other code are two builds, not one read back."""
    from atrex_inject import sass
    monkeypatch.setenv(sass.BUILD_CACHE_ENV, str(tmp_path / "cache"))
    builds = []
    for name, scale in (("a", "2.0f"), ("b", "3.0f")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "k.cuh").write_text(f"__global__ void k(float* x) {{ x[threadIdx.x] *= {scale}; }}\n")
        (tmp_path / name / "k.cu").write_text('#include "k.cuh"\n')
        builds.append(sass.build(tmp_path / name / "k.cu", [], ["-arch=sm_90a"]))
    assert builds[0].funcs != builds[1].funcs


SCALAR_FIRST = {  # a kernel whose first parameter is each kind of scalar: the mangled name's parameters
    "int": "int", "unsigned": "unsigned", "float": "float", "double": "double",  # follow its name directly
    "long_long": "long long", "bool": "bool", "struct": "Params", "char": "char",
}


def test_a_kernel_whose_first_parameter_is_a_scalar_is_found_in_the_sass(tmp_path):
    """`__global__ void k_int(int n, float* x)` mangles as `_Z5k_intiPf`: the name is read from its
    length prefix, so no parameter kind that follows it hides the kernel (nor does a namespace, a
    template or an anonymous namespace)."""
    from atrex_inject import sass
    src = ["struct Params { int n; float a; };"]
    src += [f"__global__ void k_{name}({ty} v, float* x) {{ x[threadIdx.x] += (float)sizeof(v); }}"
            for name, ty in SCALAR_FIRST.items()]
    src += ["namespace outer { template <int N> __global__ void k_tpl(int n, float* x) { x[threadIdx.x] += N; } }",
            "template __global__ void outer::k_tpl<4>(int, float*);",
            "namespace { __global__ void k_anon(long n, float* x) { x[threadIdx.x] += n; } }",
            "void launch(float* x) { k_anon<<<1, 32>>>(1, x); }",
            'extern "C" __global__ void k_c(int n, float* x) { x[threadIdx.x] += n; }']
    (tmp_path / "k.cu").write_text("\n".join(src) + "\n")
    built = sass.build(tmp_path / "k.cu", [], ["-gencode=arch=compute_90a,code=sm_90a"])
    for name in [*SCALAR_FIRST, "anon", "c"]:
        assert any(op.startswith("STG") for _, op, _ in built.kernel(f"k_{name}")[0]), name
    assert built.kernel("outer::k_tpl")[0] == built.kernel("k_tpl")[0]
    with pytest.raises(sass.AtrexError, match="matches 0 functions"):
        built.kernel("k_in")  # a prefix of a kernel's name is not its name


def test_qualified_names_are_read_from_the_mangling():
    from atrex_inject.sass import qualified_name
    assert qualified_name("_Z1kiPf") == ("k",)
    assert qualified_name("_Z1kbPf") == ("k",)
    assert qualified_name("_Z6reduce6ParamsPf") == ("reduce",)
    assert qualified_name("_ZN4slow4stepIfEEvPT_") == ("slow", "step")
    assert qualified_name("_ZN10flashinfer4norm13RMSNormKernelILj8E13__nv_bfloat16EEvPT0_S4_S4_jjjjf") == (
        "flashinfer", "norm", "RMSNormKernel")
    assert qualified_name("_ZN12_GLOBAL__N_16kernelEPf") == ("kernel",)
    assert qualified_name("k_c") is None
    assert qualified_name("_Z12truncated") is None


@pytest.mark.parametrize("mangled, args", [
    ("_Z1kILi128ELb1EEvPf", ["128", "1"]),  # int and bool
    ("_Z1kILin3ELj7ELm9EEvv", ["-3", "7", "9"]),  # a negative int, unsigned, unsigned long
    ("_ZN10flashinfer56BatchQKApplyRotaryPosIdsCosSinCacheHeadParallelismKernelILb0ELj128ELj8ELj16E13__nv_bfloat16iEEvP"
     "T3_S3_S3_S3_PfPT4_jjjjmmmmmmmm", ["0", "128", "8", "16", None, None]),  # types: a struct's name, a builtin
    ("_ZN10flashinfer17MergeStatesKernelILj8E13__nv_bfloat16S1_EEvPT0_PfPT1_S4_jjj", ["8", None, None]),  # a substitution
    ("_ZN4slow4stepIN2ns4HalfEPKfEEvPT_", [None, None]),  # a nested name, a pointer to const
    ("_ZN4slow4stepIfEEvPT_", [None]),
    ("_ZN10flashinfer29SingleDecodeWithKVCacheKernelILNS_15PosEncodingModeE0ELj1EEEvv", None),  # an enum literal
    ("_Z1kIJifEEvv", None),  # a pack
    ("_Z1kiPf", None),  # no template arguments
    ("k_c", None),
])
def test_template_arguments_are_read_from_the_mangling(mangled, args):
    """An instantiation's integer and bool arguments by value, any other argument None, in order;
    None where the reader cannot be sure of every argument's position."""
    from atrex_inject.sass import template_args
    assert template_args(mangled) == args
