// saxpy_tail.cu — an elementwise kernel with the usual bounds check: out = a*x + y over n elements,
// n not a multiple of the block, so the grid's last block has a partial warp (its last) whose lanes
// past n return at the check while the others go on to the store. A recording warp then reaches
// the kernel's exits in two parts.
#include "harness.cuh"

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) saxpy_tail(const float* __restrict__ x, const float* __restrict__ y,
                                                       float* __restrict__ out, float a, int n) {
  const int i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= n) return;
  const float v = a * x[i] + y[i];
  out[i] = v;
}

int main(int argc, char** argv) {
  HarnessArgs a = parse_args(argc, argv);
  const int n = 100071;  // 391 blocks; the last has 231 threads in range: warps 0-6, and 7 lanes of warp 7
  const float alpha = 0.5f;
  std::vector<float> hx(n), hy(n);
  unsigned long long s = a.seed;
  for (int i = 0; i < n; ++i) hx[i] = lcg_uniform(s), hy[i] = lcg_uniform(s);
  float *x, *y, *out;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  CHECK(cudaMalloc(&out, n * sizeof(float)));
  CHECK(cudaMemcpy(x, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(y, hy.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(out, 0xff, n * sizeof(float)));  // NaN: an element no launch wrote fails the check
  const int grid = (n + kThreads - 1) / kThreads;
  auto launch = [&] { saxpy_tail<<<grid, kThreads>>>(x, y, out, alpha, n); };
  double ms = time_launches(a, launch);
  std::vector<float> got(n);
  CHECK(cudaMemcpy(got.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
  double err = 0;
  for (int i = 0; i < n; ++i) {
    const double d = std::abs(double(got[i]) - (double(alpha) * hx[i] + hy[i]));
    err = d == d ? std::max(err, d) : 1.0;  // NaN: not written
  }
  char wl[128];
  std::snprintf(wl, sizeof wl, "saxpy_tail:n=%d:seed=%u", n, a.seed);
  print_sample(a, ms, err < 1e-6, wl, err);
  return err < 1e-6 ? 0 : 1;
}
