"""Copy what scripts/gpu-compare.sh brought back into tests/fixtures/h200/compare/ and write its
section of tests/fixtures/h200/PROVENANCE.md (before the sections scripts/update_fixtures.py writes,
so that script keeps it).

    python3 scripts/update_compare_fixtures.py compare.tar.gz
"""
from __future__ import annotations

import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from atrex_inject.decode import capture_files
from atrex_inject.manifest import load as load_manifest
from atrex_inject.measure import load_measurement

from provenance import put_section

REPO = Path(__file__).resolve().parent.parent
FIX = REPO / "tests" / "fixtures" / "h200"
DEST = FIX / "compare"
FOLDERS = ("before", "before_rerun", "after")  # the A/A pair is before + before_rerun; the change before + after
SECTION = "## compare/"
AHEAD_OF = "## rowscale_split/"  # update_fixtures.py rewrites this section and the ones above cutedsl/


def _section(t: Path) -> list[str]:
    """The PROVENANCE.md section, from the fixtures just copied and the run's device.txt."""
    sides = {f: json.loads(sorted((DEST / f).glob("*-launch*.json"))[0].read_text()) for f in FOLDERS}
    launches = {f: [p.stem for p in capture_files(DEST / f)] for f in FOLDERS}
    m = {f: load_manifest(DEST / f / "manifest.json") for f in FOLDERS}
    d = sides["before"]["device"]
    device_txt = (t / "device.txt").read_text().splitlines()
    arts = {f: load_measurement(DEST / f / "measure.json") for f in ("before", "after")}
    direct = load_measurement(DEST / "clean_before_vs_after.json")
    lines = [SECTION + " (before and after one change: `atrex-inject compare`)", "",
             f"`bash scripts/gpu-compare.sh` on the lent GPU host, copied by `python3 scripts/update_compare_fixtures.py`"
             f" (first launch written {sides['before']['time_utc']}):", "",
             f"- device: {d['name']}, UUID {d['uuid']}, {d['sm_count']} SMs, compute capability {d.get('cc')}",
             f"- nvidia-smi: {device_txt[0]}",
             f"- CUDA driver API {sides['before']['driver_version']}, runtime {sides['before']['runtime_version']}",
             f"- nvcc: {device_txt[-1].strip()}; flags `-O3 -gencode=arch=compute_90a,code=sm_90a`",
             "- kernels: `tests/sources/compare/sumsq.cu` and `sumsq.after.cu`, which differ in one line (the",
             "  streaming loop's `#pragma unroll 1`, then `4`), each copied in turn to the spec's source,",
             "  `tests/sources/compare/sumsq.toml` applied (`sumsq.instrumented.cu` and `sumsq.after.instrumented.cu`",
             "  are the files built; `tests/captures/test_compare.py` checks that apply writes the same bytes), built,",
             "  captured with `atrex-inject capture --workload W -- BUILD --warmup 10 --iters 20` (the spec writes",
             "  launches 10-17), and reverted byte for byte. `before/` and `before_rerun/` are one binary run in two",
             "  processes (the A/A pair); `after/` is the changed build.", "",
             "| folder | source | clean sha256 | instrumented source id | launches | workload |", "|---|---|---|---|---|---|"]
    for f in FOLDERS:
        lines.append(f"| {f} | {'sumsq.after.cu' if f == 'after' else 'sumsq.cu'} | {m[f].source.clean_sha256[:16]}… | "
                     f"{m[f].source.source_id[:16]}… | {len(launches[f])}: {launches[f][0]} … {launches[f][-1]} | "
                     f"{sides[f]['workload']} |")
    lines += ["",
              "- `before/measure.json`, `after/measure.json`: `atrex-inject measure`, that build's clean binary (A)",
              "  against its instrumented one (B), ABBA BAAB, `--warmup 10 --iterations 200`: probe overhead "
              + ", ".join(f"{f} {100 * arts[f]['overhead']:+.2f}%" for f in arts) + "; clean medians "
              + ", ".join(f"{f} {arts[f]['median_ms']['baseline']:.4f} ms" for f in arts) + ".",
              "- `clean_before_vs_after.json`: the two clean binaries measured against each other (A = before,",
              f"  B = after), ABBA BAAB: {100 * direct['overhead']:+.2f}% [95% CI {100 * direct['overhead_ci95'][0]:+.2f}%,"
              f" {100 * direct['overhead_ci95'][1]:+.2f}%], the end-to-end change measured directly.",
              "", "These files are device output: never edit them. Fault-injection tests copy them and plant faults",
              "in the copies (named synthetic).", "", ""]
    return lines


def main(tar: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        with tarfile.open(tar) as f:
            f.extractall(t, filter="data")
        cap = t / "cap"
        shutil.rmtree(DEST, ignore_errors=True)
        for folder in FOLDERS:
            src = cap / folder
            (DEST / folder).mkdir(parents=True)
            for p in [*src.glob("*-launch*"), src / "manifest.json", src / "run.json", src / "measure.json"]:
                if p.exists():
                    shutil.copy(p, DEST / folder / p.name)
        shutil.copy(cap / "before.instrumented.cu", DEST / "sumsq.instrumented.cu")
        shutil.copy(cap / "after.instrumented.cu", DEST / "sumsq.after.instrumented.cu")
        shutil.copy(cap / "clean_before_vs_after.json", DEST / "clean_before_vs_after.json")
        for p in DEST.rglob("*"):
            if p.is_file():
                p.chmod(0o644)
        section = _section(t)
        for name in ("aa", "change"):  # compare's text on the GPU host, to read against the tests
            if (t / f"{name}.txt").exists():
                print((t / f"{name}.txt").read_text())
    prov = FIX / "PROVENANCE.md"
    prov.write_text(put_section(prov.read_text(), SECTION, "\n".join(section), before=AHEAD_OF))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
