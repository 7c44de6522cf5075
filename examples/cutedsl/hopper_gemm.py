"""CuTe DSL example: a Hopper GEMM with TMA loads and warpgroup MMA (WGMMA).

C (M x N, fp32) = A (M x K, bf16, K-major) * B (N x K, bf16, K-major)^T. One warpgroup (128
threads) per CTA computes a 64 x 128 tile; K advances 64 at a time through one shared-memory
stage: thread 0 arms an mbarrier with the expected bytes and issues the two TMA copies, every
thread waits on the barrier, the warpgroup issues its WGMMAs, commits and waits, and the CTA
syncs before the stage is refilled. Deliberately simple (no multi-stage pipeline, no warp
specialization) so that a probe spec has visible load and MMA phases to time.

TMA copies are issued by a whole warp (warp 0): the CuTe DSL wraps each TMA copy in `elect.sync`
over the full warp, so issuing one from a single-thread branch (`if tidx == 0`) deadlocks; only
the barrier setup runs under `elect_one`. The accumulator is zero-filled and WGMMA always
accumulates (the ACCUMULATE field is a kernel argument that would otherwise default to False).
"""
import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.memory.smem import SmemAllocator
from cutlass.tensor_utils import LayoutEnum

BM, BN, BK = 64, 128, 64
THREADS = 128


@cute.kernel
def gemm_kernel(tiled_mma: cute.TiledMma, tma_a: cute.CopyAtom, mA: cute.Tensor, tma_b: cute.CopyAtom,
                mB: cute.Tensor, mC: cute.Tensor, sa_layout: cute.ComposedLayout, sb_layout: cute.ComposedLayout):
    tidx, _, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()
    smem = SmemAllocator()
    sA = smem.allocate_tensor(cutlass.BFloat16, sa_layout.outer, 1024, sa_layout.inner)
    sB = smem.allocate_tensor(cutlass.BFloat16, sb_layout.outer, 1024, sb_layout.inner)
    bar = smem.allocate_array(cutlass.Int64, 1)
    gA = cute.local_tile(mA, (BM, BK), (by, None))
    gB = cute.local_tile(mB, (BN, BK), (bx, None))
    gC = cute.local_tile(mC, (BM, BN), (by, bx))
    tAsA, tAgA = cpasync.tma_partition(tma_a, 0, cute.make_layout(1), cute.group_modes(sA, 0, 2),
                                       cute.group_modes(gA, 0, 2))
    tBsB, tBgB = cpasync.tma_partition(tma_b, 0, cute.make_layout(1), cute.group_modes(sB, 0, 2),
                                       cute.group_modes(gB, 0, 2))
    thr_mma = tiled_mma.get_slice(tidx)
    tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))
    tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))
    tCgC = thr_mma.partition_C(gC)
    acc = tiled_mma.make_fragment_C(tCgC.shape)
    acc.fill(0.0)
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    if warp == 0:
        with cute.arch.elect_one():
            cute.arch.mbarrier_init(bar, 1)
        cute.arch.mbarrier_init_fence()
    cute.arch.sync_threads()
    tiled_mma.set(warpgroup.Field.ACCUMULATE, True)
    stage_bytes = (BM + BN) * BK * 2
    k_tiles = cute.size(gA, mode=[2])
    phase = cutlass.Int32(0)
    for kt in cutlass.range(k_tiles):
        if warp == 0:
            with cute.arch.elect_one():
                cute.arch.mbarrier_arrive_and_expect_tx(bar, stage_bytes)
            cute.copy(tma_a, tAgA[(None, kt)], tAsA[(None, 0)], tma_bar_ptr=bar)
            cute.copy(tma_b, tBgB[(None, kt)], tBsB[(None, 0)], tma_bar_ptr=bar)
        cute.arch.mbarrier_wait(bar, phase)
        phase = phase ^ 1
        warpgroup.fence()
        for kb in cutlass.range_constexpr(cute.size(tCrA, mode=[2])):
            cute.gemm(tiled_mma, acc, tCrA[(None, None, kb, 0)], tCrB[(None, None, kb, 0)], acc)
        warpgroup.commit_group()
        warpgroup.wait_group(0)
        cute.arch.sync_threads()
    cute.autovec_copy(acc, tCgC)


@cute.jit
def gemm(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor):
    tiled_mma = sm90.make_trivial_tiled_mma(cutlass.BFloat16, cutlass.BFloat16, LayoutEnum.ROW_MAJOR.sm90_mma_major_mode(),
                                            LayoutEnum.ROW_MAJOR.sm90_mma_major_mode(), cutlass.Float32, (1, 1, 1),
                                            tiler_mn=(BM, BN))
    sa_layout = sm90.make_smem_layout_a(LayoutEnum.ROW_MAJOR, (BM, BN, BK), cutlass.BFloat16, 1)
    sb_layout = sm90.make_smem_layout_b(LayoutEnum.ROW_MAJOR, (BM, BN, BK), cutlass.BFloat16, 1)
    tma_a, mA_t = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), mA,
                                              cute.slice_(sa_layout, (None, None, 0)), (BM, BK))
    tma_b, mB_t = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), mB,
                                              cute.slice_(sb_layout, (None, None, 0)), (BN, BK))
    m, n = cute.size(mC, mode=[0]), cute.size(mC, mode=[1])
    smem_bytes = (BM + BN) * BK * 2 + 2048
    gemm_kernel(tiled_mma, tma_a, mA_t, tma_b, mB_t, mC, sa_layout, sb_layout).launch(
        grid=(n // BN, m // BM, 1), block=(THREADS, 1, 1), smem=smem_bytes)


def compile_only(m: int = 1024, n: int = 1024, k: int = 1024):
    """Compile for the architecture in CUTE_DSL_ARCH with fake tensors (CPU only)."""
    from cutlass.cute.runtime import make_fake_compact_tensor

    a = make_fake_compact_tensor(cutlass.BFloat16, (m, k), stride_order=(1, 0), assumed_align=16)
    b = make_fake_compact_tensor(cutlass.BFloat16, (n, k), stride_order=(1, 0), assumed_align=16)
    c = make_fake_compact_tensor(cutlass.Float32, (m, n), stride_order=(1, 0), assumed_align=16)
    return cute.compile(gemm, a, b, c)


if __name__ == "__main__":
    compile_only()
    print("compiled")
