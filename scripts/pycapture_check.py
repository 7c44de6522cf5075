"""GPU check of the cuda-python capture path (run by scripts/gpu-suite.sh on the GPU host).

Applies examples/specs/reduce_sumsq.toml in a temporary project, compiles the instrumented kernel
to a cubin, loads it with cuda.bindings, launches it from Python under LaunchCapture, checks the
kernel's result against float64, decodes the capture and prints its counts.

    python scripts/pycapture_check.py OUT_DIR
"""
from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from cuda.bindings import driver as cu

from atrex_inject import snapshot
from atrex_inject.cuda.python.capture import LaunchCapture
from atrex_inject.decode import decode_dir
from atrex_inject.gpu import check, gpu_available

REPO = Path(__file__).resolve().parent.parent


def main(out_dir: Path) -> int:
    assert gpu_available(), "no GPU"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shutil.copytree(REPO / "examples", root / "examples")
        (root / ".git").mkdir()
        spec = root / "examples/specs/reduce_sumsq.toml"
        m = snapshot.apply(spec).manifest
        src = root / m.source.path
        cubin = root / "k.cubin"
        subprocess.run(["nvcc", "-cubin", "-O3", "-gencode=arch=compute_90a,code=sm_90a",
                        f"-I{snapshot.runtime_header().parent}", f"-I{src.parent}", "-o", cubin, src], check=True)
        snapshot.revert(spec)
        check(cu.cuInit(0), "cuInit")
        dev = check(cu.cuDeviceGet(0), "cuDeviceGet")
        ctx = check(cu.cuDevicePrimaryCtxRetain(dev), "retain")
        check(cu.cuCtxSetCurrent(ctx), "set ctx")
        mod = check(cu.cuModuleLoadData(cubin.read_bytes()), "cuModuleLoadData")
        # recording launches the instrumented copy, reduce_sumsq__atrex (manifest perturbation.clone):
        # cap.function maps the clean kernel's symbol to the copy's
        assert m.perturbation.clone == "reduce_sumsq__atrex"
        n4 = 1 << 22
        rng = np.random.default_rng(7)
        x = rng.uniform(-1, 1, 4 * n4).astype(np.float32)
        dx = check(cu.cuMemAlloc(x.nbytes), "alloc x")
        dout = check(cu.cuMemAlloc(4), "alloc out")
        check(cu.cuMemcpyHtoD(dx, x, x.nbytes), "copy x")
        check(cu.cuMemsetD8(dout, 0, 4), "zero out")
        sms = check(cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), "sms")
        grid, block = (int(sms) * 4, 1, 1), (256, 1, 1)
        cap_dir = out_dir / "pycapture"
        cap_dir.mkdir(parents=True, exist_ok=True)
        params = ((dx, n4, dout), (None, ctypes.c_long, None))
        with LaunchCapture(mod, m, grid, block, cap_dir, launch_seq=0, workload=f"pycapture:n4={n4}") as cap:
            func = cap.function(b"_Z12reduce_sumsqPK6float4lPf")
            check(cu.cuLaunchKernel(func, *grid, *block, 0, 0, params, 0), "cuLaunchKernel")
        got = np.zeros(1, dtype=np.float32)
        check(cu.cuMemcpyDtoH(got, dout, 4), "read out")
        ref = float(np.sum(x.astype(np.float64) ** 2))
        rel = abs(float(got[0]) - ref) / ref
        (cap_dir / "manifest.json").write_text(m.dumps())
        launches = decode_dir(cap_dir, m)
        for l in launches:
            print(f"pycapture {l.name}: {l.counts}")
        print(f"pycapture result rel_err {rel:.2e}: {'passed' if rel < 1e-4 else 'FAILED'}")
        return 0 if rel < 1e-4 and all(l.counts["owners_missing"] == 0 and l.counts["torn_events"] == 0
                                       for l in launches) else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
