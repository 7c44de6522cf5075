// probe_cost.cu — probe-cost benchmark kernels, one loop shape each (bench/probe_cost/run.py drives it
// and instruments each <shape>_loop); 1056 x 256 threads on an H200 (8 CTAs per SM) unless said:
//   fma_loop:     four independent FMA chains, 128 FMA per thread per iteration (FMA-throughput-bound)
//   fma_dep_loop: one dependent FMA chain, 128 FMA per thread per iteration, each waiting for the last
//   copy_loop:    grid-stride float4 copy, 512 bytes per warp per iteration (memory-bound), 2112 CTAs
//   smem_loop:    a shared-memory store, a __syncthreads() and eight loads of other warps' values per iteration
//   mma_loop:     16 mma.sync bf16 m16n8k16 per warp per iteration, four accumulators in registers
// fma_manual / copy_manual carry the hand-written physical reference probe: %globaltimer_lo read +
// lane-0 predicated 8-byte global store per iteration; fma_floor / copy_floor the store-based floor
// (floor_probe).
//   probe_cost [reps] [shape] [iterations...]   (defaults: 21, fma, 1024)
// times the shape's kernels at each trip count (the copy's is its data's) and prints one JSON line:
//   {"sms", "clock_khz", "shape", "runs": [{"iterations", "loop_ms", "hand_written_ms", "floor_ms"}]}
// (iterations null for the copy; hand_written_ms and floor_ms null where the shape has none).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <cuda_runtime.h>

#include "harness.cuh"  // CHECK and time_launches: the CUDA examples' timing, launches queued back to back

// Median of `reps` launches after 3 untimed ones, each timed as the GPU runs it (time_launches).
template <class F>
static float median_ms(int reps, F launch) {
  return static_cast<float>(time_launches(HarnessArgs{3, reps}, launch));
}

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

// x = x*y + z; y = y*z + x: every FMA reads the one before (z = 0.1 keeps both finite).
__global__ void fma_dep_loop(float* out, int iters, float z) {
  float x = threadIdx.x * 1e-3f, y = 0.5f;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 64; ++j) { x = fmaf(x, y, z); y = fmaf(y, z, x); }
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = x + y;
}

// Double-buffered, so one barrier per iteration orders each store after the loads of two iterations
// before; v keeps its scale (0.5 v + 8 x 0.0625 of others' v).
__global__ void smem_loop(float* out, int iters) {
  __shared__ float buf[2][256];
  const int t = threadIdx.x;
  float v = t;
  for (int i = 0; i < iters; ++i) {
    float* b = buf[i & 1];
    b[t] = v;
    __syncthreads();
    v *= 0.5f;
#pragma unroll
    for (int k = 1; k <= 8; ++k) v = fmaf(b[(t + 32 * k) & 255], 0.0625f, v);
  }
  out[blockIdx.x * blockDim.x + t] = v;
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// A and B fragments of bf16 2^-8 (0x3b80): each mma adds 16 x 2^-16 to every accumulator element.
__global__ void mma_loop(float* out, int iters) {
  const uint32_t a[4] = {0x3b803b80u, 0x3b803b80u, 0x3b803b80u, 0x3b803b80u}, b[2] = {0x3b803b80u, 0x3b803b80u};
  float d[4][4] = {};
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#pragma unroll
      for (int j = 0; j < 4; ++j) mma_bf16(d[j], a, b);
    }
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 4; ++j) s += d[j][0] + d[j][1] + d[j][2] + d[j][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// One shape's timings at one trip count, as a JSON object (a negative time: the shape has no such kernel).
static void print_run(bool first, int iters, float loop, float manual, float floor) {
  std::printf("%s{\"iterations\": ", first ? "" : ", ");
  iters > 0 ? std::printf("%d", iters) : std::printf("null");
  const char* keys[] = {"loop_ms", "hand_written_ms", "floor_ms"};
  const float ms[] = {loop, manual, floor};
  for (int k = 0; k < 3; ++k) {
    ms[k] < 0 ? std::printf(", \"%s\": null", keys[k]) : std::printf(", \"%s\": %.5f", keys[k], ms[k]);
  }
  std::printf("}");
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 21;
  const std::string shape = argc > 2 ? argv[2] : "fma";
  std::vector<int> trips;
  for (int k = 3; k < argc; ++k) trips.push_back(std::atoi(argv[k]));
  if (trips.empty()) trips.push_back(1024);
  const int max_trip = *std::max_element(trips.begin(), trips.end());
  if (std::string(" fma fma_dep copy smem mma ").find(" " + shape + " ") == std::string::npos) {
    std::fprintf(stderr, "unknown shape %s (fma, fma_dep, copy, smem, mma)\n", shape.c_str());
    return 2;
  }
  int sms = 0, clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const int blocks = sms * 8, threads = 256;
  const size_t warps = (size_t)blocks * threads / 32;
  float* out;
  CHECK(cudaMalloc(&out, (size_t)blocks * threads * 4));
  std::printf("{\"sms\": %d, \"clock_khz\": %d, \"shape\": \"%s\", \"runs\": [", sms, clock_khz, shape.c_str());
  // a shape with no reference kernels: its loop alone at each trip count
  auto at_each_trip = [&](auto launch) {
    for (size_t k = 0; k < trips.size(); ++k) {
      print_run(k == 0, trips[k], median_ms(reps, [&] { launch(trips[k]); }), -1, -1);
    }
  };
  if (shape == "fma") {
    uint2* buf;
    CHECK(cudaMalloc(&buf, warps * max_trip * sizeof(uint2)));
    for (size_t k = 0; k < trips.size(); ++k) {
      const int n = trips[k];
      const float t = median_ms(reps, [&] { fma_loop<<<blocks, threads>>>(out, n); });
      const float m = median_ms(reps, [&] { fma_manual<<<blocks, threads>>>(out, n, buf); });
      const float f = median_ms(reps, [&] { fma_floor<<<blocks, threads>>>(out, n); });
      print_run(k == 0, n, t, m, f);
    }
  } else if (shape == "fma_dep") {
    at_each_trip([&](int n) { fma_dep_loop<<<blocks, threads>>>(out, n, 0.1f); });
  } else if (shape == "smem") {
    at_each_trip([&](int n) { smem_loop<<<blocks, threads>>>(out, n); });
  } else if (shape == "mma") {
    at_each_trip([&](int n) { mma_loop<<<blocks, threads>>>(out, n); });
  } else {  // copy
    const int copy_blocks = sms * 16, copy_cap = 128;
    const long n4 = 1l << 26;  // 1 GiB in, 1 GiB out
    float4 *in4, *out4;
    uint2* buf;
    CHECK(cudaMalloc(&in4, n4 * 16));
    CHECK(cudaMalloc(&out4, n4 * 16));
    CHECK(cudaMemset(in4, 1, n4 * 16));
    CHECK(cudaMalloc(&buf, (size_t)copy_blocks * threads / 32 * copy_cap * sizeof(uint2)));
    const float t = median_ms(reps, [&] { copy_loop<<<copy_blocks, threads>>>(in4, out4, n4); });
    const float m = median_ms(reps, [&] { copy_manual<<<copy_blocks, threads>>>(in4, out4, n4, buf, copy_cap); });
    const float f = median_ms(reps, [&] { copy_floor<<<copy_blocks, threads>>>(in4, out4, n4); });
    print_run(true, 0, t, m, f);
  }
  std::printf("]}\n");
  return 0;
}
