"""quack's LayerNorm forward (quack.rmsnorm.RMSNorm with is_layernorm, as quack.layernorm_fwd runs
it, the heuristic's Hopper launch configuration) on bf16 rows of 8192 with a float32 weight and
bias, writing the output and each row's mean and rstd: each row is loaded to shared memory with
cp.async, its mean reduced across the row's threads, then the variance about it in a second
reduction, then scaled, shifted and stored. Checked against torch in float32.

    python3 quack_layernorm.py [--src DIR] [--warmup 3] [--iters 10] [--small] [--compile-only]
"""
import sys

import cutedsl_runner

ROWS, SMALL_ROWS, N, EPS = 16384, 512, 8192, 1e-6


def main() -> int:
    a = cutedsl_runner.parse(__doc__)
    import cutlass  # noqa: PLC0415
    import torch  # noqa: PLC0415
    from quack.rmsnorm import RMSNorm  # noqa: PLC0415
    from quack.rmsnorm_config import RmsNormFwdConfig  # noqa: PLC0415
    m = SMALL_ROWS if a.small else ROWS
    ops = cutedsl_runner.Operands(a.compile_only)
    x = torch.randn(m, N, device=ops.device, dtype=torch.bfloat16, generator=ops.generator)
    w, b = (torch.randn(N, device=ops.device, generator=ops.generator) for _ in range(2))
    out = torch.full_like(x, float("nan"))  # poison: every element must be written
    mean, rstd = (torch.full((m,), float("nan"), device=ops.device) for _ in range(2))
    # the configuration quack picks on an H200 (arch 9), also when compiling on a CPU
    config = RmsNormFwdConfig.from_analytical_heuristic(N, 16, arch_major=9, is_layernorm=True)

    def check():
        xf = x.float()
        ref_mean = xf.mean(-1)
        ref_rstd = torch.rsqrt(xf.var(-1, unbiased=False) + EPS)
        ref = (xf - ref_mean[:, None]) * ref_rstd[:, None] * w + b
        err = float(((out.float() - ref).abs() / (ref.abs() + 1)).max())
        stat_err = float(max((mean - ref_mean).abs().max(), ((rstd - ref_rstd).abs() / ref_rstd).max()))
        ok = bool(torch.isfinite(out).all() and torch.isfinite(mean).all() and torch.isfinite(rstd).all()) \
            and err < 2e-2 and stat_err < 1e-3
        return ok, {"max_rel_err": err, "mean_rstd_err": stat_err}

    args = (ops.cute(x), ops.cute(w), ops.cute(b), None, ops.cute(out), None, ops.cute(rstd), ops.cute(mean),
            cutlass.Float32(EPS), ops.stream())
    return cutedsl_runner.run(a, RMSNorm(cutlass.BFloat16, N, is_layernorm=True, config=config), args, check,
                            f"quack_layernorm:m={m}:n={N}:bf16:fp32-weight-bias:mean:rstd:seed=1")


if __name__ == "__main__":
    sys.exit(main())
