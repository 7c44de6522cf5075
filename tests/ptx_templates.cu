// ptx_templates.cu: inline-asm templates shaped like those of Hopper/Ampere kernels, written from the
// PTX ISA's instruction syntax. tests/compile/test_ptx.py parses every asm statement of kernel `templates` as
// the rewriter does and checks it against the `//>` line above it (its opcodes, in order); it is parsed, never
// compiled (operand lists are only as long as the reading needs).
#define SCOPE ".cluster"
#define SEM ".release"
#define SPACE ".shared::cta"
#define ACQ_GPU ".acquire" ".gpu"
#define FENCE_ASYNC "fence.proxy.async"
#define L2_HINT ".L2::cache_hint"
__global__ void templates(unsigned* s, unsigned long long* b, float* f, unsigned long long d, int n) {
  // ---- ld / st
//> ld.global.u32
  asm volatile("ld.global.u32 %0, [%1];" : "=r"(s[0]) : "l"(b));
//> ld.global.nc.v4.f32
  asm volatile("ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(f[0]), "=f"(f[1]), "=f"(f[2]), "=f"(f[3]) : "l"(b));
//> ld.global.nc.L1::no_allocate.v4.u32
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(s[0]), "=r"(s[1]), "=r"(s[2]), "=r"(s[3]) : "l"(b));
//> ld.global.nc.L1::no_allocate.L2::256B.v4.s32
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.s32 {%0, %1, %2, %3}, [%4];"
               : "=r"(s[0]), "=r"(s[1]), "=r"(s[2]), "=r"(s[3]) : "l"(b));
//> ld.global.L2::cache_hint.v4.u32
  asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(s[0]), "=r"(s[1]), "=r"(s[2]), "=r"(s[3]) : "l"(b), "l"(d));
//> ld.global.L1::evict_last.L2::256B.v2.u64
  asm volatile("ld.global.L1::evict_last.L2::256B.v2.u64 {%0, %1}, [%2];" : "=l"(b[0]), "=l"(b[1]) : "l"(b));
//> ld.shared.v4.u32
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(s[0]), "=r"(s[1]), "=r"(s[2]), "=r"(s[3]) : "r"(s[4]));
//> ld.shared::cta.b32
  asm volatile("ld.shared::cta.b32 %0, [%1+128];" : "=r"(s[0]) : "r"(s[1]));
//> ld.shared::cluster.u32
  asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(s[0]) : "r"(s[1]));
//> ld.param.u64
  asm volatile("ld.param.u64 %0, [%1];" : "=l"(b[0]) : "l"(b));
//> ld.volatile.global.u32
  asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(s[0]) : "l"(b) : "memory");
//> ld.acquire.gpu.global.u32
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(s[0]) : "l"(b) : "memory");
//> ld.relaxed.sys.global.b64
  asm volatile("ld.relaxed.sys.global.b64 %0, [%1];" : "=l"(b[0]) : "l"(b) : "memory");
//> ld.acquire.gpu.global.b32
  asm volatile("ld" ACQ_GPU ".global.b32 %0, [%1];" : "=r"(s[0]) : "l"(b) : "memory");
//> ld.global.v2.f32
  asm volatile("ld.global.v2.f32 {%0, %1}, [%2+8];" : "=f"(f[0]), "=f"(f[1]) : "l"(b));
//> ld.global.b16
  asm volatile("ld.global.b16 %0, [%1];" : "=h"(*(unsigned short*)s) : "l"(b));
//> ld.global.ca.u8
  asm volatile("ld.global.ca.u8 %0, [%1];" : "=r"(s[0]) : "l"(b));
//> ld.global.cs.v4.f32
  asm volatile("ld.global.cs.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(f[0]), "=f"(f[1]), "=f"(f[2]), "=f"(f[3]) : "l"(b));
//> st.global.u32
  asm volatile("st.global.u32 [%0], %1;" :: "l"(b), "r"(s[0]) : "memory");
//> st.global.v4.b32
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" :: "l"(b), "r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]) : "memory");
//> st.global.L1::no_allocate.v4.f32
  asm volatile("st.global.L1::no_allocate.v4.f32 [%0], {%1, %2, %3, %4};"
               :: "l"(b), "f"(f[0]), "f"(f[1]), "f"(f[2]), "f"(f[3]) : "memory");
//> st.global.L2::cache_hint.v2.b32
  asm volatile("st.global.L2::cache_hint.v2.b32 [%0], {%1, %2}, %3;" :: "l"(b), "r"(s[0]), "r"(s[1]), "l"(d) : "memory");
//> st.shared.v2.u32
  asm volatile("st.shared.v2.u32 [%0], {%1, %2};" :: "r"(s[0]), "r"(s[1]), "r"(s[2]));
//> st.shared::cta.b64
  asm volatile("st.shared::cta.b64 [%0], %1;" :: "r"(s[0]), "l"(d));
//> st.shared::cluster.u32
  asm volatile("st.shared::cluster.u32 [%0], %1;" :: "r"(s[0]), "r"(s[1]) : "memory");
//> st.release.gpu.global.u32
  asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(b), "r"(s[0]) : "memory");
//> st.relaxed.sys.global.b32
  asm volatile("st.relaxed.sys.global.b32 [%0], %1;" :: "l"(b), "r"(s[0]) : "memory");
//> st.volatile.global.u32
  asm volatile("st.volatile.global.u32 [%0], %1;" :: "l"(b), "r"(s[0]) : "memory");
//> st.global.wb.v4.u32
  asm volatile("st.global.wb.v4.u32 [%0+16], {%1, %2, %3, %4};" :: "l"(b), "r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]));
//> st.async.shared::cluster.mbarrier::complete_tx::bytes.u32
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%0], %1, [%2];" :: "r"(s[0]), "r"(s[1]), "r"(s[2]) : "memory");
//> st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];"
               :: "r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]) : "memory");
//> st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];"
               :: "r"(s[0]), "f"(f[0]), "f"(f[1]), "f"(f[2]), "f"(f[3]), "r"(s[1]) : "memory");
//> red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32
  asm volatile("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [%0], %1, [%2];"
               :: "r"(s[0]), "r"(s[1]), "r"(s[2]) : "memory");
//> red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.inc.u32
  asm volatile("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.inc.u32 [%0], %1, [%2];"
               :: "r"(s[0]), "r"(s[1]), "r"(s[2]) : "memory");
  // ---- cp.async (Ampere)
//> cp.async.ca.shared.global
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(s[0]), "l"(b));
//> cp.async.ca.shared.global
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" :: "r"(s[0]), "l"(b), "r"(s[1]));
//> cp.async.cg.shared.global
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s[0]), "l"(b));
//> cp.async.cg.shared.global
  asm volatile("cp.async.cg.shared.global [%0], [%1], %2, %3;\n" :: "r"(s[0]), "l"(b), "n"(16), "r"(s[1]));
//> cp.async.cg.shared.global.L2::128B
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" :: "r"(s[0]), "l"(b), "r"(s[1]));
//> cp.async.cg.shared.global.L2::cache_hint
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" :: "r"(s[0]), "l"(b), "l"(d));
//> cp.async.ca.shared.global.L2::256B
  asm volatile("cp.async.ca.shared.global.L2::256B [%0], [%1], 16;" :: "r"(s[0]), "l"(b));
//> .reg setp.ne.b32 cp.async.cg.shared.global
  asm volatile("{\n"
               "  .reg .pred p;\n"
               "  setp.ne.b32 p, %0, 0;\n"
               "  @p cp.async.cg.shared.global [%1], [%2], %3;\n"
               "}\n" :: "r"(n), "r"(s[0]), "l"(b), "n"(16));
//> .reg setp.ne.b32 mov.b32 cp.async.cg.shared.global
  asm volatile("{\n"
               "  .reg .pred p;\n"
               "  setp.ne.b32 p, %0, 0;\n"
               "  @!p mov.b32 %3, 0;\n"
               "  cp.async.cg.shared.global [%1], [%2], 16, %3;\n"
               "}\n" :: "r"(n), "r"(s[0]), "l"(b), "r"(s[1]));
//> cp.async.commit_group
  asm volatile("cp.async.commit_group;\n" ::);
//> cp.async.wait_group
  asm volatile("cp.async.wait_group %0;\n" :: "n"(2));
//> cp.async.wait_group
  asm volatile("cp.async.wait_group 0;" ::: "memory");
//> cp.async.wait_all
  asm volatile("cp.async.wait_all;\n" ::: "memory");
//> cp.async.mbarrier.arrive.noinc.shared::cta.b64
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(s[0]) : "memory");
//> cp.async.mbarrier.arrive.shared.b64
  asm volatile("cp.async.mbarrier.arrive.shared.b64 [%0];" :: "r"(s[0]) : "memory");
  // ---- cp.async.bulk / TMA (Hopper)
//> cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
               :: "r"(s[0]), "l"(b), "r"(s[1]), "r"(s[2]) : "memory");
//> cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
               " [%0], [%1], %2, [%3], %4;\n" :: "r"(s[0]), "l"(b), "r"(s[1]), "r"(s[2]), "l"(d) : "memory");
//> cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1], %2, [%3], %4;" :: "r"(s[0]), "l"(b), "r"(s[1]), "r"(s[2]), "h"((short)n) : "memory");
//> cp.async.bulk.global.shared::cta.bulk_group
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" :: "l"(b), "r"(s[0]), "r"(s[1]) : "memory");
//> cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%0], [%1], %2, %3;\n"
               :: "l"(b), "r"(s[0]), "r"(s[1]), "l"(d) : "memory");
//> cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]) : "memory");
//> cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" :: "l"(b), "r"(s[0]), "r"(s[1]) : "memory");
//> cp.async.bulk.prefetch.L2.global
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(b), "r"(s[0]) : "memory");
//> cp.async.bulk.commit_group
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
//> cp.async.bulk.wait_group.read
  asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(0) : "memory");
//> cp.async.bulk.wait_group
  asm volatile("cp.async.bulk.wait_group 1;" ::: "memory");
//> cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes
  asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3}], [%2];"
               :: "r"(s[0]), "l"(d), "r"(s[1]), "r"(s[2]) : "memory");
//> cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4}], [%2];"
               :: "r"(s[0]), "l"(d), "r"(s[1]), "r"(s[2]), "r"(s[3]) : "memory");
//> cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4, %5}], [%2];"
               :: "r"(s[0]), "l"(d), "r"(s[1]), "r"(s[2]), "r"(s[3]), "r"(s[4]) : "memory");
//> cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes\n"
      "    [%0], [%1, {%3, %4, %5, %6}], [%2];\n"
      :: "r"(s[0]), "l"(d), "r"(s[1]), "r"(s[2]), "r"(s[3]), "r"(s[4]), "r"(s[5]) : "memory");
//> cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes\n"
      "    [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n"
      :: "r"(s[0]), "l"(d), "r"(s[1]), "r"(s[2]), "r"(s[3]), "r"(s[4]), "r"(s[5]), "r"(s[6]) : "memory");
//> cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
               " [%0], [%1, {%3, %4}], [%2], %5;"
               :: "r"(s[0]), "l"(d), "r"(s[1]), "r"(s[2]), "r"(s[3]), "l"(d) : "memory");
//> cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%4, %5}], [%2], %3;"
               :: "r"(s[0]), "l"(d), "r"(s[1]), "h"((short)n), "r"(s[2]), "r"(s[3]) : "memory");
//> cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint"
               " [%0], [%1, {%4, %5, %6}], [%2], %3, %7;"
               :: "r"(s[0]), "l"(d), "r"(s[1]), "h"((short)n), "r"(s[2]), "r"(s[3]), "r"(s[4]), "l"(d) : "memory");
//> cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
               L2_HINT " [%0], [%1, {%3, %4}], [%2], %5;"
               :: "r"(s[0]), "l"(d), "r"(s[1]), "r"(s[2]), "r"(s[3]), "l"(d) : "memory");
//> cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4, %5, %6}], [%2], {%7, %8};"
               :: "r"(s[0]), "l"(d), "r"(s[1]), "r"(s[2]), "r"(s[3]), "r"(s[4]), "r"(s[5]),
                  "h"((short)n), "h"((short)n) : "memory");
//> cp.async.bulk.tensor.5d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes.L2::cache_hint
  asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes.L2::cache_hint\n"
               "  [%0], [%1, {%3, %4, %5, %6, %7}], [%2], {%8, %9, %10}, %11;\n"
               :: "r"(s[0]), "l"(d), "r"(s[1]), "r"(s[2]), "r"(s[3]), "r"(s[4]), "r"(s[5]), "r"(s[6]),
                  "h"((short)n), "h"((short)n), "h"((short)n), "l"(d) : "memory");
//> cp.async.bulk.tensor.2d.global.shared::cta.bulk_group
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
               :: "l"(d), "r"(s[0]), "r"(s[1]), "r"(s[2]) : "memory");
//> cp.async.bulk.tensor.3d.global.shared::cta.bulk_group.L2::cache_hint
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group.L2::cache_hint [%0, {%2, %3, %4}], [%1], %5;"
               :: "l"(d), "r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]), "l"(d) : "memory");
//> cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group
  asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3}], [%1];"
               :: "l"(d), "r"(s[0]), "r"(s[1]), "r"(s[2]) : "memory");
//> cp.reduce.async.bulk.tensor.1d.global.shared::cta.max.tile.bulk_group
  asm volatile("cp.reduce.async.bulk.tensor.1d.global.shared::cta.max.tile.bulk_group [%0, {%2}], [%1];"
               :: "l"(d), "r"(s[0]), "r"(s[1]) : "memory");
//> cp.async.bulk.prefetch.tensor.2d.L2.global
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global [%0, {%1, %2}];" :: "l"(d), "r"(s[0]), "r"(s[1]) : "memory");
//> cp.async.bulk.prefetch.tensor.3d.L2.global.tile.L2::cache_hint
  asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile.L2::cache_hint [%0, {%1, %2, %3}], %4;"
               :: "l"(d), "r"(s[0]), "r"(s[1]), "r"(s[2]), "l"(d) : "memory");
//> cp.async.bulk.prefetch.tensor.4d.L2.global.im2col
  asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.im2col [%0, {%1, %2, %3, %4}], {%5, %6};"
               :: "l"(d), "r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]), "h"((short)n), "h"((short)n) : "memory");
  // ---- mbarrier
//> mbarrier.init.shared::cta.b64
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(s[0]), "r"(s[1]));
//> mbarrier.init.shared.b64
  asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" :: "r"(s[0]), "n"(1));
//> mbarrier.arrive.shared::cta.b64
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(s[0]) : "memory");
//> mbarrier.arrive.shared.b64
  asm volatile("mbarrier.arrive.shared.b64 %0, [%1];" : "=l"(b[0]) : "r"(s[0]) : "memory");
//> mbarrier.arrive.release.cluster.shared::cluster.b64
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" :: "r"(s[0]) : "memory");
//> mbarrier.arrive.release.cluster.shared::cluster.b64
  asm volatile("mbarrier.arrive" SEM SCOPE ".shared::cluster.b64 _, [%0];" :: "r"(s[0]) : "memory");
//> mbarrier.arrive.release.cluster.shared::cta.b64
  asm volatile("mbarrier.arrive" SEM SCOPE SPACE ".b64 _, [%0], %1;" :: "r"(s[0]), "r"(s[1]) : "memory");
//> .reg mapa.shared::cluster.u32 mbarrier.arrive.shared::cluster.b64
  asm volatile("{\n\t.reg .b32 remAddr32;\n\t"
               "mapa.shared::cluster.u32  remAddr32, %0, %1;\n\t"
               "mbarrier.arrive.shared::cluster.b64  _, [remAddr32];\n\t}"
               :: "r"(s[0]), "r"(s[1]) : "memory");
//> mbarrier.arrive.expect_tx.shared::cta.b64
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(s[0]), "r"(s[1]) : "memory");
//> mbarrier.arrive.expect_tx.release.cta.shared::cta.b64
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 %0, [%1], %2;" : "=l"(b[0]) : "r"(s[0]), "r"(s[1]) : "memory");
//> mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64
  asm volatile("mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [%0], %1;" :: "r"(s[0]), "r"(s[1]) : "memory");
//> mbarrier.expect_tx.relaxed.cta.shared::cta.b64
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(s[0]), "r"(s[1]) : "memory");
//> mbarrier.arrive_drop.shared::cta.b64
  asm volatile("mbarrier.arrive_drop.shared::cta.b64 _, [%0];" :: "r"(s[0]) : "memory");
//> mbarrier.complete_tx.relaxed.cta.shared::cta.b64
  asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(s[0]), "r"(s[1]) : "memory");
//> .reg mbarrier.try_wait.parity.shared::cta.b64 bra bra
  asm volatile("{\n"
               ".reg .pred                P1;\n"
               "LAB_WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
               "@P1                       bra DONE;\n"
               "bra                   LAB_WAIT;\n"
               "DONE:\n"
               "}\n" :: "r"(s[0]), "r"(s[1]) : "memory");
//> .reg mbarrier.try_wait.parity.shared::cta.b64 bra.uni bra.uni
  asm volatile("{\n"
               ".reg .pred P1;\n"
               "WAIT_%=:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1, %2;\n"
               "@P1 bra.uni DONE_%=;\n"
               "bra.uni WAIT_%=;\n"
               "DONE_%=:\n"
               "}\n" :: "r"(s[0]), "r"(s[1]), "r"(0x989680) : "memory");
//> .reg mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 bra
  asm volatile("{\n"
               "  .reg .pred p;\n"
               "  $L_retry%=:\n"
               "  mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n"
               "  @!p bra $L_retry%=;\n"
               "}\n" :: "r"(s[0]), "r"(s[1]) : "memory");
//> .reg mbarrier.try_wait.shared::cta.b64 selp.b32
  asm volatile("{\n"
               ".reg .pred p;\n"
               "mbarrier.try_wait.shared::cta.b64 p, [%1], %2;\n"
               "selp.b32 %0, 1, 0, p;\n"
               "}\n" : "=r"(s[0]) : "r"(s[1]), "l"(d) : "memory");
//> .reg mbarrier.test_wait.parity.shared::cta.b64 selp.u32
  asm volatile("{\n"
               "  .reg .pred P1;\n"
               "  mbarrier.test_wait.parity.shared::cta.b64 P1, [%1], %2;\n"
               "  selp.u32 %0, 1, 0, P1;\n"
               "}\n" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]) : "memory");
//> .reg mbarrier.test_wait.shared.b64 selp.u32
  asm volatile("{ .reg .pred p; mbarrier.test_wait.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
               : "=r"(s[0]) : "r"(s[1]), "l"(d) : "memory");
//> mbarrier.inval.shared::cta.b64
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" :: "r"(s[0]) : "memory");
//> mbarrier.pending_count.b64
  asm volatile("mbarrier.pending_count.b64 %0, %1;" : "=r"(s[0]) : "l"(d));
  // ---- fences and barriers
//> fence.proxy.async
  asm volatile("fence.proxy.async;" ::: "memory");
//> fence.proxy.async.shared::cta
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
//> fence.proxy.async.global
  asm volatile("fence.proxy.async.global;" ::: "memory");
//> fence.proxy.async.shared::cta
  asm volatile(FENCE_ASYNC ".shared::cta;" ::: "memory");
//> fence.mbarrier_init.release.cluster
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
//> fence.acq_rel.gpu
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
//> fence.sc.sys
  asm volatile("fence.sc.sys;" ::: "memory");
//> fence.acq_rel.cluster
  asm volatile("fence.acq_rel.cluster;" ::: "memory");
//> fence.proxy.tensormap::generic.release.gpu
  asm volatile("fence.proxy.tensormap::generic.release.gpu;" ::: "memory");
//> fence.proxy.tensormap::generic.acquire.gpu
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" :: "l"(d) : "memory");
//> fence.proxy.alias
  asm volatile("fence.proxy.alias;" ::: "memory");
//> membar.gl
  asm volatile("membar.gl;" ::: "memory");
//> membar.cta
  asm volatile("membar.cta;\n" ::: "memory");
//> membar.sys
  asm volatile("membar.sys;" ::: "memory");
//> bar.sync
  asm volatile("bar.sync 0;" ::: "memory");
//> bar.sync
  asm volatile("bar.sync %0, %1;" :: "r"(1), "r"(128) : "memory");
//> barrier.sync
  asm volatile("barrier.sync %0, %1;" :: "r"(2), "n"(256));
//> barrier.sync.aligned
  asm volatile("barrier.sync.aligned %0, %1;" :: "r"(s[0]), "r"(s[1]));
//> bar.arrive
  asm volatile("bar.arrive %0, %1;" :: "r"(s[0]), "r"(s[1]) : "memory");
//> barrier.arrive
  asm volatile("barrier.arrive %0, %1;" :: "r"(s[0]), "r"(s[1]) : "memory");
//> bar.red.popc.u32
  asm volatile("bar.red.popc.u32 %0, 0, %1;" : "=r"(s[0]) : "r"(s[1]));
//> .reg setp.ne.u32 bar.red.and.pred selp.u32
  asm volatile("{ .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.and.pred q, 0, p;\n selp.u32 %0, 1, 0, q; }"
               : "=r"(s[0]) : "r"(s[1]));
//> barrier.cluster.arrive
  asm volatile("barrier.cluster.arrive;" ::: "memory");
//> barrier.cluster.arrive.release.aligned
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
//> barrier.cluster.arrive.relaxed.aligned
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" :);
//> barrier.cluster.wait
  asm volatile("barrier.cluster.wait;" ::: "memory");
//> barrier.cluster.wait.acquire.aligned
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
//> barrier.cluster.arrive.aligned barrier.cluster.wait.aligned
  asm volatile("barrier.cluster.arrive.aligned;\n"
               "barrier.cluster.wait.aligned;\n" ::: "memory");
  // ---- warp-specialization helpers
//> .reg .reg elect.sync mov.s32
  asm volatile("{\n"
               ".reg .b32 %%rx;\n"
               ".reg .pred %%px;\n"
               "     elect.sync %%rx|%%px, %1;\n"
               "@%%px mov.s32 %0, 1;\n"
               "}\n" : "+r"(s[0]) : "r"(0xffffffff));
//> elect.sync
  asm volatile("elect.sync _|%0, %1;" : "=r"(s[0]) : "r"(0xffffffff));
//> .reg elect.sync selp.u32
  asm volatile("{ .reg .pred P; elect.sync %0|P, 0xffffffff; selp.u32 %1, 1, 0, P; }" : "=r"(s[0]), "=r"(s[1]));
//> setmaxnreg.inc.sync.aligned.u32
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(240));
//> setmaxnreg.dec.sync.aligned.u32
  asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::);
//> griddepcontrol.wait
  asm volatile("griddepcontrol.wait;" ::: "memory");
//> griddepcontrol.launch_dependents
  asm volatile("griddepcontrol.launch_dependents;" :::);
//> nanosleep.u32
  asm volatile("nanosleep.u32 %0;" :: "r"(s[0]));
//> nanosleep.u32
  asm volatile("nanosleep.u32 20;");
//> createpolicy.fractional.L2::evict_last.b64
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(b[0]));
//> createpolicy.fractional.L2::evict_first.L2::evict_unchanged.b64
  asm volatile("createpolicy.fractional.L2::evict_first.L2::evict_unchanged.b64 %0, %1;" : "=l"(b[0]) : "f"(0.5f));
//> createpolicy.fractional.L2::evict_normal.b64
  asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0;" : "=l"(b[0]));
//> createpolicy.range.L2::evict_last.L2::evict_first.b64
  asm volatile("createpolicy.range.L2::evict_last.L2::evict_first.b64 %0, [%1], %2, %3;" : "=l"(b[0]) : "l"(b), "r"(s[0]), "r"(s[1]));
//> prefetch.global.L2
  asm volatile("prefetch.global.L2 [%0];" :: "l"(b));
//> prefetch.global.L2::evict_last
  asm volatile("prefetch.global.L2::evict_last [%0];" :: "l"(b));
//> prefetch.global.L1
  asm volatile("prefetch.global.L1 [%0+64];" :: "l"(b));
//> prefetch.tensormap
  asm volatile("prefetch.tensormap [%0];" :: "l"(d) : "memory");
//> prefetchu.L1
  asm volatile("prefetchu.L1 [%0];" :: "l"(b));
//> discard.global.L2
  asm volatile("discard.global.L2 [%0], 128;" :: "l"(b) : "memory");
//> applypriority.global.L2::evict_normal
  asm volatile("applypriority.global.L2::evict_normal [%0], 128;" :: "l"(b) : "memory");
//> tensormap.replace.tile.global_address.shared::cta.b1024.b64
  asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;" :: "r"(s[0]), "l"(d) : "memory");
//> tensormap.replace.tile.global_dim.global.b1024.b32
  asm volatile("tensormap.replace.tile.global_dim.global.b1024.b32 [%0], 1, %1;" :: "l"(d), "r"(s[0]) : "memory");
//> tensormap.replace.tile.global_stride.shared::cta.b1024.b64
  asm volatile("tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%0], 0, %1;" :: "r"(s[0]), "l"(d) : "memory");
//> tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned
  asm volatile("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%0], [%1], %2;"
               :: "l"(d), "r"(s[0]), "n"(128) : "memory");
//> mapa.shared::cluster.u32
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]));
//> mapa.u64
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(b[0]) : "l"(d), "r"(s[2]));
//> getctarank.shared::cluster.u32
  asm volatile("getctarank.shared::cluster.u32 %0, %1;" : "=r"(s[0]) : "r"(s[1]));
//> .reg isspacep.shared::cluster selp.u32
  asm volatile("{ .reg .pred p; isspacep.shared::cluster p, %1; selp.u32 %0, 1, 0, p; }" : "=r"(s[0]) : "l"(d));
  // ---- wgmma
//> wgmma.fence.sync.aligned
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
//> wgmma.commit_group.sync.aligned
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
//> wgmma.wait_group.sync.aligned
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(0) : "memory");
//> wgmma.wait_group.sync.aligned
  asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
//> .reg setp.ne.b32 wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
  asm volatile("{\n"
               ".reg .pred p;\n"
               "setp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16\n"
               "{\n"
               " %0, %1, %2, %3, %4, %5, %6, %7,\n"
               " %8, %9, %10, %11, %12, %13, %14, %15,\n"
               " %16, %17, %18, %19, %20, %21, %22, %23,\n"
               " %24, %25, %26, %27, %28, %29, %30, %31,\n"
               " %32, %33, %34, %35, %36, %37, %38, %39,\n"
               " %40, %41, %42, %43, %44, %45, %46, %47,\n"
               " %48, %49, %50, %51, %52, %53, %54, %55,\n"
               " %56, %57, %58, %59, %60, %61, %62, %63\n"
               "},\n"
               " %64,\n"
               " %65,\n"
               " p, %67, %68, %69, %70;\n"
               "}\n"
               : "+f"(f[0]) : "l"(d), "l"(d), "r"(n), "n"(1), "n"(1), "n"(0), "n"(0));
//> .reg setp.ne.b32 wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{"
               " %0, %1, %2, %3, %4, %5, %6, %7,\n"
               " %8, %9, %10, %11, %12, %13, %14, %15,\n"
               " %16, %17, %18, %19, %20, %21, %22, %23,\n"
               " %24, %25, %26, %27, %28, %29, %30, %31,\n"
               " %32, %33, %34, %35, %36, %37, %38, %39,\n"
               " %40, %41, %42, %43, %44, %45, %46, %47,\n"
               " %48, %49, %50, %51, %52, %53, %54, %55,\n"
               " %56, %57, %58, %59, %60, %61, %62, %63\n"
      "}, %64, %65, p, %67, %68;\n"
      "}\n"
      : "+f"(f[0]) : "l"(d), "l"(d), "r"(n), "n"(1), "n"(1));
//> .reg setp.ne.b32 wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {"
               " %0, %1, %2, %3, %4, %5, %6, %7,\n"
               " %8, %9, %10, %11, %12, %13, %14, %15,\n"
               " %16, %17, %18, %19, %20, %21, %22, %23,\n"
               " %24, %25, %26, %27, %28, %29, %30, %31,\n"
               " %32, %33, %34, %35, %36, %37, %38, %39,\n"
               " %40, %41, %42, %43, %44, %45, %46, %47,\n"
               " %48, %49, %50, %51, %52, %53, %54, %55,\n"
               " %56, %57, %58, %59, %60, %61, %62, %63\n"
               "}, %64, %65, p, %67, %68;\n}\n" : "+f"(f[0]) : "l"(d), "l"(d), "r"(n), "n"(1), "n"(1));
//> .reg setp.ne.b32 wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16\n"
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,\n"
               " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31},\n"
               " %32, %33, p, %35, %36, %37, %38;\n}\n"
               : "+f"(f[0]) : "l"(d), "l"(d), "r"(n), "n"(1), "n"(1), "n"(0), "n"(1));
//> .reg setp.ne.b32 wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16\n"
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,\n"
               " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31},\n"
               "{%32, %33, %34, %35},\n"
               " %36, p, %38, %39, %40;\n}\n"
               : "+f"(f[0]) : "r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]), "l"(d), "r"(n), "n"(1), "n"(1), "n"(1));
//> .reg setp.ne.b32 wgmma.mma_async.sync.aligned.m64n16k16.f16.f16.f16
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k16.f16.f16.f16 {%0, %1, %2, %3}, %4, %5, p, %7, %8, %9, %10;\n}\n"
               : "+r"(s[0]), "+r"(s[1]), "+r"(s[2]), "+r"(s[3]) : "l"(d), "l"(d), "r"(n), "n"(1), "n"(1), "n"(0), "n"(0));
//> .reg setp.ne.b32 wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8.satfinite
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8.satfinite {%0, %1, %2, %3}, %4, %5, p;\n}\n"
               : "+r"(s[0]), "+r"(s[1]), "+r"(s[2]), "+r"(s[3]) : "l"(d), "l"(d), "r"(n));
//> wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16
  asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, 1, 1, 1, 0, 0;"
               : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3]) : "l"(d), "l"(d));
//> wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.bf16.bf16
  asm volatile("wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, %6, 0, 1, 1, 1, 0, 0;"
               : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3]) : "l"(d), "l"(d), "r"(s[0]));
  // ---- mma.sync, ldmatrix, stmatrix, movmatrix
//> mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
               : "=f"(f[0]), "=f"(f[1]), "=f"(f[2]), "=f"(f[3])
               : "r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]), "r"(s[4]), "r"(s[5]),
                 "f"(f[4]), "f"(f[5]), "f"(f[6]), "f"(f[7]));
//> mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32\n"
      "  {%0, %1, %2, %3},\n"
      "  {%4, %5, %6, %7},\n"
      "  {%8, %9},\n"
      "  {%0, %1, %2, %3};\n"
      : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3]) : "r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]), "r"(s[4]), "r"(s[5]));
//> mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%8, %9};"
               : "=r"(s[0]), "=r"(s[1]) : "r"(s[2]), "r"(s[3]), "r"(s[4]), "r"(s[5]), "r"(s[6]), "r"(s[7]), "r"(s[8]), "r"(s[9]));
//> mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};"
               : "=f"(f[0]), "=f"(f[1]), "=f"(f[2]), "=f"(f[3]) : "r"(s[0]), "r"(s[1]), "r"(s[2]),
                 "f"(f[4]), "f"(f[5]), "f"(f[6]), "f"(f[7]));
//> mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3]) : "r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]), "r"(s[4]), "r"(s[5]));
//> mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3]) : "r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]), "r"(s[4]), "r"(s[5]));
//> mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32
  asm volatile("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+r"(s[10]), "+r"(s[11]), "+r"(s[12]), "+r"(s[13]) : "r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]), "r"(s[4]), "r"(s[5]));
//> mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
               : "+d"(*(double*)f), "+d"(*(double*)s) : "d"(1.0), "d"(2.0));
//> ldmatrix.sync.aligned.m8n8.x1.shared.b16
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(s[0]) : "r"(s[1]));
//> ldmatrix.sync.aligned.m8n8.x2.shared.b16
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(s[0]), "=r"(s[1]) : "r"(s[2]));
//> ldmatrix.sync.aligned.m8n8.x4.shared.b16
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(s[0]), "=r"(s[1]), "=r"(s[2]), "=r"(s[3]) : "r"(s[4]));
//> ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(s[0]), "=r"(s[1]), "=r"(s[2]), "=r"(s[3]) : "r"(s[4]));
//> ldmatrix.sync.aligned.x2.trans.m8n8.shared::cta.b16
  asm volatile("ldmatrix.sync.aligned.x2.trans.m8n8.shared::cta.b16 {%0, %1}, [%2];" : "=r"(s[0]), "=r"(s[1]) : "r"(s[2]));
//> stmatrix.sync.aligned.x1.m8n8.shared.b16
  asm volatile("stmatrix.sync.aligned.x1.m8n8.shared.b16 [%0], {%1};" :: "r"(s[0]), "r"(s[1]));
//> stmatrix.sync.aligned.x2.trans.m8n8.shared.b16
  asm volatile("stmatrix.sync.aligned.x2.trans.m8n8.shared.b16 [%0], {%1, %2};" :: "r"(s[0]), "r"(s[1]), "r"(s[2]));
//> stmatrix.sync.aligned.x4.m8n8.shared.b16
  asm volatile("stmatrix.sync.aligned.x4.m8n8.shared.b16 [%0], {%1, %2, %3, %4};\n"
               :: "r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]), "r"(s[4]));
//> stmatrix.sync.aligned.m8n8.x4.trans.shared::cta.b16
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared::cta.b16 [%0], {%1, %2, %3, %4};\n"
               :: "r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]), "r"(s[4]));
//> movmatrix.sync.aligned.m8n8.trans.b16
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(s[0]) : "r"(s[1]));
  // ---- warp-level
//> shfl.sync.bfly.b32
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, %3, %4;" : "=r"(s[0]) : "r"(s[1]), "r"(16), "r"(0x1f), "r"(0xffffffff));
//> shfl.sync.down.b32
  asm volatile("shfl.sync.down.b32 %0, %1, 1, 0x1f, 0xffffffff;" : "=r"(s[0]) : "r"(s[1]));
//> shfl.sync.up.b32
  asm volatile("shfl.sync.up.b32 %0|%1, %2, %3, 0, %4;" : "=r"(s[0]), "=r"(s[1]) : "r"(s[2]), "r"(1), "r"(0xffffffff));
//> .reg shfl.sync.idx.b32 selp.u32
  asm volatile("{ .reg .pred p; shfl.sync.idx.b32 %0|p, %2, %3, 0x1f, -1; selp.u32 %1, 1, 0, p; }"
               : "=r"(s[0]), "=r"(s[1]) : "r"(s[2]), "r"(s[3]));
//> vote.sync.ballot.b32
  asm volatile("vote.sync.ballot.b32 %0, %1, %2;" : "=r"(s[0]) : "r"(s[1]), "r"(0xffffffff));
//> .reg setp.ne.u32 vote.sync.any.pred selp.u32
  asm volatile("{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n vote.sync.any.pred q, p, %2;\n selp.u32 %0, 1, 0, q;\n}"
               : "=r"(s[0]) : "r"(s[1]), "r"(0xffffffff));
//> .reg setp.ne.u32 vote.sync.all.pred selp.u32
  asm volatile("{ .reg .pred p, q; setp.ne.u32 p, %1, 0; vote.sync.all.pred q, !p, 0xffffffff; selp.u32 %0, 1, 0, q; }"
               : "=r"(s[0]) : "r"(s[1]));
//> vote.sync.uni.pred
  asm volatile("vote.sync.uni.pred %0, %1, %2;" : "=r"(s[0]) : "r"(s[1]), "r"(0xffffffff));
//> match.sync.any.b32
  asm volatile("match.sync.any.b32 %0, %1, %2;" : "=r"(s[0]) : "r"(s[1]), "r"(0xffffffff));
//> match.sync.all.b64
  asm volatile("match.sync.all.b64 %0|%1, %2, %3;" : "=r"(s[0]), "=r"(s[1]) : "l"(d), "r"(0xffffffff));
//> redux.sync.add.u32
  asm volatile("redux.sync.add.u32 %0, %1, %2;" : "=r"(s[0]) : "r"(s[1]), "r"(0xffffffff));
//> redux.sync.min.s32
  asm volatile("redux.sync.min.s32 %0, %1, 0xffffffff;" : "=r"(s[0]) : "r"(s[1]));
//> redux.sync.max.u32
  asm volatile("redux.sync.max.u32 %0, %1, %2;" : "=r"(s[0]) : "r"(s[1]), "r"(0xffffffff));
//> redux.sync.or.b32
  asm volatile("redux.sync.or.b32 %0, %1, %2;" : "=r"(s[0]) : "r"(s[1]), "r"(0xffffffff));
//> activemask.b32
  asm volatile("activemask.b32 %0;" : "=r"(s[0]));
//> bar.warp.sync
  asm volatile("bar.warp.sync %0;" :: "r"(0xffffffff));
  // ---- atomics and reductions
//> atom.global.add.f32
  asm volatile("atom.global.add.f32 %0, [%1], %2;" : "=f"(f[0]) : "l"(f), "f"(f[1]) : "memory");
//> atom.global.add.noftz.f16x2
  asm volatile("atom.global.add.noftz.f16x2 %0, [%1], %2;" : "=r"(s[0]) : "l"(b), "r"(s[1]) : "memory");
//> atom.global.add.noftz.bf16x2
  asm volatile("atom.global.add.noftz.bf16x2 %0, [%1], %2;" : "=r"(s[0]) : "l"(b), "r"(s[1]) : "memory");
//> atom.relaxed.gpu.global.cas.b32
  asm volatile("atom.relaxed.gpu.global.cas.b32 %0, [%1], %2, %3;" : "=r"(s[0]) : "l"(b), "r"(s[1]), "r"(s[2]) : "memory");
//> atom.acquire.gpu.global.cas.b64
  asm volatile("atom.acquire.gpu.global.cas.b64 %0, [%1], %2, %3;" : "=l"(b[0]) : "l"(b), "l"(d), "l"(d) : "memory");
//> atom.acquire.sys.global.exch.b32
  asm volatile("atom.acquire.sys.global.exch.b32 %0, [%1], %2;" : "=r"(s[0]) : "l"(b), "r"(s[1]) : "memory");
//> atom.release.gpu.global.exch.b64
  asm volatile("atom.release.gpu.global.exch.b64 %0, [%1], %2;" : "=l"(b[0]) : "l"(b), "l"(d) : "memory");
//> atom.shared.min.s32
  asm volatile("atom.shared.min.s32 %0, [%1], %2;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]) : "memory");
//> atom.release.cta.shared::cta.max.u32
  asm volatile("atom.release.cta.shared::cta.max.u32 %0, [%1], %2;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]) : "memory");
//> atom.acq_rel.gpu.global.add.u64
  asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], %2;" : "=l"(b[0]) : "l"(b), "l"(d) : "memory");
//> atom.global.v4.f32.add
  asm volatile("atom.global.v4.f32.add {%0, %1, %2, %3}, [%4], {%5, %6, %7, %8};"
               : "=f"(f[0]), "=f"(f[1]), "=f"(f[2]), "=f"(f[3]) : "l"(f), "f"(f[4]), "f"(f[5]), "f"(f[6]), "f"(f[7]) : "memory");
//> atom.shared::cluster.add.u32
  asm volatile("atom.shared::cluster.add.u32 %0, [%1], %2;" : "=r"(s[0]) : "r"(s[1]), "r"(1) : "memory");
//> atom.global.inc.u32
  asm volatile("atom.global.inc.u32 %0, [%1], %2;" : "=r"(s[0]) : "l"(b), "r"(s[1]) : "memory");
//> atom.global.or.b32
  asm volatile("atom.global.or.b32 %0, [%1], %2;" : "=r"(s[0]) : "l"(b), "r"(s[1]) : "memory");
//> red.relaxed.gpu.global.add.u32
  asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" :: "l"(b), "r"(s[0]) : "memory");
//> red.release.sys.global.add.s32
  asm volatile("red.release.sys.global.add.s32 [%0], %1;" :: "l"(b), "r"(s[0]) : "memory");
//> red.global.add.noftz.f16x2
  asm volatile("red.global.add.noftz.f16x2 [%0], %1;" :: "l"(b), "r"(s[0]) : "memory");
//> red.global.add.noftz.bf16x2
  asm volatile("red.global.add.noftz.bf16x2 [%0], %1;" :: "l"(b), "r"(s[0]) : "memory");
//> red.shared.max.u32
  asm volatile("red.shared.max.u32 [%0], %1;" :: "r"(s[0]), "r"(s[1]) : "memory");
//> red.global.v2.f32.add
  asm volatile("red.global.v2.f32.add [%0], {%1, %2};" :: "l"(f), "f"(f[0]), "f"(f[1]) : "memory");
//> red.global.add.f32
  asm volatile("red.global.add.f32 [%0+4], %1;" :: "l"(f), "f"(f[0]) : "memory");
//> red.relaxed.cta.shared::cta.min.s32
  asm volatile("red.relaxed.cta.shared::cta.min.s32 [%0], %1;" :: "r"(s[0]), "r"(s[1]) : "memory");
//> multimem.ld_reduce.relaxed.sys.global.add.v4.f32
  asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(f[0]), "=f"(f[1]), "=f"(f[2]), "=f"(f[3]) : "l"(b) : "memory");
//> multimem.ld_reduce.weak.global.add.acc::f32.v4.bf16x2
  asm volatile("multimem.ld_reduce.weak.global.add.acc::f32.v4.bf16x2 {%0, %1, %2, %3}, [%4];"
               : "=r"(s[0]), "=r"(s[1]), "=r"(s[2]), "=r"(s[3]) : "l"(b) : "memory");
//> multimem.st.relaxed.sys.global.v4.f32
  asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1, %2, %3, %4};" :: "l"(b), "f"(f[0]), "f"(f[1]), "f"(f[2]), "f"(f[3]) : "memory");
//> multimem.red.release.sys.global.add.u32
  asm volatile("multimem.red.release.sys.global.add.u32 [%0], %1;" :: "l"(b), "n"(1) : "memory");
  // ---- conversions and arithmetic
//> cvt.rn.bf16x2.f32
  asm("cvt.rn.bf16x2.f32 %0, %2, %1;" : "=r"(s[0]) : "f"(f[0]), "f"(f[1]));
//> cvt.rn.f16x2.f32
  asm("cvt.rn.f16x2.f32 %0, %2, %1;" : "=r"(s[0]) : "f"(f[0]), "f"(f[1]));
//> cvt.rn.satfinite.e4m3x2.f32
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;" : "=h"(*(unsigned short*)s) : "f"(f[0]), "f"(f[1]));
//> cvt.rn.satfinite.e5m2x2.f16x2
  asm("cvt.rn.satfinite.e5m2x2.f16x2 %0, %1;" : "=h"(*(unsigned short*)s) : "r"(s[1]));
//> cvt.rn.f16x2.e4m3x2
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(s[0]) : "h"(*(unsigned short*)s));
//> .reg .reg mov.b32 cvt.rn.f16x2.e4m3x2 cvt.rn.f16x2.e4m3x2 mov.b64
  asm("{\n"
      ".reg .b16 lo, hi;\n"
      ".reg .b32 r0, r1;\n"
      "mov.b32 {lo, hi}, %1;\n"
      "cvt.rn.f16x2.e4m3x2 r0, lo;\n"
      "cvt.rn.f16x2.e4m3x2 r1, hi;\n"
      "mov.b64 %0, {r0, r1};\n"
      "}\n" : "=l"(b[0]) : "r"(s[1]));
//> cvt.rna.tf32.f32
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(s[0]) : "f"(f[0]));
//> cvt.rz.sat.s32.f32
  asm("cvt.rz.sat.s32.f32 %0, %1;" : "=r"(s[0]) : "f"(f[0]));
//> cvt.rn.f32.f16
  asm("cvt.rn.f32.f16 %0, %1;" : "=f"(f[0]) : "h"(*(unsigned short*)s));
//> cvt.f32.bf16
  asm("cvt.f32.bf16 %0, %1;" : "=f"(f[0]) : "h"(*(unsigned short*)s));
//> cvt.u32.u64
  asm("cvt.u32.u64 %0, %1;" : "=r"(s[0]) : "l"(d));
//> cvta.to.shared.u64
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(b[0]) : "l"(d));
//> .reg cvta.to.shared.u64 cvt.u32.u64
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(s[0]) : "l"(d));
//> prmt.b32
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]), "r"(0x5410));
//> prmt.b32
  asm("prmt.b32 %0, %1, %2, 0x7632;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]));
//> prmt.b32.f4e
  asm("prmt.b32.f4e %0, %1, %2, %3;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]), "r"(s[3]));
//> lop3.b32
  asm("lop3.b32 %0, %1, %2, %3, %4;\n" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]), "r"(s[3]), "n"(0xEA));
//> lop3.b32
  asm("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]), "r"(s[3]));
//> shf.l.wrap.b32
  asm("shf.l.wrap.b32 %0, %1, %2, %3;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]), "r"(s[3]));
//> shf.r.clamp.b32
  asm("shf.r.clamp.b32 %0, %1, %2, 8;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]));
//> bfe.u32
  asm("bfe.u32 %0, %1, %2, %3;" : "=r"(s[0]) : "r"(s[1]), "r"(4), "r"(8));
//> bfi.b32
  asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]), "r"(8), "r"(8));
//> fma.rn.f32
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(f[0]) : "f"(f[1]), "f"(f[2]), "f"(f[3]));
//> fma.rn.ftz.f32
  asm("fma.rn.ftz.f32 %0, %1, %2, %0;" : "+f"(f[0]) : "f"(f[1]), "f"(f[2]));
//> fma.rn.f16x2
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]), "r"(s[3]));
//> fma.rn.bf16x2
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]), "r"(s[3]));
//> fma.rn.relu.bf16x2
  asm("fma.rn.relu.bf16x2 %0, %1, %2, %3;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]), "r"(s[3]));
//> ex2.approx.ftz.f32
  asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(f[0]) : "f"(f[1]));
//> ex2.approx.f16x2
  asm volatile("ex2.approx.f16x2 %0, %1;" : "=r"(s[0]) : "r"(s[1]));
//> rcp.approx.ftz.f32
  asm volatile("rcp.approx.ftz.f32 %0, %1;" : "=f"(f[0]) : "f"(f[1]));
//> rcp.approx.ftz.f64
  asm volatile("rcp.approx.ftz.f64 %0, %1;" : "=d"(*(double*)f) : "d"(2.0));
//> rsqrt.approx.ftz.f32
  asm volatile("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(f[0]) : "f"(f[1]));
//> tanh.approx.f32
  asm volatile("tanh.approx.f32 %0, %1;" : "=f"(f[0]) : "f"(f[1]));
//> tanh.approx.bf16x2
  asm volatile("tanh.approx.bf16x2 %0, %1;" : "=r"(s[0]) : "r"(s[1]));
//> lg2.approx.ftz.f32
  asm volatile("lg2.approx.ftz.f32 %0, %1;" : "=f"(f[0]) : "f"(f[1]));
//> sin.approx.ftz.f32
  asm volatile("sin.approx.ftz.f32 %0, %1;" : "=f"(f[0]) : "f"(f[1]));
//> max.NaN.f32
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(f[0]) : "f"(f[1]), "f"(f[2]));
//> min.xorsign.abs.f32
  asm("min.xorsign.abs.f32 %0, %1, %2;" : "=f"(f[0]) : "f"(f[1]), "f"(f[2]));
//> max.bf16x2
  asm("max.bf16x2 %0, %1, %2;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]));
//> mul.wide.u32
  asm("mul.wide.u32 %0, %1, %2;" : "=l"(b[0]) : "r"(s[1]), "r"(s[2]));
//> mul.hi.u32
  asm("mul.hi.u32 %0, %1, %2;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]));
//> mad.lo.s32
  asm("mad.lo.s32 %0, %1, %2, %3;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]), "r"(s[3]));
//> add.cc.u32 addc.u32
  asm("add.cc.u32 %0, %2, %4;\n\t"
      "addc.u32 %1, %3, %5;" : "=r"(s[0]), "=r"(s[1]) : "r"(s[2]), "r"(s[3]), "r"(s[4]), "r"(s[5]));
//> sub.cc.u32 subc.u32
  asm("sub.cc.u32 %0, %2, %4; subc.u32 %1, %3, %5;" : "=r"(s[0]), "=r"(s[1]) : "r"(s[2]), "r"(s[3]), "r"(s[4]), "r"(s[5]));
//> mad.wide.u16
  asm("mad.wide.u16 %0, %1, %2, %3;" : "=r"(s[0]) : "h"((short)1), "h"((short)2), "r"(s[3]));
//> popc.b32
  asm("popc.b32 %0, %1;" : "=r"(s[0]) : "r"(s[1]));
//> clz.b32
  asm("clz.b32 %0, %1;" : "=r"(s[0]) : "r"(s[1]));
//> brev.b32
  asm("brev.b32 %0, %1;" : "=r"(s[0]) : "r"(s[1]));
//> bfind.u32
  asm("bfind.u32 %0, %1;" : "=r"(s[0]) : "r"(s[1]));
//> bfind.shiftamt.u32
  asm("bfind.shiftamt.u32 %0, %1;" : "=r"(s[0]) : "r"(s[1]));
//> fns.b32
  asm("fns.b32 %0, %1, %2, %3;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]), "r"(1));
//> dp4a.s32.s32
  asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]), "r"(s[3]));
//> mov.b32
  asm("mov.b32 %0, {%1, %2};" : "=r"(s[0]) : "h"((short)1), "h"((short)2));
//> mov.b64
  asm("mov.b64 {%0, %1}, %2;" : "=r"(s[0]), "=r"(s[1]) : "l"(d));
//> mov.b32
  asm("mov.b32 %0, 0f3F800000;" : "=f"(f[0]));
//> mov.b64
  asm("mov.b64 %0, 0d3FF0000000000000;" : "=d"(*(double*)f));
//> mov.u32
  asm("mov.u32 %0, -1;" : "=r"(s[0]));
//> abs.s32 neg.s32
  asm("abs.s32 %0, %1;\nneg.s32 %0, %0;" : "=r"(s[0]) : "r"(s[1]));
//> copysign.f32
  asm("copysign.f32 %0, %1, %2;" : "=f"(f[0]) : "f"(f[1]), "f"(f[2]));
//> .reg testp.finite.f32 selp.u32
  asm("{ .reg .pred p; testp.finite.f32 p, %1; selp.u32 %0, 1, 0, p; }" : "=r"(s[0]) : "f"(f[1]));
  // ---- predicates, selects, labels and branches
//> .reg setp.lt.u32 selp.b32
  asm("{ .reg .pred p; setp.lt.u32 p, %1, %2; selp.b32 %0, %1, %2, p; }" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]));
//> .reg setp.ge.and.s32 selp.s32
  asm("{\n  .reg .pred p;\n  setp.ge.and.s32 p, %1, 0, 1;\n  selp.s32 %0, 1, -1, p;\n}" : "=r"(s[0]) : "r"(s[1]));
//> .reg setp.lt.s32 mov.u32
  asm("{ .reg .pred p, q; setp.lt.s32 p|q, %1, 0; @p mov.u32 %0, 0; }" : "+r"(s[0]) : "r"(s[1]));
//> .reg setp.gt.f32 mov.f32 mov.f32
  asm("{\n.reg .pred %%p;\nsetp.gt.f32 %%p, %1, 0f00000000;\n@%%p mov.f32 %0, %1;\n@!%%p mov.f32 %0, 0f00000000;\n}"
      : "=f"(f[0]) : "f"(f[1]));
//> .reg setp.eq.u32 bra add.u32
  asm volatile("{\n"
               "  .reg .pred p;\n"
               "  setp.eq.u32 p, %1, 0;\n"
               "  @p bra L_skip_%=;\n"
               "  add.u32 %0, %0, %1;\n"
               "  L_skip_%=:\n"
               "}\n" : "+r"(s[0]) : "r"(s[1]));
//> .reg .reg mov.u32 add.u32 setp.lt.u32 bra.uni
  asm volatile("{\n"
               ".reg .b32 i;\n"
               ".reg .pred p;\n"
               "mov.u32 i, 0;\n"
               "LOOP%=:\n"
               "add.u32 i, i, 1;\n"
               "setp.lt.u32 p, i, %0;\n"
               "@p bra.uni LOOP%=;\n"
               "}\n" :: "r"(n));
//> .reg .reg ld.global.u32 setp.eq.u32 nanosleep.u32 bra
  asm volatile("{\n"
               "\t.reg .pred done;\n"
               "\t.reg .b32 v;\n"
               "spin_%=:\n"
               "\tld.global.u32 v, [%0];\n"
               "\tsetp.eq.u32 done, v, %1;\n"
               "\t@!done nanosleep.u32 32;\n"
               "\t@!done bra spin_%=;\n"
               "}\n" :: "l"(b), "r"(s[0]) : "memory");
//> .reg .reg ld.acquire.gpu.global.b32 setp.ne.b32 bra
  asm volatile("{\n.reg .b32 f;\n.reg .pred p;\nW%=: ld.acquire.gpu.global.b32 f, [%0];\nsetp.ne.b32 p, f, %1;\n@p bra W%=;\n}"
               :: "l"(b), "r"(s[0]) : "memory");
//> ret
  asm volatile("ret;");
//> exit
  asm volatile("exit;");
//> trap
  asm volatile("trap;");
//> brkpt
  asm volatile("brkpt;");
//> pmevent
  asm volatile("pmevent 7;");
//> .reg setp.eq.u32 bra.uni
  asm volatile("{ .reg .pred p; setp.eq.u32 p, %0, 0; @p bra.uni DONE%=; DONE%=: }" :: "r"(n));
  // ---- special registers
//> mov.u64
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(b[0]));
//> mov.u64
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(b[0]));
//> mov.u32
  asm volatile("mov.u32 %0, %%clock;" : "=r"(s[0]));
//> mov.u32
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s[0]));
//> mov.u32
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(s[0]));
//> mov.u32
  asm volatile("mov.u32 %0, %%warpid;" : "=r"(s[0]));
//> mov.u32
  asm volatile("mov.u32 %0, %%nsmid;" : "=r"(s[0]));
//> mov.u32
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(s[0]));
//> mov.u32
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(s[0]));
//> mov.u32
  asm volatile("mov.u32 %0, %%cluster_nctaid.y;" : "=r"(s[0]));
//> mov.u32
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(s[0]));
//> mov.u32
  asm volatile("mov.u32 %0, %%lanemask_lt;" : "=r"(s[0]));
//> mov.b32
  asm volatile("mov.b32 %0, %%envreg3;" : "=r"(s[0]));
//> mov.u32 mov.u32
  asm volatile("mov.u32 %0, %%tid.x;\n\tmov.u32 %1, %%ctaid.y;" : "=r"(s[0]), "=r"(s[1]));
//> mov.u64 mov.u32 mov.u32
  asm volatile("mov.u64 %0, %%globaltimer;\n"
               "mov.u32 %1, %%smid;\n"
               "mov.u32 %2, %%warpid;\n" : "=l"(b[0]), "=r"(s[0]), "=r"(s[1]));
//> mov.u64
  asm volatile("mov.u64 %0, %%globaltimer_lo;" : "=l"(b[0]));
  // ---- spellings: __asm__, raw strings, operand-less, macros first
//> fence.proxy.async.shared::cta
  __asm__ __volatile__("fence.proxy.async.shared::cta;" ::: "memory");
//> cp.async.commit_group
  __asm__ volatile("cp.async.commit_group;\n" ::);
//> .reg mbarrier.try_wait.parity.shared::cta.b64 bra
  asm volatile(R"(
{
  .reg .pred P1;
LAB_WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;
  @!P1 bra LAB_WAIT;
}
)" :: "r"(s[0]), "r"(s[1]) : "memory");
//> ldmatrix.sync.aligned.m8n8.x4.shared.b16
  asm volatile(R"(ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];)"
               : "=r"(s[0]), "=r"(s[1]), "=r"(s[2]), "=r"(s[3]) : "r"(s[4]));
//> wgmma.fence.sync.aligned wgmma.commit_group.sync.aligned wgmma.wait_group.sync.aligned
  asm volatile("wgmma.fence.sync.aligned;\n"
               "wgmma.commit_group.sync.aligned;\n"
               "wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
//> mbarrier.arrive.release.cluster.shared::cluster.b64
  asm volatile("mbarrier.arrive" SEM SCOPE
               ".shared::cluster.b64"
               " _, [%0];" :: "r"(s[0]) : "memory");
//> mbarrier.try_wait.parity.release.cluster.shared::cta.b64
  asm volatile("mbarrier.try_wait.parity" SEM SCOPE SPACE ".b64 %0, [%1], %2;" : "=r"(s[0]) : "r"(s[1]), "r"(s[2]));
//> fence.proxy.async
  asm volatile(FENCE_ASYNC ";" ::: "memory");
//> fence.proxy.async.global
  asm volatile(FENCE_ASYNC ".global;\n" ::: "memory");
//> atom.acquire.gpu.global.add.u32
  asm volatile("atom" ACQ_GPU ".global.add.u32 %0, [%1], 1;" : "=r"(s[0]) : "l"(b) : "memory");
//> red.release.cluster.shared::cta.add.u32
  asm volatile("red" SEM SCOPE SPACE ".add.u32 [%0], %1;" :: "r"(s[0]), "r"(s[1]) : "memory");
//> ld.global.L2::cache_hint.b32
  asm volatile("ld.global" L2_HINT ".b32 %0, [%1], %2;" : "=r"(s[0]) : "l"(b), "l"(d));
//> st.global.v2.f32
  asm volatile("st.global.v2.f32 [%0], {%1, %2}; // store the pair\n" :: "l"(f), "f"(f[0]), "f"(f[1]) : "memory");
//> st.global.b32
  asm volatile("/* release the slot */ st.global.b32 [%0], %1;" :: "l"(b), "r"(s[0]) : "memory");
//> ld.global.u32
  asm volatile("ld.global.u32 %0, [%1];" : "=r"(s[0]) : "l"(b + 2));
//> ld.global.v4.u32
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4 + 32];" : "=r"(s[0]), "=r"(s[1]), "=r"(s[2]), "=r"(s[3]) : "l"(b));
//> ld.shared.u32
  asm volatile("ld.shared.u32 %0, [%1 - 4];" : "=r"(s[0]) : "r"(s[1]));
//> ld.global.u32
  asm volatile("ld.global.u32 %0, [%c1];" : "=r"(s[0]) : "n"(64));
//> .reg mbarrier.try_wait.parity.shared::cta.b64 bra.uni
  asm volatile("{\n"
               ".reg .pred p;\n"
               "L_%=_wait:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               "@!p bra.uni L_%=_wait;\n"
               "}\n" :: "r"(s[0]), "r"(s[1]) : "memory");
//> .reg setp.eq.u32 bra mov.u32
  asm volatile("{ .reg .pred p; setp.eq.u32 p, %1, 0; @p bra $L__skip_%=_0; mov.u32 %0, 1; $L__skip_%=_0 : }"
               : "+r"(s[0]) : "r"(s[1]));
//> shr.u32
  asm("shr.u32 %0, %1, (32 - 8);" : "=r"(s[0]) : "r"(s[1]));
//> and.b32
  asm("and.b32 %0, %1, ((1 << 4) - 1);" : "=r"(s[0]) : "r"(s[1]));
//> ld.global.u32
  asm volatile("ld.global.u32 %0, [%1+(4*%2)];" : "=r"(s[0]) : "l"(b), "n"(3));
  // ---- Blackwell-era forms that share the syntax
//> tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"(s[0]) : "memory");
//> tcgen05.fence::before_thread_sync
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
//> tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" :: "r"(s[0]), "r"(128) : "memory");
//> tcgen05.ld.sync.aligned.32x32b.x4.b32
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(s[0]), "=r"(s[1]), "=r"(s[2]), "=r"(s[3]) : "r"(s[4]));
//> clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128
  asm volatile("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%0], [%1];"
               :: "r"(s[0]), "r"(s[1]) : "memory");
}
