// realkernels.cuh — what the benchmark's harnesses share on top of examples/cuda/harness.cuh (the
// sample protocol): bf16 inputs from a seed, device copies, a tolerance check over the full output,
// and the run: reset the inputs, time the launches, reset again, launch once and check that launch.
// Kernels that update their inputs in place (fused add + RMSNorm, a KV-cache append) are checked on a
// launch from fresh inputs, so the timed launches may leave the inputs changed.
#pragma once
#include <cuda_bf16.h>
#include <cmath>
#include <functional>
#include <vector>

#include "harness.cuh"

inline std::vector<__nv_bfloat16> random_bf16(size_t n, unsigned long long seed, float scale = 1.0f) {
  std::vector<__nv_bfloat16> v(n);
  for (auto& x : v) x = __float2bfloat16(scale * lcg_uniform(seed));
  return v;
}

inline std::vector<float> random_f32(size_t n, unsigned long long seed, float scale = 1.0f) {
  std::vector<float> v(n);
  for (auto& x : v) x = scale * lcg_uniform(seed);
  return v;
}

template <class T>
T* to_device(const std::vector<T>& h) {
  T* d = nullptr;
  CHECK(cudaMalloc(&d, h.size() * sizeof(T)));
  CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <class T>
void upload(T* d, const std::vector<T>& h) {
  CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}

template <class T>
std::vector<T> from_device(const T* d, size_t n) {
  std::vector<T> h(n);
  CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

inline double to_double(__nv_bfloat16 x) { return __bfloat162float(x); }

// The values as floats, converted once: the references' inner loops then run at the CPU's speed
// (a check runs in every sample process).
inline std::vector<float> as_float(const std::vector<__nv_bfloat16>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = __bfloat162float(v[i]);
  return f;
}
inline double to_double(float x) { return x; }
inline double to_double(double x) { return x; }

// |got - want| <= atol + rtol * |want| on every element; counts failures and the largest error
// relative to the output's scale (reported as rel_err).
struct Tolerance {
  double atol, rtol;
  size_t checked = 0, failed = 0;
  double max_err = 0, scale = 0;
  void operator()(double got, double want) {
    const double err = std::fabs(got - want);
    ++checked;
    if (!(err <= atol + rtol * std::fabs(want))) ++failed;  // NaN fails
    max_err = std::max(max_err, err);
    scale = std::max(scale, std::fabs(want));
  }
  double rel_err() const { return scale > 0 ? max_err / scale : max_err; }
  bool passed() const { return checked > 0 && failed == 0; }
};

// The harness's whole run: reset(); time launch() per the arguments; reset(); launch() once,
// synchronize, check(tol) over that launch's full output; print the sample line. Exit status 1 when
// the output is wrong (the first failures' count goes to stderr).
inline int run_harness(const HarnessArgs& a, const std::string& workload, const std::function<void()>& reset,
                       const std::function<void()>& launch, const std::function<void(Tolerance&)>& check,
                       Tolerance tol) {
  reset();
  const double ms = time_launches(a, launch);
  reset();
  launch();
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaGetLastError());
  check(tol);
  if (!tol.passed())
    std::fprintf(stderr, "%s: %zu of %zu values beyond atol %g + rtol %g; largest error %g\n", workload.c_str(),
                 tol.failed, tol.checked, tol.atol, tol.rtol, tol.max_err);
  print_sample(a, ms, tol.passed(), workload, tol.rel_err());
  return tol.passed() ? 0 : 1;
}
