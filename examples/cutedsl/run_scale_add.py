"""Run the CuTe DSL scale_add example on a GPU: warmup, timed iterations, full-output check, and
the __ATREX_TIMELINE_SAMPLE__ line (docs/measure.md).

    python run_scale_add.py [--warmup 3] [--iters 10] [--n 16777216] [--small]
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402
from cutlass.cute.runtime import from_dlpack  # noqa: E402

from harness import median_ms, print_sample  # noqa: E402
from scale_add import scale_add  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--small", action="store_true", help="n = 262144 (for captures)")
    a = ap.parse_args()
    if a.small:
        a.n = 262144
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.rand(a.n, device="cuda", generator=g) * 2 - 1
    y0 = torch.rand(a.n, device="cuda", generator=g) * 2 - 1
    y = y0.clone()
    blocks = torch.cuda.get_device_properties(0).multi_processor_count * 4
    args = (from_dlpack(x, assumed_align=16), from_dlpack(y, assumed_align=16), cutlass.Float32(2.0),
            cutlass.Int32(a.n), cutlass.Int32(blocks))
    f = cute.compile(scale_add, *args)
    ms = median_ms(lambda: f(*args), a.warmup, a.iters, before=lambda: y.copy_(y0))
    ref = 2.0 * x.double() + y0.double()
    rel = float((y.double() - ref).norm() / ref.norm())
    ok = rel < 1e-6 and bool(torch.isfinite(y).all())
    print_sample(ms, ok, f"scale_add:n={a.n}:blocks={blocks}:seed=1", a.warmup, a.iters, rel_err=rel)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
