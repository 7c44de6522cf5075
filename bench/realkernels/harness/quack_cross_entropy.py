"""quack's cross-entropy forward (quack.cross_entropy.CrossEntropy, online softmax) on bf16 logits
over a 32000-token vocabulary, writing each row's loss and log-sum-exp: each row is split across a
cluster of two CTAs (quack's choice on sm_90 at this width), loaded to shared memory with cp.async,
reduced (max and sum in one pass) across the cluster, and the loss written by the row's first
thread. Checked against torch's cross_entropy and logsumexp in float32.

    python3 quack_cross_entropy.py [--src DIR] [--warmup 3] [--iters 10] [--small] [--compile-only]
"""
import sys

import cutedsl_runner

ROWS, SMALL_ROWS, VOCAB, IGNORE = 8192, 512, 32000, -100


def main() -> int:
    a = cutedsl_runner.parse(__doc__)
    import cutlass  # noqa: PLC0415
    import torch  # noqa: PLC0415
    from quack.cross_entropy import CrossEntropy  # noqa: PLC0415
    m = SMALL_ROWS if a.small else ROWS
    ops = cutedsl_runner.Operands(a.compile_only)
    x = torch.randn(m, VOCAB, device=ops.device, dtype=torch.bfloat16, generator=ops.generator)
    target = torch.randint(0, VOCAB, (m,), device=ops.device, generator=ops.generator)
    loss = torch.full((m,), float("nan"), device=ops.device)  # poison: every row must be written
    lse = torch.full_like(loss, float("nan"))

    def check():
        ref = torch.nn.functional.cross_entropy(x.float(), target, reduction="none")
        ref_lse = torch.logsumexp(x.float(), dim=-1)
        err = float(((loss - ref).abs() / ref.abs()).max())
        lse_err = float(((lse - ref_lse).abs() / ref_lse.abs()).max())
        ok = bool(torch.isfinite(loss).all() and torch.isfinite(lse).all()) and err < 1e-3 and lse_err < 1e-3
        return ok, {"max_rel_err": err, "lse_rel_err": lse_err}

    args = (ops.cute(x), ops.cute(target), None, ops.cute(loss), ops.cute(lse), None, None, cutlass.Int32(IGNORE),
            ops.stream())
    return cutedsl_runner.run(a, CrossEntropy(cutlass.BFloat16, VOCAB), args, check,
                            f"quack_cross_entropy:m={m}:vocab={VOCAB}:bf16:seed=1")


if __name__ == "__main__":
    sys.exit(main())
