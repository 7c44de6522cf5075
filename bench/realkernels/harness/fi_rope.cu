// flashinfer's RoPE with a cos/sin cache (pos_enc.cuh, through
// flashinfer::BatchQKApplyRotaryPosIdsCosSinCache): 4096 tokens at random positions, 32 query and 8
// KV heads x head_dim 128, bf16, non-interleaved (NeoX) rotation of all 128 dims into separate
// outputs. On an H200 this shape takes the head-parallel kernel (one CTA per 8 tokens and one head).
// Checked against float64 rotation of the same inputs.
#include "flashinfer/pos_enc.cuh"
#include "realkernels.cuh"

int main(int argc, char** argv) {
  const HarnessArgs a = parse_args(argc, argv);
  const uint32_t nnz = 4096, qh = 32, kh = 8, dim = 128, max_pos = 8192;
  const auto q = random_bf16(size_t(nnz) * qh * dim, a.seed), k = random_bf16(size_t(nnz) * kh * dim, a.seed + 1);
  std::vector<int32_t> pos(nnz);
  unsigned long long s = a.seed + 2;
  for (auto& p : pos) p = int32_t((lcg_uniform(s) + 1) / 2 * (max_pos - 1));
  std::vector<float> cache(size_t(max_pos) * dim);
  for (uint32_t p = 0; p < max_pos; ++p)
    for (uint32_t j = 0; j < dim / 2; ++j) {
      const double f = p * std::pow(1e4, -2.0 * j / dim);
      cache[size_t(p) * dim + j] = float(std::cos(f));
      cache[size_t(p) * dim + dim / 2 + j] = float(std::sin(f));
    }
  __nv_bfloat16 *dq = to_device(q), *dk = to_device(k), *dqr = to_device(q), *dkr = to_device(k);
  float* dcache = to_device(cache);
  int32_t* dpos = to_device(pos);
  auto launch = [&] {
    CHECK(flashinfer::BatchQKApplyRotaryPosIdsCosSinCache(dq, dk, dqr, dkr, dcache, dpos, nnz, qh, kh, dim, dim,
                                                          qh * dim, dim, kh * dim, dim, qh * dim, dim, kh * dim, dim,
                                                          false));
  };
  auto rotated = [&](const std::vector<__nv_bfloat16>& x, const std::vector<__nv_bfloat16>& y, uint32_t heads,
                     Tolerance& tol) {
    for (uint32_t i = 0; i < nnz; ++i)
      for (uint32_t h = 0; h < heads; ++h) {
        const size_t base = (size_t(i) * heads + h) * dim;
        const float* c = &cache[size_t(pos[i]) * dim];
        for (uint32_t j = 0; j < dim / 2; ++j) {
          const double x0 = to_double(x[base + j]), x1 = to_double(x[base + j + dim / 2]);
          tol(to_double(y[base + j]), x0 * c[j] - x1 * c[dim / 2 + j]);
          tol(to_double(y[base + j + dim / 2]), x1 * c[j] + x0 * c[dim / 2 + j]);
        }
      }
  };
  auto check = [&](Tolerance& tol) {
    rotated(q, from_device(dqr, q.size()), qh, tol);
    rotated(k, from_device(dkr, k.size()), kh, tol);
  };
  return run_harness(a, "flashinfer_rope_cos_sin_cache:tokens=4096:qh=32:kh=8:dim=128:bf16:seed=" + std::to_string(a.seed),
                     [] {}, launch, check, Tolerance{1e-2, 1e-2});
}
