// The kernel `atrex-inject compare` is shown on (docs/compare.md): a sum of squares through a
// grid-stride loop. sumsq.cu and sumsq.after.cu differ in one line, that loop's unroll pragma: 1 in
// sumsq.cu (one 16-byte load in flight per thread), 4 in sumsq.after.cu (four). The streaming loop,
// and with it the kernel, should get faster; the code after the loop is the same.
#include "harness.cuh"

constexpr int kThreads = 256;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void __launch_bounds__(kThreads) sumsq(const float4* __restrict__ x, long n4, float* out) {
  __shared__ float partial[kThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float acc = 0.f;
#pragma unroll 4
  for (long i = blockIdx.x * (long)kThreads + threadIdx.x; i < n4; i += (long)gridDim.x * kThreads) {
    float4 v = x[i];
    acc += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  acc = warp_sum(acc);
  if (lane == 0) partial[warp] = acc;
  __syncthreads();
  if (warp != 0) return;
  acc = lane < kThreads / 32 ? partial[lane] : 0.f;
  acc = warp_sum(acc);
  if (lane == 0) atomicAdd(out, acc);
}

int main(int argc, char** argv) {
  HarnessArgs a = parse_args(argc, argv);
  const long n = 1l << 26;  // 256 MiB of floats
  std::vector<float> h(n);
  unsigned long long s = a.seed;
  for (long i = 0; i < n; ++i) h[i] = lcg_uniform(s);
  double ref = 0;
  for (long i = 0; i < n; ++i) ref += double(h[i]) * h[i];
  float *x, *out;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&out, sizeof(float)));
  CHECK(cudaMemcpy(x, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int grid = sms * 4;
  auto launch = [&] {
    cudaMemsetAsync(out, 0, sizeof(float));
    sumsq<<<grid, kThreads>>>(reinterpret_cast<const float4*>(x), n / 4, out);
  };
  double ms = time_launches(a, launch);
  float got = 0;
  CHECK(cudaMemcpy(&got, out, sizeof got, cudaMemcpyDeviceToHost));
  const double rel = std::abs(got - ref) / ref;
  char wl[128];
  std::snprintf(wl, sizeof wl, "compare_sumsq:n=%ld:seed=%u:grid=%d", n, a.seed, grid);
  print_sample(a, ms, rel < 1e-4, wl, rel);
  return rel < 1e-4 ? 0 : 1;
}
