// designs.cu — recorder designs side by side in one process, on the three loops the perturbation
// targets judge (issue 10): the per-event FMA loop and the 3.9 TB/s copy (every warp recording,
// lane 0 the owner) and reduce_sumsq's strip-mined grid-stride loop (1 CTA in 8 recording, begin and
// end of each group of G iterations, the other CTAs running the clean loop, as the instrumented copy
// does). Each design writes a real per-owner buffer with a capacity bound (the resident ring on the
// FMA loop holds 64 of its 1024 events a warp and saturates: the same instructions, so the cost of
// the shape, not a capture that would validate). On the GPU host:
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/designs bench/perturbation/designs.cu && /tmp/designs
// Prints one JSON object: per round, each variant's overhead (%) against the mean of the clean loop
// timed before and after the variants (median of 31 launches each), and that clean pair's drift.
#include <cstdint>

#include "../probe_cost/timing.cuh"

__constant__ unsigned char* g_buf;  // like atrex_tl_buffer: the events' base, a constant-bank operand

__device__ __forceinline__ uint32_t timer_lo() {
  uint32_t t;
  asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(t));
  return t;
}
__device__ __forceinline__ uint32_t warp_global() { return (blockIdx.x * blockDim.x + threadIdx.x) >> 5; }

struct None {
  __device__ None(uint32_t) {}
  __device__ __forceinline__ void rec(uint32_t) {}
  __device__ __forceinline__ void finish() {}
};

// Today's atrex hot path: lane 0 owns the range [off, end) of byte offsets from the constant base;
// a predicated 8-byte global store per event, the other lanes an empty range.
struct Cur {
  uint32_t off, end;
  __device__ Cur(uint32_t cap) {
    off = warp_global() * cap * 8u;
    end = (threadIdx.x & 31u) == 0u ? off + cap * 8u : 0u;
  }
  __device__ __forceinline__ void rec(uint32_t site) {
    const uint32_t t = timer_lo();
    asm volatile("{\n\t.reg .pred p;\n\tsetp.lt.u32 p, %1, %2;\n\t@p st.global.v2.u32 [%0], {%3, %4};\n\t}"
                 ::"l"(g_buf + off), "r"(off), "r"(end), "r"(t), "r"(site | 0x80000000u));
    off += 8u;
  }
  __device__ __forceinline__ void finish() {}
};

// Saturating global path: the owner's slot pointer is kept as the low word of its address (the
// host keeps the buffer inside one 4 GiB window, so the high word is constant) and saturates at the
// owner's last slot, a sink that is never decoded; lanes that own nothing point at the sink from the
// start. So every lane stores, unpredicated: a timer read, one VIADDMNMX and one store, no compare.
// PACK: 4-byte events, the site id in the timer's low 5 bits (no time there at a 32 ns tick), as
// IKeT does.
template <bool PACK>
struct Sat {
  static constexpr uint32_t kB = PACK ? 4u : 8u;
  uint64_t p;     // one slot past the next one: its low word saturates at `end`, one past the sink
  uint32_t end;
  __device__ Sat(uint32_t cap) {
    const uint64_t base = reinterpret_cast<uint64_t>(g_buf) + (uint64_t)warp_global() * cap * kB;
    end = static_cast<uint32_t>(base) + cap * kB;
    p = (threadIdx.x & 31u) == 0u ? base : ((base >> 32) << 32 | (end - kB));
  }
  __device__ __forceinline__ void rec(uint32_t site) {
    const uint32_t t = timer_lo();
    asm("{\n\t.reg .b32 l, h;\n\tmov.b64 {l, h}, %0;\n\tadd.u32 l, l, %2;\n\tmin.u32 l, l, %1;\n\t"
        "mov.b64 %0, {l, h};\n\t}" : "+l"(p) : "r"(end), "n"(kB));
    if (PACK)
      asm volatile("st.global.u32 [%0+-4], %1;" ::"l"(p), "r"(t | site) : "memory");
    else
      asm volatile("st.global.v2.u32 [%0+-8], {%1, %2};" ::"l"(p), "r"(t), "r"(site | 0x80000000u) : "memory");
  }
  __device__ __forceinline__ void finish() {}
};

// Sink slot: the owner's range has capacity + 1 slots, the last a sink its offset saturates at
// (VIADDMNMX); every lane of the warp holds the owner's range and stores the same event to the same
// address (one sector), so no compare and no predicate: 6 instructions an event against Cur's 7.
// It would need a format with a sink slot per owner; measured first (session 9), it was not cheaper.
struct Sink {
  uint32_t off, end;
  __device__ Sink(uint32_t cap) {
    off = warp_global() * (cap + 1u) * 8u;
    end = off + cap * 8u;
  }
  __device__ __forceinline__ void rec(uint32_t site) {
    asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(g_buf + off), "r"(timer_lo()), "r"(site | 0x80000000u));
    off = __viaddmin_u32(off, 8u, end);
  }
  __device__ __forceinline__ void finish() {}
};

// Resident shared ring: the warp's events stay in shared memory until exit. Every lane stores the
// same event to the warp's next slot (no predicate); the slot pointer saturates at an overflow slot
// past the ring (one VIADDMNMX), so the hot path has no compare and no branch. At exit the warp
// copies the ring out coalesced. R = ring slots per warp.
template <uint32_t R>
struct Res {
  uint32_t a, last, base, cap;
  __device__ Res(uint32_t capacity) {
    __shared__ __align__(16) uint2 ring[8][R + 1];
    base = a = static_cast<uint32_t>(__cvta_generic_to_shared(&ring[threadIdx.x >> 5][0]));
    last = base + R * 8u;
    cap = capacity;
  }
  __device__ __forceinline__ void rec(uint32_t site) {
    const uint32_t t = timer_lo();
    asm volatile("st.shared.v2.u32 [%0], {%1, %2};" ::"r"(a), "r"(t), "r"(site | 0x80000000u));
    a = __viaddmin_u32(a, 8u, last);
  }
  __device__ __forceinline__ void finish() {
    const uint32_t n = (a - base) / 8u;
    uint2* dst = reinterpret_cast<uint2*>(g_buf) + (uint64_t)warp_global() * cap;
    for (uint32_t j = threadIdx.x & 31u; j < n && j < cap; j += 32u) {
      uint2 v;
      asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(base + j * 8u) : "memory");
      dst[j] = v;
    }
  }
};

// Register ring across the warp's lanes: event k of a run of 32 lands in lane k's two registers (a
// predicated move, no memory operation); every 32 events the warp writes them with one coalesced
// store. Needs every lane at every site, like the staged ring.
struct Reg {
  uint32_t k = 0u, rt = 0u, rs = 0u, off, end, lane;
  __device__ Reg(uint32_t cap) {
    lane = threadIdx.x & 31u;
    off = warp_global() * cap * 8u;
    end = off + cap * 8u;
  }
  __device__ __forceinline__ void rec(uint32_t site) {
    const uint32_t t = timer_lo();
    if (lane == k) { rt = t; rs = site | 0x80000000u; }
    if (++k == 32u) flush(32u);
  }
  __device__ __forceinline__ void flush(uint32_t n) {
    const uint32_t p = off + lane * 8u;
    if (lane < n && p < end) *reinterpret_cast<uint2*>(g_buf + p) = make_uint2(rt, rs);
    off += n * 8u;
    k = 0u;
  }
  __device__ __forceinline__ void finish() { flush(k); }
};

// The floor: every lane stores the timer to its warp's fixed shared slot (not a recorder).
struct Floor {
  uint32_t slot;
  __device__ Floor(uint32_t) {
    __shared__ uint32_t slots[32];
    slot = static_cast<uint32_t>(__cvta_generic_to_shared(&slots[threadIdx.x >> 5]));
  }
  __device__ __forceinline__ void rec(uint32_t) { asm volatile("st.shared.u32 [%0], %1;" ::"r"(slot), "r"(timer_lo())); }
  __device__ __forceinline__ void finish() {}
};

#define FMA128(a0, a1, a2, a3)                                             \
  _Pragma("unroll") for (int j = 0; j < 32; ++j) {                        \
    a0 = fmaf(a0, 1.0001f, 0.5f); a1 = fmaf(a1, 0.9999f, 0.25f);           \
    a2 = fmaf(a2, 1.0002f, 0.125f); a3 = fmaf(a3, 0.9998f, 0.0625f);       \
  }

template <class P>
__global__ void __launch_bounds__(256) fma_loop(float* out, int iters, uint32_t cap) {
  P r(cap);
  float a0 = threadIdx.x, a1 = a0 + 1.f, a2 = a0 + 2.f, a3 = a0 + 3.f;
  for (int i = 0; i < iters; ++i) {
    r.rec(1u);
    FMA128(a0, a1, a2, a3)
  }
  r.finish();
  out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3;
}

template <class P>
__global__ void __launch_bounds__(256) copy_loop(const float4* __restrict__ in, float4* __restrict__ out, long n,
                                                 uint32_t cap) {
  P r(cap);
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    r.rec(1u);
    out[i] = in[i];
  }
  r.finish();
}

#define ACC(v) acc += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w
// reduce_sumsq's loop: CTAs 0, 8, 16, ... record begin/end of each group of G iterations (G loads
// issued together, as the rewriter's strip-mining does); the others run the clean loop.
// LATE: the begin probe after the group's loads are issued (its timer read and store then overlap
// the loads' flight instead of holding back the loads behind them).
template <class P, int G, bool LATE = false>
__global__ void __launch_bounds__(256) reduce_loop(const float4* __restrict__ x, long n4, float* out, uint32_t cap) {
  __shared__ float partial[8];
  float acc = 0.f;
  const long S = (long)gridDim.x * 256;
  long i = blockIdx.x * 256L + threadIdx.x;
  if (blockIdx.x % 8u == 0u) {
    P r(cap);
    for (; (i < n4) && n4 - i > (G - 1) * S; i += S) {
      if (!LATE) r.rec(1u);
      float4 v[G];
#pragma unroll
      for (int g = 0; g < G; ++g) v[g] = x[i + g * S];
      if (LATE) r.rec(1u);
#pragma unroll
      for (int g = 0; g < G; ++g) ACC(v[g]);
      i += (G - 1) * S;
      r.rec(2u);
    }
    for (; i < n4; i += S) { float4 v = x[i]; ACC(v); }
    r.finish();
  } else {
    for (; i < n4; i += S) { float4 v = x[i]; ACC(v); }
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.f;
    for (int w = 0; w < 8; ++w) s += partial[w];
    atomicAdd(out, s);
  }
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int th = 256, fb = sms * 8, iters = 1024, cb = sms * 16, rb = sms * 4;
  const long n4 = 1l << 26;                   // copy: 1 GiB in and out
  const long r4 = 1l << 24;                   // reduce: 256 MiB, as the example
  const uint32_t ccap = 128, rcap = 80;       // events per warp: copy 124 iterations, reduce <= 64
  float* out;
  float4 *in4, *out4;
  unsigned char* buf;
  CHECK(cudaMalloc(&out, (size_t)fb * th * 4));
  CHECK(cudaMalloc(&in4, n4 * 16));
  CHECK(cudaMalloc(&out4, n4 * 16));
  CHECK(cudaMemset(in4, 0, n4 * 16));
  const size_t bytes = std::max({(size_t)fb * 8 * (iters + 1), (size_t)cb * 8 * (ccap + 1), (size_t)rb * 8 * rcap}) * 8;
  CHECK(cudaMalloc(&buf, bytes));
  CHECK(cudaMemcpyToSymbol(g_buf, &buf, sizeof buf));
  const int reps = 31;
  auto fma = [&](auto k) { return median_ms(reps, [&] { k<<<fb, th>>>(out, iters, iters); }); };
  auto copy = [&](auto k) { return median_ms(reps, [&] { k<<<cb, th>>>(in4, out4, n4, ccap); }); };
  auto red = [&](auto k) { return median_ms(reps, [&] { k<<<rb, th>>>(in4, r4, out, rcap); }); };
  std::printf("{\"sms\": %d, \"unit\": \"overhead vs clean, per round\", \"rounds\": [", sms);
  for (int round = 0; round < 3; ++round) {
    const float f0 = fma(fma_loop<None>), c0 = copy(copy_loop<None>), r0 = red(reduce_loop<None, 4>);
    const float f[] = {fma(fma_loop<Cur>), fma(fma_loop<Res<64>>), fma(fma_loop<Reg>), fma(fma_loop<Floor>),
                       fma(fma_loop<Sat<false>>), fma(fma_loop<Sat<true>>), fma(fma_loop<Sink>)};
    const float c[] = {copy(copy_loop<Cur>), copy(copy_loop<Res<128>>), copy(copy_loop<Reg>), copy(copy_loop<Floor>),
                       copy(copy_loop<Sat<false>>), copy(copy_loop<Sat<true>>), copy(copy_loop<Sink>)};
    const float r[] = {red(reduce_loop<Cur, 4>), red(reduce_loop<Res<80>, 4>), red(reduce_loop<Reg, 4>),
                       red(reduce_loop<Floor, 4>), red(reduce_loop<None, 16>), red(reduce_loop<Cur, 16>),
                       red(reduce_loop<Res<80>, 16>), red(reduce_loop<Cur, 4, true>),
                       red(reduce_loop<Res<80>, 4, true>)};
    const float f1 = fma(fma_loop<None>), c1 = copy(copy_loop<None>), r1 = red(reduce_loop<None, 4>);
    const float F = 0.5f * (f0 + f1), C = 0.5f * (c0 + c1), Rr = 0.5f * (r0 + r1);
    auto pc = [](float x, float b) { return 100.0 * (x / b - 1.0); };
    std::printf("%s{\"clean_ms\": {\"fma\": %.4f, \"copy\": %.4f, \"reduce\": %.4f}, \"clean_drift\": [%.2f, %.2f, %.2f], ",
                round ? ", " : "", F, C, Rr, pc(f1, f0), pc(c1, c0), pc(r1, r0));
    std::printf("\"fma\": {\"cur\": %.2f, \"resident\": %.2f, \"regring\": %.2f, \"floor\": %.2f, "
                "\"saturating\": %.2f, \"saturating_packed\": %.2f, \"sink\": %.2f}, ", pc(f[0], F), pc(f[1], F),
                pc(f[2], F), pc(f[3], F), pc(f[4], F), pc(f[5], F), pc(f[6], F));
    std::printf("\"copy\": {\"cur\": %.2f, \"resident\": %.2f, \"regring\": %.2f, \"floor\": %.2f, "
                "\"saturating\": %.2f, \"saturating_packed\": %.2f, \"sink\": %.2f}, ", pc(c[0], C), pc(c[1], C),
                pc(c[2], C), pc(c[3], C), pc(c[4], C), pc(c[5], C), pc(c[6], C));
    std::printf("\"reduce\": {\"cur4\": %.2f, \"resident4\": %.2f, \"regring4\": %.2f, \"floor4\": %.2f, "
                "\"none16\": %.2f, \"cur16\": %.2f, \"resident16\": %.2f, \"cur4_late\": %.2f, "
                "\"resident4_late\": %.2f}}",
                pc(r[0], Rr), pc(r[1], Rr), pc(r[2], Rr), pc(r[3], Rr), pc(r[4], Rr), pc(r[5], Rr), pc(r[6], Rr),
                pc(r[7], Rr), pc(r[8], Rr));
    std::fflush(stdout);
  }
  std::printf("]}\n");
  return 0;
}
