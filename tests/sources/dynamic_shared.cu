// dynamic_shared.cu — a kernel that stages a tile in dynamic shared memory (`extern __shared__`,
// sized by its launch), with __launch_bounds__: tests/compile/test_recorder_choice.py. How many of
// its CTAs an SM holds depends on the launch's shared-memory size, which its SASS does not show.
__global__ void __launch_bounds__(256) tile_sum(const float* __restrict__ x, float* __restrict__ y, int n) {
  extern __shared__ float tile[];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  float s = 0.f;
  for (int k = 0; k < 256; ++k) s += tile[(threadIdx.x + k) & 255];
  if (i < n) y[i] = s;
}

void run(const float* x, float* y, int n) {
  tile_sum<<<(n + 255) / 256, 256, 256 * sizeof(float)>>>(x, y, n);
}
