"""Capture for instrumented kernels that Python loads from a cubin/PTX and launches itself.

Uses cuda-python's driver bindings (cuda.bindings.driver). The instrumented module exports the
device symbol `atrex_tl_buffer`; a LaunchCapture allocates the launch's buffer, writes the launch
header, points the symbol at it, and after the user's launch reads it back and writes the same
`.atrex` + `.json` pair as the C++ host session, so decode cannot tell them apart.

    with LaunchCapture(module, manifest, grid, block, out_dir, launch_seq=0) as cap:
        driver.cuLaunchKernel(func, *grid, *block, 0, stream, params, 0)
"""
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import numpy as np

from .errors import CaptureError
from .launchfile import write_launch
from .layout import build_header
from .manifest import Manifest

SYMBOL = b"atrex_tl_buffer"
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


class LaunchCapture:
    """One captured launch of an instrumented kernel from a loaded CUmodule."""

    def __init__(self, module, manifest: Manifest, grid, block, out_dir: str | Path, launch_seq: int = 0,
                 stream=0, workload: str | None = None):
        self.driver = _driver()
        self.module, self.manifest, self.stream = module, manifest, stream
        self.grid, self.block = tuple(grid) + (1,) * (3 - len(grid)), tuple(block) + (1,) * (3 - len(block))
        self.out_dir, self.seq = Path(out_dir), launch_seq
        self.workload = workload if workload is not None else os.environ.get("ATREX_WORKLOAD", "")
        cap = manifest.capture
        self.header = build_header(manifest.groups, self.grid, self.block, cap.capacity, cap.event_bytes, cap.clock,
                                   manifest.source.source_id, launch_seq)
        self.nbytes = int(self.header["total_bytes"][0])
        if self.nbytes > 0xFFFFFFFF:  # the device recorder addresses slots with 32-bit buffer offsets
            raise CaptureError(f"this launch needs a {self.nbytes}-byte buffer, over the recorder's 4 GiB",
                               hint="lower [capture] capacity or the CTA density in the spec, re-apply, rebuild")
        self.buf = None

    def __enter__(self) -> "LaunchCapture":
        d = self.driver
        sym, size = _check(d.cuModuleGetGlobal(self.module, SYMBOL), "cuModuleGetGlobal(atrex_tl_buffer)")
        if int(size) != 8:
            raise CaptureError(f"atrex_tl_buffer has {int(size)} bytes, expected a pointer")
        self.buf = _check(d.cuMemAlloc(self.nbytes), "cuMemAlloc")
        _check(d.cuMemsetD8Async(self.buf, 0, self.nbytes, self.stream), "cuMemsetD8Async")
        _check(d.cuMemcpyHtoDAsync(self.buf, self.header, self.header.nbytes, self.stream), "write header")
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
                            self.manifest.source.source_id, self.workload, device_info(), RUN_ID,
                            driver_version=int(drv), runtime_version=None, capture="cuda-python",
                            time_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
