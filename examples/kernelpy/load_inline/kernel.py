"""KernelBench-style candidate: row softmax as a PyTorch module. The CUDA source, kernel and
launcher, is one string compiled with torch.utils.cpp_extension.load_inline when this module is
imported."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The block's max (or sum) in every thread, through shared memory: two barriers.
__device__ __forceinline__ float block_max(float v, float* red) {
  v = warp_max(v);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  v = red[0];
  for (int w = 1; w < kWarps; ++w) v = fmaxf(v, red[w]);
  __syncthreads();
  return v;
}

__device__ __forceinline__ float block_sum(float v, float* red) {
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  v = 0.f;
  for (int w = 0; w < kWarps; ++w) v += red[w];
  __syncthreads();
  return v;
}

// One CTA per row: the row's max, the sum of exp(x - max), then the normalized row.
__global__ void __launch_bounds__(kThreads) softmax_rows(const float* __restrict__ x, float* __restrict__ y,
                                                         int cols) {
  __shared__ float red[kWarps];
  const float* row = x + static_cast<long>(blockIdx.x) * cols;
  float* out = y + static_cast<long>(blockIdx.x) * cols;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < cols; i += kThreads) m = fmaxf(m, row[i]);
  m = block_max(m, red);
  float s = 0.f;
  for (int i = threadIdx.x; i < cols; i += kThreads) s += __expf(row[i] - m);
  s = block_sum(s, red);
  const float inv = 1.f / s;
  for (int i = threadIdx.x; i < cols; i += kThreads) out[i] = __expf(row[i] - m) * inv;
}

torch::Tensor softmax_rows_cuda(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2 && x.is_contiguous(),
              "softmax_rows_cuda takes a contiguous 2-D float32 CUDA tensor");
  auto y = torch::empty_like(x);
  softmax_rows<<<x.size(0), kThreads>>>(x.data_ptr<float>(), y.data_ptr<float>(), static_cast<int>(x.size(1)));
  return y;
}
"""

cpp_src = "torch::Tensor softmax_rows_cuda(torch::Tensor x);"

softmax_ext = load_inline(name="softmax_rows_ext", cpp_sources=cpp_src, cuda_sources=cuda_src,
                          functions=["softmax_rows_cuda"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_rows_cuda(x)
