// harness.cuh — the measurement protocol shared by the CUDA examples (docs/measure.md).
//
//   prog [--warmup W] [--iters N] [--seed S]
// runs W warmup launches, times N launches with CUDA events, synchronizes, checks the full output
// against a float64 CPU reference, and prints exactly one line:
//   __ATREX_TIMELINE_SAMPLE__={"latency_ms":...,"correctness":"passed"|"failed","synchronized":true,...}
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x)                                                                             \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(3);                                                                          \
    }                                                                                        \
  } while (0)

struct HarnessArgs {
  int warmup = 3, iters = 10;
  unsigned seed = 1;
};

inline HarnessArgs parse_args(int argc, char** argv) {
  HarnessArgs a;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--warmup")) a.warmup = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--iters")) a.iters = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seed")) a.seed = static_cast<unsigned>(std::atoi(argv[i + 1]));
  }
  return a;
}

// Deterministic inputs in [-1, 1): a fixed seed gives a reproducible workload identity.
inline float lcg_uniform(unsigned long long& s) {
  s = s * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>((s >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

inline std::string device_uuid() {
  int dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, dev);
  const unsigned char* u = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  return buf;
}

// Times `launch` (one kernel launch, no synchronization inside) and returns the median in ms.
template <class F>
double time_launches(const HarnessArgs& a, F launch) {
  for (int i = 0; i < a.warmup; ++i) launch();
  CHECK(cudaDeviceSynchronize());
  std::vector<cudaEvent_t> ev(a.iters + 1);
  for (auto& e : ev) CHECK(cudaEventCreate(&e));
  CHECK(cudaEventRecord(ev[0]));
  std::vector<float> ms(a.iters);
  for (int i = 0; i < a.iters; ++i) {
    launch();
    CHECK(cudaEventRecord(ev[i + 1]));
  }
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaGetLastError());
  for (int i = 0; i < a.iters; ++i) CHECK(cudaEventElapsedTime(&ms[i], ev[i], ev[i + 1]));
  for (auto& e : ev) cudaEventDestroy(e);
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

inline void print_sample(const HarnessArgs& a, double latency_ms, bool passed, const std::string& workload,
                         double rel_err) {
  std::printf(
      "__ATREX_TIMELINE_SAMPLE__={\"latency_ms\":%.6f,\"correctness\":\"%s\",\"synchronized\":true,"
      "\"workload_identity\":\"%s\",\"device_identity\":{\"uuid\":\"%s\"},\"warmup\":%d,\"iterations\":%d,"
      "\"rel_err\":%.3e}\n",
      latency_ms, passed ? "passed" : "failed", workload.c_str(), device_uuid().c_str(), a.warmup, a.iters, rel_err);
}
