// layernorm.cu — memory-bound example: LayerNorm forward over rows of 8192 floats, one CTA per row.
// Pass 1 streams the row as float4s and accumulates sum and sum of squares (the compiler unrolls the
// loop so several 16-byte loads are in flight per thread); a block reduction gives mean and inverse
// standard deviation; pass 2 reads the row again (mostly from L2) and writes the normalized, scaled
// and shifted values.
#include "harness.cuh"
#include <cmath>

constexpr int kThreads = 256, kD = 8192, kD4 = kD / 4;

__device__ __forceinline__ float2 warp_sum2(float2 v) {
  for (int o = 16; o > 0; o >>= 1) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
  }
  return v;
}

__global__ void __launch_bounds__(kThreads) layernorm_fwd(const float4* __restrict__ x, const float4* __restrict__ gamma,
                                                        const float4* __restrict__ beta, float4* __restrict__ y) {
  __shared__ float2 partial[kThreads / 32];
  __shared__ float2 stats;
  const float4* row = x + (size_t)blockIdx.x * kD4;
  float4* out = y + (size_t)blockIdx.x * kD4;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float2 acc = make_float2(0.f, 0.f);
  for (int i = threadIdx.x; i < kD4; i += kThreads) {
    const float4 v = row[i];
    acc.x += v.x + v.y + v.z + v.w;
    acc.y += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  acc = warp_sum2(acc);
  if (lane == 0) partial[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < kThreads / 32 ? partial[lane] : make_float2(0.f, 0.f);
    acc = warp_sum2(acc);
    if (lane == 0) {
      const float mean = acc.x / kD;
      stats = make_float2(mean, rsqrtf(acc.y / kD - mean * mean + 1e-5f));
    }
  }
  __syncthreads();
  const float mean = stats.x, inv = stats.y;
  for (int i = threadIdx.x; i < kD4; i += kThreads) {
    const float4 v = row[i], g = gamma[i], b = beta[i];
    out[i] = make_float4((v.x - mean) * inv * g.x + b.x, (v.y - mean) * inv * g.y + b.y,
                         (v.z - mean) * inv * g.z + b.z, (v.w - mean) * inv * g.w + b.w);
  }
}

int main(int argc, char** argv) {
  HarnessArgs a = parse_args(argc, argv);
  const int rows = 8192;
  const size_t n = (size_t)rows * kD;  // 256 MiB in, 256 MiB out
  std::vector<float> hx(n), hg(kD), hb(kD);
  unsigned long long s = a.seed;
  for (auto& v : hx) v = lcg_uniform(s) * 2.f + 0.5f;
  for (auto& v : hg) v = 1.f + 0.25f * lcg_uniform(s);
  for (auto& v : hb) v = 0.1f * lcg_uniform(s);
  float *x, *g, *b, *y;
  CHECK(cudaMalloc(&x, n * 4));
  CHECK(cudaMalloc(&y, n * 4));
  CHECK(cudaMalloc(&g, kD * 4));
  CHECK(cudaMalloc(&b, kD * 4));
  CHECK(cudaMemcpy(x, hx.data(), n * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(g, hg.data(), kD * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b, hb.data(), kD * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(y, 0xff, n * 4));  // poison: every element must be written
  const double ms = time_launches(a, [&] {
    layernorm_fwd<<<rows, kThreads>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<const float4*>(g),
                                      reinterpret_cast<const float4*>(b), reinterpret_cast<float4*>(y));
  });
  std::vector<float> hy(n);
  CHECK(cudaMemcpy(hy.data(), y, n * 4, cudaMemcpyDeviceToHost));
  // float64 reference on every 16th row (all columns), plus a NaN/poison scan of the whole output
  bool finite = true;
  for (float v : hy) finite = finite && std::isfinite(v);
  double num = 0, den = 0;
  for (int r = 0; r < rows; r += 16) {
    double m = 0, q = 0;
    for (int c = 0; c < kD; ++c) m += hx[(size_t)r * kD + c];
    m /= kD;
    for (int c = 0; c < kD; ++c) q += (hx[(size_t)r * kD + c] - m) * (hx[(size_t)r * kD + c] - m);
    const double inv = 1.0 / std::sqrt(q / kD + 1e-5);
    for (int c = 0; c < kD; ++c) {
      const double ref = (hx[(size_t)r * kD + c] - m) * inv * hg[c] + hb[c];
      num += (hy[(size_t)r * kD + c] - ref) * (hy[(size_t)r * kD + c] - ref);
      den += ref * ref;
    }
  }
  const double rel = std::sqrt(num / den);
  const bool ok = finite && rel < 1e-4;
  char wl[128];
  std::snprintf(wl, sizeof wl, "layernorm_fwd:rows=%d:d=%d:seed=%u", rows, kD, a.seed);
  print_sample(a, ms, ok, wl, rel);
  return ok ? 0 : 1;
}
