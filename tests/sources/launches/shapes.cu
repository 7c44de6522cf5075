// shapes.cu — the launch shapes of one kernel template, for tests/compile/test_launches.py (compiled, never run).
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime.h>

#define CHECK(x)                                                 \
  do {                                                           \
    cudaError_t e_ = (x);                                        \
    if (e_ != cudaSuccess) return e_;                            \
  } while (0)
#define CUDA_CHECK(...)                                          \
  do {                                                           \
    __VA_ARGS__;                                                 \
    cudaError_t e_ = cudaGetLastError();                         \
    if (e_ != cudaSuccess) std::printf("%s\n", cudaGetErrorString(e_)); \
  } while (0)
#define LAUNCH_SCALE(g, b, p) scale<float, 4><<<g, b>>>(p)

template <typename T> struct Tag {};

template <typename T, int N>
__global__ void scale(T* x) {
  x[threadIdx.x] *= T(N);
}

template <int K, typename U>
__global__ void tagged(float* x) {
  x[threadIdx.x] = float(K);
}

constexpr int N = 8;

cudaError_t run_returned(float* p, cudaStream_t s) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(2);
  cfg.blockDim = dim3(32);
  cfg.stream = s;
  return cudaLaunchKernelEx(&cfg, scale<float, 4>, p);
}

cudaError_t run_checked(float* p, cudaStream_t s) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(2);
  cfg.blockDim = dim3(32);
  CHECK(cudaLaunchKernelEx(&cfg, scale<float, 4>, p));
  cudaError_t err = cudaLaunchKernelEx(&cfg, scale<float, 4>, p);
  if (err != cudaSuccess) return err;
  void* args[] = {&p};
  CHECK(cudaLaunchKernel((void*)scale<float, 4>, dim3(2), dim3(32), args, 0, s));
  return cudaSuccess;
}

void run_chevrons(float* p, int gx, int t, size_t smem, cudaStream_t stream) {
  scale<float, (N >> 1)><<<dim3(gx, 1), t, smem, stream>>>(p);
  CUDA_CHECK(scale<float, 4><<<gx, t>>>(p));
  if (gx > 1) scale<float, 4><<<1, t>>>(p);
  else
    scale<float, 4><<<2, t>>>(p);
  auto again = [&] { scale<float, 4><<<1, 32>>>(p); };
  again();
  tagged<4, Tag<Tag<int>>><<<1, 32>>>(p);
}

void run_void_return(float* p) { return scale<float, 4><<<1, 32>>>(p); }

cudaError_t not_captured(float* p, CUfunction f, void** params) {
  if (cudaLaunchKernel((void*)scale<float, 4>, dim3(1), dim3(32), (void**)&p, 0, 0) != cudaSuccess) return cudaErrorUnknown;
  cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, params, nullptr);
  LAUNCH_SCALE(1, 32, p);
  void (*fp)(float*) = scale<float, 4>;
  cudaFuncSetAttribute(scale<float, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 0);
  fp<<<1, 32>>>(p);
  return cudaSuccess;
}
