"""Run a KernelBench-style candidate (examples/kernelpy/*/kernel.py) against the reference in its
folder's problem.py: every output element checked, launches timed after warmup, one sample line
printed (docs/measure.md); exit status 1 when the output is wrong.

    python3 examples/kernelpy/run.py examples/kernelpy/nvrtc/kernel.py [--warmup 3] [--iters 10] [--seed 1]
"""
import argparse
import importlib.util
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cutedsl"))
from harness import median_ms, print_sample  # noqa: E402  (the examples' shared timing protocol)


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernel", type=Path, help="the candidate kernel.py (problem.py sits next to it)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    kernel = a.kernel.resolve()
    problem = load(kernel.parent / "problem.py", "problem")
    candidate = load(kernel, "kernel")
    torch.manual_seed(a.seed)
    ref = problem.Model(*problem.get_init_inputs()).cuda()
    torch.manual_seed(a.seed)
    new = candidate.ModelNew(*problem.get_init_inputs()).cuda()
    torch.manual_seed(a.seed)
    inputs = [t.cuda() for t in problem.get_inputs()]
    with torch.no_grad():
        want = ref(*inputs)
        ms = median_ms(lambda: new(*inputs), a.warmup, a.iters)
        got = new(*inputs)
        torch.cuda.synchronize()
    err = (got - want).abs().max().item()
    ok = bool(torch.allclose(got, want, atol=problem.ATOL, rtol=problem.RTOL))
    shape = "x".join(str(d) for d in inputs[0].shape)
    print_sample(ms, ok, f"{problem.NAME}:{shape}:seed={a.seed}", a.warmup, a.iters, max_abs_err=err)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
