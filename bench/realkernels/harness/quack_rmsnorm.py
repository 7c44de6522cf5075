"""quack's RMSNorm forward (quack.rmsnorm.RMSNorm, the heuristic's Hopper launch configuration) on
bf16 rows of 4096 with a bf16 weight, writing the output and each row's rstd: each row is loaded
to shared memory with cp.async, its sum of squares reduced across the row's threads, then scaled
and stored. Checked against torch in float32.

    python3 quack_rmsnorm.py [--src DIR] [--warmup 3] [--iters 10] [--small] [--compile-only]
"""
import sys

import cutedsl_runner

ROWS, SMALL_ROWS, N, EPS = 32768, 1024, 4096, 1e-6


def main() -> int:
    a = cutedsl_runner.parse(__doc__)
    import cutlass  # noqa: PLC0415
    import torch  # noqa: PLC0415
    from quack.rmsnorm import RMSNorm  # noqa: PLC0415
    from quack.rmsnorm_config import RmsNormFwdConfig  # noqa: PLC0415
    m = SMALL_ROWS if a.small else ROWS
    ops = cutedsl_runner.Operands(a.compile_only)
    x = torch.randn(m, N, device=ops.device, dtype=torch.bfloat16, generator=ops.generator)
    w = torch.randn(N, device=ops.device, dtype=torch.bfloat16, generator=ops.generator)
    out = torch.full_like(x, float("nan"))  # poison: every element must be written
    rstd = torch.full((m,), float("nan"), device=ops.device)
    # the configuration quack picks on an H200 (arch 9), also when compiling on a CPU
    config = RmsNormFwdConfig.from_analytical_heuristic(N, 16, arch_major=9)

    def check():
        ref_rstd = torch.rsqrt(x.float().pow(2).mean(-1) + EPS)
        ref = x.float() * ref_rstd[:, None] * w.float()
        err = float(((out.float() - ref).abs() / (ref.abs() + 1)).max())
        rstd_err = float(((rstd - ref_rstd).abs() / ref_rstd).max())
        ok = bool(torch.isfinite(out).all() and torch.isfinite(rstd).all()) and err < 2e-2 and rstd_err < 1e-3
        return ok, {"max_rel_err": err, "rstd_rel_err": rstd_err}

    args = (ops.cute(x), ops.cute(w), None, None, ops.cute(out), None, ops.cute(rstd), None, cutlass.Float32(EPS),
            ops.stream())
    return cutedsl_runner.run(a, RMSNorm(cutlass.BFloat16, N, config=config), args, check,
                            f"quack_rmsnorm:m={m}:n={N}:bf16:weight:rstd:seed=1")


if __name__ == "__main__":
    sys.exit(main())
