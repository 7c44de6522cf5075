// main.cu — launcher of rowscale (rowscale.cuh) through cudaLaunchKernelEx inside an error-check
// macro, as kernel libraries write it; checks every output element against a float64 reference.
#include "../harness.cuh"
#include "rowscale.cuh"

static void launch_rowscale(const float* x, const float* s, float* y, int rows, int cols, cudaStream_t st) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(rows);
  cfg.blockDim = dim3(kRowThreads);
  cfg.stream = st;
  CHECK(cudaLaunchKernelEx(&cfg, rowscale, reinterpret_cast<const float4*>(x), s, reinterpret_cast<float4*>(y),
                           cols / 4));
}

int main(int argc, char** argv) {
  HarnessArgs a = parse_args(argc, argv);
  const int rows = 4096, cols = 8192;
  std::vector<float> hx((size_t)rows * cols), hs(rows);
  unsigned long long seed = a.seed;
  for (auto& v : hx) v = lcg_uniform(seed);
  for (auto& v : hs) v = lcg_uniform(seed);
  float *x, *s, *y;
  CHECK(cudaMalloc(&x, hx.size() * 4));
  CHECK(cudaMalloc(&s, hs.size() * 4));
  CHECK(cudaMalloc(&y, hx.size() * 4));
  CHECK(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(s, hs.data(), hs.size() * 4, cudaMemcpyHostToDevice));
  const double ms = time_launches(a, [&] { launch_rowscale(x, s, y, rows, cols, 0); });
  std::vector<float> hy(hx.size());
  CHECK(cudaMemcpy(hy.data(), y, hy.size() * 4, cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const double ref = double(hx[(size_t)r * cols + c]) * hs[r];
      worst = std::max(worst, std::abs(hy[(size_t)r * cols + c] - ref) / (std::abs(ref) + 1e-6));
    }
  char wl[96];
  std::snprintf(wl, sizeof wl, "rowscale:%dx%d:seed=%u", rows, cols, a.seed);
  print_sample(a, ms, worst < 1e-5, wl, worst);
  return worst < 1e-5 ? 0 : 1;
}
