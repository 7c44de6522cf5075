"""KernelBench-style candidate: RMSNorm over rows as a PyTorch module whose CUDA source is
compiled at run time with NVRTC (cuda-python's cuda.bindings) and launched with the driver API
on PyTorch's current stream. Nothing here knows about atrex-inject: under `atrex-inject capture`
the launch hooks capture the launches the spec selects (docs/launches.md).
"""
import ctypes

import torch
import torch.nn as nn
from cuda.bindings import driver, nvrtc

THREADS = 256

RMSNORM_SRC = """
// One CTA of 256 threads per row: the row's sum of squares, reduced across the CTA, then the
// scaled row.
extern "C" __global__ void __launch_bounds__(256) rmsnorm_rows(const float* __restrict__ x,
                                                               const float* __restrict__ w,
                                                               float* __restrict__ y, int cols, float eps) {
  __shared__ float red[8];
  const float* row = x + static_cast<long>(blockIdx.x) * cols;
  float* out = y + static_cast<long>(blockIdx.x) * cols;
  float ss = 0.f;
  for (int i = threadIdx.x; i < cols; i += 256) {
    const float v = row[i];
    ss += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0.f;
  for (int k = 0; k < 8; ++k) total += red[k];
  const float scale = rsqrtf(total / cols + eps);
  for (int i = threadIdx.x; i < cols; i += 256) out[i] = row[i] * scale * w[i];
}
"""


def _ok(result):
    err, *rest = result
    if int(err) != 0:
        raise RuntimeError(f"CUDA call failed: {err!r}")
    return rest[0] if len(rest) == 1 else rest


def compile_cubin(arch: str) -> bytes:
    """RMSNORM_SRC compiled by NVRTC for `arch` (sm_90a on an H200)."""
    prog = _ok(nvrtc.nvrtcCreateProgram(RMSNORM_SRC.encode(), b"rmsnorm.cu", 0, [], []))
    opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17"]
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    if int(err) != 0:
        log = bytearray(_ok(nvrtc.nvrtcGetProgramLogSize(prog)))  # NVRTC writes into it: never a bytes
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise RuntimeError(f"NVRTC failed:\n{log.decode(errors='replace')}")
    cubin = bytearray(_ok(nvrtc.nvrtcGetCUBINSize(prog)))
    _ok(nvrtc.nvrtcGetCUBIN(prog, cubin))
    return bytes(cubin)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(dim))
        self.eps = eps
        dev = torch.cuda.current_device()
        _ok(driver.cuInit(0))
        ctx = _ok(driver.cuDevicePrimaryCtxRetain(_ok(driver.cuDeviceGet(dev))))  # the context PyTorch uses
        _ok(driver.cuCtxSetCurrent(ctx))
        major, minor = torch.cuda.get_device_capability(dev)
        self.module = _ok(driver.cuModuleLoadData(compile_cubin(f"sm_{major}{minor}{'a' if major >= 9 else ''}")))
        self.kernel = _ok(driver.cuModuleGetFunction(self.module, b"rmsnorm_rows"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.is_cuda and x.dtype == torch.float32 and x.dim() == 2 and x.is_contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        stream = torch.cuda.current_stream().cuda_stream
        args = ((x.data_ptr(), self.weight.data_ptr(), y.data_ptr(), cols, self.eps),
                (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_float))
        _ok(driver.cuLaunchKernel(self.kernel, rows, 1, 1, THREADS, 1, 1, 0, stream, args, 0))
        return y
