"""KernelBench-style problem: each row of a (rows, cols) float32 tensor scaled so that its largest
magnitude becomes 127. `Model` is the reference; kernel.py's `ModelNew` the candidate."""
import torch
import torch.nn as nn

NAME = "absmax_scale"
rows, cols = 4096, 4096
ATOL, RTOL = 1e-4, 1e-5  # 127 / amax is computed once per row, in float32, on both sides


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * (127.0 / x.abs().amax(dim=1, keepdim=True))


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
