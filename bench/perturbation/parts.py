"""Where a recording run's overhead comes from (run on the GPU host): the example's spec cut into
parts, each measured against the clean build with `atrex-inject measure` (8+8 fresh processes, as
bench/perturbation/run.py does), on the global path and with resident staging rings.

    full      every site of the spec
    entry     the entry site alone (the recorder's entry and exit, one event per owner)
    loop      the loop's sites alone (strip-mined; entry and exit still claim and publish)
    noloop    every site but the loop's (the clean loop runs in the recording side, its recorders'
              state live across it: check-sass says whether it keeps the clean loop's loads in flight)

A grid-stride kernel waits for its slowest CTA, so each part's figure is what its recording CTAs
spend. Runs 46-53 of bench/RESULTS.md were taken this way (with hand-edited variants besides).
The whole spec at another density tells the same from the other side (is the cost per recording
CTA, whatever their number, or per event?):

    strideN   every site, every N-th CTA recording instead of the spec's stride
    everyN    every site, the loop's sites every N-th iteration instead of the spec's `every`

    python3 bench/perturbation/parts.py [--example reduce_sumsq] [--variants full,entry,stride32,...]
        [--paths global,resident] [--samples 8] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from atrex_inject import snapshot
from atrex_inject.spec import staged_copy


def _load_run():
    """bench/perturbation/run.py (the measured arm, its capture's validation), loaded from its file:
    putting this folder on sys.path would shadow the `iket` package with its iket.py."""
    spec = importlib.util.spec_from_file_location("atrex_bench_perturbation_run", Path(__file__).with_name("run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run = _load_run()

LOOP_POSITIONS = ("loop-begin", "loop-end")
PARTS = {
    "full": lambda site: True,
    "entry": lambda site: "entry = true" in site,
    "loop": lambda site: any(f'"{p}"' in site for p in LOOP_POSITIONS),
    "noloop": lambda site: not any(f'"{p}"' in site for p in LOOP_POSITIONS),
}


def part_spec(spec: Path, part: str) -> Path:
    """The spec with only the part's [[site]] tables, no intervals and no [expect] (they would name
    dropped sites), under its own name (its own workspace and manifest)."""
    head, *sites = spec.read_text().split("[[site]]")
    sites[-1] = sites[-1].split("[expect]")[0]
    head = re.sub(r"(?ms)^intervals\s*=\s*\[.*?\]", "intervals = []", head)  # the array may span lines
    head = re.sub(r'(?m)^name\s*=\s*"([^"]+)"', rf'name = "\1_{part}"', head, count=1)
    kept = [s for s in sites if PARTS[part](s)]
    out = spec.with_name(f"{spec.stem}_{part}.toml")
    out.write_text(head + "".join("[[site]]" + s for s in kept))
    return out


DENSITY = {"stride": r"(ctas = \{ stride = )\d+", "every": r"(?m)^(every = )\d+"}


def variant_spec(spec: Path, variant: str) -> Path:
    """A part of PARTS, or the whole spec at another density (`strideN`, `everyN`: each such key of
    the spec set to N), under its own name."""
    m = re.fullmatch(r"(stride|every)([1-9]\d*)", variant)
    if not m:
        if variant not in PARTS:
            raise SystemExit(f"--variants: {variant!r} is none of {', '.join(PARTS)}, strideN, everyN")
        return part_spec(spec, variant)
    text, n = re.subn(DENSITY[m[1]], rf"\g<1>{m[2]}", spec.read_text())
    if not n:
        raise SystemExit(f"--variants {variant}: {spec} has no `{m[1]}` to change")
    text = re.sub(r'(?m)^name\s*=\s*"([^"]+)"', rf'name = "\1_{variant}"', text, count=1)
    out = spec.with_name(f"{spec.stem}_{variant}.toml")
    out.write_text(text)
    return out


def build(work: Path, example: str, variants=tuple(PARTS), paths=("global", "resident")) -> dict[str, Path]:
    """The clean build and one instrumented build per variant and path, each with its manifest kept
    for its capture's validation (run.capture_check)."""
    src = work / "examples" / "cuda" / f"{example}.cu"
    bins = {"clean": work / f"{example}.clean"}
    subprocess.run([*run.NVCC, f"-I{src.parent}", "-o", bins["clean"], src], check=True)
    spec = work / "examples" / "specs" / f"{example}.toml"
    for part in variants:
        for path in paths:
            s = variant_spec(spec, part)
            if path == "resident":
                s = staged_copy(s, None, 8)
            name = f"{part}-{path}"
            res = snapshot.apply(s, root=work)
            inst = work / f"{example}.{name}.cu"
            shutil.copy(src, inst)
            snapshot.revert(s, root=work)
            (work / f"manifest-{example}-{name}.json").write_text(res.manifest.dumps())
            bins[name] = work / f"{example}.{name}"
            subprocess.run([*run.NVCC, f"-I{snapshot.runtime_header().parent}", f"-I{src.parent}", "-o",
                            bins[name], inst], check=True)
    return bins


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--example", default="reduce_sumsq", choices=sorted(run.RESIDENT))
    ap.add_argument("--samples", type=int, default=8, help="fresh processes per part and side (multiple of 4)")
    ap.add_argument("--variants", default=",".join(PARTS), help="parts of PARTS, strideN or everyN, comma-separated")
    ap.add_argument("--paths", default="global,resident", help="global, resident or both")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    paths = [p for p in a.paths.split(",") if p]
    if not paths or set(paths) - {"global", "resident"}:
        raise SystemExit(f"--paths {a.paths!r}: global, resident or both")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = run.workspace(Path(tmp))
        bins = build(work, a.example, [v for v in a.variants.split(",") if v], paths)
        print(f"{a.example}: overhead against the clean build (95% CI), {a.samples}+{a.samples} processes")
        for name in (n for n in bins if n != "clean"):
            r = run.arm(work, a.example, bins, name, a.samples)
            rows.append(r)
            cap = r.get("capture", {})
            print(f"  {name:<16}{run._pct(r['overhead']):>9} {run._ci(r['ci95']):>20}  capture "
                  f"{cap.get('verdict', '-')}" + ("" if r["valid"] else f"  REJECTED: {r['reasons']}"), flush=True)
    if a.json:
        a.json.write_text(json.dumps({"example": a.example, "device": run._device(), "rows": rows}, indent=2) + "\n")
    return 0 if all(r["valid"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
