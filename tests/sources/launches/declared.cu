// A kernel declared before its definition, launched between the two (as a header's prototype and
// a later definition are): the instrumented copy must be declared there too.
#include <cuda_runtime.h>

__global__ void step(float* x, int n);

void launch_step(float* x, int n, cudaStream_t stream) {
  step<<<(n + 255) / 256, 256, 0, stream>>>(x, n);
}

__global__ void step(float* x, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    x[i] = x[i] * 2.0f + 1.0f;
  }
}
