// flashinfer's Mamba-2 selective state update, one decode step (mamba/kernel_selective_state_update_stp.cuh,
// selective_state_update_kernel_simple, launched as flashinfer's dispatch launches it for a
// full-head tile): 64 sequences x 80 heads x head_dim 64 x d_state 128, 8 groups, bf16 inputs and
// state, fp32 dt/A/D, softplus on dt, z gating. The state is updated in place. Checked on a launch
// from fresh inputs against float64 on the CPU: the output and the whole new state.
#include <cuda_bf16.h>

#include <cstdint>

// What flashinfer's JIT generates before it includes the header (csrc/selective_state_update_customize_config.jinja).
using state_t = __nv_bfloat16;
using input_t = __nv_bfloat16;
using weight_t = float;
using matrixA_t = float;
using stateIndex_t = int32_t;
using cuSeqlensIndex_t = int32_t;
using numAcceptedIndex_t = int32_t;
using state_scale_t = void;
constexpr int DIM = 64;
constexpr int DSTATE = 128;
constexpr int NTOKENS_MTP = 1;
constexpr int PHILOX_ROUNDS = 0;

#include "flashinfer/mamba/selective_state_update.cuh"
#include "realkernels.cuh"

constexpr int kDim = DIM, kDstate = DSTATE, kWarps = 4;

int main(int argc, char** argv) {
  const HarnessArgs a = parse_args(argc, argv);
  const uint32_t batch = 64, heads = 80, groups = 8;
  const auto x = random_bf16(size_t(batch) * heads * kDim, a.seed), z = random_bf16(size_t(batch) * heads * kDim, a.seed + 1);
  const auto B = random_bf16(size_t(batch) * groups * kDstate, a.seed + 2), C = random_bf16(size_t(batch) * groups * kDstate, a.seed + 3);
  const auto state = random_bf16(size_t(batch) * heads * kDim * kDstate, a.seed + 4);
  const auto dt = random_f32(size_t(batch) * heads, a.seed + 5), dt_bias = random_f32(heads, a.seed + 6, 0.5f);
  auto A = random_f32(heads, a.seed + 7), D = random_f32(heads, a.seed + 8);
  for (auto& v : A) v = -std::exp(v);  // A < 0: a decaying state
  __nv_bfloat16 *dx = to_device(x), *dz = to_device(z), *dB = to_device(B), *dC = to_device(C), *ds = to_device(state);
  __nv_bfloat16* dout = to_device(std::vector<__nv_bfloat16>(x.size()));
  float *ddt = to_device(dt), *dbias = to_device(dt_bias), *dA = to_device(A), *dD = to_device(D);
  flashinfer::mamba::SelectiveStateUpdateParams p;
  p.batch = batch, p.nheads = heads, p.dim = kDim, p.dstate = kDstate, p.ngroups = groups, p.state_cache_size = batch;
  p.x_stride_batch = p.out_stride_batch = p.z_stride_batch = int64_t(heads) * kDim;
  p.dt_stride_batch = heads, p.B_stride_batch = p.C_stride_batch = int64_t(groups) * kDstate;
  p.state_stride_batch = int64_t(heads) * kDim * kDstate;
  p.state = ds, p.x = dx, p.dt = ddt, p.dt_bias = dbias, p.A = dA, p.B = dB, p.C = dC, p.D = dD, p.z = dz, p.output = dout;
  p.dt_softplus = true;
  auto launch = [&] {
    flashinfer::mamba::selective_state_update_kernel_simple<input_t, weight_t, matrixA_t, state_t, stateIndex_t,
                                                            state_scale_t, kDim, kDstate, kDim, kWarps, PHILOX_ROUNDS>
        <<<dim3(batch, heads, 1), dim3(32, kWarps)>>>(p);
  };
  auto check = [&](Tolerance& tol) {
    const auto out = from_device(dout, x.size());
    const auto s2 = as_float(from_device(ds, state.size()));
    const auto s0 = as_float(state), Bf = as_float(B), Cf = as_float(C);
    for (uint32_t b = 0; b < batch; ++b)
      for (uint32_t h = 0; h < heads; ++h) {
        const uint32_t g = h / (heads / groups);
        double t = dt[b * heads + h] + dt_bias[h];
        t = t <= 20 ? std::log1p(std::exp(t)) : t;
        const double decay = std::exp(A[h] * t);
        for (int d = 0; d < kDim; ++d) {
          const size_t xi = (size_t(b) * heads + h) * kDim + d;
          const double xv = to_double(x[xi]);
          double o = D[h] * xv;
          for (int n = 0; n < kDstate; ++n) {
            const size_t si = xi * kDstate + n;
            const double s = s0[si] * decay + Bf[(size_t(b) * groups + g) * kDstate + n] * t * xv;
            tol(s2[si], s);
            o += s * Cf[(size_t(b) * groups + g) * kDstate + n];
          }
          const double zv = to_double(z[xi]);
          tol(to_double(out[xi]), o * zv / (1 + std::exp(-zv)));
        }
      }
  };
  return run_harness(a, "flashinfer_mamba_ssu:batch=64:heads=80:dim=64:dstate=128:groups=8:bf16:seed=" +
                            std::to_string(a.seed), [&] { upload(ds, state); }, launch, check, Tolerance{3e-2, 2e-2});
}
