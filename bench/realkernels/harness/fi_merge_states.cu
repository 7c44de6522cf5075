// flashinfer's merge of attention states (attention/cascade.cuh, through flashinfer::MergeStates):
// MERGE_POSITIONS positions x MERGE_SETS partial states x 32 heads x head_dim 128, bf16 values and
// base-2 log-sum-exps; each position's states merged into one value and one lse. By default 2048
// positions x 8 states (MergeStatesKernel, one CTA per position); with as many states as positions
// or more, MergeStates takes MergeStatesLargeNumIndexSetsKernel (one CTA per position and head, a
// cp.async pipeline over the states): the fi_merge_states_many spec builds 32 x 1024 so. Checked
// against float64 on the CPU.
#include "flashinfer/attention/cascade.cuh"
#include "realkernels.cuh"

#ifndef MERGE_POSITIONS
#define MERGE_POSITIONS 2048
#endif
#ifndef MERGE_SETS
#define MERGE_SETS 8
#endif

int main(int argc, char** argv) {
  const HarnessArgs a = parse_args(argc, argv);
  const uint32_t n = MERGE_POSITIONS, sets = MERGE_SETS, heads = 32, dim = 128;
  const auto v = random_bf16(size_t(n) * sets * heads * dim, a.seed);
  const auto s = random_f32(size_t(n) * sets * heads, a.seed + 1, 8.0f);
  __nv_bfloat16* dv = to_device(v);
  float* ds = to_device(s);
  __nv_bfloat16* dvm = to_device(std::vector<__nv_bfloat16>(size_t(n) * heads * dim));
  float* dsm = to_device(std::vector<float>(size_t(n) * heads));
  auto launch = [&] { CHECK(flashinfer::MergeStates(dv, ds, dvm, dsm, sets, n, heads, dim)); };
  auto check = [&](Tolerance& tol) {
    const auto vm = from_device(dvm, size_t(n) * heads * dim);
    const auto sm = from_device(dsm, size_t(n) * heads);
    const auto vf = as_float(v);
    std::vector<double> acc(dim);
    for (uint32_t p = 0; p < n; ++p)
      for (uint32_t h = 0; h < heads; ++h) {
        double m = -INFINITY, wsum = 0;
        for (uint32_t i = 0; i < sets; ++i) m = std::max(m, double(s[(size_t(p) * sets + i) * heads + h]));
        std::fill(acc.begin(), acc.end(), 0.0);
        for (uint32_t i = 0; i < sets; ++i) {
          const double w = std::exp2(s[(size_t(p) * sets + i) * heads + h] - m);
          wsum += w;
          for (uint32_t k = 0; k < dim; ++k) acc[k] += w * vf[((size_t(p) * sets + i) * heads + h) * dim + k];
        }
        for (uint32_t k = 0; k < dim; ++k) tol(to_double(vm[(size_t(p) * heads + h) * dim + k]), acc[k] / wsum);
        tol(sm[size_t(p) * heads + h], m + std::log2(wsum));
      }
  };
  return run_harness(a, "flashinfer_merge_states:n=" + std::to_string(n) + ":sets=" + std::to_string(sets) +
                            ":heads=32:dim=128:bf16:seed=" + std::to_string(a.seed),
                     [] {}, launch, check, Tolerance{1e-2, 1e-2});
}
