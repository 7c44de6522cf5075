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

A program run under `atrex-inject capture` needs none of this in its own code: the launch hooks
(hooks/) put every launch of the kernel from cuda-python or CuPy through a LaunchCapture
(docs/launches.md).
"""
from __future__ import annotations

import os
import re
import time
import uuid
from pathlib import Path

import numpy as np

from ...errors import CaptureError
from ...gpu import check, device_info, driver
from ...launchfile import write_launch
from ...layout import MAX_BUFFER_BYTES, build_header
from ...manifest import Manifest

SYMBOL = b"atrex_tl_buffer"
HEADER_SYMBOL = b"atrex_tl_header"  # the launch header's constant copy, read by the owners' entry and exit
RUN_ID = uuid.uuid4().hex  # one per process, in every sidecar it writes: validation keeps one run per folder


def kernel_copy(manifest: Manifest, symbol: str | bytes) -> bytes | None:
    """The symbol of the kernel's instrumented copy for a symbol naming the manifest's kernel: `k`
    (extern "C") becomes `k__atrex`, and in an Itanium-mangled name (`_Z1kPf`, a lowered name from
    NVRTC) the kernel's name becomes the copy's (`_Z8k__atrexPf`); None for any other symbol (the
    copy itself included). A manifest without a copy (older tools instrumented the kernel in
    place) keeps the symbol."""
    sym = symbol.decode() if isinstance(symbol, bytes) else symbol
    name, clone = _names(manifest)
    copy = clone or name
    if sym == name:
        return copy.encode()
    m = re.search(rf"(?<![0-9]){len(name)}{re.escape(name)}", sym) if sym.startswith("_Z") else None
    if m is None:
        return None
    return (sym[:m.start()] + f"{len(copy)}{copy}" + sym[m.end():]).encode()


def copy_expression(manifest: Manifest, expression: str | bytes) -> str | None:
    """The copy's NVRTC name expression for one naming the kernel (`k<float>` -> `k__atrex<float>`,
    `&ns::k<4>` -> `&ns::k__atrex<4>`), so that compiling it instantiates the copy of a template
    kernel; None for an expression naming anything else."""
    expr = expression.decode() if isinstance(expression, bytes) else expression
    name, clone = _names(manifest)
    if clone is None:
        return None
    m = re.match(rf"^(\s*&?\s*(?:[\w:]*::)?){re.escape(name)}(?![\w])", expr)
    return None if m is None else m.group(1) + clone + expr[m.end():]


def _names(manifest: Manifest) -> tuple[str, str | None]:
    """The kernel's own name and its copy's, unqualified and without template arguments, as the
    manifest records them (`ns::k<T, 4>` -> k). The copy's name is read, never rebuilt from the
    kernel's and cuda/clone.py's suffix: the manifest is the record of what apply wrote. None where
    the manifest has no `perturbation.clone`: the copy and that field came in together, so such a
    manifest is older than the copy, and its probes are in the kernel itself."""
    bare = lambda n: re.sub(r"<.*", "", n).split("::")[-1].strip()  # noqa: E731
    clone = manifest.perturbation.clone if manifest.perturbation is not None else None
    return bare(manifest.kernel), (bare(clone) if clone else None)


def clone_symbol(manifest: Manifest, symbol: str | bytes) -> bytes:
    """kernel_copy, refusing a symbol that does not name the manifest's kernel."""
    copy = kernel_copy(manifest, symbol)
    if copy is None:
        sym = symbol.decode() if isinstance(symbol, bytes) else symbol
        name = re.sub(r"<.*", "", manifest.kernel).split("::")[-1].strip()
        raise CaptureError(f"symbol {sym!r} is not the kernel {name!r} of the manifest, nor its mangled name",
                           hint=f"load the kernel by the name the spec instruments ({name})")
    return copy


class LaunchCapture:
    """One captured launch of an instrumented kernel from a loaded CUmodule. `source_id` names the
    source the module was compiled from (default: the manifest's); decode refuses a mismatch."""

    def __init__(self, module, manifest: Manifest, grid, block, out_dir: str | Path, launch_seq: int = 0,
                 stream=0, workload: str | None = None, source_id: str | None = None, api: str = "cuda-python"):
        self.driver = driver()
        self.api = api  # the sidecar's `capture`: which Python API launched it
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
        return check(self.driver.cuModuleGetFunction(self.module, sym),
                      f"cuModuleGetFunction({sym.decode()}): is the module built from the instrumented source?")

    def bind(self) -> None:
        """Allocate the launch's buffer, write its header, and point the module's atrex_tl_buffer and
        atrex_tl_header at it (on the launch's stream); on failure nothing stays bound or allocated."""
        d = self.driver
        sym, size = check(d.cuModuleGetGlobal(self.module, SYMBOL), "cuModuleGetGlobal(atrex_tl_buffer)")
        if int(size) != 8:
            raise CaptureError(f"atrex_tl_buffer has {int(size)} bytes, expected a pointer")
        self._sym = sym
        hsym, hsize = check(d.cuModuleGetGlobal(self.module, HEADER_SYMBOL), "cuModuleGetGlobal(atrex_tl_header)")
        if int(hsize) != self.header.nbytes:
            raise CaptureError(f"atrex_tl_header has {int(hsize)} bytes, expected the {self.header.nbytes}-byte "
                               "launch header", hint="rebuild the module from the source `apply` wrote")
        self.buf = check(d.cuMemAlloc(self.nbytes), "cuMemAlloc")
        try:
            check(d.cuMemsetD8Async(self.buf, 0, self.nbytes, self.stream), "cuMemsetD8Async")
            check(d.cuMemcpyHtoDAsync(self.buf, self.header, self.header.nbytes, self.stream), "write header")
            check(d.cuMemcpyHtoDAsync(hsym, self.header, self.header.nbytes, self.stream), "bind atrex_tl_header")
            self._ptr = np.array([int(self.buf)], dtype=np.uint64)
            check(d.cuMemcpyHtoDAsync(sym, self._ptr, 8, self.stream), "bind atrex_tl_buffer")
        except CaptureError:
            self.release()
            raise

    def release(self) -> None:
        """Point atrex_tl_buffer back at null and free the buffer: a later launch must not see it."""
        d = self.driver
        if self.buf is not None:
            self._ptr = np.zeros(1, dtype=np.uint64)
            d.cuMemcpyHtoDAsync(self._sym, self._ptr, 8, self.stream)
            d.cuStreamSynchronize(self.stream)
            d.cuMemFree(self.buf)
            self.buf = None

    def __enter__(self) -> "LaunchCapture":
        self.bind()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.write()
        finally:
            self.release()

    def write(self) -> Path:
        """Synchronize, read back, and write `<kernel>-launch<seq>.atrex` and its sidecar atomically."""
        d = self.driver
        check(d.cuStreamSynchronize(self.stream), "cuStreamSynchronize (the kernel failed?)")
        host = np.empty(self.nbytes, dtype=np.uint8)
        check(d.cuMemcpyDtoH(host, self.buf, self.nbytes), "read back")
        drv = check(self.driver.cuDriverGetVersion(), "cuDriverGetVersion")
        return write_launch(self.out_dir, self.manifest.kernel, self.seq, host.tobytes(), self.grid, self.block,
                            self.source_id, self.workload, device_info(), RUN_ID,
                            driver_version=int(drv), runtime_version=None, capture=self.api,
                            time_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
