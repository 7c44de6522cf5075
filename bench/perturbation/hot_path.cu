// hot_path.cu — candidate shapes for the recorder's per-event hot path, timed side by side in one
// process on the per-event FMA loop (1056 x 256 threads, 1024 iterations of 128 FMA per thread, one
// event per iteration, every warp recording) and on a 3.9 TB/s copy (one event per 512 B per warp).
// Each candidate stores into a real per-owner buffer with a capacity check, so a shape that is cheap
// only because it drops the check does not count. Run on the GPU host:
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o hot_path bench/perturbation/hot_path.cu && ./hot_path
// Prints one JSON line: overhead of each candidate against the clean loop, median of 21 launches, per round.
#include <cstdint>

#include "../probe_cost/timing.cuh"

__device__ __forceinline__ uint32_t timer_lo() {
  uint32_t t;
  asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(t));
  return t;
}

// 0 clean
struct None {
  __device__ None(unsigned char*, uint32_t) {}
  __device__ __forceinline__ void rec(uint32_t) {}
  __device__ __forceinline__ void finish() {}
};

// 1/2 global: lane 0 stores each event at ev + n*B when n < cap (the other lanes have cap 0).
// B = 8: today's {t, tag}; B = 4: compact (t & ~31) | site.
template <uint32_t B>
struct Global {
  unsigned char* ev; uint32_t n = 0, cap;
  __device__ Global(unsigned char* buf, uint32_t capacity) {
    const uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    ev = buf + (uint64_t)warp * capacity * B;
    cap = (threadIdx.x & 31u) == 0u ? capacity : 0u;
  }
  __device__ __forceinline__ void rec(uint32_t site) {
    const uint32_t t = timer_lo();
    if (B == 8) {
      asm volatile("{\n\t.reg .pred p;\n\tsetp.lt.u32 p, %1, %2;\n\t@p st.global.v2.u32 [%0], {%3, %4};\n\t}"
                   ::"l"(ev + n * 8u), "r"(n), "r"(cap), "r"(t), "r"(site | 0x80000000u));
    } else {
      asm volatile("{\n\t.reg .pred p;\n\tsetp.lt.u32 p, %1, %2;\n\t@p st.global.u32 [%0], %3;\n\t}"
                   ::"l"(ev + n * 4u), "r"(n), "r"(cap), "r"((t & ~31u) | site));
    }
    ++n;
  }
  __device__ __forceinline__ void finish() {}
};

// 3/4 shared ring of 32 slots per warp, every lane storing the same value (no predicate), the warp
// copying the ring to its global buffer (one coalesced store, capacity checked per slot) when full.
// B = 4: compact (t & ~31) | site; B = 8: {t, tag}.
template <uint32_t B>
struct Ring {
  unsigned char* ev; uint32_t n = 0, cap, a, base;
  __device__ Ring(unsigned char* buf, uint32_t capacity) {
    __shared__ __align__(256) uint32_t ring[8 * 32 * (B / 4)];
    const uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    ev = buf + (uint64_t)warp * capacity * B;
    cap = capacity;
    base = a = static_cast<uint32_t>(__cvta_generic_to_shared(ring)) + (threadIdx.x >> 5) * 32u * B;
  }
  __device__ __forceinline__ void rec(uint32_t site) {
    const uint32_t t = timer_lo();
    if (B == 4) {
      asm volatile("st.shared.u32 [%0], %1;" ::"r"(a), "r"((t & ~31u) | site));
    } else {
      asm volatile("st.shared.v2.u32 [%0], {%1, %2};" ::"r"(a), "r"(t), "r"(site | 0x80000000u));
    }
    a += B;
    if (a == base + 32u * B) drain(32u);
  }
  __device__ __forceinline__ void drain(uint32_t count) {
    const uint32_t j = threadIdx.x & 31u, p = n + j;
    if (j < count && p < cap) {
      if (B == 4) {
        uint32_t v;
        asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(base + j * 4u) : "memory");
        reinterpret_cast<uint32_t*>(ev)[p] = v;
      } else {
        uint2 v;
        asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(base + j * 8u) : "memory");
        reinterpret_cast<uint2*>(ev)[p] = v;
      }
    }
    n += count;
    a = base;
  }
  __device__ __forceinline__ void finish() { drain((a - base) / B); }
};

// 5 the floor: every lane stores one 4-byte timer to its warp's fixed shared slot (no index, no
// check, nothing kept): not a recorder, the cost of any store-based probe at least.
struct Floor {
  uint32_t slot;
  __device__ Floor(unsigned char*, uint32_t) {
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

template <class R>
__global__ void fma_loop(float* out, int iters, unsigned char* buf, uint32_t cap) {
  R r(buf, cap);
  float a0 = threadIdx.x, a1 = a0 + 1.f, a2 = a0 + 2.f, a3 = a0 + 3.f;
  for (int i = 0; i < iters; ++i) {
    r.rec(1u);
    FMA128(a0, a1, a2, a3)
  }
  r.finish();
  out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3;
}

template <class R>
__global__ void copy_loop(const float4* __restrict__ in, float4* __restrict__ out, long n, unsigned char* buf,
                          uint32_t cap) {
  R r(buf, cap);
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    r.rec(1u);
    out[i] = in[i];
  }
  r.finish();
}


int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int fb = sms * 8, iters = 1024, th = 256, cb = sms * 16, ccap = 160;
  const long n4 = 1l << 26;
  float* out;
  float4 *in4, *out4;
  unsigned char* buf;
  CHECK(cudaMalloc(&out, (size_t)fb * th * 4));
  CHECK(cudaMalloc(&in4, n4 * 16));
  CHECK(cudaMalloc(&out4, n4 * 16));
  CHECK(cudaMemset(in4, 1, n4 * 16));
  CHECK(cudaMalloc(&buf, std::max((size_t)fb * th / 32 * iters, (size_t)cb * th / 32 * ccap) * 8));
  const char* names[] = {"clean", "global8", "global4", "ring4", "ring8", "floor"};
  auto fma = [&](int v) {
    switch (v) {
      case 0: return median_ms(21, [&] { fma_loop<None><<<fb, th>>>(out, iters, buf, iters); });
      case 1: return median_ms(21, [&] { fma_loop<Global<8>><<<fb, th>>>(out, iters, buf, iters); });
      case 2: return median_ms(21, [&] { fma_loop<Global<4>><<<fb, th>>>(out, iters, buf, iters); });
      case 3: return median_ms(21, [&] { fma_loop<Ring<4>><<<fb, th>>>(out, iters, buf, iters); });
      case 4: return median_ms(21, [&] { fma_loop<Ring<8>><<<fb, th>>>(out, iters, buf, iters); });
      default: return median_ms(21, [&] { fma_loop<Floor><<<fb, th>>>(out, iters, buf, iters); });
    }
  };
  auto copy = [&](int v) {
    switch (v) {
      case 0: return median_ms(21, [&] { copy_loop<None><<<cb, th>>>(in4, out4, n4, buf, ccap); });
      case 1: return median_ms(21, [&] { copy_loop<Global<8>><<<cb, th>>>(in4, out4, n4, buf, ccap); });
      case 2: return median_ms(21, [&] { copy_loop<Global<4>><<<cb, th>>>(in4, out4, n4, buf, ccap); });
      case 3: return median_ms(21, [&] { copy_loop<Ring<4>><<<cb, th>>>(in4, out4, n4, buf, ccap); });
      case 4: return median_ms(21, [&] { copy_loop<Ring<8>><<<cb, th>>>(in4, out4, n4, buf, ccap); });
      default: return median_ms(21, [&] { copy_loop<Floor><<<cb, th>>>(in4, out4, n4, buf, ccap); });
    }
  };
  std::printf("{\"rounds\": [");
  for (int round = 0; round < 3; ++round) {
    float f[6], c[6];
    for (int k = 0; k < 6; ++k) {
      const int v = round % 2 ? 5 - k : k;
      f[v] = fma(v);
      c[v] = copy(v);
    }
    std::printf("%s{", round ? ", " : "");
    for (int v = 0; v < 6; ++v)
      std::printf("%s\"%s\": [%.5f, %.5f]", v ? ", " : "", names[v], f[v], c[v]);
    std::printf("}");
  }
  std::printf("], \"unit\": \"ms [fma, copy]\", \"sms\": %d}\n", sms);
  return 0;
}
