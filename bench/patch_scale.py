"""How the patch (atrex_inject/patch.py, difflib) scales with repeated lines.

    python bench/patch_scale.py [--lines 25000 50000 100000] [--distinct 20]

For each size, a file of that many lines in which `--distinct` lines each repeat just under
difflib's "popular" cut (1% of the lines; more popular lines are ignored when it aligns) and the
rest are unique, shuffled; the new text inserts two lines. Prints the CPU seconds of
`unified_diff`: difflib visits, for each old line, every equal new line, so a line repeated r
times costs r^2 and the total grows with the square of the size.
"""
from __future__ import annotations

import argparse
import random
import time

from atrex_inject.patch import unified_diff


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, nargs="+", default=[25000, 50000, 100000])
    ap.add_argument("--distinct", type=int, default=20)
    a = ap.parse_args()
    print(f"{'lines':>8} {'repeats':>8} {'diff CPU s':>11}")
    for n in a.lines:
        rep = n // 100
        lines = [f"  x{i % a.distinct}();\n" for i in range(a.distinct * rep)]
        lines += [f"  u{i}();\n" for i in range(n - len(lines))]
        random.Random(1).shuffle(lines)
        old = "".join(lines)
        new = "// probe\n" + old[:len(old) // 2] + "  probe();\n" + old[len(old) // 2:]
        t0 = time.process_time()
        unified_diff(old, new, "f.cu")
        print(f"{n:>8} {rep:>8} {time.process_time() - t0:>11.2f}")


if __name__ == "__main__":
    main()
