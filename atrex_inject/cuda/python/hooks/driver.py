"""Hooks on cuda-python's cuda.bindings (docs/launches.md, "Launches from Python").

NVRTC: each program's text is kept (nvrtcCreateProgram), and so is the text behind each image it
hands out (nvrtcGetCUBIN, nvrtcGetPTX, nvrtcGetLTOIR: keyed by the image's bytes); in a program
of the instrumented text, a name expression of the kernel (nvrtcAddNameExpression) is followed by
the copy's, so that a template kernel's copy is instantiated and has a lowered name.

Driver: each module and library is tied to the image it was loaded from (cuModuleLoadData,
cuModuleLoadDataEx, cuModuleLoadFatBinary, cuModuleLoad, cuLibraryLoadData,
cuLibraryLoadFromFile), and so to a text or to "unknown"; every cuLaunchKernel, cuLaunchKernelEx
and cuLaunchCooperativeKernel asks the driver which function it launches (cuFuncGetName,
cuFuncGetModule) and goes through Session.launch, which runs the copy from the same module
(cuModuleGetFunction) with the clean kernel's settable attributes (mirror_attributes). A kernel
node of the kernel added to a graph (cuGraphAddKernelNode) is recorded as not captured.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from ....errors import CaptureError
from .session import Origin, current

API = "cuda.bindings"
_programs: dict[int, Origin] = {}  # NVRTC program handle -> its text
_images: dict[str, Origin] = {}  # sha256 of an image NVRTC produced -> its program's text
_modules: dict[int, Origin] = {}
_libraries: dict[int, Origin] = {}
_names: dict[int, bytes | None] = {}
_orig: dict[str, object] = {}  # the unpatched functions
# attributes a program may set on the clean kernel that the copy needs too (dynamic shared memory above
# 48 KiB, carveout, cluster shape): copied before the copy launches when they differ
SETTABLE = ("MAX_DYNAMIC_SHARED_SIZE_BYTES", "PREFERRED_SHARED_MEMORY_CARVEOUT", "NON_PORTABLE_CLUSTER_SIZE_ALLOWED",
            "CLUSTER_SCHEDULING_POLICY_PREFERENCE", "REQUIRED_CLUSTER_WIDTH", "REQUIRED_CLUSTER_HEIGHT",
            "REQUIRED_CLUSTER_DEPTH")


def _key(data: bytes) -> str:
    return hashlib.sha256(data.rstrip(b"\0")).hexdigest()  # PTX comes NUL-terminated, or not


def _bytes(buf) -> bytes | None:
    if isinstance(buf, str):
        return buf.encode()
    try:
        return bytes(memoryview(buf))
    except TypeError:  # a pointer given as an int: nothing to read
        return None


def _text(src) -> str | None:
    try:
        return src.decode() if isinstance(src, (bytes, bytearray)) else src if isinstance(src, str) else None
    except UnicodeDecodeError:
        return None


def image_origin(image, how: str) -> Origin:
    """The text behind an image a module or library is loaded from (NVRTC's output in this process)."""
    data = _bytes(image)
    if data is None:
        return Origin(None, f"{how} of an image given by its address, which the hooks cannot read")
    return _images.get(_key(data)) or Origin(None, f"{how} of an image no NVRTC program of this process produced "
                                                   "(compiled elsewhere, or cached on disk)")


def _ok(result, what: str):
    from cuda.bindings import driver
    err, *rest = result
    if err != driver.CUresult.CUDA_SUCCESS:
        raise CaptureError(f"{what} failed: {err!r}")
    return rest[0] if len(rest) == 1 else rest


def mirror_attributes(clean, copy) -> None:
    """Give the copy (a CUfunction) each settable attribute the program set on the clean kernel."""
    from cuda.bindings import driver as d
    for name in SETTABLE:
        attr = getattr(d.CUfunction_attribute, "CU_FUNC_ATTRIBUTE_" + name, None)
        if attr is None:
            continue
        e1, want = d.cuFuncGetAttribute(attr, clean)
        e2, have = d.cuFuncGetAttribute(attr, copy)
        if e1 == e2 == d.CUresult.CUDA_SUCCESS and want != have:
            d.cuFuncSetAttribute(copy, attr, want)  # refused: the copy's launch fails, and says so


def _name(f) -> bytes | None:
    from cuda.bindings import driver as d
    try:
        k = int(f)
    except TypeError:
        return None
    if k not in _names:
        try:
            err, name = d.cuFuncGetName(f)
            if err != d.CUresult.CUDA_SUCCESS:  # a CUkernel passed where a CUfunction goes
                err, name = d.cuKernelGetName(d.CUkernel(k))
        except Exception:  # noqa: BLE001 - no driver: the launch itself will say so
            return None
        _names[k] = name if err == d.CUresult.CUDA_SUCCESS else None
    return _names[k]


def function_module(f):
    """The CUmodule a launched function (or CUkernel) lives in, in the current context."""
    from cuda.bindings import driver as d
    err, mod = d.cuFuncGetModule(f)
    if err == d.CUresult.CUDA_SUCCESS:
        return mod
    lib = _ok(d.cuKernelGetLibrary(d.CUkernel(int(f))), "cuKernelGetLibrary")
    return _ok(d.cuLibraryGetModule(lib), "cuLibraryGetModule")


def module_origin(mod) -> Origin:
    from cuda.bindings import driver as d
    if int(mod) in _modules:
        return _modules[int(mod)]
    for lib, origin in _libraries.items():
        err, m = d.cuLibraryGetModule(d.CUlibrary(lib))
        if err == d.CUresult.CUDA_SUCCESS and int(m) == int(mod):
            return origin
    return Origin(None, "a module loaded before the hooks were installed, or through another API")


def capturing(stream) -> bool:
    """Whether `stream` is capturing a CUDA graph."""
    from cuda.bindings import driver as d
    err, status = d.cuStreamIsCapturing(stream if stream is not None else 0)
    return err == d.CUresult.CUDA_SUCCESS and status != d.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE


def _launch(f, grid, block, stream, call):
    """One launch of `f`; `call(fn)` makes it with function fn in f's place."""
    s = current()
    if s is None or not s.is_kernel(_name(f)):
        return call(f)
    module = functools.cache(lambda: function_module(f))

    def instrumented(copy: bytes):
        from cuda.bindings import driver as d
        fn = _ok(d.cuModuleGetFunction(module(), copy), f"cuModuleGetFunction({copy.decode()})")
        mirror_attributes(f, fn)
        r = call(fn)
        _ok(r, f"the launch of {copy.decode()}")
        return r

    return s.launch(API, _name(f), grid, block, stream, lambda: call(f), instrumented,
                    lambda: module_origin(module()), module, lambda: capturing(stream))


def _wrap(mod, name: str, make) -> None:
    orig = getattr(mod, name, None)
    if orig is None:  # an older cuda-python without it
        return
    _orig[name] = orig
    setattr(mod, name, functools.wraps(orig)(make(orig)))


def _on_load(table: dict, first: str, how):
    """A loader that records, on success, where the module or library it returns came from (`how` of
    its first argument, named `first`)."""
    def make(orig):
        def loader(*args, **kwargs):
            r = orig(*args, **kwargs)
            if int(r[0]) == 0:
                table[int(r[1])] = how(args[0] if args else kwargs.get(first))
            return r
        return loader
    return make


def _file_origin(call: str):
    def how(path):
        p = Path(path.decode() if isinstance(path, bytes) else str(path))
        try:
            return image_origin(p.read_bytes(), f"{call}({p})")
        except OSError:
            return Origin(None, f"{call}({p}), a file the hooks cannot read")
    return how


def patch_driver(d) -> None:
    for call, first in (("cuModuleLoadData", "image"), ("cuModuleLoadDataEx", "image"),
                        ("cuModuleLoadFatBinary", "fatCubin")):
        _wrap(d, call, _on_load(_modules, first, functools.partial(image_origin, how=call)))
    _wrap(d, "cuModuleLoad", _on_load(_modules, "fname", _file_origin("cuModuleLoad")))
    _wrap(d, "cuLibraryLoadData", _on_load(_libraries, "code", functools.partial(image_origin, how="cuLibraryLoadData")))
    _wrap(d, "cuLibraryLoadFromFile", _on_load(_libraries, "fileName", _file_origin("cuLibraryLoadFromFile")))

    def launch_kernel(orig):
        def cuLaunchKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                           hStream, kernelParams, extra):
            rest = (gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                    kernelParams, extra)
            return _launch(f, rest[:3], rest[3:6], hStream, lambda fn: orig(fn, *rest))
        return cuLaunchKernel

    def launch_cooperative(orig):
        def cuLaunchCooperativeKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                      sharedMemBytes, hStream, kernelParams):
            rest = (gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                    kernelParams)
            return _launch(f, rest[:3], rest[3:6], hStream, lambda fn: orig(fn, *rest))
        return cuLaunchCooperativeKernel

    def launch_ex(orig):
        def cuLaunchKernelEx(config, f, kernelParams, extra):
            grid = (config.gridDimX, config.gridDimY, config.gridDimZ)
            block = (config.blockDimX, config.blockDimY, config.blockDimZ)
            return _launch(f, grid, block, config.hStream, lambda fn: orig(config, fn, kernelParams, extra))
        return cuLaunchKernelEx

    def graph_node(orig):
        def cuGraphAddKernelNode(hGraph, dependencies, numDependencies, nodeParams):
            s = current()
            func = getattr(nodeParams, "func", None)
            if s is not None and func is not None and s.is_kernel(_name(func)):
                s.not_a_launch(API, "a kernel node of the kernel was added to a CUDA graph (cuGraphAddKernelNode): "
                                    "each replay of the graph launches the clean kernel",
                               "launch the kernel outside the graph while recording")
            return orig(hGraph, dependencies, numDependencies, nodeParams)
        return cuGraphAddKernelNode

    _wrap(d, "cuLaunchKernel", launch_kernel)
    _wrap(d, "cuLaunchCooperativeKernel", launch_cooperative)
    _wrap(d, "cuLaunchKernelEx", launch_ex)
    _wrap(d, "cuGraphAddKernelNode", graph_node)


def patch_nvrtc(nvrtc) -> None:
    def create(orig):
        def nvrtcCreateProgram(src, name, numHeaders, headers, includeNames):
            r = orig(src, name, numHeaders, headers, includeNames)
            if int(r[0]) == 0:
                label = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
                _programs[int(r[1])] = Origin(_text(src), f"NVRTC program {label}")
            return r
        return nvrtcCreateProgram

    def add_expression(orig):
        def nvrtcAddNameExpression(prog, name_expression):
            r = orig(prog, name_expression)
            s, origin = current(), _programs.get(int(prog))
            copy = s.copy_expression(name_expression, origin and origin.text) if s is not None else None
            if int(r[0]) == 0 and copy is not None:
                orig(prog, copy.encode())
            return r
        return nvrtcAddNameExpression

    def output(orig):
        def get(prog, buf):
            r = orig(prog, buf)
            origin = _programs.get(int(prog))
            data = _bytes(buf) if int(r[0]) == 0 and origin is not None else None
            if data:
                _images[_key(data)] = origin
            return r
        return get

    _wrap(nvrtc, "nvrtcCreateProgram", create)
    _wrap(nvrtc, "nvrtcAddNameExpression", add_expression)
    for call in ("nvrtcGetCUBIN", "nvrtcGetPTX", "nvrtcGetLTOIR"):
        _wrap(nvrtc, call, output)
