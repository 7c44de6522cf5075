// rowscale.cuh — a kernel kept in a header, launched from another file (split/main.cu), the usual
// layout of kernel libraries: y[r][c] = x[r][c] * s[r], one CTA per row, a float4 grid-stride loop
// over the row. The spec (examples/specs/rowscale_split.toml) instruments this file and names
// main.cu in `launchers`, so the launch there is captured.
#pragma once
#include <cuda_runtime.h>

constexpr int kRowThreads = 256;

__global__ void __launch_bounds__(kRowThreads) rowscale(const float4* __restrict__ x, const float* __restrict__ s,
                                                      float4* __restrict__ y, int cols4) {
  const float4* in = x + (size_t)blockIdx.x * cols4;
  float4* out = y + (size_t)blockIdx.x * cols4;
  const float k = s[blockIdx.x];
  for (int i = threadIdx.x; i < cols4; i += kRowThreads) {
    const float4 v = in[i];
    out[i] = make_float4(v.x * k, v.y * k, v.z * k, v.w * k);
  }
}
