"""Capture for instrumented kernels that Python loads from a cubin/PTX and launches itself.

Uses cuda-python's driver bindings (cuda.bindings.driver). The instrumented module exports the
device symbol `atrex_tl_buffer`; a LaunchCapture allocates the launch's buffer, writes the launch
header, points the symbol at it, and after the user's launch reads it back, writes the same
`.atrex` + `.json` pair as the C++ host session (so decode cannot tell them apart) and points the
symbol back at null, so no later launch writes into the freed buffer. The probes live in the
kernel's instrumented copy (`K__atrex`, the manifest's `perturbation.clone`): the launch under
capture runs `cap.function(symbol)`, the copy, instead of the clean kernel.

    with LaunchCapture(module, manifest, grid, block, out_dir, launch_seq=0) as cap:
        driver.cuLaunchKernel(cap.function(b"k"), *grid, *block, 0, stream, params, 0)

`capture_launch` does the same for every launch of a program, the way the C++ session does:
probes off unless ATREX_TIMELINE_OUT is set, launches counted per kernel, only those the spec's
[capture] skip/count select written (docs/kernelpy.md).
"""
from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from pathlib import Path

import numpy as np

from .errors import CaptureError
from .launchfile import write_launch
from .layout import MAX_BUFFER_BYTES, build_header
from .manifest import Manifest

SYMBOL = b"atrex_tl_buffer"
HEADER_SYMBOL = b"atrex_tl_header"  # the launch header's constant copy, read by the owners' entry and exit
RUN_ID = uuid.uuid4().hex  # one per process, in every sidecar it writes: validation keeps one run per folder


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise CaptureError("cuda-python is not installed", hint="pip install 'atrex-inject[cuda]'") from e
    return driver


def gpu_available() -> bool:
    """True when a driver and at least one device answer; False on a machine without them."""
    try:
        driver = _driver()
        err, = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False
        err, n = driver.cuDeviceGetCount()
        return err == driver.CUresult.CUDA_SUCCESS and n > 0
    except CaptureError:
        return False
    except Exception as e:  # cuda.pathfinder's DynamicLibNotFoundError: no libcuda on this machine
        if type(e).__name__ == "DynamicLibNotFoundError":
            return False
        raise


def device_info() -> dict:
    """Name, UUID and SM count of the current (or first) device; {} without a GPU."""
    if not gpu_available():
        return {}
    d = _driver()
    err, dev = d.cuCtxGetDevice()
    if err != d.CUresult.CUDA_SUCCESS:
        dev = _check(d.cuDeviceGet(0), "cuDeviceGet")
    name = _check(d.cuDeviceGetName(256, dev), "cuDeviceGetName").split(b"\0")[0].decode()
    u = bytes(_check(d.cuDeviceGetUuid(dev), "cuDeviceGetUuid").bytes).hex()
    sms = _check(d.cuDeviceGetAttribute(d.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
                 "cuDeviceGetAttribute")
    return {"name": name, "uuid": f"GPU-{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}", "sm_count": int(sms)}


def _check(result, what: str):
    driver = _driver()
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        _, msg = driver.cuGetErrorString(err)
        raise CaptureError(f"{what} failed: {msg.decode() if msg else err}")
    return rest[0] if len(rest) == 1 else rest


def clone_symbol(manifest: Manifest, symbol: str | bytes) -> bytes:
    """The symbol of the kernel's instrumented copy, for the symbol the program loads the kernel
    by: `k` (extern "C") becomes `k__atrex`, and in an Itanium-mangled name (`_Z1kPf`, a lowered
    name from NVRTC) the kernel's name becomes the copy's (`_Z8k__atrexPf`). A manifest without
    a copy (older tools instrumented the kernel in place) keeps the symbol."""
    from .cuda.clone import CLONE_SUFFIX
    sym = symbol.decode() if isinstance(symbol, bytes) else symbol
    if manifest.perturbation is None or not manifest.perturbation.clone:
        return sym.encode()
    name = re.sub(r"<.*", "", manifest.kernel).split("::")[-1].strip()  # `ns::k<T, 4>` -> k
    copy = name + CLONE_SUFFIX
    if sym == name:
        return copy.encode()
    m = re.search(rf"(?<![0-9]){len(name)}{re.escape(name)}", sym) if sym.startswith("_Z") else None
    if m is None:
        raise CaptureError(f"symbol {sym!r} is not the kernel {name!r} of the manifest, nor its mangled name",
                           hint=f"load the kernel by the name the spec instruments ({name})")
    return (sym[:m.start()] + f"{len(copy)}{copy}" + sym[m.end():]).encode()


class LaunchCapture:
    """One captured launch of an instrumented kernel from a loaded CUmodule. `source_id` names the
    source the module was compiled from (default: the manifest's); decode refuses a mismatch."""

    def __init__(self, module, manifest: Manifest, grid, block, out_dir: str | Path, launch_seq: int = 0,
                 stream=0, workload: str | None = None, source_id: str | None = None):
        self.driver = _driver()
        self.module, self.manifest, self.stream = module, manifest, stream
        self.grid, self.block = tuple(grid) + (1,) * (3 - len(grid)), tuple(block) + (1,) * (3 - len(block))
        self.out_dir, self.seq = Path(out_dir), launch_seq
        self.workload = workload if workload is not None else os.environ.get("ATREX_WORKLOAD", "")
        self.source_id = source_id or manifest.source.source_id
        cap = manifest.capture
        hint = "lower [capture] capacity or the CTA density in the spec, re-apply, rebuild"
        try:
            self.header = build_header(manifest.groups, self.grid, self.block, cap.capacity, cap.event_bytes,
                                       cap.clock, self.source_id, launch_seq)
        except OverflowError:  # more owners than the header's u32 counts
            raise CaptureError(f"grid {self.grid} x block {self.block} selects more owners than the recorder counts "
                               "(2^32 - 1)", hint=hint) from None
        self.nbytes = int(self.header["total_bytes"][0])
        if self.nbytes > MAX_BUFFER_BYTES:
            raise CaptureError(f"this launch needs a {self.nbytes}-byte buffer, over the recorder's 4 GiB", hint=hint)
        self.buf = None

    def function(self, symbol: str | bytes):
        """The CUfunction to launch while capturing: the instrumented copy of `symbol`."""
        sym = clone_symbol(self.manifest, symbol)
        return _check(self.driver.cuModuleGetFunction(self.module, sym),
                      f"cuModuleGetFunction({sym.decode()}): is the module built from the instrumented source?")

    def __enter__(self) -> "LaunchCapture":
        d = self.driver
        sym, size = _check(d.cuModuleGetGlobal(self.module, SYMBOL), "cuModuleGetGlobal(atrex_tl_buffer)")
        if int(size) != 8:
            raise CaptureError(f"atrex_tl_buffer has {int(size)} bytes, expected a pointer")
        self._sym = sym
        hsym, hsize = _check(d.cuModuleGetGlobal(self.module, HEADER_SYMBOL), "cuModuleGetGlobal(atrex_tl_header)")
        if int(hsize) != self.header.nbytes:
            raise CaptureError(f"atrex_tl_header has {int(hsize)} bytes, expected the {self.header.nbytes}-byte "
                               "launch header", hint="rebuild the module from the source `apply` wrote")
        self.buf = _check(d.cuMemAlloc(self.nbytes), "cuMemAlloc")
        _check(d.cuMemsetD8Async(self.buf, 0, self.nbytes, self.stream), "cuMemsetD8Async")
        _check(d.cuMemcpyHtoDAsync(self.buf, self.header, self.header.nbytes, self.stream), "write header")
        _check(d.cuMemcpyHtoDAsync(hsym, self.header, self.header.nbytes, self.stream), "bind atrex_tl_header")
        self._ptr = np.array([int(self.buf)], dtype=np.uint64)
        _check(d.cuMemcpyHtoDAsync(sym, self._ptr, 8, self.stream), "bind atrex_tl_buffer")
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        d = self.driver
        try:
            if exc_type is None:
                self.write()
        finally:
            if self.buf is not None:
                self._ptr = np.zeros(1, dtype=np.uint64)  # unbind: a later launch must not see a freed buffer
                d.cuMemcpyHtoDAsync(self._sym, self._ptr, 8, self.stream)
                d.cuStreamSynchronize(self.stream)
                d.cuMemFree(self.buf)
                self.buf = None

    def write(self) -> Path:
        """Synchronize, read back, and write `<kernel>-launch<seq>.atrex` and its sidecar atomically."""
        d = self.driver
        _check(d.cuStreamSynchronize(self.stream), "cuStreamSynchronize (the kernel failed?)")
        host = np.empty(self.nbytes, dtype=np.uint8)
        _check(d.cuMemcpyDtoH(host, self.buf, self.nbytes), "read back")
        drv = _check(self.driver.cuDriverGetVersion(), "cuDriverGetVersion")
        return write_launch(self.out_dir, self.manifest.kernel, self.seq, host.tobytes(), self.grid, self.block,
                            self.source_id, self.workload, device_info(), RUN_ID,
                            driver_version=int(drv), runtime_version=None, capture="cuda-python",
                            time_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


_launches: dict[str, int] = {}  # launches seen per kernel symbol in this process
_manifests: dict[str, Manifest] = {}


def _env_manifest() -> Manifest:
    from . import manifest as mf
    p = os.environ.get("ATREX_MANIFEST", "")
    if not p:
        raise CaptureError("ATREX_TIMELINE_OUT is set but ATREX_MANIFEST is not: a launch from Python needs the "
                           "manifest of the applied spec", hint="run under `atrex-inject capture --spec SPEC`, or "
                                                                "set ATREX_MANIFEST=.atrex/<spec name>/manifest.json")
    if p not in _manifests:
        m = mf.load_if_present(Path(p))
        if m is None:
            raise CaptureError(f"ATREX_MANIFEST names {p}, which does not exist", hint="apply the spec first")
        _manifests[p] = m
    return _manifests[p]


@contextlib.contextmanager
def capture_launch(module, symbol: str | bytes, grid, block, *, source: str, stream=0,
                   manifest: Manifest | None = None):
    """Bracket one launch of an instrumented kernel from Python; yields the CUfunction to launch.

    With ATREX_TIMELINE_OUT unset (probes off) it is the clean kernel and nothing else happens.
    Set, every launch of `symbol` in this process is counted, and those the manifest's [capture]
    skip/count select run the instrumented copy under a LaunchCapture into that folder; the
    others run the clean kernel. `source` is the CUDA text the module was compiled from: its
    source id goes into the capture, so a module built from another text is refused by decode.
    The manifest comes from ATREX_MANIFEST (set by `atrex-inject capture`) unless given."""
    from .source_id import source_id_of
    d = _driver()
    key = symbol.decode() if isinstance(symbol, bytes) else symbol
    seq = _launches.get(key, 0)
    _launches[key] = seq + 1
    out = os.environ.get("ATREX_TIMELINE_OUT", "")
    m = (manifest or _env_manifest()) if out else None
    if m is None or seq < m.capture.skip or (m.capture.count and seq >= m.capture.skip + m.capture.count):
        yield _check(d.cuModuleGetFunction(module, key.encode()), f"cuModuleGetFunction({key})")
        return
    with LaunchCapture(module, m, grid, block, out, launch_seq=seq, stream=stream,
                       source_id=source_id_of(source)) as lc:
        yield lc.function(key)
