// softmax_rows.cu — memory-bound example: a three-pass row softmax over rows of 8192 floats, one CTA
// per row. Pass 1 streams the row as float4s for its maximum; a block reduction (one barrier) gives
// every warp the row's maximum; pass 2 reads the row again (mostly from L2) for the sum of
// exp(x - max); a second block reduction gives the sum; pass 3 reads the row a third time and writes
// exp(x - max) / sum. Each block reduction has its own shared array, so the two need no barrier
// between them.
#include "harness.cuh"
#include <cmath>

constexpr int kThreads = 256, kWarps = kThreads / 32, kCols = 8192, kCols4 = kCols / 4;

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Every warp reduces its lanes, publishes one partial, waits at the barrier, then reduces the
// partials itself: each warp leaves with the block's value.
__device__ __forceinline__ float block_max(float v, float* partial) {
  v = warp_max(v);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  return warp_max((threadIdx.x & 31) < kWarps ? partial[threadIdx.x & 31] : -INFINITY);
}

__device__ __forceinline__ float block_sum(float v, float* partial) {
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  return warp_sum((threadIdx.x & 31) < kWarps ? partial[threadIdx.x & 31] : 0.f);
}

__global__ void __launch_bounds__(kThreads) softmax_rows(const float4* __restrict__ x, float4* __restrict__ y) {
  __shared__ float max_partial[kWarps];
  __shared__ float sum_partial[kWarps];
  const float4* row = x + (size_t)blockIdx.x * kCols4;
  float4* out = y + (size_t)blockIdx.x * kCols4;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < kCols4; i += kThreads) {
    const float4 v = row[i];
    m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
  }
  m = block_max(m, max_partial);
  float s = 0.f;
  for (int i = threadIdx.x; i < kCols4; i += kThreads) {
    const float4 v = row[i];
    s += __expf(v.x - m) + __expf(v.y - m) + __expf(v.z - m) + __expf(v.w - m);
  }
  s = block_sum(s, sum_partial);
  const float inv = 1.f / s;
  for (int i = threadIdx.x; i < kCols4; i += kThreads) {
    const float4 v = row[i];
    out[i] = make_float4(__expf(v.x - m) * inv, __expf(v.y - m) * inv, __expf(v.z - m) * inv, __expf(v.w - m) * inv);
  }
}

int main(int argc, char** argv) {
  HarnessArgs a = parse_args(argc, argv);
  const int rows = 16384;
  const size_t n = (size_t)rows * kCols;  // 512 MiB in, 512 MiB out
  std::vector<float> hx(n);
  unsigned long long s = a.seed;
  for (auto& v : hx) v = 4.f * lcg_uniform(s);
  float *x, *y;
  CHECK(cudaMalloc(&x, n * 4));
  CHECK(cudaMalloc(&y, n * 4));
  CHECK(cudaMemcpy(x, hx.data(), n * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(y, 0xff, n * 4));  // poison: every element must be written
  const double ms = time_launches(a, [&] {
    softmax_rows<<<rows, kThreads>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y));
  });
  std::vector<float> hy(n);
  CHECK(cudaMemcpy(hy.data(), y, n * 4, cudaMemcpyDeviceToHost));
  // float64 reference on every 16th row (all columns), plus a NaN/poison scan of the whole output
  bool finite = true;
  for (float v : hy) finite = finite && std::isfinite(v);
  double num = 0, den = 0;
  for (int r = 0; r < rows; r += 16) {
    const float* xr = &hx[(size_t)r * kCols];
    const float* yr = &hy[(size_t)r * kCols];
    double m = -INFINITY, sum = 0;
    for (int c = 0; c < kCols; ++c) m = std::max(m, (double)xr[c]);
    for (int c = 0; c < kCols; ++c) sum += std::exp(xr[c] - m);
    for (int c = 0; c < kCols; ++c) {
      const double ref = std::exp(xr[c] - m) / sum;
      num += (yr[c] - ref) * (yr[c] - ref);
      den += ref * ref;
    }
  }
  const double rel = std::sqrt(num / den);
  const bool ok = finite && rel < 1e-5;
  char wl[128];
  std::snprintf(wl, sizeof wl, "softmax_rows:rows=%d:cols=%d:seed=%u", rows, kCols, a.seed);
  print_sample(a, ms, ok, wl, rel);
  return ok ? 0 : 1;
}
