"""Example evaluator: runs a program once on its representative workload, checks the sample line
it prints, and appends one correctness record (JSONL) that `atrex-inject verdict` accepts as the
user's evaluator evidence.

    python examples/evaluator.py --source SRC.cu [--source ...] --out evaluations.jsonl -- ./prog --warmup 3 --iters 10

The record binds the verdict to exact sources (sha256) and the workload identity the program
reported; a record for other sources or another workload does not count.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

PREFIX = "__ATREX_TIMELINE_SAMPLE__="


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", action="append", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    p = subprocess.run(cmd, capture_output=True, text=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith(PREFIX)]
    sample = json.loads(lines[0][len(PREFIX):]) if len(lines) == 1 else {}
    passed = p.returncode == 0 and sample.get("correctness") == "passed"
    rec = {"evaluator": "examples/evaluator.py", "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "sources": [{"path": str(s), "sha256": hashlib.sha256(s.read_bytes()).hexdigest()} for s in a.source],
           "workload_identity": sample.get("workload_identity"), "correctness": "passed" if passed else "failed",
           "rel_err": sample.get("rel_err"), "exit_status": p.returncode, "command": cmd}
    with a.out.open("a") as f:
        f.write(json.dumps(rec) + "\n")
    print(json.dumps(rec))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
