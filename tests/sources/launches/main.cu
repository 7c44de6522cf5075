// main.cu — launches ops::saxpy from saxpy.cuh through an error-check macro (tests/compile/test_launches.py).
#include <cstdio>
#include "saxpy.cuh"

#define CUDA_CHECK(x)                                                           \
  do {                                                                          \
    cudaError_t err_ = (x);                                                     \
    if (err_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

int main() {
  const int n = 1 << 20;
  float *x, *y;
  CUDA_CHECK(cudaMalloc(&x, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&y, n * sizeof(float)));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((n + 255) / 256);
  cfg.blockDim = dim3(256);
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, ops::saxpy, 2.f, (const float*)x, y, n));
  CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("done\n");
  return 0;
}
