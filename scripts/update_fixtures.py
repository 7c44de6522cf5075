"""Copy the captures of one scripts/gpu-suite.sh run into tests/fixtures/h200/ and write PROVENANCE.md.

    python scripts/update_fixtures.py RESULTS.tar.gz RUN_LABEL
"""
from __future__ import annotations

import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIX = REPO / "tests" / "fixtures" / "h200"


def main(tar: Path, label: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        with tarfile.open(tar) as f:
            f.extractall(t, filter="data")
        cap = t / "cap"
        shutil.rmtree(FIX, ignore_errors=True)
        rows = []
        for ex in ("gemm_mma", "reduce_sumsq", "pycapture"):
            (FIX / ex).mkdir(parents=True)
            for p in [*cap.joinpath(ex).glob("*-launch*"), cap / ex / "manifest.json", cap / ex / "instrumented.patch"]:
                if p.exists():
                    shutil.copy(p, FIX / ex / p.name)
            m = json.loads((FIX / ex / "manifest.json").read_text())
            side = json.loads(next((FIX / ex).glob("*-launch*.json")).read_text())
            rows.append((ex, m, side))
        shutil.copytree(cap / "measure", FIX / "measure")
        shutil.copy(t / "probe_cost.json", REPO / "bench" / "probe_cost" / "results-h200.json")
        device_txt = (t / "device.txt").read_text().splitlines()
    for p in FIX.rglob("*"):
        if p.is_file():
            p.chmod(0o644)
    d = rows[0][2]["device"]
    lines = ["# H200 captures used as test fixtures", "",
             f"Real captures from `bash scripts/gpu-suite.sh` ({label}) on the lent GPU host, copied by",
             "`python scripts/update_fixtures.py`:", "",
             f"- date: {rows[0][2]['time_utc']} (UTC)",
             f"- device: {d['name']}, UUID {d['uuid']}, {d['sm_count']} SMs, compute capability {d.get('cc')}",
             f"- nvidia-smi: {device_txt[0]}",
             f"- CUDA driver API {rows[0][2]['driver_version']}, runtime {rows[0][2]['runtime_version']}",
             f"- nvcc: {device_txt[-1].strip()}; flags `-O3 -gencode=arch=compute_90a,code=sm_90a`",
             "- command: `bash scripts/gpu-suite.sh`: each example applied from its spec, built, run with",
             "  `--warmup 3 --iters 10` and `ATREX_TIMELINE_OUT` set, reverted; `pycapture/` is the same reduction",
             "  launched from Python by `scripts/pycapture_check.py` (cuda-python)", "",
             "| folder | spec | spec sha256 | clean source sha256 | instrumented source id | launch | workload |",
             "|---|---|---|---|---|---|---|"]
    for ex, m, side in rows:
        lines.append(f"| {ex} | {m['spec']['path']} | {m['spec']['sha256'][:16]}… | "
                     f"{m['source']['clean_sha256'][:16]}… | {m['source']['source_id'][:16]}… | "
                     f"{side['launch_seq']} | {side['workload']} |")
    lines += ["", "`measure/` holds the GEMM's perturbation artifact (`atrex-inject measure`, ABBA BAAB x 2, a fresh",
              "process per sample), its validation, and the example evaluator's correctness records; paths in",
              "them are the GPU host's temporary paths.", "",
              "These files are device output: never edit them. Fault-injection tests copy them and plant faults",
              "in the copies (named synthetic)."]
    (FIX / "PROVENANCE.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
