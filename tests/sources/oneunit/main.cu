// main.cu: scale and shift, each instrumented by its own spec, launched in turn six times; each spec
// writes its kernel's fourth launch. Both captures validate only if each launch binds its own
// buffer and launch header, whatever the other kernel bound last (scripts/gpu-multikernel.sh).
#include <cstdio>
#include <cuda_runtime.h>
#include "scale.cuh"
#include "shift.cuh"

int main() {
  const int n = 1 << 20;
  float* x = nullptr;
  if (cudaMalloc(&x, n * sizeof(float)) != cudaSuccess || cudaMemset(x, 0, n * sizeof(float)) != cudaSuccess) return 1;
  for (int it = 0; it < 6; ++it) {
    scale<<<n / 256, 256>>>(x, n);
    shift<<<n / 128, 128>>>(x, n);
  }
  const cudaError_t e = cudaDeviceSynchronize();
  std::printf("oneunit: %s\n", cudaGetErrorString(e));
  cudaFree(x);
  return e == cudaSuccess ? 0 : 1;
}
