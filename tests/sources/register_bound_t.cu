// register_bound_t.cu — register_bound.cu as a template on how many loads stay live, built in two
// instantiations of different register counts (tests/compile/test_recorder_choice.py).
template <int N>
__global__ void register_bound_t(const float4* __restrict__ x, float* __restrict__ y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 v[N];
#pragma unroll
  for (int k = 0; k < N; ++k) v[k] = x[i + k * n];
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < N; ++k) s += v[k].x * v[(k + 1) % N].y - v[k].z * v[(k + 2) % N].w;
  y[i] = s;
}

void launch(const float4* x, float* y, int n, bool wide) {
  if (wide)
    register_bound_t<4><<<(n + 127) / 128, 128>>>(x, y, n);
  else
    register_bound_t<9><<<(n + 127) / 128, 128>>>(x, y, n);
}
