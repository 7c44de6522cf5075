// timing.cuh — what the benchmark programs share: CUDA error checks and the median of timed launches.
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); std::exit(3); } } while (0)

// Median of `reps` launches timed with CUDA events, after 3 untimed ones: the launches queued back
// to back, an event between each two and one synchronization at the end (the examples' protocol,
// examples/cuda/harness.cuh), so that each time is the GPU's. Timed one launch at a time, each
// start event fired on an idle GPU at once, and the launch's host work (a capture session's) was
// timed as the kernel's.
template <class F>
static float median_ms(int reps, F launch) {
  for (int i = 0; i < 3; ++i) launch();
  CHECK(cudaDeviceSynchronize());
  std::vector<cudaEvent_t> ev(reps + 1);
  for (auto& e : ev) CHECK(cudaEventCreate(&e));
  CHECK(cudaEventRecord(ev[0]));
  for (int r = 0; r < reps; ++r) {
    launch();
    CHECK(cudaEventRecord(ev[r + 1]));
  }
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaGetLastError());
  std::vector<float> ms(reps);
  for (int r = 0; r < reps; ++r) CHECK(cudaEventElapsedTime(&ms[r], ev[r], ev[r + 1]));
  for (auto& e : ev) CHECK(cudaEventDestroy(e));
  std::sort(ms.begin(), ms.end());
  return ms[reps / 2];
}
