// flashinfer's online softmax over the vocabulary (sampling.cuh, OnlineSoftmaxFusedKernel through
// flashinfer::sampling::OnlineSoftmax): 256 rows x 128256 fp32 logits (a Llama-3 LM head), one CTA
// of 1024 threads per row, two passes (a running max and denominator with a block reduction per
// tile, then normalize and store). Checked against a float64 softmax on the CPU.
#include "flashinfer/sampling.cuh"
#include "realkernels.cuh"

int main(int argc, char** argv) {
  const HarnessArgs a = parse_args(argc, argv);
  const uint32_t rows = 256, vocab = 128256;
  const auto logits = random_f32(size_t(rows) * vocab, a.seed, 8.0f);
  float *dl = to_device(logits), *dp = to_device(std::vector<float>(logits.size()));
  auto launch = [&] {
    CHECK(flashinfer::sampling::OnlineSoftmax<float>(dl, dp, rows, vocab, nullptr, 1.0f, nullptr, 0, false));
  };
  auto check = [&](Tolerance& tol) {
    const auto p = from_device(dp, logits.size());
    std::vector<double> e(vocab);
    for (uint32_t r = 0; r < rows; ++r) {
      const float* x = &logits[size_t(r) * vocab];
      const double m = *std::max_element(x, x + vocab);
      double sum = 0;
      for (uint32_t i = 0; i < vocab; ++i) sum += e[i] = std::exp(x[i] - m);
      for (uint32_t i = 0; i < vocab; ++i) tol(p[size_t(r) * vocab + i], e[i] / sum);
    }
  };
  return run_harness(a, "flashinfer_online_softmax:rows=256:vocab=128256:fp32:seed=" + std::to_string(a.seed), [] {},
                     launch, check, Tolerance{1e-8, 2e-3});
}
