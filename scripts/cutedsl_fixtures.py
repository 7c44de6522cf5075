"""Copy what `MEASURE_OFF=1 ROUNDS=2 ITERS=300 bash scripts/gpu-cutedsl.sh hopper_gemm` brought back
into the tree, and write its PROVENANCE.md section:

    python3 scripts/cutedsl_fixtures.py RESULTS.tar.gz

- tests/fixtures/h200/cutedsl_gemm_cta0/: the Hopper GEMM's capture recording its first CTA only
  (IKeT's selection): the first launch's file and sidecar, manifest.json, run.json, run-iket.log,
  iket-select.json (what capture gave run-iket) and iket_trace.json (run-iket's decoded trace, whole);
- bench/perturbation/cutedsl_gemm/: measure-off.json and measure-spec.json, the CuTe DSL GEMM's rows
  that bench/perturbation/run.py folds in (`--cutedsl bench/perturbation/cutedsl_gemm`).

An archive of another example, or of a spec that records every CTA, is refused: nothing is copied.
"""
from __future__ import annotations

import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from atrex_inject.manifest import load as load_manifest

from provenance import put_section

REPO = Path(__file__).resolve().parent.parent
FIX = REPO / "tests" / "fixtures" / "h200"
DEST = FIX / "cutedsl_gemm_cta0"
BENCH = REPO / "bench" / "perturbation" / "cutedsl_gemm"
HEAD = "## cutedsl_gemm_cta0/"
NEXT = "## kernelpy/"  # the section this one goes before
KEPT = ("manifest.json", "run.json", "run-iket.log", "iket-select.json")
MEASURED = ("measure-off.json", "measure-spec.json")


def how(art: dict) -> str:
    r = art["requested"]
    return (f"clean against B, {r['pattern'].replace(',', ' ')} x {r['rounds']} ({art['n']['baseline']}+"
            f"{art['n']['instrumented']} fresh processes), `--warmup {r['warmup']} --iterations {r['iterations']}`")


def section(device: list[str], manifest, side: dict, art: dict) -> str:
    """PROVENANCE.md's section for the folder as copied."""
    return "\n".join([
        f"{HEAD} (CuTe DSL Hopper GEMM, the first CTA only: IKeT's selection)", "",
        f"`MEASURE_OFF=1 ROUNDS=2 ITERS=300 bash scripts/gpu-cutedsl.sh hopper_gemm` on an {device[0]}",
        f"({device[1]}), nvidia-cutlass-dsl from the offline bundle, copied by `python3 scripts/cutedsl_fixtures.py`:",
        f"`{manifest.spec.path}` (spec sha256 {manifest.spec.sha256[:16]}…: every site `ctas = {{ limit = 1 }}`)",
        "applied on the GPU host (the instrumented file is `cutedsl_gemm/hopper_gemm.instrumented.py` byte for byte),",
        f"captured with `atrex-inject capture --workload {side['workload']} -- python3 run_hopper_gemm.py --warmup 1",
        "--iters 1 --small`, which ran `run-iket profile --enabled-cluster-config iket-select.json` (that file:",
        "the kernel's cluster 0,0,0) and normalized its decoded output (`iket_trace.json`, as run-iket wrote it)",
        f"into format 2; `gemm_kernel-launch0` is the first launch (grid {side['grid']}, block {side['block']}).",
        "The same call measured the GEMM at 4096^3 (bench/perturbation/cutedsl_gemm/measure-off.json and",
        f"measure-spec.json, {how(art)}).", ""])


def main(tar: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        with tarfile.open(tar) as f:
            f.extractall(t, filter="data")
        cap = t / "cap"
        m = load_manifest(cap / "manifest.json")
        if m.name != "hopper_gemm_cutedsl" or not (cap / "iket-select.json").is_file():
            raise SystemExit(f"{tar}: not a capture of hopper_gemm_cutedsl recording its first CTA (spec {m.name!r}; "
                             "run `bash scripts/gpu-cutedsl.sh hopper_gemm` with the spec as committed)")
        missing = [n for n in (*MEASURED, "iket_trace.json", "device.txt") if not (t / n).is_file()]
        if missing:
            raise SystemExit(f"{tar}: {', '.join(missing)} missing (MEASURE_OFF=1 and the default MEASURE_ON=1 write "
                             "both measure files)")
        shutil.rmtree(DEST, ignore_errors=True)
        DEST.mkdir(parents=True)
        for p in [*cap.glob("gemm_kernel-launch0.*"), *(cap / n for n in KEPT), t / "iket_trace.json"]:
            shutil.copy(p, DEST / p.name)
        for n in MEASURED:
            shutil.copy(t / n, BENCH / n)
        device = (t / "device.txt").read_text().splitlines()
    for p in [*DEST.iterdir(), *(BENCH / n for n in MEASURED)]:
        p.chmod(0o644)
    side = json.loads((DEST / "gemm_kernel-launch0.json").read_text())
    text = section(device, m, side, json.loads((BENCH / "measure-spec.json").read_text()))
    prov = FIX / "PROVENANCE.md"
    prov.write_text(put_section(prov.read_text(), HEAD, text, before=NEXT))
    print(f"copied into {DEST.relative_to(REPO)} and {BENCH.relative_to(REPO)}; PROVENANCE.md's {HEAD} written")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]))
