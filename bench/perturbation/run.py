"""Perturbation benchmark: what the probes do to the kernels they observe, each figure a ratio of
medians measured side by side in fresh processes with `atrex-inject measure` (ABBA then BAAB).

For each kernel row (an example and its spec, KERNELS) it builds the clean kernel and the kernel
instrumented from the spec with the recorder the tool chose, and measures clean (A) against (B):
  off     the instrumented build with probes compiled in and no capture (the program runs the clean kernel)
  spec    the instrumented build recording at the spec's density
  clock   the spec with `[capture] clock = true` (16-byte events with %clock) recording
Each recording arm's first capture is validated. The per-event rows of bench/probe_cost/run.py (NVIDIA
IKeT's figure on the same loops among them, from the same call) and the CuTe DSL GEMM's rows
(bench/perturbation/cutedsl_gemm/, scripts/gpu-cutedsl.sh) are folded in; the results file is
the one the cost table (docs/cost.md) is generated from.

    python3 bench/perturbation/run.py build WORK [--kernels gemm_mma,...]     (nvcc: here or on the GPU host)
    python3 bench/perturbation/run.py measure WORK [--samples 8] [--arms off,spec,clock]
        [--probe-cost F] [--cutedsl DIR] [--json OUT]                (the GPU host)
    python3 bench/perturbation/run.py fold [--json F] [--probe-cost F] [--cutedsl DIR] [--rows F]
        [--captures ARCHIVE]   (another call's per-event, CuTe DSL or kernel rows into the results; its
                               captures validated again with this checkout's checks; each row keeps
                               its call's date and device in `measured`, and the file's device line
                               names each call with its rows)
    python3 bench/perturbation/run.py table [--json F] [--out docs/cost.md]   (the cost table, from the results)
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from atrex_inject import snapshot

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
from measuring import OFF_TARGET, device as _device, measure_pair, met, pct as _pct, ci as _ci, validate_capture  # noqa: E402
RESULTS = REPO / "bench" / "perturbation" / "results-h200.json"
TABLE = REPO / "docs" / "cost.md"
NVCC = ["nvcc", "-O3", "-gencode=arch=compute_90a,code=sm_90a"]
# row -> (example, CTA stride in place of the spec's (None: as written), target |overhead|, what it is)
KERNELS = {
    "gemm_mma": ("gemm_mma", None, 0.01, "bf16 mma.sync GEMM 4096³, 1/64 CTAs, every 4th k-tile"),
    "sgemm_smem": ("sgemm_smem", None, 0.01, "shared-memory fp32 GEMM 4096³, 1/64 CTAs, every k-tile"),
    "reduce_sumsq": ("reduce_sumsq", None, 0.03, "sum of squares, memory-bound, 1/8 CTAs, every 4th iteration"),
    "reduce_sumsq_1in32": ("reduce_sumsq", 32, 0.02, "the same at 1/32 CTAs"),
    "layernorm": ("layernorm", None, 0.02, "LayerNorm rows, memory-bound, 1/64 rows, every 4th iteration"),
    "softmax_rows": ("softmax_rows", None, 0.02, "three-pass row softmax, memory-bound, 1/64 rows"),
}
ARMS = ("off", "spec", "clock")
WARMUP, ITERATIONS = 10, 200  # per sample process: launches before timing, launches timed


def _arm_name(row: str, clock: bool) -> str:
    """A row's spec, build and manifest name: its clock variant's is its own."""
    return f"{row}_clock" if clock else row


def _capture_folder(row: str, arm: str) -> str:
    """Where `measure` keeps a recording arm's captures (in WORK, and in the call's captures.tar.gz)."""
    return f"cap-{row}-{arm}"


def _variant(spec: Path, row: str, stride: int | None, clock: bool) -> Path:
    """The row's spec: the example's, with its CTA stride and clock as the row and arm ask, under its
    own name (so its workspace and the instrumented file's first line are its own)."""
    text = spec.read_text()
    if stride is not None:
        text = re.sub(r"ctas = \{ stride = \d+ \}", f"ctas = {{ stride = {stride} }}", text)
    if clock and not re.search(r"(?m)^clock = true", text):
        text = text.replace("[capture]\n", "[capture]\nclock = true\n", 1)
    name = _arm_name(row, clock)
    text = re.sub(r'(?m)^name = "[^"]+"', f'name = "{name}"', text, count=1)
    out = spec.with_name(f"{name}.toml")
    out.write_text(text)
    return out


def build(work: Path, kernels: list[str]) -> None:
    """Every row's clean and instrumented builds into WORK, with plan.json: per row and arm, the two
    binaries, the manifest and the recorder the tool chose. Applied and reverted one at a time (apply
    holds the project's lock), compiled in parallel."""
    work.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "examples", work / "examples", dirs_exist_ok=True)
    (work / ".git").mkdir(exist_ok=True)
    jobs, plan = [], {}
    inc = snapshot.runtime_header().parent
    for row in kernels:
        example, stride, target, what = KERNELS[row]
        src = work / "examples" / "cuda" / f"{example}.cu"
        jobs.append((work / f"{example}.clean", src, ()))
        plan[row] = {"what": what, "target": target, "clean": f"{example}.clean", "arms": {}}
        for clock in (False, True):
            spec = _variant(work / "examples" / "specs" / f"{example}.toml", row, stride, clock)
            m = snapshot.apply(spec, root=work).manifest
            name = spec.stem
            shutil.copy(src, work / f"{name}.cu")
            (work / f"{name}.manifest.json").write_text(m.dumps())
            snapshot.revert(spec, root=work)
            jobs.append((work / name, work / f"{name}.cu", (f"-I{inc}", f"-I{src.parent}")))
            arm = {"binary": name, "manifest": f"{name}.manifest.json", "recorder": m.recorder.mode.path.value,
                   "recorder_why": m.recorder.why, "clock": m.capture.clock}
            for a in (("clock",) if clock else ("off", "spec")):
                plan[row]["arms"][a] = arm
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda j: subprocess.run([*NVCC, *j[2], "-o", j[0], j[1]], check=True), dict.fromkeys(jobs)))
    (work / "plan.json").write_text(json.dumps(plan, indent=2) + "\n")


def measure_arm(work: Path, row: str, arm: str, plan: dict, samples: int) -> dict:
    p = plan[row]
    a = p["arms"][arm]
    argv = lambda b: [str(work / b), "--warmup", "{warmup}", "--iters", "{iterations}"]  # noqa: E731
    cap = work / _capture_folder(row, arm) if arm != "off" else None
    m = measure_pair(argv(p["clean"]), argv(a["binary"]), WARMUP, ITERATIONS, samples, work / f"measure-{row}-{arm}.json",
                     cap, work / a["manifest"])
    return {"kernel": row, "arm": arm, "recorder": a["recorder"], "clock": a["clock"],
            "target": OFF_TARGET if arm == "off" else p["target"], **m}


def measure(work: Path, arms: list[str], samples: int, probe_cost: Path | None, cutedsl: Path | None,
            out: Path | None = None) -> dict:
    """Every row's arms in turn; the results so far are written to `out` after each arm, so a call
    cut short keeps what it measured."""
    plan = json.loads((work / "plan.json").read_text())
    rows = []
    result = {"date": time.strftime("%Y-%m-%d"), "device": _device(), "rows": rows, "per_event": []}
    for row in plan:
        for arm in arms:
            if arm == "clock" and plan[row]["arms"]["spec"]["clock"]:
                continue  # the spec records the clock already: its spec row is its clock row
            t0 = time.time()
            r = {**measure_arm(work, row, arm, plan, samples), "measured": _measured(result["date"], result["device"])}
            rows.append(r)
            print(f"{row:<20}{arm:<7}{r['recorder']:<10}{_pct(r['overhead']):>9} {_ci(r['ci95']):>20}  "
                  f"{r['samples']['A']}+{r['samples']['B']} samples, {time.time() - t0:.0f} s"
                  + (f"  capture {r['capture']['verdict']} ({r['capture']['events']} events)" if "capture" in r else "")
                  + ("" if r["valid"] else f"  REJECTED: {r['reasons']}"), flush=True)
            if out is not None:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(json.dumps(result, indent=2) + "\n")
    rows += fold_cutedsl(cutedsl, _measured(result["date"], result["device"]))
    fold_per_event(result, probe_cost)
    name_calls(result)
    return result


def _measured(date: str, device: str) -> str:
    """A row's `measured`: the date and device of the call that measured it."""
    return f"{date}, {device}"


def name_calls(result: dict) -> None:
    """The file's date (its newest row's) and device line, from its rows' `measured`: each call, the
    rows it measured. Written from the rows, so that a row replaced by a later call takes its call's
    name off the line with it."""
    calls: dict[tuple[str, str], dict[str, list[str]]] = {}
    for r in result["rows"]:  # a row of a file written before rows carried `measured`: the file's call
        date, device = (r.get("measured") or _measured(result["date"], result["device"])).split(", ", 1)
        calls.setdefault((date, device), {}).setdefault(r["kernel"], []).append(r["arm"])
    if calls:
        result["date"] = max(date for date, _ in calls)
        result["device"] = "; ".join(f"{device} ({date}: {', '.join(k + ' ' + '/'.join(a) for k, a in kernels.items())})"
                                     for (date, device), kernels in calls.items())


def fold_cutedsl(folder: Path | None, measured: str | None = None) -> list[dict]:
    """The CuTe DSL GEMM's arms from `atrex-inject measure` artifacts of scripts/gpu-cutedsl.sh, each
    with what recorded on its instrumented side, read from the command measured: nothing (probes
    off), or under run-iket the first CTA (IKeT's selection, --enabled-cluster-config) or every CTA.
    `measured`: the call's date and device; else the artifact's start date and the first line of
    the device.txt beside it (gpu-cutedsl.sh writes one)."""
    rows = []
    for arm in ("off", "spec"):
        path = folder / f"measure-{arm}.json" if folder else None
        if path and path.exists():
            art = json.loads(path.read_text())
            n, b = art["n"], art["commands"]["B"]
            records = ("the first CTA (IKeT's selection)" if "--enabled-cluster-config" in b else "every CTA"
                       ) if "iket.cli.main" in b else None
            rows.append({"kernel": "cutedsl_gemm", "arm": arm, "recorder": "iket", "records": records, "clock": False,
                         "overhead": art.get("overhead"), "ci95": art.get("overhead_ci95"),
                         "target": OFF_TARGET if arm == "off" else 0.01,
                         "samples": {"A": n["baseline"], "B": n["instrumented"]}, "median_ms": art.get("median_ms"),
                         "valid": art["valid"], "reasons": art["reasons"],
                         "artifact": str(path.relative_to(REPO) if path.is_relative_to(REPO) else path),
                         "measured": measured or _measured(art["started_utc"][:10], _device_txt(folder))})
    return rows


def _device_txt(folder: Path) -> str:
    """The device gpu-cutedsl.sh names on device.txt's first line (nvidia-smi's name, uuid, driver)."""
    lines = (folder / "device.txt").read_text().splitlines() if (folder / "device.txt").is_file() else []
    return lines[0].strip() if lines else "device not recorded"


def fold_rows(result: dict, part: dict) -> None:
    """Another call's kernel rows into `result`: each replaces the row of the same kernel and arm
    (or joins the table) and keeps its call's date and device in `measured`, its own where it has
    one (a file `measure` wrote: its device line already names its calls, name_calls)."""
    got = {(r["kernel"], r["arm"]): {**r, "measured": r.get("measured") or _measured(part["date"], part["device"])}
           for r in part["rows"]}
    rows = [got.pop((r["kernel"], r["arm"]), r) for r in result["rows"]]
    result["rows"] = rows + list(got.values())


def revalidate(result: dict, archive: Path) -> None:
    """Validate again, with this checkout's checks, the captures a `measure` call archived
    (gpu-perturbation.sh's captures.tar.gz: each recording arm's first capture and the manifests):
    each row's capture verdict becomes today's, marked `revalidated` with the date, so that a row keeps
    no rejection the checks no longer make, nor the reverse."""
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(archive) as t:
            t.extractall(tmp, filter="data")
        for r in result["rows"]:
            folder = Path(tmp) / _capture_folder(r["kernel"], r["arm"])
            manifest = Path(tmp) / f"{_arm_name(r['kernel'], r['arm'] == 'clock')}.manifest.json"
            sample = next((p for p in sorted(folder.iterdir()) if p.is_dir()), None) if folder.is_dir() else None
            if "capture" in r and sample and manifest.is_file():
                r["capture"] = {**validate_capture(sample, manifest), "revalidated": time.strftime("%Y-%m-%d")}


def fold_per_event(result: dict, probe_cost: Path | None) -> None:
    """bench/probe_cost/run.py's rows into the results (IKeT's figure on the same loop in each: its
    run --iket), with the date and device of their call (`per_event_measured`)."""
    got = json.loads(probe_cost.read_text()) if probe_cost and probe_cost.exists() else {"rows": []}
    result["per_event"] = got["rows"]
    result["per_event_measured"] = f"{got['date']}, {got['device']}" if got["rows"] else None


def _rounds(r: dict) -> str:
    """The per-event row's rounds (bench/probe_cost by_round), lowest to highest: the tool's choice's, then
    IKeT's; a dash where the file has none."""
    def span(v: list[float] | None) -> str:
        return f"{100 * min(v):+.2f} to {100 * max(v):+.2f}" if v else "—"
    got = r.get("rounds") or {}
    return f"{span(got.get('default'))} / {span(got.get('iket'))}"


def _sass_cell(r: dict, rec: str) -> str:
    """A recorder's per-event overhead with what it is (the tool's choice) and the SASS instructions
    its probe adds an event, where the results have them."""
    if rec in r.get("refused", {}):
        return "refused"
    if r.get(rec) is None:
        return "—"
    added = r.get("sass", {}).get(rec)
    notes = ([r["default_recorder"]] if rec == "default" and "default_recorder" in r else []) + ([f"{added['added']:g} SASS"] if added else [])
    return _pct(r.get(rec)) + (f" ({', '.join(notes)})" if notes else "")


def _sass_kinds(r: dict, rec: str = "default") -> str:
    """The SASS the tool's choice (or IKeT) adds an event, by opcode family (those of at least 0.1 an
    event); IKeT's with each clean loop's instructions an iteration."""
    s = r.get("sass", {}).get(rec)
    if not s:
        return "—"
    loops = f" ({s['cuda_clean']:g} / {s['cute_clean']:g})" if "cute_clean" in s else ""
    return f"{s['added']:g}: " + ", ".join(f"{f} {d:+g}" for f, d in s["kinds"].items() if abs(d) >= 0.1) + loops


def table(result: dict) -> str:
    """The cost table (docs/cost.md), in markdown, from a results file."""
    by = {(r["kernel"], r["arm"]): r for r in result["rows"]}
    kernels = list(dict.fromkeys(r["kernel"] for r in result["rows"]))
    cute = by.get(("cutedsl_gemm", "spec"), {}).get("records")  # what recorded under IKeT
    what = {k: v[3] for k, v in KERNELS.items()} | {
        "cutedsl_gemm": "CuTe DSL TMA + WGMMA GEMM 4096³ under IKeT" + (f", {cute}" if cute else "")}
    def cell(r: dict | None) -> str:
        """A row's overhead, interval and target; and its capture's verdict where validation refused it."""
        if r is None:
            return "—"
        verdict = r.get("capture", {}).get("verdict", "valid")
        return f"{_pct(r['overhead'])} {_ci(r['ci95'])} ({met(r)})" + ("" if verdict == "valid" else f", capture {verdict}")

    out = ["# What the probes cost", "",
           f"Generated by `python3 bench/perturbation/run.py table` from `bench/perturbation/results-h200.json` "
           f"({result['date']}; {result['device']}; each row names its device in the file). Each figure is an overhead against the clean kernel, measured "
           "side by side with `atrex-inject measure` (fresh processes, ABBA then BAAB), with its 95% interval and "
           "whether it meets its target in either direction (docs/design.md says why a recording faster than the "
           "clean kernel is not evidence either).", "",
           "| kernel (spec density) | recorder the tool chose | probes compiled in, off (±0.5%) | recording at the "
           "spec's density (target) | the same with `clock = true` |", "|---|---|---|---|---|"]
    for k in kernels:
        spec, off, clock = by.get((k, "spec")), by.get((k, "off")), by.get((k, "clock"))
        target = f" (±{100 * spec['target']:.0f}%)" if spec else ""
        same = spec is not None and spec.get("clock") and clock is None
        clock_cell = "the spec records it" if same else cell(clock) + (
            f", {clock['recorder']}" if clock and spec and clock["recorder"] != spec["recorder"] else "")
        out.append(f"| {what.get(k, k)} | {spec['recorder'] if spec else '—'} | {cell(off)} | {cell(spec)}{target} | "
                   f"{clock_cell} |")
    if result["per_event"]:
        out += ["", f"Per event, every warp recording, by loop shape (bench/probe_cost/results-h200.json, "
                    f"{result.get('per_event_measured') or 'its device in the file'}: NVIDIA IKeT's "
                    "`iket.mark` in every iteration of the same loops written in CuTe DSL, at its top for a loop-begin "
                    "row, at its bottom for a loop-end row, in the same call, clean and under run-iket, its "
                    "overhead against its own clean loop). Both sides time each launch with the launches queued "
                    "back to back (docs/measure.md), so each time is the GPU's: timed one launch at a time, a "
                    "start event fires on an idle GPU at once and the launch's host work was timed as the "
                    "kernel's, run-iket's included (IKeT's mark at the top of the FMA loop then cost +102 µs at "
                    "1024 iterations and +60 µs at 2048, not in proportion to its events: an H200 on "
                    "2026-12-04). Beside each "
                    "recorder's overhead, the SASS instructions its probe adds an event, read at build time from "
                    "the loop's SASS against the clean loop's (net: a probe that costs the loop some unrolling adds "
                    "its branches and counter updates too; a strip-mined trip's copy-out spread over its events); "
                    "IKeT's as the CuTe DSL compiles the loop under run-iket (which then patches the module it "
                    "loads); beside IKeT's, the rounds of the call, each against its own clean run, lowest to "
                    "highest, for the tool's choice and for IKeT (the medians pool them); "
                    "the last columns, by opcode family, for the tool's choice and for IKeT, with each "
                    "clean loop's instructions an iteration (nvcc's, the CuTe DSL's): the two sides time the same "
                    "loop where those agree:",
                "", "| loop | site | iterations | the tool's choice | global | staged | resident | hand-written lane-0 "
                    "store | store floor | IKeT | by round: the tool's choice / IKeT | SASS the tool's choice adds "
                    "an event | SASS IKeT adds an event (clean loop: nvcc / CuTe DSL) |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in result["per_event"]:
            out.append(f"| {r.get('what', r['loop'])} | {r['site']} | {r['iterations'] or '—'} | "
                       f"{_sass_cell(r, 'default')} | {_sass_cell(r, 'global')} | "
                       f"{_sass_cell(r, 'staged')} | {_sass_cell(r, 'resident')} | {_pct(r.get('hand_written'))} | "
                       f"{_pct(r.get('floor'))} | {_sass_cell(r, 'iket')} | {_rounds(r)} | {_sass_kinds(r)} | "
                       f"{_sass_kinds(r, 'iket')} |")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="compile each row's builds into WORK")
    b.add_argument("work", type=Path)
    b.add_argument("--kernels", default=",".join(KERNELS))
    m = sub.add_parser("measure", help="measure WORK's builds (GPU)")
    m.add_argument("work", type=Path)
    m.add_argument("--samples", type=int, default=8, help="fresh processes per arm and side (multiple of 4)")
    m.add_argument("--arms", default=",".join(ARMS))
    m.add_argument("--probe-cost", type=Path, help="bench/probe_cost/run.py --json output to fold in")
    m.add_argument("--cutedsl", type=Path, help="folder of the CuTe DSL GEMM's measure-off.json and measure-spec.json")
    m.add_argument("--json", type=Path, default=RESULTS)
    f = sub.add_parser("fold", help="fold another call's per-event and CuTe DSL figures into a results file")
    f.add_argument("--json", type=Path, default=RESULTS)
    f.add_argument("--probe-cost", type=Path)
    f.add_argument("--cutedsl", type=Path)
    f.add_argument("--rows", type=Path, help="another call's `measure` results file: its rows replace the same "
                                             "kernel's same arm; the file's date and device line are then written from its rows'")
    f.add_argument("--captures", type=Path, help="that call's captures.tar.gz: its captures validated again here "
                                                 "(after --rows), with this checkout's checks")
    t = sub.add_parser("table", help="write the cost table from a results file")
    t.add_argument("--json", type=Path, default=RESULTS)
    t.add_argument("--out", type=Path, default=TABLE)
    a = ap.parse_args()
    if a.cmd == "build":
        unknown = [k for k in a.kernels.split(",") if k not in KERNELS]
        if unknown:
            raise SystemExit(f"--kernels: {', '.join(unknown)} not among {', '.join(KERNELS)}")
        build(a.work, a.kernels.split(","))
        return 0
    if a.cmd == "fold":
        result = json.loads(a.json.read_text())
        if a.cutedsl:
            result["rows"] = [r for r in result["rows"] if r["kernel"] != "cutedsl_gemm"] + fold_cutedsl(a.cutedsl)
        if a.probe_cost:
            fold_per_event(result, a.probe_cost)
        if a.rows:
            fold_rows(result, json.loads(a.rows.read_text()))
        if a.captures:
            revalidate(result, a.captures)
        name_calls(result)
        a.json.write_text(json.dumps(result, indent=2) + "\n")
        return 0
    if a.cmd == "table":
        a.out.write_text(table(json.loads(a.json.read_text())))
        print(a.out.read_text())
        return 0
    result = measure(a.work, [x for x in a.arms.split(",") if x in ARMS], a.samples, a.probe_cost, a.cutedsl,
                     a.json)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    return 0 if all(r["valid"] for r in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
