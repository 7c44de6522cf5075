"""quack's softmax forward (quack.softmax.Softmax, online softmax) on bf16 rows of 4096: each row
is loaded to shared memory with cp.async, reduced (max and sum in one pass) across the row's
threads, normalized and stored. Checked against torch.softmax in float32.

    python3 quack_softmax.py [--src DIR] [--warmup 3] [--iters 10] [--small] [--compile-only]
"""
import sys

import cutedsl_runner

ROWS, SMALL_ROWS, N = 32768, 1024, 4096


def main() -> int:
    a = cutedsl_runner.parse(__doc__)
    import cutlass  # noqa: PLC0415
    import torch  # noqa: PLC0415
    from quack.softmax import Softmax  # noqa: PLC0415
    m = SMALL_ROWS if a.small else ROWS
    ops = cutedsl_runner.Operands(a.compile_only)
    x = torch.randn(m, N, device=ops.device, dtype=torch.bfloat16, generator=ops.generator)
    out = torch.full_like(x, float("nan"))  # poison: every element must be written

    def check():
        ref = torch.softmax(x.float(), dim=-1)
        err = float(((out.float() - ref).abs() / ref).max())  # bf16 output: 2^-8 relative, with rounding
        return bool(torch.isfinite(out).all()) and err < 1e-2, {"max_rel_err": err}

    return cutedsl_runner.run(a, Softmax(cutlass.BFloat16, N), (ops.cute(x), ops.cute(out), ops.stream()), check,
                            f"quack_softmax:m={m}:n={N}:bf16:seed=1")


if __name__ == "__main__":
    sys.exit(main())
