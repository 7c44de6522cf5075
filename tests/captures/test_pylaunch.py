"""Launches from Python captured with no change to the program (atrex_inject/cuda/python/hooks/,
docs/launches.md). Under `atrex-inject capture` every Python process of the program gets the
hooks; each launch API is patched as it is imported; compiling ties each image and module to the
CUDA text it came from; a launch of the kernel that cannot be captured runs the clean kernel and
is counted, with why, in the process's ledger, which capture reports and validate notes.

No GPU here: the hooks, NVRTC and cuda.core's compiler are real and run in child processes (the
patches are process-wide); a launch stops where a driver is needed, and is reported as not
captured. scripts/gpu-pylaunch.sh captures each path on the H200; the fixtures it wrote are
validated at the end of this file.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from atrex_inject import snapshot
from atrex_inject.manifest import load as load_manifest
from atrex_inject.cuda.python.capture import copy_expression, kernel_copy
from atrex_inject.cuda.python.hooks import child_env, ledger
from atrex_inject.cuda.python.hooks.session import Origin, Session
from conftest import REPO, cli

FIX = REPO / "tests" / "fixtures" / "h200" / "pylaunch"
PYLAUNCH_FIXTURES = {"rmsnorm_nvrtc": "cuda.bindings", "absmax_cupy": "cupy"}  # folder -> the API that launched it
needs_nvrtc = pytest.mark.skipif(importlib.util.find_spec("cuda") is None
                                 or importlib.util.find_spec("cuda.bindings") is None, reason="cuda-python not installed")

TEMPLATE_PY = '''"""A template kernel compiled by NVRTC or cuda.core with a name expression per instantiation."""
SRC = r"""
template <typename T>
__global__ void twice(T* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] + x[i];
}
"""
'''

TEMPLATE_SPEC = """version = 1
name = "twice"
question = "q"
backend = "cuda"
source = "kernel.py"
cuda_string = "SRC"
kernel = "twice"

[[site]]
name = "start"
anchor = { entry = true }

[[site]]
name = "done"
anchor = { exit = true }
"""


def string_of(path: Path, variable: str) -> str:
    """The value of `variable` in a Python file, as Python reads it."""
    (value,) = [n.value.value for n in ast.walk(ast.parse(path.read_text()))
                if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == variable]
    return value


def applied(project: Path, spec: str) -> Path:
    """Apply an example spec in the throwaway project; its manifest's path."""
    snapshot.apply(project / "examples" / "specs" / f"{spec}.toml")
    return project / ".atrex" / spec / "manifest.json"


def template_project(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir(parents=True)
    (tmp_path / "kernel.py").write_text(TEMPLATE_PY)
    (tmp_path / "twice.toml").write_text(TEMPLATE_SPEC)
    snapshot.apply(tmp_path / "twice.toml")
    return tmp_path / ".atrex" / "twice" / "manifest.json"


def hooked(code: str, manifest: Path | None, out: Path | None, *args: str, extra_path: str = ""
           ) -> subprocess.CompletedProcess:
    """Run `code ARGS` in a Python process started as `atrex-inject capture` starts the program's."""
    env = {k: v for k, v in os.environ.items() if k not in ("ATREX_TIMELINE_OUT", "ATREX_MANIFEST")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path, str(REPO), env.get("PYTHONPATH", "")) if p)
    if out is not None:
        env.update(ATREX_TIMELINE_OUT=str(out), ATREX_MANIFEST=str(manifest))
    return subprocess.run([sys.executable, "-c", code, *args], env=child_env(env), capture_output=True, text=True,
                          timeout=120)


def last_json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


PATCHED = '''
import json
from cuda.bindings.driver import cuLaunchKernel, cuLaunchKernelEx
from cuda.bindings import driver, nvrtc
import cuda.core
ours = lambda f: "atrex_inject" in getattr(getattr(f, "__code__", None), "co_filename", "")
print(json.dumps({"from_import": ours(cuLaunchKernel), "ex": ours(cuLaunchKernelEx),
                  "cooperative": ours(driver.cuLaunchCooperativeKernel), "load": ours(driver.cuModuleLoadData),
                  "nvrtc": ours(nvrtc.nvrtcGetCUBIN), "core_launch": ours(cuda.core.launch),
                  "core_program": ours(cuda.core.Program.compile)}))
'''


@needs_nvrtc
def test_each_api_is_patched_as_it_is_imported(project, tmp_path):
    """Under capture, importing the APIs gives the hooks, even through `from ... import`; the
    process's ledger names what it hooked. With probes off (no ATREX_TIMELINE_OUT) nothing is
    patched and no ledger is written."""
    pytest.importorskip("cuda.core")
    manifest = applied(project, "rmsnorm_nvrtc")
    got = last_json(hooked(PATCHED, manifest, tmp_path / "cap"))
    assert got == dict.fromkeys(got, True) and len(got) == 7
    (rec,) = ledger.read(tmp_path / "cap")
    assert {"cuda.bindings.driver", "cuda.bindings.nvrtc", "cuda.core"} <= set(rec["hooked"])
    assert rec["failed_hooks"] == [] and rec["launches"] == 0 and rec["kernel"] == "rmsnorm_rows"
    off = last_json(hooked(PATCHED, None, None))
    assert off == dict.fromkeys(off, False)


@needs_nvrtc
def test_the_programs_own_sitecustomize_still_runs(project, tmp_path):
    """The hooks come from a sitecustomize.py first on PYTHONPATH; the one it hides runs after it."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITECUSTOMIZE = True\n")
    code = ("import builtins, json\nfrom cuda.bindings import driver\n"
            "print(json.dumps([getattr(builtins, 'USER_SITECUSTOMIZE', False), hasattr(driver.cuLaunchKernel, "
            "'__wrapped__')]))")
    assert last_json(hooked(code, applied(project, "rmsnorm_nvrtc"), tmp_path / "cap", extra_path=str(user))) == [True, True]


NVRTC_TRACE = '''
import json, sys
from pathlib import Path
from cuda.bindings import nvrtc
from atrex_inject.cuda.python.capture import kernel_copy
from atrex_inject.cuda.python.hooks.driver import image_origin
from atrex_inject.cuda.python.hooks.session import current
text, expr, copy = Path(sys.argv[1]).read_text(), sys.argv[2], sys.argv[3]

def build(t, exprs=()):
    prog = nvrtc.nvrtcCreateProgram(t.encode(), b"k.cu", 0, [], [])[1]
    for e in exprs:
        nvrtc.nvrtcAddNameExpression(prog, e.encode())
    assert int(nvrtc.nvrtcCompileProgram(prog, 1, [b"--gpu-architecture=sm_90a"])[0]) == 0
    buf = bytearray(nvrtc.nvrtcGetCUBINSize(prog)[1])
    nvrtc.nvrtcGetCUBIN(prog, buf)
    return prog, bytes(buf)

s = current()
prog, image = build(text, [expr])
problem = lambda image, capturing=False: s._problem(image_origin(image, "cuModuleLoadData"), lambda: capturing)
print(json.dumps({"lowered": nvrtc.nvrtcGetLoweredName(prog, copy.encode())[1].decode(),
                  "copy": kernel_copy(s.manifest, nvrtc.nvrtcGetLoweredName(prog, expr.encode())[1]).decode(),
                  "traced": problem(image), "graph": problem(image, True),
                  "edited": problem(build(text.replace("__global__", "__global__ ", 1), [expr])[1]),
                  "unknown": problem(b"\\x7fELF not from this process")}))
'''


@needs_nvrtc
@pytest.mark.parametrize("case", ["extern C kernel", "template kernel"])
def test_nvrtc_images_are_traced_to_their_text(project, tmp_path, case):
    """The hooks tie NVRTC's output to the program's text: the instrumented string is accepted, the
    same string edited before compiling, an image from elsewhere and a stream capturing a graph are
    each a reason not to capture. A name expression of the kernel brings the copy's, so a template
    kernel's copy is instantiated and its lowered name is the one kernel_copy maps to."""
    try:
        from cuda.bindings import nvrtc
        nvrtc.nvrtcVersion()
    except Exception as e:  # noqa: BLE001 - no libnvrtc here (pip install nvidia-cuda-nvrtc)
        pytest.skip(f"NVRTC library not found: {e}")
    if case == "template kernel":
        manifest = template_project(tmp_path / "t")
        text, expr, copy = string_of(tmp_path / "t" / "kernel.py", "SRC"), "twice<float>", "twice__atrex<float>"
    else:
        manifest = applied(project, "rmsnorm_nvrtc")
        text = string_of(project / "examples" / "kernelpy" / "nvrtc" / "kernel.py", "RMSNORM_SRC")
        expr, copy = "rmsnorm_rows", "rmsnorm_rows__atrex"
    src = tmp_path / "text.cu"
    src.write_text(text)
    got = last_json(hooked(NVRTC_TRACE, manifest, tmp_path / "cap", str(src), expr, copy))
    assert got["lowered"] == got["copy"]  # the instantiated copy is the symbol a launch maps to
    assert got["lowered"] == ("_Z12twice__atrexIfEvPT_i" if case == "template kernel" else "rmsnorm_rows__atrex")
    assert got["traced"] is None
    assert "not the instrumented source" in got["edited"][0] and "no .replace" in got["edited"][1]
    assert "no NVRTC program of this process produced" in got["unknown"][0]
    assert "capturing a CUDA graph" in got["graph"][0]


CORE_COMPILE = '''
import json, sys
from cuda.core import Program, ProgramOptions
from atrex_inject.cuda.python.hooks import cudacore
from atrex_inject.source_id import source_id_of
from atrex_inject.cuda.python.hooks.session import current
text = open(sys.argv[1]).read()
oc = Program(text, "c++", ProgramOptions(arch="sm_90a")).compile("cubin", name_expressions=("twice<float>",))
(kept, origin), = cudacore._objects
print(json.dumps({"mapping": {k: v.decode() for k, v in oc.symbol_mapping.items()}, "kept": kept is oc,
                  "same_source": source_id_of(origin.text) == current().manifest.source.source_id}))
'''


@needs_nvrtc
def test_cuda_core_program_keeps_its_text_and_instantiates_the_copy(tmp_path):
    pytest.importorskip("cuda.core")
    manifest = template_project(tmp_path / "t")
    src = tmp_path / "text.cu"
    src.write_text(string_of(tmp_path / "t" / "kernel.py", "SRC"))
    try:
        got = last_json(hooked(CORE_COMPILE, manifest, tmp_path / "cap", str(src)))
    except AssertionError as e:
        if "NVRTC" in str(e) and "not found" in str(e):
            pytest.skip("NVRTC library not found")
        raise
    assert got["mapping"] == {"twice<float>": "_Z5twiceIfEvPT_i", "twice__atrex<float>": "_Z12twice__atrexIfEvPT_i"}
    assert got["kept"] and got["same_source"]


def test_cupy_classes_are_hooked(project, tmp_path):
    """RawKernel and RawModule are CuPy's own classes, subclassed: isinstance holds, and a module's
    name expression of the kernel brings the copy's."""
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("cupy not installed (scripts/gpu-pylaunch.sh exercises it on the H200)")
    code = ('import json, cupy\nfrom cupy._core import raw\n'
            'k = cupy.RawKernel("extern \\"C\\" __global__ void absmax_scale() {}", "absmax_scale")\n'
            'm = cupy.RawModule(code="x", name_expressions=["absmax_scale"])\n'
            'print(json.dumps([isinstance(k, raw.RawKernel), cupy.RawKernel is not raw.RawKernel, '
            'list(m.name_expressions)]))')
    got = last_json(hooked(code, applied(project, "absmax_cupy"), tmp_path / "cap"))
    assert got == [True, True, ["absmax_scale", "absmax_scale__atrex"]]


CUPY_STUB = '''"""A stand-in for CuPy's two classes the hooks subclass (CuPy is not installed here)."""
class RawKernel:
    def __init__(self, code, name, **options):
        self.code, self.name = code, name

    def __call__(self, grid, block, args, **kwargs):
        return f"{self.name} ran"


class RawModule:
    def __init__(self, code=None, *, name_expressions=None, **options):
        self.code, self.name_expressions = code, name_expressions

    def get_function(self, name):
        return RawKernel(self.code, name)
'''

OTHER_KERNELS = '''
import json, sys
from pathlib import Path
import cupy
from cuda.bindings import nvrtc
from cuda.core import Program, ProgramOptions
clean = Path(sys.argv[1]).read_text()  # the kernel's clean string: the spec names its kernel, not this text
other = 'extern "C" __global__ void scale_by_two(float* x) { x[threadIdx.x] *= 2.0f; }'

def nvrtc_compile(text, expr):
    prog = nvrtc.nvrtcCreateProgram(text.encode(), b"k.cu", 0, [], [])[1]
    nvrtc.nvrtcAddNameExpression(prog, expr.encode())
    err = int(nvrtc.nvrtcCompileProgram(prog, 1, [b"--gpu-architecture=sm_90a"])[0])
    return err, nvrtc.nvrtcGetLoweredName(prog, expr.encode())[1].decode() if err == 0 else None

def core_compile(text, expr):
    oc = Program(text, "c++", ProgramOptions(arch="sm_90a")).compile("cubin", name_expressions=(expr,))
    return {k: v.decode() for k, v in oc.symbol_mapping.items()}

module = cupy.RawModule(code=clean, name_expressions=["rmsnorm_rows"])
print(json.dumps({"nvrtc_clean": nvrtc_compile(clean, "rmsnorm_rows"), "nvrtc_other": nvrtc_compile(other, "scale_by_two"),
                  "core_clean": core_compile(clean, "rmsnorm_rows"), "core_other": core_compile(other, "scale_by_two"),
                  "cupy_names": module.name_expressions, "cupy_other": cupy.RawKernel(other, "scale_by_two")(1, 32, ()),
                  "cupy_module_other": module.get_function("scale_by_two")(1, 32, ())}))
'''


@needs_nvrtc
def test_programs_of_other_kernels_run_under_the_hooks_as_without_them(project, tmp_path):
    """A program that compiles, through NVRTC, cuda.core and CuPy (a stand-in: not installed here),
    the kernel's clean string and a kernel the spec does not name gets exactly what it gets without
    `capture`: the copy's name expression goes only into a compile of the instrumented text, and
    nothing of the other kernels is touched."""
    pytest.importorskip("cuda.core")
    (tmp_path / "stub" / "cupy").mkdir(parents=True)
    (tmp_path / "stub" / "cupy" / "__init__.py").write_text(CUPY_STUB)
    clean = tmp_path / "clean.cu"
    clean.write_text(string_of(REPO / "examples" / "kernelpy" / "nvrtc" / "kernel.py", "RMSNORM_SRC"))
    manifest = applied(project, "rmsnorm_nvrtc")
    args = (str(clean),)
    alone = last_json(hooked(OTHER_KERNELS, None, None, *args, extra_path=str(tmp_path / "stub")))
    under = hooked(OTHER_KERNELS, manifest, tmp_path / "cap", *args, extra_path=str(tmp_path / "stub"))
    assert last_json(under) == alone and alone["nvrtc_clean"] == [0, "rmsnorm_rows"], under.stderr
    assert alone["cupy_names"] == ["rmsnorm_rows"] and alone["cupy_other"] == "scale_by_two ran"
    (rec,) = ledger.read(tmp_path / "cap")
    assert {"cuda.bindings.nvrtc", "cuda.core", "cupy"} <= set(rec["hooked"]) and rec["launches"] == 0


@needs_nvrtc
@pytest.mark.parametrize("where", ["under a file", "a file", "in /proc", "too long"])
def test_an_unwritable_capture_folder_leaves_the_program_running(project, tmp_path, where):
    """ATREX_TIMELINE_OUT that cannot be made (synthetic: set by hand as a broken run would): the
    program's imports of the launch APIs succeed, each process says on stderr why its launches are
    not captured, and it runs as without the hooks."""
    (tmp_path / "stub" / "cupy").mkdir(parents=True)
    (tmp_path / "stub" / "cupy" / "__init__.py").write_text(CUPY_STUB)
    (tmp_path / "f").write_text("")
    out = {"under a file": tmp_path / "f" / "cap", "a file": tmp_path / "f", "in /proc": Path("/proc/atrex-cap"),
           "too long": tmp_path / ("x" * 300)}[where]
    code = "import json, cupy\nfrom cuda.bindings import driver\nprint(json.dumps(hasattr(driver.cuLaunchKernel, '__wrapped__')))"
    proc = hooked(code, applied(project, "rmsnorm_nvrtc"), out, extra_path=str(tmp_path / "stub"))
    assert last_json(proc) is False
    assert f"atrex: launches from Python are not captured: ATREX_TIMELINE_OUT={str(out)!r} is not a folder this " \
           "process can make or write" in proc.stderr and "Traceback" not in proc.stderr


def test_copy_names():
    """The copy's symbol for each way a program names the kernel; None for anything else."""
    m = load_manifest(REPO / "tests" / "fixtures" / "h200" / "kernelpy" / "rmsnorm_nvrtc" / "manifest.json")
    assert kernel_copy(m, b"rmsnorm_rows") == b"rmsnorm_rows__atrex"
    assert kernel_copy(m, "_Z12rmsnorm_rowsPKfPfi") == b"_Z19rmsnorm_rows__atrexPKfPfi"
    assert kernel_copy(m, "rmsnorm_rows__atrex") is None and kernel_copy(m, "_Z19rmsnorm_rows__atrexPKf") is None
    assert kernel_copy(m, "rmsnorm") is None and kernel_copy(m, "_Z112rmsnorm_rowsxPf") is None
    assert copy_expression(m, "rmsnorm_rows") == "rmsnorm_rows__atrex"
    assert copy_expression(m, b"&ns::rmsnorm_rows<float, 4>") == "&ns::rmsnorm_rows__atrex<float, 4>"
    assert copy_expression(m, "rmsnorm_rows2<float>") is None and copy_expression(m, "other") is None


def test_copy_names_are_the_manifest_s():
    """The copy's name is read from the manifest (`perturbation.clone`, qualified in a namespace),
    not rebuilt from the kernel's: a manifest naming another copy (synthetic) is followed, and a
    namespaced kernel's mangled name maps to its namespaced copy's."""
    m = load_manifest(REPO / "tests" / "fixtures" / "h200" / "realkernels" / "fi_decode_clock" / "manifest.json")
    assert m.perturbation.clone == "flashinfer::SingleDecodeWithKVCacheKernel__atrex"
    assert kernel_copy(m, "_ZN10flashinfer29SingleDecodeWithKVCacheKernelILb0EEEvT_") == \
        b"_ZN10flashinfer36SingleDecodeWithKVCacheKernel__atrexILb0EEEvT_"
    other = dataclasses.replace(m, perturbation=dataclasses.replace(m.perturbation, clone="flashinfer::decode_probed"))
    assert kernel_copy(other, "_ZN10flashinfer29SingleDecodeWithKVCacheKernelEv") == b"_ZN10flashinfer13decode_probedEv"
    assert copy_expression(other, "flashinfer::SingleDecodeWithKVCacheKernel<P>") == "flashinfer::decode_probed<P>"


def test_a_manifest_without_a_copy_still_reads(tmp_path):
    """A manifest written before the instrumented copy existed has no `perturbation.clone`: it
    still loads, and its kernel is launched by its own name (the probes were in the kernel)."""
    d = json.loads((REPO / "tests" / "fixtures" / "h200" / "kernelpy" / "rmsnorm_nvrtc" / "manifest.json").read_text())
    del d["perturbation"]["clone"]
    (tmp_path / "manifest.json").write_text(json.dumps(d))
    m = load_manifest(tmp_path / "manifest.json")
    assert m.perturbation.clone is None
    assert kernel_copy(m, "rmsnorm_rows") == b"rmsnorm_rows"
    assert kernel_copy(m, "_Z12rmsnorm_rowsPKfPfi") == b"_Z12rmsnorm_rowsPKfPfi"
    assert copy_expression(m, "rmsnorm_rows<float>") is None  # nothing to instantiate beside the kernel


class Calls:
    """What a stand-in API saw: which launches ran clean and which ran the copy."""

    def __init__(self):
        self.ran: list[str] = []

    def clean(self):
        self.ran.append("clean")
        return "clean result"

    def copy(self, symbol: bytes):
        self.ran.append(symbol.decode())
        return "copy result"


def test_session_counts_chooses_and_reports(project, tmp_path, capsys):
    """Session.launch on its own, with stand-ins for an API's two launches (synthetic: there is no
    driver here). Another kernel runs untouched and uncounted; the spec's skip leaves launches 0
    and 1 clean; every chosen launch that cannot be captured runs clean and is in the ledger and
    on stderr with its reason: an image of unknown text, a stream capturing a graph, a capture
    that cannot be set up (no driver here); a graph node is recorded as launch -1; a hook inside
    a handled launch passes it on."""
    m = load_manifest(applied(project, "rmsnorm_nvrtc"))
    m = dataclasses.replace(m, capture=dataclasses.replace(m.capture, count=0))  # every launch after the skip
    text = string_of(project / "examples" / "kernelpy" / "nvrtc" / "kernel.py", "RMSNORM_SRC")
    s, c = Session(m, tmp_path / "cap"), Calls()
    (tmp_path / "cap").mkdir()
    known, unknown = (lambda: Origin(text, "NVRTC program k.cu")), (lambda: Origin(None, "cuModuleLoad(k.cubin)"))

    def launch(symbol, origin=known, capturing=lambda: False, clean=c.clean):
        return s.launch("cuda.bindings", symbol, (4096, 1, 1), (256, 1, 1), 0, clean, c.copy, origin,
                        lambda: 0, capturing)

    assert launch(b"other_kernel") == "clean result" and s.record["launches"] == 0
    assert [launch(b"rmsnorm_rows"), launch(b"_Z12rmsnorm_rowsPKfPfi")] == ["clean result"] * 2
    assert s.record["skipped"] == 2
    assert launch(b"rmsnorm_rows", unknown) == "clean result"
    assert launch(b"rmsnorm_rows", capturing=lambda: True) == "clean result"
    assert launch(b"rmsnorm_rows") == "clean result"  # no driver: the capture cannot be set up
    assert launch(b"rmsnorm_rows", clean=lambda: launch(b"rmsnorm_rows")) == "clean result"  # nested: passed on
    s.not_a_launch("cuda.bindings", "a kernel node of the kernel was added to a CUDA graph", "launch it outside")
    assert c.ran == ["clean"] * 7 and s.record["launches"] == 6 and s.record["written"] == []
    (rec,) = ledger.read(tmp_path / "cap")
    assert rec["launches"] == 6 and rec["skipped"] == 2
    missed = [(n["seq"], n["reason"]) for n in rec["not_captured"]]
    assert [seq for seq, _ in missed] == [2, 3, 4, 5, -1]
    assert "came from cuModuleLoad(k.cubin)" in missed[0][1] and "unknown" in missed[0][1]
    assert "capturing a CUDA graph" in missed[1][1]
    assert all("could not be set up" in r for _, r in missed[2:4])
    err = capsys.readouterr().err
    assert "atrex: launch 2 of rmsnorm_rows through cuda.bindings was not captured: its module came from " \
           "cuModuleLoad(k.cubin)" in err and "atrex: a launch of rmsnorm_rows through cuda.bindings" in err
    assert "atrex:   to capture it: compile the instrumented string in this process" in err


PROGRAM = '''
from cuda.bindings import driver, nvrtc
'''

UNCAPTURED = '''
from cuda.bindings import driver
from atrex_inject.cuda.python.hooks.session import Origin, current
s = current()
for _ in range(3):  # synthetic: launches through the hooks of a module whose text they never saw (no GPU here)
    s.launch("cuda.bindings", b"rmsnorm_rows", (1, 1, 1), (256, 1, 1), 0, lambda: None, None,
             lambda: Origin(None, "cuModuleLoad(rmsnorm.cubin)"), None)
'''


@needs_nvrtc
@pytest.mark.parametrize("program,needles", [
    (PROGRAM, ["the launch hooks saw 0 launch(es) of it from Python (0 left out by the spec's [capture] skip/count, 0 "
               "not captured), hooking cuda.bindings.driver, cuda.bindings.nvrtc",
               "hint: launch the kernel through cuda.bindings, cuda.core or CuPy"]),
    (UNCAPTURED, ["the launch hooks saw 3 launch(es) of it from Python (2 left out by the spec's [capture] skip/count, "
                  "1 not captured)", "hint: compile the instrumented string in this process"])],
    ids=["no launch", "not captured"])
def test_capture_says_what_the_hooks_saw(project, tmp_path, program, needles):
    """`atrex-inject capture` of a Python program that captured nothing says what the hooks saw in
    it, from its ledger, and exits 2."""
    applied(project, "rmsnorm_nvrtc")
    prog = tmp_path / "prog.py"
    prog.write_text(program)
    code, out = cli("capture", "--spec", project / "examples" / "specs" / "rmsnorm_nvrtc.toml", "--out",
                    tmp_path / "cap", "--json", "--", sys.executable, prog)
    assert code == 2, out
    msg = json.loads(out)
    for n in needles:
        assert n in msg["error"] + "\nhint: " + msg["hint"], msg


LEFT_A_FILE = UNCAPTURED + """
import glob, os, shutil, sys
for f in glob.glob(os.path.join(sys.argv[1], "rmsnorm_rows-launch2.*")):  # a real capture, standing in for one written
    shutil.copy(f, os.environ["ATREX_TIMELINE_OUT"])
"""


@needs_nvrtc
def test_capture_lists_each_launch_not_captured(project, tmp_path):
    """A capture that wrote a launch and missed another exits 0 and lists the one missed, with its
    reason and what to do (synthetic program: the file it leaves is copied from a real capture,
    the launch it misses is made through the hooks' session)."""
    applied(project, "rmsnorm_nvrtc")
    prog = tmp_path / "prog.py"
    prog.write_text(LEFT_A_FILE)
    code, out = cli("capture", "--spec", project / "examples" / "specs" / "rmsnorm_nvrtc.toml", "--out",
                    tmp_path / "cap", "--", sys.executable, prog, REPO / "tests" / "fixtures" / "h200" / "kernelpy" /
                    "rmsnorm_nvrtc")
    assert code == 0, out
    assert "1 launch(es) captured in" in out
    assert ("from Python (cuda.bindings.driver): 3 launch(es) of the kernel, 0 captured, 2 left out by [capture] "
            "skip/count, 1 NOT captured") in out
    assert "launch 2 through cuda.bindings: its module came from cuModuleLoad(rmsnorm.cubin)" in out
    assert "to capture it: compile the instrumented string in this process" in out


def _fixture_copy(tmp_path: Path) -> Path:
    d = tmp_path / "cap"
    shutil.copytree(REPO / "tests" / "fixtures" / "h200" / "kernelpy" / "rmsnorm_nvrtc", d)
    return d


def test_validate_notes_launches_from_python_not_captured(tmp_path):
    """A ledger naming a launch not captured (synthetic, planted in a copy of a real capture) is a
    note of validate: the folder lacks that launch, and the report says so."""
    d = _fixture_copy(tmp_path)
    ledger.write(d, 77, {"run_id": "0" * 32, "kernel": "rmsnorm_rows", "hooked": ["cuda.bindings.driver"],
                         "failed_hooks": ["cupy"], "launches": 4, "skipped": 2, "written": [2],
                         "not_captured": [{"seq": 3, "api": "cuda.bindings", "reason": "its module came from X",
                                           "hint": "h"}]})
    code, out = cli("validate", d, "--source", d / "kernel.instrumented.py", "--json")
    r = json.loads(out)
    assert code == 0 and r["verdict"] == "valid", out
    assert ("1 launch(es) from Python of the kernel were not captured (they ran the clean kernel and left no file "
            "here): process 77 launch 3 through cuda.bindings (its module came from X)") in r["notes"]
    assert any(n.startswith("launches through cupy were not hooked") for n in r["notes"])


@pytest.mark.parametrize("edit,needle", [
    (lambda r: "not json", "launch ledger is not readable JSON"),
    (lambda r: dict(r, version=2), "not a version-1 atrex-pylaunch ledger"),
    (lambda r: dict(r, skipped=-1), "ledger field 'skipped' is not a non-negative integer"),
    (lambda r: dict(r, written=["2"]), "ledger field 'written' is not a list of int"),
    (lambda r: dict(r, not_captured=[{"seq": 3, "api": "cupy"}]), "lacks seq, api, reason or hint")])
def test_a_damaged_ledger_is_refused(tmp_path, edit, needle):
    """One fault planted in a ledger (synthetic): validate exits 2 naming the file and what is wrong."""
    d = _fixture_copy(tmp_path)
    rec = {"format": "atrex-pylaunch", "version": 1, "pid": 5, "run_id": "0" * 32, "kernel": "rmsnorm_rows",
           "hooked": [], "failed_hooks": [], "launches": 0, "skipped": 0, "written": [], "not_captured": []}
    bad = edit(rec)
    (d / "pylaunch-5.json").write_text(bad if isinstance(bad, str) else json.dumps(bad))
    code, out = cli("validate", d, "--json")
    assert code == 2, out
    err = json.loads(out)
    assert needle in err["error"] and err["path"].endswith("pylaunch-5.json"), err


@pytest.mark.parametrize("example", ["nvrtc", "cupy", "load_inline"])
def test_clean_examples_know_nothing_of_atrex(example):
    """The point of the hooks: a program is captured as its author wrote it, importing nothing of ours."""
    tree = ast.parse((REPO / "examples" / "kernelpy" / example / "kernel.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | \
               {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported and not any(m.startswith("atrex_inject") for m in imported), imported


def test_cupy_example_compiles_as_cupy_compiles_it(project):
    """The instrumented CuPy string through NVRTC with the options CuPy adds for an H200 (sm_90, not
    sm_90a; device code by default; flush to zero) and the example's own."""
    try:
        from cuda.bindings import nvrtc
        nvrtc.nvrtcVersion()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC not available: {e}")
    applied(project, "absmax_cupy")
    text = string_of(project / "examples" / "kernelpy" / "cupy" / "kernel.py", "ABSMAX_SRC")
    assert "absmax_scale__atrex" in text
    prog = nvrtc.nvrtcCreateProgram(text.encode(), b"kern.cu", 0, [], [])[1]
    opts = [b"--std=c++17", b"-ftz=true", b"-arch=sm_90", b"--device-as-default-execution-space"]
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    log = bytearray(nvrtc.nvrtcGetProgramLogSize(prog)[1])
    nvrtc.nvrtcGetProgramLog(prog, log)
    assert int(err) == 0 and "warning" not in log.decode(), log.decode()


@pytest.mark.parametrize("example", [*PYLAUNCH_FIXTURES, "softmax_inline"])
def test_h200_captures_of_each_launch_path(example):
    """scripts/gpu-pylaunch.sh's captures (tests/fixtures/h200/PROVENANCE.md, "pylaunch/"): each
    launch path captured on the H200 from a program not edited for it validates against the file
    it ran, names its program, and its ledger (the Python paths) says which API launched it and
    that nothing was missed."""
    d = FIX / example
    if not (d / "manifest.json").is_file():
        pytest.skip(f"no H200 capture in {d.relative_to(REPO)} yet: run scripts/gpu-pylaunch.sh on the GPU host, then "
                    "python scripts/pylaunch_fixtures.py RESULTS.tar.gz LABEL")
    code, out = cli("validate", d, "--source", d / "kernel.instrumented.py", "--json")
    r = json.loads(out)
    assert code == 0 and r["verdict"] == "valid", out
    assert (d / "run.json").is_file() and r["identity"]
    side = json.loads(next(d.glob("*-launch*.json")).read_text())
    if example in PYLAUNCH_FIXTURES:
        assert side["capture"] == PYLAUNCH_FIXTURES[example]
        s = ledger.summary(d)
        assert s["written"] == 1 and s["not_captured"] == [] and s["failed_hooks"] == []
        assert s["launches"] >= 3 and s["skipped"] == s["launches"] - 1
    assert "import atrex_inject" not in (d / "kernel.instrumented.py").read_text()  # the program as its author wrote it


def test_h200_capture_through_every_hooked_api():
    """scripts/pylaunch_check.py's capture: one string launched through each hooked API in one
    process, every launch written, as apis.json lists them. Each launch the check expected captured
    is in the folder, written by the hook of its API; the launch into a graph is not, and the
    ledger says why; validate notes it."""
    d = FIX / "apis"
    if not (d / "apis.json").is_file():
        pytest.skip(f"no H200 capture in {d.relative_to(REPO)} yet: run scripts/gpu-pylaunch.sh on the GPU host, then "
                    "python scripts/pylaunch_fixtures.py RESULTS.tar.gz LABEL")
    launches = json.loads((d / "apis.json").read_text())
    code, out = cli("validate", d, "--source", d / "kernel.instrumented.py", "--json")
    r = json.loads(out)
    assert code == 0 and r["verdict"] == "valid", out
    sides = {s["launch_seq"]: s for s in (json.loads(p.read_text()) for p in d.glob("*-launch*.json"))}
    assert sorted(sides) == [n["seq"] for n in launches if n["captured"]]
    assert [sides[n["seq"]]["capture"] for n in launches if n["captured"]] == \
           [n["api"] for n in launches if n["captured"]]
    assert {"cupy", "cuda.bindings"} <= {sides[s]["capture"] for s in sides}
    s = ledger.summary(d)
    missed = [(n["seq"], n["api"]) for n in s["not_captured"]]
    assert missed == [(n["seq"], n["api"]) for n in launches if not n["captured"]] and missed
    assert all("capturing a CUDA graph" in n["reason"] for n in s["not_captured"])
    assert any("were not captured" in note for note in r["notes"])
