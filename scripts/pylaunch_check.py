"""GPU check of the launch hooks on every launch API at once (run by scripts/gpu-pylaunch.sh under
`atrex-inject capture`, with a spec that writes every launch): the instrumented string of
examples/kernelpy/cupy/kernel.py launched, in one process, through

    0 cupy.RawKernel           1 cupy.RawModule(code=...).get_function
    2 NVRTC + cuLaunchKernel   3 NVRTC + cuLaunchKernelEx (cuda.bindings)
    4 cuda.core Program + launch (where cuda.core 1.x is installed)
    5 cuLaunchKernel on a stream capturing a CUDA graph (the hooks must count it as not captured)

and then a kernel the spec does not name, compiled with a name expression and launched through
CuPy, NVRTC + cuLaunchKernel and cuda.core: the hooks must leave each as the program made it
(other_kernels; not in OUT_JSON, since the hooks count none of them).

Nothing here calls atrex-inject: the hooks see the launches. Each launch's output is checked
against the reference; OUT_JSON gets what was launched through what, for the fixture's test.

    python3 scripts/pylaunch_check.py KERNEL_PY OUT_JSON
"""
from __future__ import annotations

import ast
import ctypes
import json
import sys
from pathlib import Path

import cupy as cp
import numpy as np
from cuda.bindings import driver, nvrtc

ROWS, COLS, THREADS = 1024, 2048, 256


def ok(result):
    err, *rest = result
    if int(err) != 0:
        raise RuntimeError(f"CUDA call failed: {err!r}")
    return rest[0] if len(rest) == 1 else rest if rest else None


def nvrtc_module(text: str):
    prog = ok(nvrtc.nvrtcCreateProgram(text.encode(), b"absmax.cu", 0, [], []))
    opts = [b"--gpu-architecture=sm_90a", b"--std=c++17"]
    ok(nvrtc.nvrtcCompileProgram(prog, len(opts), opts))
    cubin = bytearray(ok(nvrtc.nvrtcGetCUBINSize(prog)))
    ok(nvrtc.nvrtcGetCUBIN(prog, cubin))
    return ok(driver.cuModuleLoadData(bytes(cubin)))


OTHER = 'extern "C" __global__ void twice_of(const float* x, float* y, int n) ' \
        '{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2.0f * x[i]; }'


def other_kernels(core) -> list[float]:
    """A kernel the spec does not name, compiled with a name expression and launched through each
    API under the hooks: max abs error of each against 2 * x."""
    n = ROWS * COLS
    x = cp.random.default_rng(2).standard_normal(n, dtype=cp.float32)
    ys = []

    def out():
        ys.append(cp.zeros_like(x))
        return ys[-1]

    grid, block = ((n + THREADS - 1) // THREADS, 1, 1), (THREADS, 1, 1)
    cp.RawModule(code=OTHER, name_expressions=["twice_of"]).get_function("twice_of")(grid, block, (x, out(), np.int32(n)))
    prog = ok(nvrtc.nvrtcCreateProgram(OTHER.encode(), b"twice.cu", 0, [], []))
    ok(nvrtc.nvrtcAddNameExpression(prog, b"twice_of"))
    ok(nvrtc.nvrtcCompileProgram(prog, 1, [b"--gpu-architecture=sm_90a"]))
    cubin = bytearray(ok(nvrtc.nvrtcGetCUBINSize(prog)))
    ok(nvrtc.nvrtcGetCUBIN(prog, cubin))
    fn = ok(driver.cuModuleGetFunction(ok(driver.cuModuleLoadData(bytes(cubin))), b"twice_of"))
    y = out()
    ok(driver.cuLaunchKernel(fn, *grid, *block, 0, 0, ((x.data.ptr, y.data.ptr, n),
                                                         (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)), 0))
    if core is not None:
        s = core.Device().create_stream()
        obj = core.Program(OTHER, "c++", core.ProgramOptions(arch="sm_90a")).compile("cubin",
                                                                                     name_expressions=("twice_of",))
        core.launch(s, core.LaunchConfig(grid=grid[0], block=THREADS), obj.get_kernel("twice_of"),
                    ctypes.c_void_p(x.data.ptr), ctypes.c_void_p(out().data.ptr), np.int32(n))
        s.sync()
    cp.cuda.Device().synchronize()
    return [float(cp.abs(y - 2 * x).max()) for y in ys]


def main(kernel_py: Path, out_json: Path) -> int:
    (text,) = [n.value.value for n in ast.walk(ast.parse(kernel_py.read_text()))
               if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == "ABSMAX_SRC"]
    x = cp.random.default_rng(1).standard_normal((ROWS, COLS), dtype=cp.float32)
    want = x * (127.0 / cp.abs(x).max(axis=1, keepdims=True))
    ys, done = [], []
    stream = cp.cuda.Stream(non_blocking=True)
    grid, block = (ROWS, 1, 1), (THREADS, 1, 1)
    cols = np.int32(COLS)

    def out():
        ys.append(cp.zeros_like(x))
        return ys[-1]

    def params(y):
        return ((x.data.ptr, y.data.ptr, COLS), (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int))

    with stream:
        cp.RawKernel(text, "absmax_scale", options=("--std=c++17",))(grid, block, (x, out(), cols))
        done.append(("cupy.RawKernel", "cupy", True))
        cp.RawModule(code=text, options=("--std=c++17",)).get_function("absmax_scale")(grid, block, (x, out(), cols))
        done.append(("cupy.RawModule", "cupy", True))
    ok(driver.cuInit(0))
    fn = ok(driver.cuModuleGetFunction(nvrtc_module(text), b"absmax_scale"))
    ok(driver.cuLaunchKernel(fn, *grid, *block, 0, stream.ptr, params(out()), 0))
    done.append(("cuLaunchKernel", "cuda.bindings", True))
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.hStream, config.numAttrs, config.attrs = stream.ptr, 0, []
    ok(driver.cuLaunchKernelEx(config, fn, params(out()), 0))
    done.append(("cuLaunchKernelEx", "cuda.bindings", True))
    try:
        import cuda.core as core
        core.launch  # noqa: B018 - cuda.core before 1.0 kept it in cuda.core.experimental
    except (ImportError, AttributeError) as e:
        core = None
        print(f"cuda.core 1.x is not installed ({e}): its launch is not exercised")
    if core is not None:
        dev = core.Device()
        dev.set_current()
        s = dev.create_stream()
        obj = core.Program(text, "c++", core.ProgramOptions(arch="sm_90a", std="c++17")).compile("cubin")
        core.launch(s, core.LaunchConfig(grid=ROWS, block=THREADS), obj.get_kernel("absmax_scale"),
                    ctypes.c_void_p(x.data.ptr), ctypes.c_void_p(out().data.ptr), cols)
        s.sync()
        done.append(("cuda.core launch", "cuda.core", True))
    stream.synchronize()
    y = out()
    ok(driver.cuStreamBeginCapture(stream.ptr, driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED))
    ok(driver.cuLaunchKernel(fn, *grid, *block, 0, stream.ptr, params(y), 0))
    graph = ok(driver.cuStreamEndCapture(stream.ptr))
    ok(driver.cuGraphLaunch(ok(driver.cuGraphInstantiate(graph, 0)), stream.ptr))
    done.append(("cuLaunchKernel into a graph", "cuda.bindings", False))
    stream.synchronize()
    errs = [float(cp.abs(y - want).max()) for y in ys]
    for (what, api, captured), err in zip(done, errs):
        print(f"launch through {what} ({api}): max abs err {err:.2e}, expected {'captured' if captured else 'NOT captured'}")
    out_json.write_text(json.dumps([{"seq": i, "via": w, "api": a, "captured": c} for i, (w, a, c) in enumerate(done)],
                                   indent=1) + "\n")
    others = other_kernels(core)
    print(f"a kernel the spec does not name, through {len(others)} APIs: max abs err {max(others):.2e}")
    return 0 if max(errs + others) < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
