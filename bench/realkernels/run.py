"""Real-kernel benchmark (issue 42): public kernels fetched at pinned versions (fetch.py, kernels.toml),
each run through the whole loop as a user would, on an H200, with one result row per kernel.

For each kernel, in its own work folder (a copy of its package's extracted sources, the harnesses and
the specs): build the clean harness; `apply --json` with the tool's recorder choice (the choice and
its evidence recorded); `check-sass --json` (ok, or its problems); build the instrumented harness;
measure clean against probes compiled in and off, then against recording at the spec's density
(bench/measuring.py: `atrex-inject measure`, ABBA then BAAB, fresh processes); `capture` one launch,
`validate --json`, `summary --json`; the spec with `[capture] clock = true` captured and validated
once more (its capture kept under --out, for clock fixtures); `revert`, and every file compared
with the fetched one. A step that fails or refuses is recorded with its reason and the kernel's
later steps that need it are skipped; the run goes on. Builds, applies and checks run in parallel;
the GPU steps one kernel at a time, within --budget seconds; the results file is written after each
kernel, so a run cut short keeps what it measured.

    python3 bench/realkernels/fetch.py                   (where PyPI is reachable; carry bench/realkernels/.src)
    python3 bench/realkernels/run.py [--only a,b] [--samples 8] [--budget 520] [--work DIR] [--out DIR]
        [--json bench/realkernels/results-h200.json] [--no-gpu | --prepare-only | --resume] [--no-clock]
    python3 bench/realkernels/run.py table [--json F] [--out docs/realkernels.md]
    python3 bench/realkernels/run.py merge PART.json [--json F]   (another device call's rows folded in, each
        row keeping the date and device it was measured on)
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(HERE))
from fetch import SRC, load_catalog  # noqa: E402
from measuring import OFF_TARGET, ci, device, measure_pair, met, pct, validate_capture  # noqa: E402

from atrex_inject.spec_table import KeyLines  # noqa: E402
from atrex_inject.spec_variant import capture_variant  # noqa: E402

RESULTS = HERE / "results-h200.json"
TABLE = REPO / "docs" / "realkernels.md"
ATREX = [sys.executable, "-m", "atrex_inject.cli"]
WARMUP, ITERATIONS = 10, 100  # per sample process: launches before timing, launches timed
CAPTURE_ARGS = ["--warmup", "3", "--iters", "3"]  # a capture run: the spec's skip 3 writes the 4th launch
STEP_TIMEOUT = 600  # seconds: one CLI step or one build


class Row:
    """One kernel's outcome, step by step: each step ok or not with its reason and seconds; a step
    whose prerequisite failed is not run (`skipped`)."""

    def __init__(self, kernel: dict):
        self.kernel = kernel
        self.data = {k: kernel[k] for k in ("name", "package", "backend", "runner", "target", "what")}
        self.data["steps"] = {}

    def ok(self, step: str) -> bool:
        return self.data["steps"].get(step, {}).get("ok", False)

    def step(self, name: str, fn, *needs: str):
        """Run fn() as step `name` unless a step it needs did not succeed; fn returns (ok, reason,
        extra fields) and any exception becomes the step's reason (never the run's crash)."""
        missing = [n for n in needs if not self.ok(n)]
        if missing:
            self.data["steps"][name] = {"ok": False, "skipped": True, "reason": f"not run: {', '.join(missing)} failed"}
            return None
        t0 = time.time()
        try:
            ok, reason, extra = fn()
        except Exception as e:  # noqa: BLE001 — a row records what went wrong; the run goes on
            ok, reason, extra = False, f"{type(e).__name__}: {e}", None
        self.data["steps"][name] = {"ok": ok, "reason": reason, "s": round(time.time() - t0, 1)}
        return extra


def _cli(*args: str, cwd: Path) -> tuple[int, dict | None, str]:
    """An atrex-inject command with --json: its exit status, its JSON (None if it printed none) and
    the last lines of its stderr."""
    cmd, *rest = args  # --json right after the command: a capture's arguments after `--` are the program's
    p = subprocess.run([*ATREX, cmd, "--json", *rest], cwd=cwd, capture_output=True, text=True, timeout=STEP_TIMEOUT)
    try:
        out = json.loads(p.stdout) if p.stdout.strip() else None
    except json.JSONDecodeError:
        out = None
    return p.returncode, out, p.stderr.strip()[-1500:]


def _why(rc: int, out: dict | None, err: str) -> str:
    if isinstance(out, dict) and out.get("error"):
        return f"exit {rc}: {out['error']}" + (f" (next: {out['hint']})" if out.get("hint") else "")
    return f"exit {rc}: {err.splitlines()[-1] if err else 'no output'}"


def stage(kernel: dict, packages: dict, folder: Path, clock: bool) -> Path:
    """A fresh work folder for one kernel: its packages' extracted sources, the harnesses, the specs
    (with a clock variant of its own name), `.atrex/` marking the project tree, and staged.json, the
    sha256 of every source and harness as copied (what revert must restore). Returns the spec."""
    shutil.rmtree(folder, ignore_errors=True)
    (folder / ".atrex").mkdir(parents=True)
    for pkg in [kernel["package"], *kernel.get("includes", [])]:
        if not (SRC / pkg).is_dir():
            raise FileNotFoundError(f"{SRC / pkg} is missing: run python3 bench/realkernels/fetch.py first")
        shutil.copytree(SRC / pkg, folder / ".src" / pkg)
    for sub in ("harness", "specs"):
        shutil.copytree(HERE / sub, folder / sub)
    # the sample protocol beside the harnesses, so a harness compiles as the spec's [build] unit too
    shutil.copy(REPO / "examples" / "cuda" / "harness.cuh", folder / "harness" / "harness.cuh")
    (folder / "staged.json").write_text(json.dumps(_digests(folder)))
    spec = folder / kernel["spec"]
    if kernel.get("capture"):  # a variant row: its base row's spec with [capture] keys of its own
        spec = spec_variant(spec, kernel["name"], kernel["capture"])
    if kernel.get("cta_limit"):  # a copy row (1) or a thinned one: its base row's spec with fewer CTAs recording
        spec = limited_variant(spec, kernel["name"], kernel["cta_limit"])
    return clock_variant(spec) if clock else spec


def clock_variant(spec: Path) -> Path:
    """The spec with `[capture] clock = true`, named `<name>_clock` (its own workspace)."""
    name = re.search(r'(?m)^name = "([^"]+)"', spec.read_text()).group(1) + "_clock"
    return spec_variant(spec, name, {"clock": True})


def spec_variant(spec: Path, name: str, keys: dict) -> Path:
    """The spec renamed `name` (a workspace of its own), `keys` set in its [capture] table (a key it
    already sets there takes the new value), written beside it as `<name>.toml`."""
    out = spec.with_name(f"{name}.toml")
    # json.dumps writes the TOML literal of the values a row sets: a string, an integer, a boolean
    out.write_text(capture_variant(spec.read_text(), name, [f"{k} = {json.dumps(v)}" for k, v in keys.items()]))
    return out


def limited_variant(spec: Path, name: str, limit: int) -> Path:
    """The spec renamed `name` with only the first `limit` CTAs of its selection recording: each
    site's `ctas` written as `{ stride = S, limit = N }`, its stride kept, so that every other CTA
    runs the instrumented copy's clean side. With one CTA, the copy's cost is measured apart from
    the recording's; with more, how the recording's cost grows with the CTAs that record. Written
    beside it as `<name>.toml`."""
    text = spec.read_text()
    sites, lines = tomllib.loads(text).get("site", []), KeyLines(text)
    rows = text.split("\n")
    for i in reversed(range(len(sites))):  # from the last site: an inserted line moves only the lines below it
        line = f"ctas = {{ stride = {(sites[i].get('ctas') or {}).get('stride', 1)}, limit = {limit} }}"
        at = lines.lines.get(("site", i, "ctas"))
        if at is not None:
            rows[at - 1] = line
        else:
            rows.insert(lines.headers[("site", i)], line)
    out = spec.with_name(f"{name}.toml")
    out.write_text(capture_variant("\n".join(rows), name, []))
    return out


def rows_of(catalog: dict) -> list[dict]:
    """kernels.toml's rows: each [[kernel]], then each [[variant]] expanded into a row a recorder:
    the base row's kernel, harness and spec with the variant's `warps` (and the recorder, but for
    "auto": the tool's choice) in [capture], named `<of>_<recorder>` ("auto": `<of>_warps`), or with
    `copy = true` the spec with one CTA recording (limited_variant), named `<of>_copy`, or with
    `ctas_limits` one row a limit, named `<of>_ctas<N>`; without the clock variant."""
    kernels = {k["name"]: k for k in catalog["kernel"]}
    rows = list(catalog["kernel"])
    for v in catalog.get("variant", []):
        base = kernels[v["of"]]
        limits = [1] if v.get("copy") else v.get("ctas_limits", [])  # one row a limit, the copy's being 1
        for n in limits:
            how = ("the copy alone: one CTA records, every other runs the copy's clean side" if n == 1 else
                   f"only the first {n} CTAs of the spec's selection record")
            rows.append({**base, "name": f"{v['of']}_{'copy' if n == 1 else f'ctas{n}'}", "variant_of": v["of"],
                         "cta_limit": n, "clock": False, "what": f"{base['what']} ({how}; the tool's choice)"})
        if limits:
            continue
        for rec in v["recorders"]:
            keys = {"warps": v["warps"], **({"recorder": rec} if rec != "auto" else {})}
            how = "the tool's choice" if rec == "auto" else f"the {rec} recorder"
            rows.append({**base, "name": f"{v['of']}_{'warps' if rec == 'auto' else rec}", "variant_of": v["of"],
                         "capture": keys, "clock": False,
                         "what": f"{base['what']} (warps = {v['warps']} given; {how})"})
    return rows


def build_flags(spec: Path) -> list[str]:
    """The spec's [build] nvcc_flags, include folders made absolute (they are relative to the spec)."""
    from atrex_inject.spec import load_spec  # noqa: PLC0415 — the package's own reading of the spec
    flags = load_spec(spec).backend_keys.nvcc_flags or ["-O3", "-gencode=arch=compute_90a,code=sm_90a", "-std=c++17"]
    return [f"-I{(spec.parent / f[2:]).resolve()}" if f.startswith("-I") and not Path(f[2:]).is_absolute() else f
            for f in flags]


def build(kernel: dict, folder: Path, spec: Path, out: Path, instrumented: bool) -> tuple[bool, str | None, None]:
    """nvcc the kernel's harness with the spec's flags (and the recorder's include folder when
    instrumented); a python harness has nothing to build."""
    if kernel["runner"] != "nvcc":
        return True, None, None
    inc = [f"-I{folder / 'harness'}", f"-I{REPO / 'examples' / 'cuda'}"]
    if instrumented:
        inc.append(f"-I{subprocess.run([*ATREX, 'include-dir'], capture_output=True, text=True).stdout.strip()}")
    p = subprocess.run(["nvcc", *build_flags(spec), *inc, "-o", str(out), str(folder / kernel["harness"])],
                       capture_output=True, text=True, timeout=STEP_TIMEOUT)
    if p.returncode != 0:
        errors = [ln for ln in p.stderr.splitlines() if "error" in ln] or p.stderr.splitlines()[-1:]
        return False, f"nvcc exit {p.returncode}: {' | '.join(errors[:3])[:1200]}", None
    return True, None, None


def program(kernel: dict, folder: Path, binary: Path) -> list[str]:
    """The argv that runs the kernel's harness from `folder` (its build, or python3 and the harness)."""
    head = [str(binary)] if kernel["runner"] == "nvcc" else [sys.executable, str(folder / kernel["harness"])]
    return [*head, "--warmup", "{warmup}", "--iters", "{iterations}"]


def concrete(argv: list[str], warmup: str, iters: str) -> list[str]:
    return [a.replace("{warmup}", warmup).replace("{iterations}", iters) for a in argv]


def sass_verdict(rc: int, out: dict | None) -> str:
    """check-sass's word: "keeps" (exit 0), "another kernel" (exit 1), "unsure" (where it says so, or
    could not decide: any other outcome)."""
    said = (out or {}).get("verdict")
    if said in ("keeps", "another kernel", "unsure"):
        return said
    return {0: "keeps", 1: "another kernel"}.get(rc, "unsure")


def prepare(kernel: dict, packages: dict, work: Path) -> tuple[Row, dict]:
    """The CPU part of a kernel's loop: stage, build clean, apply, check-sass, build instrumented;
    then the clock variant applied and built in a folder of its own (both reverted by finish). Returns the row and
    the paths its GPU steps use."""
    r = Row(kernel)
    name = kernel["name"]
    folder, cfolder = work / name, work / f"{name}-clock"
    ctx = {"folder": folder, "clean": folder / "clean.bin", "inst": folder / "instrumented.bin"}
    if kernel.get("clock", True):
        ctx |= {"cfolder": cfolder, "cinst": cfolder / "instrumented.bin"}
    ctx["spec"] = r.step("stage", lambda: (True, None, stage(kernel, packages, folder, False)))
    r.step("build_clean", lambda: build(kernel, folder, ctx["spec"], ctx["clean"], False), "stage")
    if kernel["runner"] != "nvcc":  # the clean side of a python harness: a copy that is never applied
        ctx["clean_folder"] = r.step("stage_clean", lambda: (True, None, stage(kernel, packages, work / f"{name}-clean",
                                                                               False).parents[1]), "stage")

    def apply():
        rc, out, err = _cli("apply", str(ctx["spec"]), cwd=folder)
        if rc == 0 and out:
            r.data["choice"] = out.get("recorder")
            r.data["apply_warnings"] = out.get("warnings", [])
            r.data["launches"] = {"captured": len(out.get("launches", [])), "not_captured": out.get("not_captured", [])}
        return rc == 0, None if rc == 0 else _why(rc, out, err), None
    r.step("apply", apply, "stage")

    def check_sass():
        rc, out, err = _cli("check-sass", str(ctx["spec"]), cwd=folder)
        verdict = sass_verdict(rc, out)
        r.data["check_sass"] = {"exit": rc, "verdict": verdict, "problems": (out or {}).get("problems", []),
                                "reason": None if rc in (0, 1) else _why(rc, out, err)}
        return rc in (0, 1), r.data["check_sass"]["reason"], None
    r.step("check_sass", check_sass, "apply")
    r.step("build_instrumented", lambda: build(kernel, folder, ctx["spec"], ctx["inst"], True), "apply")
    if not kernel.get("clock", True):
        return r, ctx

    def clock_apply():
        ctx["cspec"] = stage(kernel, packages, cfolder, True)
        rc, out, err = _cli("apply", str(ctx["cspec"]), cwd=cfolder)
        r.data["clock_choice"] = (out or {}).get("recorder")
        return rc == 0, None if rc == 0 else _why(rc, out, err), None
    r.step("clock_apply", clock_apply, "stage")
    r.step("clock_build", lambda: build(kernel, cfolder, ctx["cspec"], ctx["cinst"], True), "clock_apply")
    return r, ctx


def gpu_steps(r: Row, ctx: dict, samples: int, out_dir: Path) -> None:
    """Measure off and recording, capture one launch, validate, summary; the clock variant's capture."""
    if not r.ok("stage"):
        return
    kernel, folder, name = r.kernel, ctx["folder"], r.kernel["name"]
    clean_folder = ctx.get("clean_folder", folder)
    clean, inst = program(kernel, clean_folder, ctx["clean"]), program(kernel, folder, ctx["inst"])
    manifest = folder / ".atrex" / ctx["spec"].stem / "manifest.json"
    built = ("build_clean", "build_instrumented") + (("stage_clean",) if "clean_folder" in ctx else ())

    def arm(which: str):
        cap = folder / f"measure-{which}-captures" if which == "spec" else None
        (out_dir / "measure").mkdir(exist_ok=True)
        m = measure_pair(clean, inst, WARMUP, ITERATIONS, samples, out_dir / "measure" / f"{name}-{which}.json", cap,
                         manifest, timeout_s=120.0)
        r.data[which] = {**m, "target": OFF_TARGET if which == "off" else kernel["target"]}
        return m["valid"], "; ".join(m["reasons"]) or None, None
    r.step("measure_off", lambda: arm("off"), *built)
    r.step("measure_spec", lambda: arm("spec"), *built)

    def capture(spec: Path, cwd: Path, argv: list[str], dest: Path):
        shutil.rmtree(dest, ignore_errors=True)
        rc, out, err = _cli("capture", "--spec", str(spec), "--out", str(dest), "--", *argv, cwd=cwd)
        return rc == 0, None if rc == 0 else _why(rc, out, err), None
    cap = out_dir / "captures" / name
    r.step("capture", lambda: capture(ctx["spec"], folder, concrete(inst, *CAPTURE_ARGS[1::2]), cap),
           "build_instrumented")

    def validate():
        rc, out, err = _cli("validate", str(cap), cwd=folder)
        r.data["validate"] = {"verdict": (out or {}).get("verdict"), "exit": rc,
                              "failed": [c["name"] for c in (out or {}).get("checks", []) if not c.get("ok")]}
        return rc == 0, None if rc == 0 else _why(rc, out, err) if not out or "error" in out else \
            f"rejected: {', '.join(r.data['validate']['failed'])}", None
    r.step("validate", validate, "capture")

    def summary():
        rc, out, err = _cli("summary", str(cap), cwd=folder)
        r.data["summary"] = out
        return rc == 0, None if rc == 0 else _why(rc, out, err), None
    r.step("summary", summary, "capture")

    if "cfolder" not in ctx or not kernel.get("clock", True):
        return
    ccap = out_dir / "clock-captures" / name
    cinst = program(kernel, ctx["cfolder"], ctx["cinst"])
    r.step("clock_capture", lambda: capture(ctx["cspec"], ctx["cfolder"], concrete(cinst, *CAPTURE_ARGS[1::2]), ccap),
           "clock_build")

    def clock_validate():
        v = validate_capture(ccap, ctx["cfolder"] / ".atrex" / ctx["cspec"].stem / "manifest.json")
        r.data["clock_validate"] = v
        return v["verdict"] != "rejected", None if v["verdict"] != "rejected" else \
            f"rejected: {', '.join(v['failed'])}", None
    r.step("clock_validate", clock_validate, "clock_capture")


def finish(r: Row, ctx: dict) -> None:
    """revert the spec and its clock variant, then every file of their work folders' sources and
    harnesses compared with what was staged."""
    def revert(spec: Path):
        folder = spec.parents[1]
        rc, out, err = _cli("revert", str(spec), cwd=folder)
        if rc != 0:
            return False, _why(rc, out, err), None
        staged, now = json.loads((folder / "staged.json").read_text()), _digests(folder)
        changed = sorted(p for p in staged.keys() | now.keys() if staged.get(p) != now.get(p))
        return not changed, f"not byte-exact after revert: {', '.join(changed[:5])}" if changed else None, None
    r.step("revert", lambda: revert(ctx["spec"]), "apply")
    if "cspec" in ctx:
        r.step("clock_revert", lambda: revert(ctx["cspec"]), "clock_apply")


def _digests(folder: Path) -> dict[str, str]:
    """sha256 of every file of the folder's fetched sources and harnesses, by relative path."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for sub in (".src", "harness") for p in sorted((folder / sub).rglob("*")) if p.is_file()}


def environment(catalog: dict, samples: int) -> dict:
    """What the results were measured on: date, device (name, UUID, driver), nvcc, packages."""
    name, uuid, driver = ([s.strip() for s in device().split(",")] + ["unknown"] * 3)[:3]
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    return {"date": time.strftime("%Y-%m-%d"), "device": name, "uuid": uuid, "driver": driver,
            "nvcc": nvcc[-1] if nvcc else "unknown",
            "packages": {k: {f: v[f] for f in ("dist", "version", "wheel", "sha256")} for k, v in catalog["package"].items()},
            "settings": {"samples": samples, "warmup": WARMUP, "iterations": ITERATIONS}, "rows": []}


def prepared(kernel: dict, packages: dict, work: Path, resume: bool) -> tuple[Row, dict]:
    """The kernel's CPU part: as an earlier `--prepare-only` call left it in WORK (with --resume),
    else done now; kept in WORK/<name>/row.json either way. A resumed kernel's instrumented builds
    are compiled again: the recorder's header is compiled into them, not into the applied sources,
    and it may have changed since the sources were applied (or the call may run on another host)."""
    state = work / kernel["name"] / "row.json"
    if resume and state.is_file():
        saved = json.loads(state.read_text())
        r = Row(kernel)
        r.data = saved["data"]
        ctx = {k: Path(v) for k, v in saved["ctx"].items()}
        r.step("build_instrumented", lambda: build(kernel, ctx["folder"], ctx["spec"], ctx["inst"], True), "apply")
        if "cspec" in ctx:
            r.step("clock_build", lambda: build(kernel, ctx["cfolder"], ctx["cspec"], ctx["cinst"], True),
                   "clock_apply")
        return r, ctx
    r, ctx = prepare(kernel, packages, work)
    if state.parent.is_dir():
        state.write_text(json.dumps({"data": r.data, "ctx": {k: str(v) for k, v in ctx.items()}}, indent=1))
    return r, ctx


def run(only: list[str] | None, samples: int, budget: float, work: Path, out_dir: Path, results: Path,
        gpu: bool, prepare_only: bool = False, resume: bool = False, clock: bool = True) -> dict:
    """Every kernel's CPU part in parallel, then (with gpu) each kernel's GPU steps and revert in turn,
    the results file rewritten after each. prepare_only stops before the GPU steps and leaves the
    sources applied for a later call with resume (a device call each: the builds of the CuTe GEMM
    alone take minutes). Without clock, no row's clock variant is applied or built (check-sass run
    again after its rules changed needs none)."""
    t0 = time.time()
    catalog = load_catalog()
    kernels = [k if clock else {**k, "clock": False} for k in rows_of(catalog) if not only or k["name"] in only]
    result = environment(catalog, samples)
    work.mkdir(parents=True, exist_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max(1, min(len(kernels), os.cpu_count() or 2))) as pool:
        rows = list(pool.map(lambda k: prepared(k, catalog["package"], work, resume), kernels))
    print(f"prepared {len(rows)} kernels in {time.time() - t0:.0f} s", flush=True)
    for r, ctx in rows:
        if prepare_only:
            pass
        elif gpu and time.time() - t0 < budget:
            gpu_steps(r, ctx, samples, out_dir)
        elif gpu:
            r.data["steps"]["measure_off"] = {"ok": False, "reason": f"time budget of {budget:.0f} s spent: rerun with "
                                                                     f"--only {r.kernel['name']}"}
        if not prepare_only:
            finish(r, ctx)
            (work / r.kernel["name"] / "row.json").unlink(missing_ok=True)  # reverted: nothing left to resume
        result["rows"].append(r.data)
        print(line(r.data), flush=True)
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(json.dumps(result, indent=2) + "\n")
    return result


def line(d: dict) -> str:
    """One row as the run prints it."""
    failed = [f"{k}: {v['reason']}" for k, v in d["steps"].items() if not v["ok"] and not v.get("skipped")]
    cs = d.get("check_sass", {}).get("verdict", "-")
    return (f"{d['name']:<22}{(d.get('choice') or {}).get('recorder', '-'):<9}{cs:<15}"
            f"off {pct(d.get('off', {}).get('overhead')):>8}  rec {pct(d.get('spec', {}).get('overhead')):>8} "
            f"{ci(d.get('spec', {}).get('ci95')):>18}  validate {d.get('validate', {}).get('verdict') or '-'}"
            + (f"\n    {' | '.join(failed)}" if failed else ""))


def within(d: dict) -> str | None:
    """"within" / "beyond" the target as measured (the point estimate), None where not measured."""
    s = d.get("spec")
    if not s or s.get("overhead") is None or not s.get("valid"):
        return None
    return "within" if abs(s["overhead"]) <= d["target"] else "beyond"


def _where(result: dict) -> dict:
    """The date and device a results file's rows were measured on (its environment)."""
    return {k: result[k] for k in ("date", "device", "uuid", "driver")}


def merge(result: dict, part: dict) -> dict:
    """The rows of another call's results file (`part`) in place of the same kernels' rows, in
    kernels.toml's order; each row keeps where it was measured (`measured`), so that rows of
    several device calls make one file. The packages are both files' (a CuTe DSL part names its own);
    the other fields (settings) are the part's."""
    tag = lambda r, env: {**r, "measured": r.get("measured") or _where(env)}  # noqa: E731
    rows = {r["name"]: tag(r, result) for r in result["rows"]} | {r["name"]: tag(r, part) for r in part["rows"]}
    order = [k["name"] for k in rows_of(load_catalog())]
    return {**part, "packages": {**result.get("packages", {}), **part.get("packages", {})},
            "rows": sorted(rows.values(), key=lambda r: order.index(r["name"]) if r["name"] in order else 1e9)}


def table(result: dict, rejudged: dict | None = None) -> str:
    """docs/realkernels.md: every row, met or not, and check-sass's word against the measurement."""
    out = ["# Real kernels on the H200", "",
           "Generated by `python3 bench/realkernels/run.py table` from `bench/realkernels/results-h200.json` "
           f"({_measured_on(result)}; {result['nvcc']}). "
           "Each kernel is public code fetched at a pinned version (bench/realkernels/kernels.toml), launched by a "
           "harness of ours that checks its output, and run through the whole loop with the spec in "
           "bench/realkernels/specs/: apply with the tool's recorder choice, check-sass, probes compiled in and off "
           "(target ±0.5%) and recording at the spec's density (target ±2%, GEMM mainloops ±1%) against the clean "
           "build (`atrex-inject measure`, fresh processes, ABBA then BAAB, with 95% intervals), one capture "
           "validated, the same with `clock = true`, revert byte-exact. The command: "
           "[bench/RESULTS.md](../bench/RESULTS.md).", "",
           "Packages: " + "; ".join(dict.fromkeys(f"{p['dist']} {p['version']} (sha256 {p['sha256'][:12]}…)"
                                                  for p in result["packages"].values())) + ".", "",
           "| kernel | recorder (how) | check-sass | probes off | recording (target) | capture | clock capture | "
           "revert | what failed |", "|---|---|---|---|---|---|---|---|---|"]
    catalog = {k["name"]: k for k in rows_of(load_catalog())}  # kernels.toml says which rows are variants
    copies = [d for d in result["rows"] if catalog.get(d["name"], {}).get("cta_limit") == 1]
    variants = [d for d in result["rows"] if catalog.get(d["name"], {}).get("variant_of") and d not in copies]
    rows = [d for d in result["rows"] if d not in variants and d not in copies]
    heads = {id((variants or [None])[0]):
             "Beyond the table: rows measured beyond their target, again with the kernel's block size given "
             "(`[capture] warps`, which their specs leave out, so staged and resident rings were no candidates of "
             "the recorder choice), with the tool's choice or a recorder forced, or with only the first N CTAs of "
             "the spec's selection recording (`<row>_ctas<N>`) (kernels.toml `[[variant]]`):",
             id((copies or [None])[0]):
             "The copy alone (`<row>_copy`, kernels.toml `[[variant]] copy = true`): each row's spec with only its "
             "first CTA recording (every site's `ctas.limit = 1`), with the tool's choice, so that every other CTA "
             "runs the instrumented copy's clean side. Its overhead is what the copy costs apart from the "
             "recording, and what check-sass judges (does the copy keep the clean kernel?):"}
    for d in rows + variants + copies:
        if id(d) in heads:
            out += ["", heads[id(d)], "",
                    "| row | recorder (how) | check-sass | probes off | recording (target) | capture | clock capture | "
                    "revert | what failed |", "|---|---|---|---|---|---|---|---|---|"]
        cell = lambda r: "—" if not r else f"{pct(r.get('overhead'))} {ci(r.get('ci95'))} ({met(r)}){_fewer(r)}"  # noqa: E731
        choice = d.get("choice") or {}
        failed = " ".join("; ".join(f"{k}: {v['reason']}" for k, v in d["steps"].items()
                                    if not v["ok"] and not v.get("skipped")).split()).replace("|", "\\|")  # one line a row
        st = d["steps"]
        held = ", registers held to the clean kernel's" if choice.get("max_registers") else ""
        out.append(f"| {d['name']}: {d['what']} | {choice.get('recorder', '—')}{held} ({choice.get('how', '—')}) | "
                   f"{d.get('check_sass', {}).get('verdict', '—')} | {cell(d.get('off'))} | {cell(d.get('spec'))} "
                   f"(±{100 * d['target']:.0f}%) | {d.get('validate', {}).get('verdict') or '—'} | "
                   f"{(d.get('clock_validate') or {}).get('verdict') or '—'} | "
                   f"{'byte-exact' if st.get('revert', {}).get('ok') else 'FAILED' if 'revert' in st else '—'} | "
                   f"{failed or '—'} |")
    said = {d["name"]: d.get("check_sass", {}).get("verdict") for d in rows}
    out += _confusion(rows, said, "check-sass's word when the run was made")
    if variants:
        out += _confusion(variants, {d["name"]: d.get("check_sass", {}).get("verdict") for d in variants},
                          "check-sass's word on the rows beyond the table (each recorder's build of its kernel)")
    if copies:
        out += _confusion(copies, {d["name"]: d.get("check_sass", {}).get("verdict") for d in copies},
                          "check-sass's word on the copy alone (one CTA recording)")
        out += _split(rows, copies, catalog)
    if rejudged:
        # a word on another build is no word on the measured one: a row whose recorder the choice now
        # makes otherwise is left out of the counts and named
        build = lambda d: ((d.get("choice") or {}).get("recorder"), (d.get("choice") or {}).get("max_registers"))  # noqa: E731
        measured = {d["name"]: build(d) for d in result["rows"]}
        again = {d["name"]: d.get("check_sass", {}).get("verdict") for d in rejudged["rows"]
                 if build(d) == measured.get(d["name"])}
        moved = [f"{d['name']} (measured with {measured[d['name']][0]}, now {build(d)[0]}"
                 f"{', registers held' if build(d)[1] else ''})" for d in rejudged["rows"]
                 if d["name"] in measured and build(d) != measured[d["name"]]]
        where = (f"(`run.py --no-gpu --no-clock`, {rejudged['date']}: bench/realkernels/rejudged.json), against the "
                 "same measurements")
        out += _confusion(rows, again, f"check-sass's word today on the same kernels, builds and specs {where}")
        if variants:
            out += _confusion(variants, again, f"check-sass's word today on the rows beyond the table {where}")
        if moved:
            out += ["", "Left out of these counts, because the recorder choice now makes another build than the one "
                        "measured: " + "; ".join(moved) + "."]
    return "\n".join(out) + "\n"


def _split(rows: list[dict], copies: list[dict], catalog: dict) -> list[str]:
    """Where each row's overhead is: its recording against its copy alone (point estimates, each
    against its own clean build, so from device calls that may differ)."""
    base = {d["name"]: d for d in rows}
    out = ["", "Where the overhead is: each row's recording against its copy alone (point estimates; what is "
               "left after the copy is the recording's; the two may come from different device calls, each against "
               "its own clean build: the rows above name theirs):", "",
           "| row | recording | the copy alone | the recording less the copy | target |", "|---|---|---|---|---|"]
    for c in copies:
        d = base.get(catalog[c["name"]]["variant_of"])
        rec, copy = ((d or {}).get("spec") or {}).get("overhead"), (c.get("spec") or {}).get("overhead")
        if d is None or rec is None or copy is None:
            continue
        out.append(f"| {d['name']} | {pct(rec)} | {pct(copy)} | {pct(rec - copy)} | ±{100 * d['target']:.0f}% |")
    return out


def _fewer(m: dict) -> str:
    """The processes a measurement took, where fewer than the default 8+8 (a shorter device call)."""
    n = m.get("samples") or {}
    a, b = n.get("A"), n.get("B")
    return f", {a}+{b} processes" if a and b and (a, b) != (8, 8) else ""


def _measured_on(result: dict) -> str:
    """Where the rows were measured: one device call, or several (each naming its rows)."""
    calls: dict[tuple, list[str]] = {}
    for r in result["rows"]:
        m = r.get("measured") or _where(result)
        calls.setdefault((m["date"], m["device"], m["uuid"], m["driver"]), []).append(r["name"])
    if len(calls) <= 1:
        return f"{result['date']}; {result['device']} {result['uuid']}, driver {result['driver']}"
    return "; ".join(f"{', '.join(names)} on {date}, {dev} {uuid}, driver {drv}"
                     for (date, dev, uuid, drv), names in calls.items())


def _confusion(rows: list[dict], said: dict, title: str) -> list[str]:
    """check-sass's word (`said`: kernel -> verdict) against each row's measured recording."""
    words = ("keeps", "another kernel", "unsure")
    counts = {(w, m): 0 for w in words for m in ("within", "beyond", None)}
    for d in rows:
        if said.get(d["name"]) in words:
            counts[(said[d["name"]], within(d))] += 1
    out = ["", f"{title}, against the measured recording (the point estimate against the row's target, either "
               "sign):", "", "| check-sass said | measured within target | measured beyond target | not measured |",
           "|---|---|---|---|"]
    return out + [f"| {w} | {counts[(w, 'within')]} | {counts[(w, 'beyond')]} | {counts[(w, None)]} |" for w in words]


def main() -> int:
    if sys.argv[1:2] == ["merge"]:
        ap = argparse.ArgumentParser(description="fold another device call's rows into the results file")
        ap.add_argument("part", type=Path, help="the other call's results file")
        ap.add_argument("--json", type=Path, default=RESULTS)
        a = ap.parse_args(sys.argv[2:])
        try:
            merged = merge(json.loads(a.json.read_text()), json.loads(a.part.read_text()))
        except (OSError, ValueError, KeyError) as e:
            print(f"merge: {e}: give two results files written by run.py", file=sys.stderr)
            return 2
        a.json.write_text(json.dumps(merged, indent=2) + "\n")
        print(f"{a.json}: {len(merged['rows'])} rows")
        return 0
    if sys.argv[1:2] == ["table"]:
        ap = argparse.ArgumentParser(description="write docs/realkernels.md from a results file")
        ap.add_argument("--json", type=Path, default=RESULTS)
        ap.add_argument("--out", type=Path, default=TABLE)
        a = ap.parse_args(sys.argv[2:])
        if not a.json.is_file():
            print(f"{a.json}: no results file; run python3 bench/realkernels/run.py on the GPU host first", file=sys.stderr)
            return 2
        again = HERE / "rejudged.json"  # check-sass run again here after its rules changed (--no-gpu)
        a.out.write_text(table(json.loads(a.json.read_text()), json.loads(again.read_text()) if again.is_file() else None))
        print(a.out.read_text())
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="kernels to run, comma-separated (default: every row of kernels.toml)")
    ap.add_argument("--samples", type=int, default=8, help="fresh processes per arm and side (a multiple of 4)")
    ap.add_argument("--budget", type=float, default=520, help="seconds after which no kernel's GPU steps start")
    ap.add_argument("--work", type=Path, default=HERE / "work", help="work folder (emptied per kernel)")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", HERE / "work" / "out")),
                    help="where the capture folders are kept (default $OUT)")
    ap.add_argument("--json", type=Path, help=f"results file (default {RESULTS.relative_to(REPO)}; with --no-gpu, "
                                               "results-nogpu.json in the work folder)")
    ap.add_argument("--no-gpu", action="store_true", help="stage, build, apply, check-sass and revert only")
    ap.add_argument("--prepare-only", action="store_true",
                    help="stage, build, apply and check-sass, leaving the sources applied in --work for --resume")
    ap.add_argument("--resume", action="store_true", help="take the kernels a --prepare-only call left in --work")
    ap.add_argument("--no-clock", action="store_true", help="leave out each row's clock variant (with --no-gpu: "
                                                            "check-sass again, as for bench/realkernels/rejudged.json)")
    a = ap.parse_args()
    names = [k["name"] for k in rows_of(load_catalog())]
    only = a.only.split(",") if a.only else None
    if only and [n for n in only if n not in names]:
        print(f"--only: {', '.join(n for n in only if n not in names)} not among {', '.join(names)}", file=sys.stderr)
        return 2
    if a.samples < 4 or a.samples % 4:
        print(f"--samples {a.samples}: give a multiple of 4 (ABBA then BAAB blocks)", file=sys.stderr)
        return 2
    results = a.json or (a.work / "results-nogpu.json" if a.no_gpu or a.prepare_only else RESULTS)
    result = run(only, a.samples, a.budget, a.work.resolve(), a.out.resolve(), results, not a.no_gpu, a.prepare_only,
                 a.resume, not a.no_clock)
    return 0 if all(all(s["ok"] for s in d["steps"].values()) for d in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
