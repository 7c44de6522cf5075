"""KernelBench-style candidate: each row scaled to 127 over its largest magnitude (the scaling step
of int8 row quantization), as a PyTorch module whose CUDA source CuPy compiles (NVRTC) and
launches (cupy.RawKernel) on PyTorch's current stream. Nothing here knows about atrex-inject:
under `atrex-inject capture` the launch hooks capture the launches the spec selects
(docs/launches.md).
"""
import cupy as cp
import torch
import torch.nn as nn

THREADS = 256

ABSMAX_SRC = r"""
// One CTA of 256 threads per row: the row's largest magnitude, reduced across the CTA, then the
// row scaled so that it maps to 127.
extern "C" __global__ void __launch_bounds__(256) absmax_scale(const float* __restrict__ x,
                                                               float* __restrict__ y, int cols) {
  __shared__ float red[8];
  const float* row = x + static_cast<long>(blockIdx.x) * cols;
  float* out = y + static_cast<long>(blockIdx.x) * cols;
  float m = 0.f;
  for (int i = threadIdx.x; i < cols; i += 256) m = fmaxf(m, fabsf(row[i]));
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
  __syncthreads();
  float amax = red[0];
  for (int k = 1; k < 8; ++k) amax = fmaxf(amax, red[k]);
  const float scale = amax > 0.f ? 127.f / amax : 0.f;
  for (int i = threadIdx.x; i < cols; i += 256) out[i] = row[i] * scale;
}
"""

_kernel = cp.RawKernel(ABSMAX_SRC, "absmax_scale", options=("--std=c++17",))


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.is_cuda and x.dtype == torch.float32 and x.dim() == 2 and x.is_contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            _kernel((rows,), (THREADS,), (cp.asarray(x), cp.asarray(y), cp.int32(cols)))
        return y
