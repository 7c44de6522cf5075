"""The per-event FMA loop of bench/probe_cost, written in CuTe DSL, for NVIDIA IKeT's figure in the
same run: 1056 x 256 threads (8 CTAs per SM on an H200), 1024 iterations of 128 FMA per thread, and
with --probe one `iket.mark` per iteration (IKeT records every warp). Prints one JSON line with the
median launch time; bench/perturbation/iket.py runs it clean and under run-iket, interleaved.

    python3 iket_fma.py [--probe] [--reps 21]
"""
import argparse
import json
import sys

import cutlass
import cutlass.cute as cute
from cutlass.cute.experimental import iket
from cutlass.cute.runtime import from_dlpack

THREADS = 256


@cute.kernel
def fma_kernel(out: cute.Tensor, iters: cutlass.Int32, probe: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    a0 = cutlass.Float32(tidx)
    a1 = a0 + cutlass.Float32(1.0)
    a2 = a0 + cutlass.Float32(2.0)
    a3 = a0 + cutlass.Float32(3.0)
    for _ in cutlass.range(iters, unroll=1):
        if cutlass.const_expr(probe):
            iket.mark("iter")
        for _j in cutlass.range_constexpr(32):
            a0 = a0 * cutlass.Float32(1.0001) + cutlass.Float32(0.5)
            a1 = a1 * cutlass.Float32(0.9999) + cutlass.Float32(0.25)
            a2 = a2 * cutlass.Float32(1.0002) + cutlass.Float32(0.125)
            a3 = a3 * cutlass.Float32(0.9998) + cutlass.Float32(0.0625)
    out[bidx * THREADS + tidx] = a0 + a1 + a2 + a3


@cute.jit
def fma(out: cute.Tensor, iters: cutlass.Int32, blocks: cutlass.Int32, probe: cutlass.Constexpr):
    fma_kernel(out, iters, probe).launch(grid=(blocks, 1, 1), block=(THREADS, 1, 1))


def main() -> int:
    import torch  # noqa: PLC0415  (GPU host only; the kernel compiles without it)

    ap = argparse.ArgumentParser()
    ap.add_argument("--probe", action="store_true")
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--iters", type=int, default=1024)
    a = ap.parse_args()
    blocks = torch.cuda.get_device_properties(0).multi_processor_count * 8
    out = torch.zeros(blocks * THREADS, device="cuda")
    args = (from_dlpack(out, assumed_align=16), cutlass.Int32(a.iters), cutlass.Int32(blocks))
    f = cute.compile(fma, *args, a.probe)
    for _ in range(3):
        f(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(a.reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f(*args)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    ok = bool(torch.isfinite(out).all())
    print(json.dumps({"probe": a.probe, "median_ms": sorted(times)[len(times) // 2], "blocks": blocks,
                      "iters": a.iters, "finite": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
