"""Copy the captures of one scripts/gpu-pylaunch.sh run into tests/fixtures/h200/pylaunch/ and write
their section of tests/fixtures/h200/PROVENANCE.md ("## pylaunch/", after the kernelpy/ section, so
that scripts/update_fixtures.py keeps it).

    python scripts/pylaunch_fixtures.py RESULTS.tar.gz RUN_LABEL

RUN_LABEL: how PROVENANCE.md names that GPU call, as update_fixtures.py's does (its date).
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
HEADING = "## pylaunch/"
# folder -> (example, how its kernel is launched)
RUNS = {"rmsnorm_nvrtc": ("examples/kernelpy/nvrtc/kernel.py", "NVRTC through cuda.bindings, `cuLaunchKernel`"),
        "absmax_cupy": ("examples/kernelpy/cupy/kernel.py", "CuPy, `cupy.RawKernel`"),
        "softmax_inline": ("examples/kernelpy/load_inline/kernel.py",
                           "torch `load_inline`, `<<<>>>` in the launcher inside the string"),
        "apis": ("examples/kernelpy/cupy/kernel.py", "scripts/pylaunch_check.py: every hooked API in one process")}
KEEP = ("*-launch*.atrex", "*-launch*.json", "pylaunch-*.json", "manifest.json", "run.json", "kernel.instrumented.py",
        "apis.json", "absmax_all.toml")


def _section(t: Path, label: str) -> str:
    device = (t / "device.txt").read_text().splitlines()
    rows, first = [], None
    for name, (example, how) in RUNS.items():
        d = FIX / "pylaunch" / name
        m = load_manifest(d / "manifest.json")
        sides = [json.loads(p.read_text()) for p in sorted(d.glob("*-launch*.json"))]
        first = first or sides[0]
        apis = sorted({s.get("capture", "C++ session") for s in sides})
        rows.append(f"| {name} | {example} | {how} | {m.spec.sha256[:16]}… | {m.source.clean_sha256[:16]}… | "
                    f"{m.source.source_id[:16]}… | {', '.join(str(s['launch_seq']) for s in sides)} | "
                    f"{', '.join(apis)} | {sides[0]['workload']} |")
    dev = first["device"]
    return "\n".join([
        HEADING + " (launches from Python, captured without editing the program)", "",
        f"{label}: `bash scripts/gpu-pylaunch.sh` on an {dev['name']} (UUID {dev['uuid']}, {dev['sm_count']} SMs;",
        f"{device[0]}; {'; '.join(device[1:])}), {first['time_utc']} (UTC), copied by",
        "`python scripts/pylaunch_fixtures.py`. Each example's kernel.py imports nothing of atrex-inject: the spec was",
        "applied, `atrex-inject capture --workload W -- python3 examples/kernelpy/run.py kernel.py --warmup 3 --iters",
        "10` ran it (every output element checked; the launch hooks, or for load_inline the C++ session in the",
        "string, wrote the spec's launch), `validate` accepted it against the instrumented file, and `revert`",
        "restored the file byte for byte. `apis/` is scripts/pylaunch_check.py under a copy of the CuPy spec that",
        "writes every launch (`absmax_all.toml`): the same string launched through cupy.RawKernel,",
        "cupy.RawModule, cuLaunchKernel, cuLaunchKernelEx and cuda.core (where installed), then once into a CUDA",
        "graph, which its ledger reports as not captured (`apis.json` lists the launches).", "",
        "| folder | example | launch path | spec sha256 | clean source sha256 | source id | launches | capture | "
        "workload |", "|---|---|---|---|---|---|---|---|---|", *rows, "",
        "Each folder holds the launches' `.atrex` / `.json`, the `manifest.json` of that apply, `run.json`, the",
        "launch ledger of each hooked Python process (`pylaunch-<pid>.json`) and `kernel.instrumented.py`, the file",
        "the capture came from. Device output: never edit it.", ""])


def main(tar: Path, label: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        with tarfile.open(tar) as f:
            f.extractall(t, filter="data")
        for name in list(RUNS):
            src, dest = t / "cap" / name, FIX / "pylaunch" / name
            if not any(src.glob("*.atrex")):
                raise SystemExit(f"{tar}: no capture in cap/{name}: see {name}.capture.txt in the archive")
            if not (src / "manifest.json").is_file():  # the run failed before capture copied it: not evidence
                print(f"{name}: the capture did not complete (no manifest.json): not copied", file=sys.stderr)
                del RUNS[name]
                continue
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            for pattern in KEEP:
                for p in src.glob(pattern):
                    shutil.copy(p, dest / p.name)
                    (dest / p.name).chmod(0o644)
        section = _section(t, label)
    prov = FIX / "PROVENANCE.md"
    prov.write_text(put_section(prov.read_text(), HEADING, section, after="## kernelpy/"))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
