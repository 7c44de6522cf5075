// shift.cuh: the other kernel of main.cu, launched with another geometry and recorded with another
// capacity and CTA stride, so that its launch header differs from scale's.
#pragma once
__global__ void shift(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.f;
}
