// flashinfer's paged KV-cache append (page.cuh, AppendPagedKVCacheKernel through
// flashinfer::AppendPagedKVCache): a prefill of 64 requests x 256 new tokens, 8 KV heads x head_dim
// 128, bf16, into pages of 16 entries (NHD) scattered in a pool of 1024 pages by a shuffled page
// table. The kernel is a persistent grid-stride loop over tokens. Checked: every entry of both
// caches equals the token written there (a copy: exact).
#include <numeric>

#include "flashinfer/page.cuh"
#include "realkernels.cuh"

int main(int argc, char** argv) {
  const HarnessArgs a = parse_args(argc, argv);
  const uint32_t batch = 64, per_req = 256, heads = 8, dim = 128, page = 16, pages = batch * per_req / page;
  const uint32_t nnz = batch * per_req, row = heads * dim;
  const auto key = random_bf16(size_t(nnz) * row, a.seed), value = random_bf16(size_t(nnz) * row, a.seed + 1);
  std::vector<int32_t> indices(pages), indptr(batch + 1), last(batch, page), bidx(nnz), pos(nnz);
  std::iota(indices.begin(), indices.end(), 0);
  unsigned long long s = a.seed;
  for (uint32_t i = pages - 1; i > 0; --i) std::swap(indices[i], indices[uint32_t((lcg_uniform(s) + 1) / 2 * i) % (i + 1)]);
  for (uint32_t b = 0; b <= batch; ++b) indptr[b] = b * (per_req / page);
  for (uint32_t i = 0; i < nnz; ++i) bidx[i] = i / per_req, pos[i] = i % per_req;
  const std::vector<__nv_bfloat16> zeros(size_t(pages) * page * row);
  __nv_bfloat16 *dk = to_device(key), *dv = to_device(value), *kc = to_device(zeros), *vc = to_device(zeros);
  int32_t *dind = to_device(indices), *dptr = to_device(indptr), *dlast = to_device(last), *db = to_device(bidx),
          *dp = to_device(pos);
  flashinfer::paged_kv_t<__nv_bfloat16, int32_t> kv(heads, page, dim, batch, flashinfer::QKVLayout::kNHD, kc, vc,
                                                    dind, dptr, dlast);
  auto launch = [&] { CHECK(flashinfer::AppendPagedKVCache(kv, dk, dv, db, dp, nnz, row, dim, row, dim)); };
  auto check = [&](Tolerance& tol) {
    const auto k = from_device(kc, zeros.size()), v = from_device(vc, zeros.size());
    for (uint32_t i = 0; i < nnz; ++i) {
      const size_t at = (size_t(indices[indptr[bidx[i]] + pos[i] / page]) * page + pos[i] % page) * row;
      for (uint32_t e = 0; e < row; ++e) {
        tol(to_double(k[at + e]), to_double(key[size_t(i) * row + e]));
        tol(to_double(v[at + e]), to_double(value[size_t(i) * row + e]));
      }
    }
  };
  return run_harness(a, "flashinfer_append_paged_kv:batch=64:tokens=256:heads=8:dim=128:page=16:bf16:seed=" +
                            std::to_string(a.seed), [] {}, launch, check, Tolerance{0, 0});
}
