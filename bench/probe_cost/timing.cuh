// timing.cuh — what the benchmark programs share: CUDA error checks and the median of timed launches.
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); std::exit(3); } } while (0)

// Median of `reps` launches timed with CUDA events, after 3 untimed ones.
template <class F>
static float median_ms(int reps, F launch) {
  for (int i = 0; i < 3; ++i) launch();
  CHECK(cudaDeviceSynchronize());
  std::vector<float> ms(reps);
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int r = 0; r < reps; ++r) {
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaGetLastError());
    CHECK(cudaEventElapsedTime(&ms[r], a, b));
  }
  std::sort(ms.begin(), ms.end());
  return ms[reps / 2];
}
