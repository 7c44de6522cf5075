"""Run the CuTe DSL Hopper GEMM on a GPU: warmup, timed iterations, full-output check against a
float32 torch reference, and the __ATREX_TIMELINE_SAMPLE__ line (docs/measure.md).

    python run_hopper_gemm.py [--warmup 3] [--iters 10] [--small]     (--small: 1024^3 instead of 4096^3)
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cutlass.cute as cute  # noqa: E402
from cutlass.cute.runtime import from_dlpack  # noqa: E402

from harness import median_ms, print_sample  # noqa: E402
from hopper_gemm import gemm  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--small", action="store_true")
    a = ap.parse_args()
    m = n = k = 1024 if a.small else 4096
    g = torch.Generator(device="cuda").manual_seed(1)
    A = (torch.rand(m, k, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)
    B = (torch.rand(n, k, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)
    C = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)  # poison: every element written
    args = [from_dlpack(t, assumed_align=16) for t in (A, B, C)]
    f = cute.compile(gemm, *args)
    ms = median_ms(lambda: f(*args), a.warmup, a.iters)
    ref = A.float() @ B.float().T
    rel = float((C - ref).norm() / ref.norm())
    ok = bool(torch.isfinite(C).all()) and rel < 1e-4
    print_sample(ms, ok, f"hopper_gemm:m={m}:n={n}:k={k}:seed=1", a.warmup, a.iters, rel_err=rel,
                 tflops=2 * m * n * k / (ms * 1e-3) / 1e12)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
