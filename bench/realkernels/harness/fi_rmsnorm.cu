// flashinfer's RMSNorm (norm.cuh, RMSNormKernel through flashinfer::norm::RMSNorm) on 4096 tokens x
// 4096 hidden, bf16; checked against a float64 CPU RMSNorm of the same bf16 inputs.
#include "flashinfer/norm.cuh"
#include "realkernels.cuh"

int main(int argc, char** argv) {
  const HarnessArgs a = parse_args(argc, argv);
  const uint32_t rows = 4096, d = 4096;
  const float eps = 1e-6f;
  const auto x = random_bf16(size_t(rows) * d, a.seed), w = random_bf16(d, a.seed + 1);
  __nv_bfloat16 *dx = to_device(x), *dw = to_device(w), *dy = to_device(x);
  auto launch = [&] { CHECK(flashinfer::norm::RMSNorm(dx, dw, dy, rows, d, d, d, eps)); };
  auto check = [&](Tolerance& tol) {
    const auto y = from_device(dy, x.size());
    for (uint32_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (uint32_t i = 0; i < d; ++i) ss += to_double(x[size_t(r) * d + i]) * to_double(x[size_t(r) * d + i]);
      const double rcp = 1.0 / std::sqrt(ss / d + eps);
      for (uint32_t i = 0; i < d; ++i)
        tol(to_double(y[size_t(r) * d + i]), to_double(x[size_t(r) * d + i]) * rcp * to_double(w[i]));
    }
  };
  return run_harness(a, "flashinfer_rmsnorm:rows=4096:d=4096:bf16:seed=" + std::to_string(a.seed), [] {}, launch,
                     check, Tolerance{1e-2, 1e-2});
}
