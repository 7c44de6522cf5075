// flashinfer's single-request decode attention (attention/decode.cuh, SingleDecodeWithKVCacheKernel
// through SingleDecodeWithKVCacheDispatched, split over KV chunks and merged with MergeStates): one
// query token, 32 query heads sharing 8 KV heads (GQA 4), head_dim 128, a 16384-token bf16 KV cache
// (NHD). Checked against a float64 softmax attention on the CPU.
#include "flashinfer/attention/decode.cuh"
#include "flashinfer/attention/default_decode_params.cuh"
#include "flashinfer/attention/variants.cuh"
#include "realkernels.cuh"

int main(int argc, char** argv) {
  const HarnessArgs a = parse_args(argc, argv);
  using bf16 = __nv_bfloat16;
  constexpr uint32_t kDim = 128;
  const uint32_t qh = 32, kh = 8, len = 16384;
  const auto q = random_bf16(size_t(qh) * kDim, a.seed), k = random_bf16(size_t(len) * kh * kDim, a.seed + 1),
             v = random_bf16(size_t(len) * kh * kDim, a.seed + 2);
  bf16 *dq = to_device(q), *dk = to_device(k), *dv = to_device(v), *dout = to_device(std::vector<bf16>(q.size()));
  bf16* tmp = to_device(std::vector<bf16>(size_t(1024) * qh * kDim + size_t(1024) * qh * 2));
  flashinfer::SingleDecodeParams<bf16, bf16, bf16> p;
  p.q = dq, p.k = dk, p.v = dv, p.o = dout, p.kv_len = len, p.num_qo_heads = qh, p.num_kv_heads = kh;
  p.q_stride_n = qh * kDim, p.q_stride_h = kDim, p.kv_stride_n = kh * kDim, p.kv_stride_h = kDim;
  p.window_left = -1, p.sm_scale = 1.0f / std::sqrt(float(kDim)), p.rope_rcp_scale = 1.0f, p.rope_rcp_theta = 1e-4f;
  using Variant = flashinfer::DefaultAttention<false, false, false, false>;
  auto launch = [&] {
    CHECK((flashinfer::SingleDecodeWithKVCacheDispatched<kDim, flashinfer::PosEncodingMode::kNone, Variant>(p, tmp,
                                                                                                            nullptr)));
  };
  auto check = [&](Tolerance& tol) {
    const auto o = from_device(dout, q.size());
    const auto qf = as_float(q), kf = as_float(k), vf = as_float(v);
    std::vector<double> s(len), acc(kDim);
    for (uint32_t h = 0; h < qh; ++h) {
      const uint32_t g = h / (qh / kh);
      double m = -INFINITY, sum = 0;
      for (uint32_t j = 0; j < len; ++j) {
        double dot = 0;
        for (uint32_t d = 0; d < kDim; ++d) dot += double(qf[h * kDim + d]) * kf[(size_t(j) * kh + g) * kDim + d];
        m = std::max(m, s[j] = dot / std::sqrt(double(kDim)));
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (uint32_t j = 0; j < len; ++j) {
        const double w = std::exp(s[j] - m);
        sum += w;
        for (uint32_t d = 0; d < kDim; ++d) acc[d] += w * vf[(size_t(j) * kh + g) * kDim + d];
      }
      for (uint32_t d = 0; d < kDim; ++d) tol(to_double(o[h * kDim + d]), acc[d] / sum);
    }
  };
  return run_harness(a, "flashinfer_single_decode:qh=32:kh=8:dim=128:kv_len=16384:bf16:seed=" + std::to_string(a.seed),
                     [] {}, launch, check, Tolerance{5e-3, 2e-2});
}
