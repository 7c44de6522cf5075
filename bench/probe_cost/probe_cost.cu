// probe_cost.cu — probe-cost benchmark kernels (bench/probe_cost/run.py drives it).
//   fma_loop / fma_manual:   128 FMA per thread per iteration (FMA-bound), 1056 x 256 threads
//   copy_loop / copy_manual: grid-stride float4 copy, 512 bytes per warp per iteration (memory-bound)
// *_manual carry the hand-written physical reference probe: %globaltimer_lo read + lane-0
// predicated 8-byte global store per iteration; *_floor the store-based floor (floor_probe).
// run.py instruments fma_loop / copy_loop from fma.toml / copy.toml with atrex-inject.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#include "timing.cuh"

__device__ __forceinline__ void manual_probe(uint2* p, bool lane0, uint32_t tag) {
  uint32_t t;
  asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(t));
  asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %2, 0;\n\t@q st.global.v2.u32 [%0], {%1, %3};\n\t}"
               :: "l"(p), "r"(t), "r"(lane0 ? 1u : 0u), "r"(tag));
}

// The store-based floor: every lane stores one 4-byte %globaltimer_lo to its warp's fixed shared
// slot (no index, no predicate, no capacity check): what any store-based probe costs at least.
__device__ __forceinline__ void floor_probe(uint32_t slot) {
  uint32_t t;
  asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(t));
  asm volatile("st.shared.u32 [%0], %1;" :: "r"(slot), "r"(t));
}

__device__ __forceinline__ uint32_t floor_slot() {
  __shared__ uint32_t slots[32];
  return static_cast<uint32_t>(__cvta_generic_to_shared(&slots[threadIdx.x >> 5]));
}

#define FMA128(a0, a1, a2, a3)                                             \
  _Pragma("unroll") for (int j = 0; j < 32; ++j) {                        \
    a0 = fmaf(a0, 1.0001f, 0.5f); a1 = fmaf(a1, 0.9999f, 0.25f);           \
    a2 = fmaf(a2, 1.0002f, 0.125f); a3 = fmaf(a3, 0.9998f, 0.0625f);       \
  }

__global__ void fma_loop(float* out, int iters) {
  float a0 = threadIdx.x, a1 = a0 + 1.f, a2 = a0 + 2.f, a3 = a0 + 3.f;
  for (int i = 0; i < iters; ++i) {
    FMA128(a0, a1, a2, a3)
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3;
}

__global__ void fma_manual(float* out, int iters, uint2* buf) {
  float a0 = threadIdx.x, a1 = a0 + 1.f, a2 = a0 + 2.f, a3 = a0 + 3.f;
  const bool lane0 = (threadIdx.x & 31) == 0;
  uint2* p = buf + (size_t)((blockIdx.x * blockDim.x + threadIdx.x) >> 5) * iters;
  for (int i = 0; i < iters; ++i) {
    manual_probe(p + i, lane0, 0x80000001u);
    FMA128(a0, a1, a2, a3)
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3;
}

__global__ void fma_floor(float* out, int iters) {
  float a0 = threadIdx.x, a1 = a0 + 1.f, a2 = a0 + 2.f, a3 = a0 + 3.f;
  const uint32_t slot = floor_slot();
  for (int i = 0; i < iters; ++i) {
    floor_probe(slot);
    FMA128(a0, a1, a2, a3)
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3;
}

__global__ void copy_loop(const float4* __restrict__ in, float4* __restrict__ out, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    out[i] = in[i];
  }
}

__global__ void copy_manual(const float4* __restrict__ in, float4* __restrict__ out, long n, uint2* buf, int cap) {
  const bool lane0 = (threadIdx.x & 31) == 0;
  uint2* p = buf + (size_t)((blockIdx.x * blockDim.x + threadIdx.x) >> 5) * cap;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    manual_probe(p++, lane0, 0x80000001u);
    out[i] = in[i];
  }
}

__global__ void copy_floor(const float4* __restrict__ in, float4* __restrict__ out, long n) {
  const uint32_t slot = floor_slot();
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    floor_probe(slot);
    out[i] = in[i];
  }
}


int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 21;
  const int fma_iters = argc > 2 ? std::atoi(argv[2]) : 1024;  // the FMA loop's trip count
  int sms = 0, clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const int fma_blocks = sms * 8, threads = 256;
  const int copy_blocks = sms * 16, copy_cap = 128;
  const long n4 = 1l << 26;  // 1 GiB in, 1 GiB out
  float* out;
  float4 *in4, *out4;
  uint2* buf;
  CHECK(cudaMalloc(&out, (size_t)fma_blocks * threads * 4));
  CHECK(cudaMalloc(&in4, n4 * 16));
  CHECK(cudaMalloc(&out4, n4 * 16));
  CHECK(cudaMemset(in4, 1, n4 * 16));
  const size_t warps_fma = (size_t)fma_blocks * threads / 32, warps_copy = (size_t)copy_blocks * threads / 32;
  CHECK(cudaMalloc(&buf, std::max(warps_fma * fma_iters, warps_copy * copy_cap) * sizeof(uint2)));
  const float t_fma = median_ms(reps, [&] { fma_loop<<<fma_blocks, threads>>>(out, fma_iters); });
  const float t_fma_m = median_ms(reps, [&] { fma_manual<<<fma_blocks, threads>>>(out, fma_iters, buf); });
  const float t_copy = median_ms(reps, [&] { copy_loop<<<copy_blocks, threads>>>(in4, out4, n4); });
  const float t_copy_m = median_ms(reps, [&] { copy_manual<<<copy_blocks, threads>>>(in4, out4, n4, buf, copy_cap); });
  const float t_fma_f = median_ms(reps, [&] { fma_floor<<<fma_blocks, threads>>>(out, fma_iters); });
  const float t_copy_f = median_ms(reps, [&] { copy_floor<<<copy_blocks, threads>>>(in4, out4, n4); });
  const double probes_fma = (double)warps_fma * fma_iters;
  const double probes_copy = (double)n4 / 32.0;  // one per warp-iteration of 512 bytes
  std::printf("{\"sms\": %d, \"clock_khz\": %d, \"fma_loop_ms\": %.5f, \"fma_manual_ms\": %.5f, "
              "\"copy_loop_ms\": %.5f, \"copy_manual_ms\": %.5f, \"fma_floor_ms\": %.5f, \"copy_floor_ms\": %.5f, \"probes_fma\": %.0f, \"probes_copy\": %.0f, "
              "\"copy_gbps\": %.1f}\n",
              sms, clock_khz, t_fma, t_fma_m, t_copy, t_copy_m, t_fma_f, t_copy_f, probes_fma, probes_copy, 2.0 * n4 * 16 / t_copy / 1e6);
  return 0;
}
