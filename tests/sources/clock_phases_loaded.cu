// clock_phases_loaded.cu — the ground truth of clock_phases.cu under memory load (tests/test_clock.py,
// the spec clock_phases_loaded.toml, scripts/gpu-clock.sh). Warps 0-3 of each CTA (one per SM
// sub-partition) run kReps rounds of the same five phases between probe sites: spins on %clock64 of
// 0, 40, 200 and 2000 cycles and a spin on %globaltimer of 5000 ns, each returning what it measured
// itself, which the site after it stores as its payload. Meanwhile warps 4-7 of the same CTA stream
// a 256 MB buffer from global memory (16-byte loads that bypass L1) until every timed warp is done,
// so the SM's load/store units, L2 and HBM are busy while the phases are timed.
//
//   clock_phases_loaded [--launches N]   N launches (default 1001: 1000 warmups, then the captured one)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(x)                                                                             \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(3);                                                                          \
    }                                                                                        \
  } while (0)

constexpr int kReps = 16;
constexpr int kTimed = 128;     // warps 0-3: the phases
constexpr int kThreads = 256;   // warps 4-7: the memory stream
constexpr int kBlocks = 132;    // one per H200 SM
constexpr size_t kWords = size_t(1) << 24;  // 16-byte words: 256 MB, beyond the 60 MB L2

// Spins until %clock64 has advanced by at least n cycles; returns by how much it had.
__device__ __forceinline__ unsigned spin_cycles(long long n) {
  const long long s = clock64();
  long long now;
  do {
    now = clock64();
  } while (now - s < n);
  return static_cast<unsigned>(now - s);
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins until %globaltimer has advanced by at least n ns; returns by how much it had.
__device__ __forceinline__ unsigned spin_ns(unsigned long long n) {
  const unsigned long long s = global_ns();
  unsigned long long now;
  do {
    now = global_ns();
  } while (now - s < n);
  return static_cast<unsigned>(now - s);
}

__global__ void __launch_bounds__(kThreads) clock_phases_loaded(long long c0, long long c1, long long c2, long long c3,
                                                                unsigned long long ns, const uint4* __restrict__ src,
                                                                unsigned* out) {
  __shared__ int timed_done;
  if (threadIdx.x == 0) timed_done = 0;
  __syncthreads();
  unsigned acc = 0;
  if (threadIdx.x < kTimed) {
    for (int r = 0; r < kReps; ++r) {
      const unsigned g0 = spin_cycles(c0);
      const unsigned g1 = spin_cycles(c1);
      const unsigned g2 = spin_cycles(c2);
      const unsigned g3 = spin_cycles(c3);
      const unsigned g4 = spin_ns(ns);
      acc += g0 + g1 + g2 + g3 + g4;
    }
    if ((threadIdx.x & 31) == 0) atomicAdd(&timed_done, 1);
  } else {
    size_t i = size_t(blockIdx.x) * (kThreads - kTimed) + (threadIdx.x - kTimed);
    const size_t stride = size_t(gridDim.x) * (kThreads - kTimed);
    uint4 a = make_uint4(0u, 0u, 0u, 0u);
    while (*static_cast<volatile int*>(&timed_done) < kTimed / 32) {
      for (int k = 0; k < 8; ++k) {
        const uint4 v = __ldcg(src + i);
        a.x ^= v.x; a.y += v.y; a.z ^= v.z; a.w += v.w;
        i += stride;
        if (i >= kWords) i -= kWords;
      }
    }
    acc = a.x ^ a.y ^ a.z ^ a.w;
  }
  out[blockIdx.x * kThreads + threadIdx.x] = acc;
}

int main(int argc, char** argv) {
  int launches = 1001;
  for (int i = 1; i + 1 < argc; i += 2)
    if (!std::strcmp(argv[i], "--launches")) launches = std::atoi(argv[i + 1]);
  unsigned* out;
  uint4* src;
  CHECK(cudaMalloc(&out, kBlocks * kThreads * sizeof(unsigned)));
  CHECK(cudaMalloc(&src, kWords * sizeof(uint4)));
  CHECK(cudaMemset(src, 1, kWords * sizeof(uint4)));
  for (int i = 0; i < launches; ++i) clock_phases_loaded<<<kBlocks, kThreads>>>(0, 40, 200, 2000, 5000, src, out);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaGetLastError());
  unsigned first;
  CHECK(cudaMemcpy(&first, out, sizeof first, cudaMemcpyDeviceToHost));
  // each round spins at least 2240 cycles and 5000 ns
  const bool ok = first >= kReps * (2240u + 5000u);
  std::printf("clock_phases_loaded: %d launches of %d x %d threads (%d streaming), %d rounds of 0/40/200/2000 "
              "cycles and 5000 ns: %s\n", launches, kBlocks, kThreads, kThreads - kTimed, kReps, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
