// flashinfer's fused residual add + RMSNorm (norm.cuh, FusedAddRMSNormKernel through
// flashinfer::norm::FusedAddRMSNorm) on 4096 tokens x 4096 hidden, bf16, in place: residual += input,
// input = RMSNorm(residual) * weight. Checked on a launch from fresh inputs against float64 on the CPU
// (the sum rounded to bf16 as the kernel stores it).
#include "flashinfer/norm.cuh"
#include "realkernels.cuh"

int main(int argc, char** argv) {
  const HarnessArgs a = parse_args(argc, argv);
  const uint32_t rows = 4096, d = 4096;
  const float eps = 1e-6f;
  const auto x = random_bf16(size_t(rows) * d, a.seed), res = random_bf16(size_t(rows) * d, a.seed + 2);
  const auto w = random_bf16(d, a.seed + 1);
  __nv_bfloat16 *dx = to_device(x), *dr = to_device(res), *dw = to_device(w);
  auto reset = [&] { upload(dx, x); upload(dr, res); };
  auto launch = [&] { CHECK(flashinfer::norm::FusedAddRMSNorm(dx, dr, dw, rows, d, d, d, eps)); };
  auto check = [&](Tolerance& tol) {
    const auto y = from_device(dx, x.size()), r2 = from_device(dr, x.size());
    for (uint32_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (uint32_t i = 0; i < d; ++i) {
        const size_t k = size_t(r) * d + i;
        const double s = float(to_double(x[k])) + float(to_double(res[k]));
        ss += s * s;
        tol(to_double(r2[k]), to_double(__float2bfloat16(float(s))));
      }
      const double rcp = 1.0 / std::sqrt(ss / d + eps);
      for (uint32_t i = 0; i < d; ++i) {
        const size_t k = size_t(r) * d + i;
        tol(to_double(y[k]), (double(float(to_double(x[k])) + float(to_double(res[k])))) * rcp * to_double(w[i]));
      }
    }
  };
  return run_harness(a, "flashinfer_fused_add_rmsnorm:rows=4096:d=4096:bf16:seed=" + std::to_string(a.seed), reset,
                     launch, check, Tolerance{1e-2, 1e-2});
}
