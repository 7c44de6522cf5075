"""CuTe DSL example: y = alpha * x + y over a 1-D tensor with a grid-stride loop.

The kernel lives in a real .py file because the DSL reads its source. `compile_only` builds it
for sm_90a with fake tensors (no GPU needed); run_scale_add.py launches it on a GPU.
"""
import cutlass
import cutlass.cute as cute

THREADS = 256


@cute.kernel
def scale_add_kernel(x: cute.Tensor, y: cute.Tensor, alpha: cutlass.Float32, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    gdim, _, _ = cute.arch.grid_dim()
    start = bidx * THREADS + tidx
    for i in cutlass.range(start, n, gdim * THREADS):
        y[i] = alpha * x[i] + y[i]
    cute.arch.sync_threads()


@cute.jit
def scale_add(x: cute.Tensor, y: cute.Tensor, alpha: cutlass.Float32, n: cutlass.Int32, blocks: cutlass.Int32):
    scale_add_kernel(x, y, alpha, n).launch(grid=(blocks, 1, 1), block=(THREADS, 1, 1))


def compile_only(n: int = 1 << 20):
    """Compile for the architecture in CUTE_DSL_ARCH with fake tensors (CPU only)."""
    from cutlass.cute.runtime import make_fake_compact_tensor

    x = make_fake_compact_tensor(cutlass.Float32, (n,), assumed_align=16)
    y = make_fake_compact_tensor(cutlass.Float32, (n,), assumed_align=16)
    return cute.compile(scale_add, x, y, cutlass.Float32(2.0), cutlass.Int32(n), cutlass.Int32(132))


if __name__ == "__main__":
    compile_only()
    print("compiled")
