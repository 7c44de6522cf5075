"""The loop shapes of bench/probe_cost (its SHAPES) written in CuTe DSL, for NVIDIA IKeT's per-event
figure on the same loops in the same call: with --marks each carries one `iket.mark` an iteration,
at the top of the iteration (`top`, where the tool's loop-begin site records) or at its bottom
(`bottom`, its loop-end site); IKeT records every warp. Each shape is compiled once a mark (the trip
count is an argument) and timed at each trip count; prints one JSON line with the median launch
time of each. bench/probe_cost/run.py builds and runs it beside the tool's recorders: clean and
under run-iket.

    python3 iket_loops.py [--marks top,bottom] [--reps 21] [--shapes fma,...] [--iters 1024,2048]
    python3 iket_loops.py --compile-only    (every shape and mark, with fake tensors: no GPU, no torch)
"""
import argparse
import functools
import json
import sys
from pathlib import Path

import cutlass
import cutlass.cute as cute
from cutlass.cute.experimental import iket

THREADS = 256
COPY_FLOAT4 = 1 << 26  # the copy's float4 elements: 1 GiB in, 1 GiB out
F32 = cutlass.Float32
MARKS = ("none", "top", "bottom")  # where an iteration's iket.mark is: none, its top, its bottom


def _mark(mark: str, where: str) -> None:
    """An iteration's iket.mark, where `mark` puts it (the kernel is traced once a mark)."""
    if mark == where:
        iket.mark("iter")


@cute.kernel
def fma_kernel(out: cute.Tensor, src: cute.Tensor, iters: cutlass.Int32, z: cutlass.Float32,
               mark: cutlass.Constexpr):
    """Four independent FMA chains, 128 FMA a thread an iteration."""
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    a0 = F32(tidx)
    a1 = a0 + F32(1.0)
    a2 = a0 + F32(2.0)
    a3 = a0 + F32(3.0)
    for _ in cutlass.range(iters, unroll=1):
        _mark(mark, "top")
        for _j in cutlass.range_constexpr(32):
            a0 = a0 * F32(1.0001) + F32(0.5)
            a1 = a1 * F32(0.9999) + F32(0.25)
            a2 = a2 * F32(1.0002) + F32(0.125)
            a3 = a3 * F32(0.9998) + F32(0.0625)
        _mark(mark, "bottom")
    out[bidx * THREADS + tidx] = a0 + a1 + a2 + a3


@cute.kernel
def fma_dep_kernel(out: cute.Tensor, src: cute.Tensor, iters: cutlass.Int32, z: cutlass.Float32,
               mark: cutlass.Constexpr):
    """One dependent chain, x = x*y + z; y = y*z + x, 128 FMA a thread an iteration (z = 0.1, a
    kernel argument as in probe_cost.cu: read from src, z took a register of the chain's bank and the
    clean loop ran at half probe_cost.cu's speed)."""
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    x = F32(tidx) * F32(1e-3)
    y = F32(0.5)
    for _ in cutlass.range(iters, unroll=1):
        _mark(mark, "top")
        for _j in cutlass.range_constexpr(64):
            x = x * y + z
            y = y * z + x
        _mark(mark, "bottom")
    out[bidx * THREADS + tidx] = x + y


@cute.kernel
def copy_kernel(out: cute.Tensor, src: cute.Tensor, iters: cutlass.Int32, z: cutlass.Float32,
               mark: cutlass.Constexpr):
    """Grid-stride float4 copy of src's rows into out's, 512 bytes a warp an iteration (iters unused:
    the data sets the trip count)."""
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    gdim, _, _ = cute.arch.grid_dim()
    frag = cute.make_rmem_tensor(cute.make_layout(4), F32)
    for i in cutlass.range(bidx * THREADS + tidx, cute.size(src, mode=[0]), gdim * THREADS):
        _mark(mark, "top")
        cute.autovec_copy(src[i, None], frag)
        cute.autovec_copy(frag, out[i, None])
        _mark(mark, "bottom")


@cute.kernel
def smem_kernel(out: cute.Tensor, src: cute.Tensor, iters: cutlass.Int32, z: cutlass.Float32,
               mark: cutlass.Constexpr):
    """A shared-memory store, a CTA barrier and eight loads of other warps' values an iteration,
    double-buffered so one barrier an iteration suffices; two iterations a trip, one a buffer, so
    that each load's address is a register and a constant, as nvcc makes probe_cost.cu's (with the
    buffer an iteration's index, the addresses were computed anew each iteration: 40 instructions
    an iteration against nvcc's 19). `iters` is even."""
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    buf = cutlass.memory.SmemAllocator().allocate_tensor(F32, cute.make_layout((THREADS, 2)), 16)
    v = F32(tidx)
    for _ in cutlass.range(iters // 2, unroll=1):
        for b in cutlass.range_constexpr(2):
            _mark(mark, "top")
            buf[tidx, b] = v
            cute.arch.sync_threads()
            v = v * F32(0.5)
            for k in cutlass.range_constexpr(1, 9):
                v = buf[(tidx + 32 * k) & (THREADS - 1), b] * F32(0.0625) + v
            _mark(mark, "bottom")
    out[bidx * THREADS + tidx] = v


@cute.kernel
def mma_kernel(out: cute.Tensor, src: cute.Tensor, iters: cutlass.Int32, z: cutlass.Float32,
               mark: cutlass.Constexpr):
    """16 mma.sync bf16 m16n8k16 a warp an iteration into four accumulators in registers (A and B
    fragments of bf16 2^-8)."""
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    mma = cute.make_tiled_mma(cute.nvgpu.warp.MmaF16BF16Op(cutlass.BFloat16, F32, (16, 8, 16)))
    a = cute.make_rmem_tensor(mma.partition_shape_A((16, 16)), cutlass.BFloat16)
    b = cute.make_rmem_tensor(mma.partition_shape_B((8, 16)), cutlass.BFloat16)
    a.fill(2.0 ** -8)
    b.fill(2.0 ** -8)
    acc = [cute.make_rmem_tensor(mma.partition_shape_C((16, 8)), F32) for _ in range(4)]
    for d in acc:
        d.fill(0.0)
    for _ in cutlass.range(iters, unroll=1):
        _mark(mark, "top")
        for _k in cutlass.range_constexpr(4):
            for d in acc:
                cute.gemm(mma, d, a, b, d)
        _mark(mark, "bottom")
    s = F32(0.0)
    for d in acc:
        for e in cutlass.range_constexpr(cute.size(d)):
            s = s + d[e]
    out[bidx * THREADS + tidx] = s


# shape (bench/probe_cost's SHAPES) -> its kernel and CTAs per SM
SHAPES = {"fma": (fma_kernel, 8), "fma_dep": (fma_dep_kernel, 8), "copy": (copy_kernel, 16), "smem": (smem_kernel, 8),
          "mma": (mma_kernel, 8)}


@cute.jit
def loop(shape: cutlass.Constexpr, out: cute.Tensor, src: cute.Tensor, iters: cutlass.Int32, blocks: cutlass.Int32,
         mark: cutlass.Constexpr):
    SHAPES[shape][0](out, src, iters, F32(0.1), mark).launch(grid=(blocks, 1, 1), block=(THREADS, 1, 1))


def compile_only() -> list[str]:
    """Every shape compiled with each mark (none, top, bottom) for the architecture in CUTE_DSL_ARCH,
    with fake tensors (CPU only); with CUTE_DSL_KEEP=cubin each lands in CUTE_DSL_DUMP_DIR as
    cutlass_loop_<shape>_<tensors>_<mark>.sm_90a.cubin (bench/probe_cost/run.py reads them)."""
    from cutlass.cute.runtime import make_fake_compact_tensor  # noqa: PLC0415

    flat = make_fake_compact_tensor(F32, (132 * 8 * THREADS,), assumed_align=16)
    rows = make_fake_compact_tensor(F32, (COPY_FLOAT4, 4), stride_order=(1, 0), assumed_align=16)
    for shape in SHAPES:
        args = (rows, rows) if shape == "copy" else (flat, flat)
        for mark in MARKS:
            cute.compile(loop, shape, *args, cutlass.Int32(1024), cutlass.Int32(132 * 8), mark)
    return list(SHAPES)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--marks", default="none", help="where the marks are, each timed: none, top, bottom")
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--iters", default="1024,2048", help="trip counts (the copy's is its data's)")
    ap.add_argument("--compile-only", action="store_true")
    a = ap.parse_args()
    if a.compile_only:
        print(json.dumps({"compiled": compile_only()}))
        return 0
    marks = a.marks.split(",")
    if not set(marks) <= set(MARKS):
        print(f"--marks: {a.marks!r}: each of {', '.join(MARKS)}", file=sys.stderr)
        return 2
    import torch  # noqa: PLC0415  (GPU host only; the kernels compile without it)
    # the CuTe DSL examples' protocol (launches queued behind one GPU spin): timed one at a time, a
    # launch's host work through Python, and under run-iket IKeT's, was timed as the kernel's
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "cutedsl"))
    import harness  # noqa: PLC0415
    from cutlass.cute.runtime import from_dlpack  # noqa: PLC0415

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    runs = []
    for shape in a.shapes.split(","):
        kernel, per_sm = SHAPES[shape]
        blocks = sms * per_sm
        if shape == "copy":
            src = torch.ones(COPY_FLOAT4, 4, device="cuda")
            out = torch.empty_like(src)
        else:
            src = torch.full((blocks * THREADS,), 0.1, device="cuda")
            out = torch.zeros(blocks * THREADS, device="cuda")
        tensors = (from_dlpack(out, assumed_align=16), from_dlpack(src, assumed_align=16))
        compiled = {m: cute.compile(loop, shape, *tensors, cutlass.Int32(1024), cutlass.Int32(blocks), m) for m in marks}
        for n in ([None] if shape == "copy" else [int(x) for x in a.iters.split(",")]):
            args = (*tensors, cutlass.Int32(n or 0), cutlass.Int32(blocks))
            for mark, f in compiled.items():
                ms = harness.median_ms(functools.partial(f, *args), warmup=3, iters=a.reps)
                runs.append({"shape": shape, "iterations": n, "mark": mark, "median_ms": ms,
                             "blocks": blocks, "finite": bool(torch.isfinite(out).all())})
        del src, out
    print(json.dumps({"marks": marks, "runs": runs}))
    return 0 if all(r["finite"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
