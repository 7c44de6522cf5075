// flashinfer's gated activation (activation.cuh, act_and_mul_kernel with SiLU, as flashinfer's
// silu_and_mul launches it: one CTA per token, 256 threads, 16-byte vectors) on 2048 tokens x 14336
// (a Llama-3-8B MLP), bf16: out = silu(x) * y for input rows [x | y]. Checked against float64.
#include "flashinfer/activation.cuh"
#include "realkernels.cuh"

__device__ __forceinline__ float silu(const float& v) { return v / (1.0f + __expf(-v)); }

int main(int argc, char** argv) {
  const HarnessArgs a = parse_args(argc, argv);
  const int tokens = 2048, d = 14336;
  constexpr uint32_t vec = 16 / sizeof(__nv_bfloat16);
  const auto in = random_bf16(size_t(tokens) * 2 * d, a.seed, 4.0f);
  __nv_bfloat16 *din = to_device(in), *dout = to_device(std::vector<__nv_bfloat16>(size_t(tokens) * d));
  auto launch = [&] {
    flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, silu, vec><<<tokens, std::min(d / vec, 256u)>>>(
        dout, din, d);
  };
  auto check = [&](Tolerance& tol) {
    const auto out = from_device(dout, size_t(tokens) * d);
    for (int t = 0; t < tokens; ++t)
      for (int i = 0; i < d; ++i) {
        const double x = to_double(in[size_t(t) * 2 * d + i]), y = to_double(in[size_t(t) * 2 * d + d + i]);
        tol(to_double(out[size_t(t) * d + i]), x / (1.0 + std::exp(-x)) * y);
      }
  };
  return run_harness(a, "flashinfer_silu_and_mul:tokens=2048:d=14336:bf16:seed=" + std::to_string(a.seed), [] {},
                     launch, check, Tolerance{2e-2, 1e-2});
}
