// saxpy.cuh — a kernel in a header; main.cu launches it (tests/compile/test_launches.py).
#pragma once
#include <cuda_runtime.h>

namespace ops {
__global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
}  // namespace ops
