"""KernelBench-style problem: softmax over the last dimension of a (batch, dim) float32 tensor.
`Model` is the reference; kernel.py's `ModelNew` is the candidate the runner checks against it."""
import torch
import torch.nn as nn

NAME = "softmax_rows"
batch_size, dim = 4096, 8192
ATOL, RTOL = 1e-7, 1e-4  # outputs average 1/dim; the kernel's __expf is within a few ulp of expf


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
