"""What the CuTe DSL runners share. Each runner launches one public kernel as a user of its package
would, checks the whole output against torch, and follows the sample protocol of docs/measure.md
through examples/cutedsl/harness.py.

The package is imported from `--src`, the folder that holds its extracted files (fetch puts them
in bench/realkernels/.src/<package>): the measurement's clean side names a clean copy, the
instrumented side the tree `apply` rewrote, so the two sides run two programs; quack, which the
others import, always from its fetched copy. `--compile-only` compiles the kernel for
CUTE_DSL_ARCH with fake tensors of the same shapes and needs no GPU (what `atrex-inject
check-iket` runs); the packages still import torch, which a CPU build of torch serves."""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / ".src"
EXAMPLES = HERE.parents[2] / "examples" / "cutedsl"  # harness.py: median_ms, print_sample


def parse(doc: str, package: str = "quack-kernels", module: str = "quack") -> argparse.Namespace:
    """The runners' command line; puts `--src` (default: the fetched `package`) first on sys.path and
    checks that `module` is imported from there (an installed copy would measure another file)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--src", type=Path, default=SRC / package, help=f"folder holding {module.split('.')[0]}/ "
                                                                    "(default: the fetched copy)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--small", action="store_true", help="the capture's shape: the same kernel on less data")
    ap.add_argument("--compile-only", action="store_true",
                    help="compile for CUTE_DSL_ARCH with fake tensors and exit (no GPU)")
    a = ap.parse_args()
    import torch  # noqa: PLC0415
    if not a.compile_only and not torch.cuda.is_available():
        sys.exit("error: torch sees no CUDA device: run on the GPU host, or compile only (--compile-only)")
    top = module.split(".")[0]
    if not (a.src / top).is_dir():
        sys.exit(f"error: {a.src}/{top} does not exist: run bench/realkernels/cutedsl_rows.py fetch first, or give "
                 f"--src the folder that holds the extracted {top}/")
    sys.path[:0] = [str(a.src.resolve()), str(SRC / "quack-kernels"), str(EXAMPLES)]
    loaded = Path(importlib.import_module(module).__file__).resolve()
    if not loaded.is_relative_to(a.src.resolve()):
        sys.exit(f"error: {module} was imported from {loaded}, not from --src {a.src}")
    return a


class Operands:
    """The kernel's tensor arguments: torch tensors on the GPU, each passed as a CuTe tensor through
    DLPack; with --compile-only, fake CuTe tensors of the same dtype and shape (torch on the meta
    device, so nothing is allocated) and a fake stream."""

    def __init__(self, compile_only: bool):
        import torch  # noqa: PLC0415
        self.compile_only = compile_only
        self.device = "meta" if compile_only else "cuda"
        self.generator = None if compile_only else torch.Generator(device="cuda").manual_seed(1)

    def cute(self, t):
        """One CuTe tensor argument (None stays None: quack's optional operands)."""
        from cutlass.cute.runtime import from_dlpack, make_fake_compact_tensor  # noqa: PLC0415
        from quack.cute_dsl_utils import torch2cute_dtype_map  # noqa: PLC0415
        if t is None:
            return None
        if not self.compile_only:
            return from_dlpack(t, assumed_align=16)
        order = tuple(reversed(range(t.dim())))  # row-major, as torch lays a contiguous tensor
        return make_fake_compact_tensor(torch2cute_dtype_map[t.dtype], tuple(t.shape), stride_order=order,
                                        assumed_align=16)

    def stream(self):
        import cutlass.cute as cute  # noqa: PLC0415
        if self.compile_only:
            return cute.runtime.make_fake_stream()
        import cuda.bindings.driver as cuda  # noqa: PLC0415
        import torch  # noqa: PLC0415
        return cuda.CUstream(torch.cuda.current_stream().cuda_stream)


def run(a: argparse.Namespace, kernel, args: tuple, check, workload: str, **extra) -> int:
    """Compile `kernel` for `args` with cute.compile; with --compile-only stop there, else sample it."""
    import cutlass.cute as cute  # noqa: PLC0415
    f = cute.compile(kernel, *args)
    if a.compile_only:
        print("compiled")
        return 0
    return sample(a, lambda: f(*args), check, workload, **extra)


def sample(a: argparse.Namespace, launch, check, workload: str, **extra) -> int:
    """Time `launch` (median_ms), check the output (`check()` -> (passed, error figures)) and print
    the sample line."""
    from harness import median_ms, print_sample  # noqa: PLC0415  (examples/cutedsl/harness.py)
    ms = median_ms(launch, a.warmup, a.iters)
    ok, errors = check()
    print_sample(ms, ok, workload, a.warmup, a.iters, **errors, **extra)
    return 0 if ok else 1
