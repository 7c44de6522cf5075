// scale.cuh: one of two instrumented kernels compiled into one translation unit (main.cu), so they
// share the unit's recorder symbols (scripts/gpu-multikernel.sh, "one unit").
#pragma once
__global__ void scale(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.f;
}
