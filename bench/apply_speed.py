"""apply speed on a generated 10k-line .cu (goal: under 1 s), in a fresh temporary project.

    python bench/apply_speed.py [--lines 10000] [--repeat 5]

Prints a table of the median wall time of parse alone and of the whole apply (parse, anchors,
rewrite, patch, manifest, atomic writes), with the parser built once beforehand as in a CLI run
that has imported the package (the one-off grammar compile is shown separately).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from atrex_inject import snapshot
from atrex_inject.cuda import source

KERNEL = """
// kernel {i}: a grid-stride loop with an asm block, a lambda and a macro
template <int N>
__global__ void __launch_bounds__(256) k{i}(float* out, const float* in, int n) {{
  auto sq = [](float v) {{ return v * v; }};
  float acc = 0.f;  // {{ not a brace
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {{
    acc += sq(in[j]);
    if (acc > 1e30f) break;
  }}
  asm volatile("{{\\n\\t.reg .pred p;\\n\\tsetp.ne.u32 p, %0, 0;\\n\\t@p bar.sync 0;\\n\\t}}" :: "r"(n));
  out[blockIdx.x] = acc;
}}
void launch{i}(float* o, const float* in, int n) {{ k{i}<1><<<64, 256>>>(o, in, n); }}
"""


SITES = ('[[site]]\nname = "top"\nanchor = { loop = "for (int j" }\nposition = "loop-begin"\n'
         '[[site]]\nname = "out"\nanchor = { exit = true }\n')


def timed_apply(text: str, kernel: str, sites: str = SITES) -> tuple[float, float, float]:
    """(front end s, whole apply s, whole apply CPU s) for `text` as big.cu in a fresh temporary project."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / ".git").mkdir()
        (root / "big.cu").write_text(text)
        (root / "big.toml").write_text(f'version = 1\nname = "big"\nquestion = "speed"\nbackend = "cuda"\n'
                                       f'source = "big.cu"\nkernel = "{kernel}"\n{sites}')
        t0 = time.perf_counter()
        source.parse_source(text)
        parse_s = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        snapshot.apply(root / "big.toml")
        return parse_s, time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    per = KERNEL.count("\n")
    text = "#include <cuda_runtime.h>\n" + "".join(KERNEL.format(i=i) for i in range(a.lines // per + 1))
    t0 = time.perf_counter()
    source.parse_source("__global__ void warm() {}")
    compile_s = time.perf_counter() - t0
    asm = '[[site]]\nname = "asm"\nanchor = { ptx = "bar.sync" }\nposition = "after"\n'
    parse, apply, _ = zip(*(timed_apply(text, "k500", SITES + asm) for _ in range(a.repeat)))
    lines = text.count("\n")
    print(f"{'lines':>7} {'grammar build s':>16} {'parse s':>9} {'apply s':>9} {'lines/s (apply)':>16}")
    print(f"{lines:>7} {compile_s:>16.3f} {statistics.median(parse):>9.3f} {statistics.median(apply):>9.3f} "
          f"{lines / statistics.median(apply):>16,.0f}")


if __name__ == "__main__":
    main()
