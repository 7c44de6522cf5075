"""Copy the captures of one scripts/gpu-suite.sh run into tests/fixtures/h200/ and write the CUDA part
of PROVENANCE.md (the CuTe DSL folders and their sections are left as they are).

    python scripts/update_fixtures.py RESULTS.tar.gz RUN_LABEL
"""
from __future__ import annotations

import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from atrex_inject.manifest import load as load_manifest

REPO = Path(__file__).resolve().parent.parent
FIX = REPO / "tests" / "fixtures" / "h200"
EXAMPLES = ("gemm_mma", "reduce_sumsq", "layernorm", "softmax_rows", "sgemm_smem", "pycapture")
KEEP_FROM = "## cutedsl/"  # PROVENANCE.md sections from here on (reduce_sumsq_resident/ too) are not written here
SPLIT = "## rowscale_split/"  # ... except this one, written here (the last section)


def _copy(src: Path, dest: Path, names: list[Path]) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for p in names:
        if p.exists():
            shutil.copy(p, dest / p.name)


def main(tar: Path, label: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        with tarfile.open(tar) as f:
            f.extractall(t, filter="data")
        cap = t / "cap"
        rows = []
        for ex in EXAMPLES:
            d = cap / ex
            _copy(d, FIX / ex, [*d.glob("*-launch*"), d / "manifest.json", d / "instrumented.patch", d / "run.json"])
            m = load_manifest(FIX / ex / "manifest.json")
            side = json.loads(next((FIX / ex).glob("*-launch*.json")).read_text())
            rows.append((ex, m, side))
        st = cap / "gemm_mma_staged"
        _copy(st, FIX / "gemm_mma_staged", [*st.glob("*-launch*"), st / "manifest.json", st / "run.json",
                                             cap / "gemm_mma_staged.instrumented.cu"])
        shutil.copy(cap / "measure" / "gemm_mma_staged.json", FIX / "gemm_mma_staged" / "measure.json")
        rs = cap / "rowscale_split"
        _copy(rs, FIX / "rowscale_split", [*rs.glob("*-launch*"), rs / "manifest.json"])
        shutil.copy(cap / "rowscale_split.instrumented.cuh", FIX / "rowscale_split" / "rowscale.instrumented.cuh")
        shutil.copy(cap / "rowscale_split.main.instrumented.cu", FIX / "rowscale_split" / "main.instrumented.cu")
        split_side = json.loads(next((FIX / "rowscale_split").glob("*-launch*.json")).read_text())
        ms = cap / "measure"
        _copy(ms, FIX / "measure", [ms / n for n in ("gemm_mma.json", "gemm_mma.validate.json", "evaluations.jsonl",
                                                       "verdict.json")])
        device_txt = (t / "device.txt").read_text().splitlines()
    for p in FIX.rglob("*"):
        if p.is_file():
            p.chmod(0o644)
    d = rows[0][2]["device"]
    old = (FIX / "PROVENANCE.md").read_text() if (FIX / "PROVENANCE.md").exists() else ""
    kept = (old[old.index(KEEP_FROM):] if KEEP_FROM in old else "").split(SPLIT)[0]
    lines = ["# H200 captures used as test fixtures", "",
             f"Real captures from `LARGE=0 bash scripts/gpu-suite.sh` ({label}) on the lent GPU host, copied by",
             "`python scripts/update_fixtures.py`:", "",
             f"- date: {rows[0][2]['time_utc']} (UTC)",
             f"- device: {d['name']}, UUID {d['uuid']}, {d['sm_count']} SMs, compute capability {d.get('cc')}",
             f"- nvidia-smi: {device_txt[0]}",
             f"- CUDA driver API {rows[0][2]['driver_version']}, runtime {rows[0][2]['runtime_version']}",
             f"- nvcc: {device_txt[-1].strip()}; flags `-O3 -gencode=arch=compute_90a,code=sm_90a`",
             "- command: `bash scripts/gpu-suite.sh`: each example applied from its spec, built, captured with",
             "  `atrex-inject capture --workload W -- BUILD --warmup 3 --iters 10` (W the identity the clean run",
             "  printed; `run.json` names the binary), reverted; `pycapture/` is the same reduction launched from Python by",
             "  `scripts/pycapture_check.py` (cuda-python)", "",
             "| folder | spec | spec sha256 | clean source sha256 | instrumented source id | launch | workload |",
             "|---|---|---|---|---|---|---|"]
    for ex, m, side in rows:
        lines.append(f"| {ex} | {m.spec.path} | {m.spec.sha256[:16]}… | "
                     f"{m.source.clean_sha256[:16]}… | {m.source.source_id[:16]}… | "
                     f"{side['launch_seq']} | {side['workload']} |")
    lines += ["", "`measure/` holds the GEMM's perturbation artifact (`atrex-inject measure --root WORK`, ABBA BAAB",
              "x 2, a fresh process per sample, paths relative to the GPU host's work folder), its validation,",
              "the example evaluator's correctness records and the verdict the suite computed from them.", "",
              "## gemm_mma_staged/ (shared-memory staging)", "",
              f"Same run. The suite wrote `gemm_mma_staged.toml` with",
              "`atrex_inject.spec.staged_copy(examples/specs/gemm_mma.toml, 32, 8)` (the same spec plus",
              "`staging = { events = 32, warps = 8 }`), applied it, built the GEMM, captured it with `--warmup 3",
              "--iters 10` through `atrex-inject capture` (`run.json` names the binary), and reverted.", "",
              "- `gemm_bf16-launch3.atrex` / `.json`: the written launch (launch 3, after 3 warmups).",
              "- `manifest.json`: the manifest of that apply; `gemm_mma_staged.instrumented.cu`: the file the GPU",
              "  host compiled (tests check that staged_copy + apply write the same bytes here).",
              "- `measure.json`: `atrex-inject measure`, clean GEMM vs the staged build, ABBA BAAB x 2,",
              "  `--warmup 10 --iterations 200`.", "",
              "These files are device output: never edit them. Fault-injection tests copy them and plant faults",
              "in the copies (named synthetic).", ""]
    split = ["", SPLIT + " (a kernel in a header, launched from another file)", "",
             f"Same run. `examples/specs/rowscale_split.toml` instruments `examples/cuda/split/rowscale.cuh` and",
             "its launcher `main.cu` (`CHECK(cudaLaunchKernelEx(...))`); the clean build, the instrumented build",
             "with probes off and the capturing run were each checked against the float64 reference; both files",
             f"reverted byte for byte. Workload `{split_side['workload']}`; launch {split_side['launch_seq']} written.", "",
             "- `rowscale-launch*.atrex` / `.json`, `manifest.json`: the capture and the manifest of that apply.",
             "- `rowscale.instrumented.cuh`, `main.instrumented.cu`: the two files as instrumented (the capture's",
             "  source id is the header's).", ""]
    (FIX / "PROVENANCE.md").write_text("\n".join(lines) + "\n" + kept.rstrip("\n") + "\n" + "\n".join(split))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
