"""Perturbation benchmark (run on the GPU host, one call): what the probes do to the kernels they
observe, each figure a ratio measured side by side in fresh processes with `atrex-inject measure`.

For each CUDA example (bf16 GEMM, reduce_sumsq, layernorm) it builds the clean kernel and the kernel
instrumented from its spec, at the spec's CTA density and with every CTA recording, and measures
clean (A) against (B):
  off       the spec build with probes compiled in but no buffer bound (ATREX_TIMELINE_OUT unset)
  spec      the spec build recording (deferred writes, as `measure` runs instrumented samples)
  resident  the spec with `recorder = "resident"\nwarps = 8` recording (events kept in shared
            memory until exit; reduce_sumsq and layernorm: the GEMM's own shared memory leaves no room)
  all       the every-CTA build recording
  packed, resident_packed
            spec and resident with `packed = true` (4-byte events, the site id in the timer's low bits;
            not built for a spec that records the clock or payloads, which a 4-byte event cannot hold)
It validates each recording arm's first capture, folds in the per-event loops of
bench/probe_cost/run.py (atrex, hand-written, floor), the IKeT figures of a CuTe DSL run
(bench/perturbation/iket.py, merged with --iket) and the CuTe DSL GEMM's rows (--cutedsl: the
measure-off.json and measure.json, copied as measure-spec.json, that `MEASURE_OFF=1 ROUNDS=2
ITERS=300 bash scripts/gpu-cutedsl.sh hopper_gemm` writes; IKeT records every warp, so its spec row
is also its every-CTA row), prints one table and writes the JSON that the README's cost table comes
from:

    python3 bench/perturbation/run.py [--samples 8] [--examples gemm_mma,reduce_sumsq,layernorm]
        [--arms off,spec,resident,all] [--iket iket.json] [--cutedsl DIR] [--json OUT.json]
        [--runtime LABEL=DIR ...]

`--runtime LABEL=DIR` also builds each recording arm against the recorder headers in DIR (another
revision's runtime/: `mkdir rt-main && git archive main runtime | tar -x -C rt-main`, then
`--runtime main=rt-main/runtime`; an untracked folder travels to the GPU host) and measures it
right after the arm as `ARM:LABEL`, in the same call: two recorders compared side by side, each
against the clean build.
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
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from atrex_inject import measure as ms
from atrex_inject import snapshot
from atrex_inject.errors import AtrexError
from atrex_inject.manifest import load as load_manifest
from atrex_inject.spec import load_spec, with_recorder
from atrex_inject.validate import validate_dir

REPO = Path(__file__).resolve().parents[2]
NVCC = ["nvcc", "-O3", "-gencode=arch=compute_90a,code=sm_90a"]
# example -> (warmup, timed launches per sample)
EXAMPLES = {"gemm_mma": (10, 200), "reduce_sumsq": (10, 200), "layernorm": (10, 200)}
RESIDENT = ("reduce_sumsq", "layernorm")  # examples measured with resident staging too (8 warps per CTA)
ARMS = ("off", "spec", "resident", "all", "packed", "resident_packed")


def _probe_cost_columns() -> list[str]:
    """bench/probe_cost/run.py's table columns (atrex, staged, ..., resident_packed), from its file."""
    spec = importlib.util.spec_from_file_location("atrex_bench_probe_cost", REPO / "bench" / "probe_cost" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.COLUMNS


PROBE_COST_COLUMNS = _probe_cost_columns()


def workspace(work: Path) -> Path:
    """A copy of the examples in `work`, made a project root (a .git marker) that specs apply in."""
    shutil.copytree(REPO / "examples", work / "examples")
    (work / ".git").mkdir()
    return work


def every_cta(spec: Path) -> Path:
    """The spec with its CTA densities removed: every CTA records (the `all` arm)."""
    text = re.sub(r"(?m)^ctas\s*=.*$\n?", "", spec.read_text())
    text = re.sub(r'(?m)^name\s*=\s*"([^"]+)"', r'name = "\1_all"', text, count=1)
    out = spec.with_name(spec.stem + "_all.toml")
    out.write_text(text)
    return out


def arm(work: Path, example: str, bins: dict[str, Path], name: str, samples: int) -> dict:
    warmup, iters = EXAMPLES[example]
    argv = lambda b: [str(b), "--warmup", "{warmup}", "--iters", "{iterations}"]  # noqa: E731
    cap = work / f"cap-{example}-{name}" if name != "off" else None
    req = ms.Request(argv(bins["clean"]), argv(bins["spec" if name == "off" else name]), warmup, iters,
                     "ABBA,BAAB", max(1, samples // 4), 300.0, capture_dir=str(cap) if cap else None)
    art = ms.measure(req, work / f"measure-{example}-{name}.json")
    row = {"kernel": example, "arm": name, "overhead": art.get("overhead"), "ci95": art.get("overhead_ci95"),
           "samples": {"A": sum(s["arm"] == "A" for s in art["samples"]), "B": sum(s["arm"] == "B" for s in art["samples"])},
           "median_ms": art.get("median_ms"), "valid": art["valid"], "reasons": art["reasons"]}
    if cap and art["valid"]:
        row["capture"] = capture_check(sorted(cap.iterdir())[0], work, example, name)
    return row


def capture_check(cap: Path, work: Path, example: str, name: str) -> dict:
    """Validation of the first recording sample's capture: the probes measured must have recorded."""
    try:
        report, launches = validate_dir(cap, load_manifest(work / f"manifest-{example}-{name}.json"))
    except AtrexError as e:
        return {"verdict": "rejected", "events": 0, "failed": [str(e)]}
    return {"verdict": report["verdict"], "events": sum(l.n_events for l in launches),
            "failed": [c["name"] for c in report["checks"] if not c["ok"]]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=8, help="fresh processes per arm and side (multiple of 4)")
    ap.add_argument("--examples", default=",".join(EXAMPLES))
    ap.add_argument("--arms", default=",".join(ARMS), help="arms to measure, of " + ", ".join(ARMS))
    ap.add_argument("--probe-cost", type=Path, help="bench/probe_cost/run.py --json output to fold in")
    ap.add_argument("--iket", type=Path, help="bench/perturbation/iket.py --json output to fold in")
    ap.add_argument("--cutedsl", type=Path, help="folder with the CuTe DSL GEMM's measure-off.json and "
                                                 "measure-spec.json to fold in (bench/perturbation/cutedsl_gemm)")
    ap.add_argument("--json", type=Path, default=REPO / "bench" / "perturbation" / "results-h200.json")
    ap.add_argument("--runtime", action="append", default=[], metavar="LABEL=DIR",
                    help="also measure each recording arm built against the recorder headers in DIR, as ARM:LABEL")
    a = ap.parse_args()
    runtimes = dict(parse_runtime(r) for r in a.runtime)
    examples = [e for e in a.examples.split(",") if e]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = workspace(Path(tmp))
        with ThreadPoolExecutor(len(examples)) as pool:
            built = dict(zip(examples, pool.map(lambda e: build_with_manifests(work, e, runtimes), examples)))
        for ex in examples:
            chosen = [n for n in a.arms.split(",") if n in ARMS and (n == "off" or n in built[ex])]
            for name in (v for n in chosen for v in (n, *(f"{n}:{r}" for r in runtimes if n != "off"))):
                t0 = time.time()
                rows.append(arm(work, ex, built[ex], name, a.samples))
                r = rows[-1]
                print(f"{ex:<14}{name:<16}{_pct(r['overhead']):>9} {_ci(r['ci95']):>20}  "
                      f"{r['samples']['A']}+{r['samples']['B']} samples, {time.time() - t0:.0f} s"
                      + (f"  capture {r['capture']['verdict']} ({r['capture']['events']} events"
                   f"{', failed: ' + '; '.join(r['capture']['failed']) if r['capture']['failed'] else ''})"
                   if "capture" in r else "")
                      + ("" if r["valid"] else f"  REJECTED: {r['reasons']}"), flush=True)
    rows += fold_cutedsl(a.cutedsl)
    per_event = fold_per_event(a.probe_cost, a.iket)
    device = _device()
    result = {"date": time.strftime("%Y-%m-%d"), "device": device, "rows": rows, "per_event": per_event}
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)
    return 0 if all(r["valid"] for r in rows) else 1


APPLY = threading.Lock()


def parse_runtime(arg: str) -> tuple[str, Path]:
    """`LABEL=DIR` of --runtime: a folder holding atrex_recorder.cuh (another revision's runtime/)."""
    label, sep, folder = arg.partition("=")
    if not sep or not re.fullmatch(r"\w+", label) or not (Path(folder) / "atrex_recorder.cuh").is_file():
        raise SystemExit(f"--runtime {arg!r}: expected LABEL=DIR, LABEL a word and DIR a folder with atrex_recorder.cuh")
    return label, Path(folder).resolve()


def build_with_manifests(work: Path, example: str, runtimes: dict[str, Path] | None = None) -> dict[str, Path]:
    """build(), keeping each instrumented build's manifest for its capture's validation; with
    `runtimes` (label -> recorder header folder) each instrumented source is also built against
    those headers, as `NAME:LABEL`."""
    src = work / "examples" / "cuda" / f"{example}.cu"
    inc = snapshot.runtime_header().parent
    bins = {"clean": work / f"{example}.clean"}
    subprocess.run([*NVCC, f"-I{src.parent}", "-o", bins["clean"], src], check=True)
    spec = work / "examples" / "specs" / f"{example}.toml"
    parsed = load_spec(spec, work)
    packs = not (parsed.capture.clock or any(x.payload for x in parsed.sites))  # a 4-byte event holds neither
    specs = [("spec", spec), ("all", every_cta(spec))]
    specs += [("packed", with_recorder(spec, "global", packed=True))] if packs else []
    if example in RESIDENT:
        specs += [("resident", with_recorder(spec, "resident", 8))]
        specs += [("resident_packed", with_recorder(spec, "resident", 8, packed=True))] if packs else []
    for name, s in specs:
        inst = work / f"{example}.{name}.cu"
        with APPLY:  # apply/revert hold the project's lock: one at a time, the builds in parallel
            res = snapshot.apply(s, root=work)
            shutil.copy(src, inst)
            snapshot.revert(s, root=work)
        for key, headers in ((name, inc), *((f"{name}:{r}", d) for r, d in (runtimes or {}).items())):
            (work / f"manifest-{example}-{key}.json").write_text(res.manifest.dumps())
            bins[key] = work / f"{example}.{key.replace(':', '@')}"
            subprocess.run([*NVCC, f"-I{headers}", f"-I{src.parent}", "-o", bins[key], inst], check=True)
    return bins


def fold_cutedsl(folder: Path | None) -> list[dict]:
    """The CuTe DSL GEMM's arms from `atrex-inject measure` artifacts of scripts/gpu-cutedsl.sh."""
    rows = []
    for name in ("off", "spec"):
        path = folder / f"measure-{name}.json" if folder else None
        if path and path.exists():
            art = json.loads(path.read_text())
            n = art["n"]
            rows.append({"kernel": "cutedsl_gemm", "arm": name, "overhead": art.get("overhead"),
                         "ci95": art.get("overhead_ci95"), "samples": {"A": n["baseline"], "B": n["instrumented"]},
                         "median_ms": art.get("median_ms"), "valid": art["valid"], "reasons": art["reasons"],
                         "artifact": str(path.relative_to(REPO) if path.is_relative_to(REPO) else path)})
    return rows


def fold_per_event(probe_cost: Path | None, iket: Path | None) -> list[dict]:
    rows = {}
    if probe_cost and probe_cost.exists():
        for r in json.loads(probe_cost.read_text())["rows"]:
            # probe_cost's columns (atrex, staged, ..., resident_packed) as atrex, atrex_staged, ...
            rows[r["loop"]] = {"loop": r["loop"], **{c if c.startswith("atrex") else f"atrex_{c}": r[f"{c}_pct"] / 100
                                                     for c in PROBE_COST_COLUMNS if f"{c}_pct" in r},
                               "hand_written": r["manual_pct"] / 100, "floor": r["floor_pct"] / 100}
    if iket and iket.exists():
        k = json.loads(iket.read_text())
        rows.setdefault("fma", {"loop": "fma"})["iket"] = k["overhead"]
        rows["fma"]["iket_detail"] = k
    return list(rows.values())


def _device() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,uuid,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        return out or "unknown"
    except OSError:
        return "unknown"


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:+.2f}%"


def _ci(ci) -> str:
    return "-" if not ci else f"[{100 * ci[0]:+.2f}, {100 * ci[1]:+.2f}]"


def print_table(result: dict) -> None:
    print(f"\nperturbation, {result['device']}, {result['date']} (overhead vs clean, 95% CI)")
    print(f"{'kernel':<14}" + "".join(f" {h:>25}" for h in ("off", "spec density", "spec, resident", "every CTA",
                                                            "spec, packed", "resident, packed")))
    by = {(r["kernel"], r["arm"]): r for r in result["rows"]}
    cell = lambda r: "-" if r is None else f"{_pct(r['overhead'])} {_ci(r['ci95'])}"  # noqa: E731
    for k in dict.fromkeys(r["kernel"] for r in result["rows"]):
        print(f"{k:<14}" + "".join(f" {cell(by.get((k, n))):>25}" for n in ARMS))
        for label in dict.fromkeys(r["arm"].partition(":")[2] for r in result["rows"] if r["kernel"] == k):
            if label:  # the same arms built against another recorder (--runtime)
                print(f"{'  :' + label:<14}" + "".join(f" {cell(by.get((k, f'{n}:{label}'))):>25}" for n in ARMS))
    for p in result["per_event"]:
        print(f"per event, {p['loop']} loop: " + ", ".join(f"{k} {_pct(v)}" for k, v in p.items()
                                                         if k not in ("loop", "iket_detail")))


if __name__ == "__main__":
    sys.exit(main())
