"""KernelBench-style problem: RMSNorm over the last dimension of a (rows, cols) float32 tensor,
with a learned per-column weight. `Model` is the reference; kernel.py's `ModelNew` the candidate."""
import torch
import torch.nn as nn

NAME = "rmsnorm_rows"
rows, cols = 4096, 8192
ATOL, RTOL = 1e-5, 1e-4  # the kernel sums squares in another order than torch


class Model(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + self.eps) * self.weight


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [cols]
