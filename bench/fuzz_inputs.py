"""Seeded fuzz run over hostile inputs: mutated specs through apply/status/revert and mutated
H200 captures (buffer, sidecar, manifest, file name) through decode and validate. Every case must
end in exit 0, 1 or 2 with a message, never a traceback, and change no file on exit 2.

    python bench/fuzz_inputs.py [--specs 2000] [--captures 1000] [--seed 15]

Prints the exit statuses seen (specs: of apply, one per case, status and revert also running on
each applied mutant; captures: of decode and of validate, two per case) and every failure (there
should be none). The mutations are synthetic (tests/fuzz_support.py); the base inputs are the
examples and real H200 captures.
"""
from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fuzz_support import Outcome, capture_case, project, spec_case  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--specs", type=int, default=2000)
    ap.add_argument("--captures", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=15)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = project(Path(tmp) / "proj")
        for what, n, case in (("specs", a.specs, lambda: [spec_case(rng, root)[1]]),
                              ("captures", a.captures, lambda: capture_case(rng, Path(tmp)))):
            exits: collections.Counter = collections.Counter()
            t0 = time.perf_counter()
            for i in range(n):
                try:
                    exits.update(case())
                except Outcome as e:
                    failures.append(f"{what} case {i}: {e}")
                    exits["failure"] += 1
            print(f"{what}: {n} cases in {time.perf_counter() - t0:.0f} s; "
                  f"exit statuses {dict(sorted(exits.items(), key=str))}")
    print(f"tracebacks or broken promises: {len(failures)}")
    for f in failures:
        print("  " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
