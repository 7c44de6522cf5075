"""FlashAttention-4's forward on Hopper (flash-attn-4's CuTe DSL FlashAttentionForwardSm90, chosen
by flash_attn.cute.flash_attn_func on sm_90: a producer warpgroup loading Q, K and V with TMA and
two consumer warpgroups running the WGMMAs and the online softmax) on bf16, batch 4, 32 heads of
128, sequence 4096, not causal. Checked against torch's scaled_dot_product_attention.

    python3 fa4_fwd_sm90.py [--src DIR] [--warmup 3] [--iters 10] [--small] [--compile-only]

--compile-only compiles for sm_90 without a GPU, as FlashAttention-4 documents it: torch's fake
tensors, FLASH_ATTENTION_ARCH=sm_90 and FLASH_ATTENTION_NUM_SMS=132 (the H200's SMs).
"""
import os
import sys

import cutedsl_runner

BATCH, HEADS, HEAD_DIM, SEQ, SMALL_SEQ = 4, 32, 128, 4096, 512


def main() -> int:
    a = cutedsl_runner.parse(__doc__, "flash-attn-4", "flash_attn.cute")
    if a.compile_only:
        os.environ.setdefault("FLASH_ATTENTION_ARCH", "sm_90")
        os.environ.setdefault("FLASH_ATTENTION_NUM_SMS", "132")
    import torch  # noqa: PLC0415
    from flash_attn.cute import flash_attn_func  # noqa: PLC0415
    seq = SMALL_SEQ if a.small else SEQ
    shape = (BATCH, seq, HEADS, HEAD_DIM)
    if a.compile_only:
        from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: PLC0415
        with FakeTensorMode():
            flash_attn_func(*(torch.empty(shape, dtype=torch.bfloat16, device="cuda") for _ in range(3)))
        print("compiled")
        return 0
    g = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    result = {}

    def launch():
        result["out"] = flash_attn_func(q, k, v)[0]

    def check():
        out = result["out"]
        ref = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v))).transpose(1, 2)
        err = float((out.float() - ref.float()).abs().max() / ref.float().abs().max())
        return bool(torch.isfinite(out).all()) and out.shape == ref.shape and err < 2e-2, {"max_err_of_max": err}

    return cutedsl_runner.sample(a, launch, check, f"fa4_fwd_sm90:b={BATCH}:h={HEADS}:d={HEAD_DIM}:s={seq}:bf16:seed=1")


if __name__ == "__main__":
    sys.exit(main())
