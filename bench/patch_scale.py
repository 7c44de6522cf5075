"""How the patch (atrex_inject/patch.py) scales with repeated lines: difflib's alignment alone
against the bounded one the tool uses (difflib below DIFFLIB_PAIRS, the linear anchored alignment
above), side by side on the same texts.

    python bench/patch_scale.py [--lines 25000 50000 100000] [--distinct 20]

For each size, a file of that many lines in which `--distinct` lines each repeat just under
difflib's "popular" cut (1% of the lines; more popular lines are ignored when it aligns) and the
rest are unique, shuffled; the new text inserts two lines. Prints the CPU seconds of
`unified_diff` both ways and whether the two patches are the same bytes: difflib visits, for each
old line, every equal new line, so a line repeated r times costs r^2 and its total grows with the
square of the size.
"""
from __future__ import annotations

import argparse
import random
import time
from unittest import mock

from atrex_inject import patch
from atrex_inject.patch import apply_patch, diffstat, unified_diff


def timed(old: str, new: str) -> tuple[float, str]:
    t0 = time.process_time()
    p = unified_diff(old, new, "f.cu")
    return time.process_time() - t0, p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, nargs="+", default=[25000, 50000, 100000])
    ap.add_argument("--distinct", type=int, default=20)
    a = ap.parse_args()
    print(f"{'lines':>8} {'repeats':>8} {'difflib s':>10} {'bounded s':>10} {'ratio':>7}  same patch  +/- lines (bounded)")
    for n in a.lines:
        rep = n // 100
        lines = [f"  x{i % a.distinct}();\n" for i in range(a.distinct * rep)]
        lines += [f"  u{i}();\n" for i in range(n - len(lines))]
        random.Random(1).shuffle(lines)
        old = "".join(lines)
        new = "// probe\n" + old[:len(old) // 2] + "  probe();\n" + old[len(old) // 2:]
        with mock.patch.object(patch, "DIFFLIB_PAIRS", float("inf")):
            slow, p_difflib = timed(old, new)
        fast, p_bounded = timed(old, new)
        assert apply_patch(old, p_bounded) == new
        print(f"{n:>8} {rep:>8} {slow:>10.2f} {fast:>10.2f} {slow / fast:>6.1f}x  {str(p_difflib == p_bounded):>10}"
              f"  {diffstat(p_bounded)}")


if __name__ == "__main__":
    main()
