"""Copy the captures of a GPU run into tests/fixtures/h200/ and write their part of PROVENANCE.md:

    python scripts/update_fixtures.py RESULTS.tar.gz LABEL            a scripts/gpu-examples.sh archive
    python scripts/update_fixtures.py --demo DEMO.tar.gz RUN_LABEL    a scripts/gpu-demo.sh archive

RUN_LABEL: how PROVENANCE.md names that GPU call: its date (and time, where one date saw several
calls), e.g. "2026-12-02, 14:05 UTC"; a reason is a sentence, never an internal run number.

The demo's GEMM (gemm_mma/, gemm_mma_staged/, measure/: scripts/gpu-demo.sh, which the suite runs
too) is copied and described by one function either way; a suite archive also brings the other CUDA
examples, the header and rowscale_split's section. The sections of other scripts (cutedsl/ on) are
left as they are.
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
EXAMPLES = ("reduce_sumsq", "layernorm", "softmax_rows", "sgemm_smem", "pycapture")
DEMO = "## gemm_mma/, gemm_mma_staged/ and measure/"  # the demo's section, before KEEP_FROM
KEEP_FROM = "## cutedsl/"  # PROVENANCE.md sections from here on (reduce_sumsq_resident/ too) are not written here
SPLIT = "## rowscale_split/"  # ... except this one, written here (the last section)
MEASURED = ("gemm_mma.json", "gemm_mma.validate.json", "evaluations.jsonl", "verdict.json")


def _copy(src: Path, dest: Path, names: list[Path]) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for p in names:
        if p.exists():
            shutil.copy(p, dest / p.name)


def _machine(side: dict, device_txt: list[str]) -> list[str]:
    """The device lines of a run, from a launch's sidecar and the run's device.txt."""
    d = side["device"]
    return [f"- date: {side['time_utc']} (UTC)",
            f"- device: {d['name']}, UUID {d['uuid']}, {d['sm_count']} SMs, compute capability {d.get('cc')}",
            f"- nvidia-smi: {device_txt[0]}",
            f"- CUDA driver API {side['driver_version']}, runtime {side['runtime_version']}",
            f"- nvcc: {device_txt[-1].strip()}; flags `-O3 -gencode=arch=compute_90a,code=sm_90a`"]


def copy_demo(cap: Path) -> None:
    """The demo's GEMM folders from an archive's cap/ (scripts/gpu-demo.sh's layout)."""
    g, st, ms = cap / "gemm_mma", cap / "gemm_mma_staged", cap / "measure"
    _copy(g, FIX / "gemm_mma", [*g.glob("*-launch*"), g / "manifest.json", g / "instrumented.patch", g / "run.json"])
    _copy(st, FIX / "gemm_mma_staged", [*st.glob("*-launch*"), st / "manifest.json", st / "run.json",
                                         cap / "gemm_mma_staged.instrumented.cu"])
    shutil.copy(ms / "gemm_mma_staged.json", FIX / "gemm_mma_staged" / "measure.json")
    _copy(ms, FIX / "measure", [ms / n for n in MEASURED])


def demo_section(device_txt: list[str], ran: str) -> str:
    """PROVENANCE.md's section for the demo's GEMM folders as they are in tests/fixtures/h200/; `ran`
    says which command of which run recorded them."""
    m = load_manifest(FIX / "gemm_mma" / "manifest.json")
    side = json.loads(next((FIX / "gemm_mma").glob("*-launch*.json")).read_text())
    meas = {k: json.loads((FIX / k).read_text()) for k in ("measure/gemm_mma.json", "gemm_mma_staged/measure.json")}

    def how(a: dict) -> str:
        r = a["requested"]
        return (f"{r['pattern'].replace(',', ' ')} x {r['rounds']} ({a['n']['baseline']}+{a['n']['instrumented']} fresh "
                f"processes), `--warmup {r['warmup']} --iterations {r['iterations']}`")
    return "\n".join([
        DEMO + " (the demo's GEMM)", "",
        f"Real captures from {ran} on the lent GPU host, copied by `python scripts/update_fixtures.py`:", "",
        *_machine(side, device_txt), "",
        f"- `gemm_mma/`: `{m.spec.path}` (spec sha256 {m.spec.sha256[:16]}…, clean source {m.source.clean_sha256[:16]}…,",
        f"  instrumented source id {m.source.source_id[:16]}…, clock {'on' if m.capture.clock else 'off'}) applied to a "
        "copy of `examples/`, built,",
        f"  captured with `atrex-inject capture --workload {side['workload']} -- BUILD --warmup 3 --iters 10`",
        f"  (launch {side['launch_seq']} written; `run.json` names the binary), reverted byte for byte;",
        "  `instrumented.patch` is that apply's patch. The demo's capture: pyproject maps this folder into the",
        "  package as `atrex_inject.demo_capture`.",
        "- `measure/`: the GEMM's perturbation artifact (`atrex-inject measure --root WORK`, clean against that",
        f"  build, {how(meas['measure/gemm_mma.json'])}; paths relative to the GPU host's work",
        "  folder), its validation, the example evaluator's correctness records (instrumented and clean) and the",
        "  verdict computed from them.",
        "- `gemm_mma_staged/`: the same spec with `recorder = \"staged\"`, `ring = 32`, `warps = 8`, written by",
        "  `atrex_inject.spec.with_recorder(examples/specs/gemm_mma.toml, 'staged', 8, 32)` (so named `gemm_mma_staged`),",
        "  applied, built and captured the same way (`gemm_mma_staged.instrumented.cu` is the file the GPU host",
        "  compiled: tests check that with_recorder + apply write the same bytes); `measure.json` is clean against",
        f"  the staged build, {how(meas['gemm_mma_staged/measure.json'])}.", "",
        "These files are device output: never edit them. Fault-injection tests copy them and plant faults",
        "in the copies (named synthetic).", ""])


def main(tar: Path, label: str, demo_only: bool = False) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        with tarfile.open(tar) as f:
            f.extractall(t, filter="data")
        cap = t / "cap"
        device_txt = (t / "device.txt").read_text().splitlines()
        copy_demo(cap)
        rows = []
        if not demo_only:
            for ex in EXAMPLES:
                d = cap / ex
                _copy(d, FIX / ex, [*d.glob("*-launch*"), d / "manifest.json", d / "instrumented.patch", d / "run.json"])
                m = load_manifest(FIX / ex / "manifest.json")
                side = json.loads(next((FIX / ex).glob("*-launch*.json")).read_text())
                rows.append((ex, m, side))
            rs = cap / "rowscale_split"
            _copy(rs, FIX / "rowscale_split", [*rs.glob("*-launch*"), rs / "manifest.json"])
            shutil.copy(cap / "rowscale_split.instrumented.cuh", FIX / "rowscale_split" / "rowscale.instrumented.cuh")
            shutil.copy(cap / "rowscale_split.main.instrumented.cu", FIX / "rowscale_split" / "main.instrumented.cu")
            split_side = json.loads(next((FIX / "rowscale_split").glob("*-launch*.json")).read_text())
    for p in FIX.rglob("*"):
        if p.is_file():
            p.chmod(0o644)
    old = (FIX / "PROVENANCE.md").read_text() if (FIX / "PROVENANCE.md").exists() else ""
    if demo_only:
        demo = demo_section(device_txt, f"`bash scripts/gpu-demo.sh` ({label})")
        at, end = old.index(DEMO), old.index(KEEP_FROM)
        (FIX / "PROVENANCE.md").write_text(old[:at] + demo + "\n" + old[end:])
        return
    demo = demo_section(device_txt, f"`bash scripts/gpu-suite.sh captures` ({label}), which runs `scripts/gpu-demo.sh`")
    kept = (old[old.index(KEEP_FROM):] if KEEP_FROM in old else "").split(SPLIT)[0]
    lines = ["# H200 captures used as test fixtures", "",
             f"Real captures from `bash scripts/gpu-suite.sh captures` ({label}) on the lent GPU host, copied by",
             "`python scripts/update_fixtures.py`:", "",
             *_machine(rows[0][2], device_txt),
             "- command: `bash scripts/gpu-suite.sh captures` (scripts/gpu-examples.sh): each example applied from its spec, built, captured with",
             "  `atrex-inject capture --workload W -- BUILD --warmup 3 --iters 10` (W the identity the clean run",
             "  printed; `run.json` names the binary), reverted; `pycapture/` is the same reduction launched from Python by",
             "  `scripts/pycapture_check.py` (cuda-python)", "",
             "| folder | spec | spec sha256 | clean source sha256 | instrumented source id | launch | workload |",
             "|---|---|---|---|---|---|---|"]
    for ex, m, side in rows:
        lines.append(f"| {ex} | {m.spec.path} | {m.spec.sha256[:16]}… | "
                     f"{m.source.clean_sha256[:16]}… | {m.source.source_id[:16]}… | "
                     f"{side['launch_seq']} | {side['workload']} |")
    lines += ["", demo]
    split = ["", SPLIT + " (a kernel in a header, launched from another file)", "",
             "Same run. `examples/specs/rowscale_split.toml` instruments `examples/cuda/split/rowscale.cuh` and",
             "its launcher `main.cu` (`CHECK(cudaLaunchKernelEx(...))`); the clean build, the instrumented build",
             "with probes off and the capturing run were each checked against the float64 reference; both files",
             f"reverted byte for byte. Workload `{split_side['workload']}`; launch {split_side['launch_seq']} written.", "",
             "- `rowscale-launch*.atrex` / `.json`, `manifest.json`: the capture and the manifest of that apply.",
             "- `rowscale.instrumented.cuh`, `main.instrumented.cu`: the two files as instrumented (the capture's",
             "  source id is the header's).", ""]
    (FIX / "PROVENANCE.md").write_text("\n".join(lines) + "\n" + kept.rstrip("\n") + "\n" + "\n".join(split))


if __name__ == "__main__":
    args = sys.argv[1:]
    demo_only = args[:1] == ["--demo"]
    if len(args) != 2 + demo_only:
        sys.exit(__doc__)
    main(Path(args[demo_only]), args[demo_only + 1], demo_only)
