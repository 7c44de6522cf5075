// clock_phases.cu — ground truth for cycle-resolution intervals (tests/test_clock.py, the spec
// clock_phases.toml, scripts/gpu-clock.sh). Every warp runs kReps rounds of five phases of known
// length between probe sites: spins on %clock64 of 0, 40, 200 and 2000 cycles (the lengths are
// kernel arguments, so each spin is the same loop) and a spin on %globaltimer of 5000 ns. Each spin
// returns what it measured itself (cycles, or ns), and the site after it stores that as its
// payload. The 0-cycle spin is one read of the clock after the start read: the phase around it is
// what a phase costs beyond its spin (the recorder's own instructions on both sides).
//
//   clock_phases [--launches N]      N launches (default 1001: 1000 warmups, about 0.1 s, so that the SM
//                                    clock has left its idle speed and the instrumented code has run,
//                                    then the captured one)
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
constexpr int kThreads = 128;  // 4 warps: one per SM sub-partition
constexpr int kBlocks = 132;   // one per H200 SM

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

__global__ void __launch_bounds__(kThreads) clock_phases(long long c0, long long c1, long long c2, long long c3,
                                                         unsigned long long ns, unsigned* out) {
  unsigned acc = 0;
  for (int r = 0; r < kReps; ++r) {
    const unsigned g0 = spin_cycles(c0);
    const unsigned g1 = spin_cycles(c1);
    const unsigned g2 = spin_cycles(c2);
    const unsigned g3 = spin_cycles(c3);
    const unsigned g4 = spin_ns(ns);
    acc += g0 + g1 + g2 + g3 + g4;
  }
  out[blockIdx.x * kThreads + threadIdx.x] = acc;
}

int main(int argc, char** argv) {
  int launches = 1001;
  for (int i = 1; i + 1 < argc; i += 2)
    if (!std::strcmp(argv[i], "--launches")) launches = std::atoi(argv[i + 1]);
  unsigned* out;
  CHECK(cudaMalloc(&out, kBlocks * kThreads * sizeof(unsigned)));
  for (int i = 0; i < launches; ++i) clock_phases<<<kBlocks, kThreads>>>(0, 40, 200, 2000, 5000, out);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaGetLastError());
  unsigned first;
  CHECK(cudaMemcpy(&first, out, sizeof first, cudaMemcpyDeviceToHost));
  // each round spins at least 2240 cycles and 5000 ns
  const bool ok = first >= kReps * (2240u + 5000u);
  std::printf("clock_phases: %d launches of %d x %d threads, %d rounds of 0/40/200/2000 cycles and 5000 ns: %s\n",
              launches, kBlocks, kThreads, kReps, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
