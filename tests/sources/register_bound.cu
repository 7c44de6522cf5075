// register_bound.cu — a kernel whose peak register pressure is where a probe sits, with no
// __launch_bounds__ (so its block size is unknown to the tool): tests/compile/test_recorder_choice.py.
// Nine 16-byte loads stay live until they are combined; the site `loaded` is between the two.
__global__ void register_bound(const float4* __restrict__ x, float* __restrict__ y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 v[9];
#pragma unroll
  for (int k = 0; k < 9; ++k) v[k] = x[i + k * n];
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 9; ++k) s += v[k].x * v[(k + 1) % 9].y - v[k].z * v[(k + 2) % 9].w;
  y[i] = s;
}
