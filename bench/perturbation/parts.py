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
from atrex_inject.spec import load_spec, staged_copy


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


def _renamed(text: str, suffix: str) -> str:
    """The spec's text under the name NAME_suffix (its own workspace and manifest)."""
    return re.sub(r'(?m)^name\s*=\s*"([^"]+)"', rf'name = "\1_{suffix}"', text, count=1)


def part_spec(spec: Path, part: str) -> Path:
    """The spec with only the part's [[site]] tables, no intervals and no [expect] (they would name
    dropped sites), under its own name."""
    head, *sites = spec.read_text().split("[[site]]")
    sites[-1] = sites[-1].split("[expect]")[0]
    head = re.sub(r"(?ms)^intervals\s*=\s*\[.*?\]", "intervals = []", head)  # the array may span lines
    kept = [s for s in sites if PARTS[part](s)]
    out = spec.with_name(f"{spec.stem}_{part}.toml")
    out.write_text(_renamed(head, part) + "".join("[[site]]" + s for s in kept))
    return out


# strideN and everyN: the key's value in every site that sets it (an inline `ctas` table, a line)
DENSITY = {"stride": (r"(ctas\s*=\s*\{[^}]*\bstride\s*=\s*)\d+", "cta_stride"),
           "every": (r"(?m)^(\s*every\s*=\s*)\d+", "every")}


def variant_spec(spec: Path, variant: str) -> Path:
    """A part of PARTS, or the whole spec at another density (`strideN`, `everyN`: that key set to N
    in every site that sets it), under its own name. ValueError for a name that is neither, a spec
    without the key, a site the rewrite missed, and an `every` below the spec's: its capacity is
    sized for the spec's events per owner, and more would overflow it."""
    m = re.fullmatch(r"(stride|every)([1-9]\d*)", variant)
    if not m:
        if variant not in PARTS:
            raise ValueError(f"{variant!r} is none of {', '.join(PARTS)}, strideN, everyN (N >= 1)")
        return part_spec(spec, variant)
    pattern, field = DENSITY[m[1]]
    n, before = int(m[2]), load_spec(spec).sites
    head, *blocks = spec.read_text().split("[[site]]")  # one block per site, in the spec's order
    done = [re.subn(pattern, rf"\g<1>{n}", b) for b in blocks]
    if not any(k for _, k in done):
        raise ValueError(f"{variant}: {spec.name} has no `{m[1]}` to change")
    missed = [site.name for site, (_, k) in zip(before, done) if getattr(site, field) != 1 and not k]
    if missed:
        raise ValueError(f"{variant}: `{m[1]}` of site(s) {', '.join(missed)} not rewritten; write it as `{m[1]} = N`")
    if field == "every" and n < min(s.every for s in before if s.every > 1):
        raise ValueError(f"{variant}: below the spec's every, its events would overflow [capture] capacity")
    out = spec.with_name(f"{spec.stem}_{variant}.toml")
    out.write_text(_renamed(head, variant) + "".join("[[site]]" + b for b, _ in done))
    return out


def build(work: Path, example: str, variants: dict[str, Path], paths=("global", "resident")) -> dict[str, Path]:
    """The clean build and one instrumented build per variant (its name -> its spec, variant_spec)
    and path, each with its manifest kept for its capture's validation (run.capture_check)."""
    src = work / "examples" / "cuda" / f"{example}.cu"
    bins = {"clean": work / f"{example}.clean"}
    subprocess.run([*run.NVCC, f"-I{src.parent}", "-o", bins["clean"], src], check=True)
    for part, spec in variants.items():
        for path in paths:
            s = staged_copy(spec, None, 8) if path == "resident" else spec
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
    paths, variants = [p for p in a.paths.split(",") if p], [v for v in a.variants.split(",") if v]
    if not paths or set(paths) - {"global", "resident"}:
        ap.error(f"--paths {a.paths!r}: global, resident or both")
    if not variants:
        ap.error("--variants: name at least one")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = run.workspace(Path(tmp))
        try:  # every name checked, and its spec written, before anything is built
            specs = {v: variant_spec(work / "examples" / "specs" / f"{a.example}.toml", v) for v in variants}
        except ValueError as e:
            ap.error(f"--variants: {e}")
        bins = build(work, a.example, specs, paths)
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
