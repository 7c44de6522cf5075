"""The CuTe DSL rows of the real-kernel benchmark (cutedsl.toml): fetch their packages at the pinned
versions, and run each row through the loop under NVIDIA IKeT as a user would, one CLI call a step:
a clean run of the runner, apply, check-iket (the probes are in the compiled kernel), measure with
probes compiled in and off, measure recording (the runner under run-iket as capture runs it, with
the tracker of one earlier run), capture at the small shape, validate, summary, revert (byte-exact
against the fetched file). A step that fails is recorded with its reason and the steps that need
it are not run.

    python3 bench/realkernels/cutedsl_rows.py fetch           (here, with package access: .src/)
    python3 bench/realkernels/cutedsl_rows.py run OUT [--kernels a,b] [--samples 8]   (the GPU host)
    python3 bench/realkernels/cutedsl_rows.py results OUT [--samples 8]  (OUT/results-h200.json for run.py merge)

`run` writes OUT/<row>.json, the row as run_row returns it (kernels.toml's result rows: name, what,
target, `steps` each ok or not with its reason, `off` and `spec` the two measurements, `validate`,
`summary`), and each row's log, measurements and capture under OUT/<row>/. The GPU host needs the
CuTe DSL bundle and the wheels `fetch` keeps in .src/wheels/ installed (scripts/gpu-realkernels-cutedsl.sh).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ROWS = HERE / "cutedsl.toml"
SRC = HERE / ".src"
ATREX = [sys.executable, "-m", "atrex_inject.cli"]
WARMUP, ITERATIONS = 10, 200  # per sample process: launches before timing, launches timed
OFF_TARGET = 0.005  # probes compiled in and off: within ±0.5%
STEP_TIMEOUT = 600  # seconds for one CLI call (a measurement's samples have their own --timeout)


@dataclass(frozen=True)
class Package:
    name: str
    dist: str
    version: str
    wheel: str
    sha256: str
    files: tuple[str, ...]  # globs of the members extracted into .src/<name>/
    pip_args: tuple[str, ...]
    install: bool  # the wheel kept in .src/wheels/ and installed on the GPU host instead


@dataclass(frozen=True)
class Kernel:
    name: str
    package: Package
    harness: Path
    spec: Path
    target: float
    what: str


def _field(table: dict, key: str, kind: type | tuple, where: str):
    v = table.get(key)
    if not isinstance(v, kind) or isinstance(v, bool):
        raise ValueError(f"{where}: field {key!r} must be {'a string' if kind is str else 'a number'} (got {v!r})")
    return v


def load(path: Path = ROWS) -> tuple[dict[str, Package], list[Kernel]]:
    """The packages and rows of cutedsl.toml; a missing or mistyped field exits 2 naming it."""
    try:
        doc = tomllib.loads(path.read_text())
        packages = {n: Package(n, *(_field(p, f, str, f"[package.{n}]") for f in ("dist", "version", "wheel", "sha256")),
                               tuple(p.get("files", ())), tuple(p.get("pip_args", ())), p.get("install") is True)
                    for n, p in doc.get("package", {}).items()}
        kernels = []
        for i, k in enumerate(doc.get("kernel", [])):
            where = f"[[kernel]] number {i + 1}"
            pkg = _field(k, "package", str, where)
            if pkg not in packages:
                raise ValueError(f"{where}: package {pkg!r} has no [package.{pkg}] table")
            kernels.append(Kernel(_field(k, "name", str, where), packages[pkg], HERE / _field(k, "harness", str, where),
                                  HERE / _field(k, "spec", str, where), float(_field(k, "target", (int, float), where)),
                                  _field(k, "what", str, where)))
    except (OSError, ValueError) as e:  # tomllib.TOMLDecodeError is a ValueError
        print(f"error: {path}: {e}: fix it there", file=sys.stderr)
        sys.exit(2)
    return packages, kernels


def fetch(packages: dict[str, Package], cache: Path | None = None) -> None:
    """Each package's pinned wheel from the registry (pip download), its sha256 checked; its `files`
    extracted into .src/<name>/, or, with `install`, the wheel kept in .src/wheels/ for the GPU host.
    The download cache is a temporary folder unless given: .src/ is what travels to the GPU host."""
    if cache is None:
        with tempfile.TemporaryDirectory(prefix="atrex-wheels-") as tmp:
            return fetch(packages, Path(tmp))
    for p in packages.values():
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", *p.pip_args,
                        "-d", str(cache), f"{p.dist}=={p.version}"], check=False)
        wheel = cache / p.wheel
        sha = hashlib.sha256(wheel.read_bytes()).hexdigest() if wheel.is_file() else "(not downloaded)"
        if sha != p.sha256:
            print(f"error: {ROWS.name} [package.{p.name}]: {p.wheel} has sha256 {sha}, the pin is {p.sha256}: check "
                  "the network and the pin", file=sys.stderr)
            sys.exit(2)
        if p.install:
            (SRC / "wheels").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(wheel, SRC / "wheels" / p.wheel)
            continue
        dest = SRC / p.name
        shutil.rmtree(dest, ignore_errors=True)
        with zipfile.ZipFile(wheel) as z:
            members = [m for m in z.namelist() if wanted(m, p.files)]
            for m in members:
                z.extract(m, dest)
        print(f"{p.dist} {p.version}: {len(members)} files in {dest.relative_to(REPO)}")


def wanted(member: str, patterns: tuple[str, ...]) -> bool:
    """Whether a wheel's member matches one of the globs, one path component per `*`."""
    path = PurePosixPath(member)
    return any(path.match(g) and len(path.parts) == len(PurePosixPath(g).parts) for g in patterns)


class Row:
    """One row's outcome as kernels.toml's rows record it: each step ok or not, with its reason and
    seconds; a step whose prerequisite failed is not run."""

    def __init__(self, k: Kernel, log: Path):
        self.data = {"name": k.name, "package": k.package.name, "version": k.package.version, "backend": "cutedsl",
                     "runner": "python", "target": k.target, "what": k.what,
                     "choice": {"recorder": "iket", "how": "NVIDIA IKeT (the cutedsl backend)"}, "steps": {}}
        self.log = log

    def ok(self, step: str) -> bool:
        return self.data["steps"].get(step, {}).get("ok", False)

    def step(self, name: str, fn, *needs: str) -> None:
        """fn() -> (ok, reason), run unless a step it needs failed; what it raises is its reason."""
        missing = [n for n in needs if not self.ok(n)]
        if missing:
            self.data["steps"][name] = {"ok": False, "skipped": True, "reason": f"not run: {', '.join(missing)} failed"}
            return
        t0 = time.time()
        try:
            ok, reason = fn()
        except Exception as e:  # noqa: BLE001 - a row records what went wrong; the other rows go on
            ok, reason = False, f"{type(e).__name__}: {e}"
        self.data["steps"][name] = {"ok": ok, "reason": reason, "s": round(time.time() - t0, 1)}

    def run(self, argv: list[str]) -> subprocess.CompletedProcess:
        """argv, its output appended to the row's log under the command line; past STEP_TIMEOUT: exit 124."""
        with open(self.log, "a") as f:
            f.write(f"$ {' '.join(argv)}\n")
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=STEP_TIMEOUT)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or ""
            p = subprocess.CompletedProcess(argv, 124, out, f"timed out after {STEP_TIMEOUT} s")
        with open(self.log, "a") as f:
            f.write(f"{p.stdout}{p.stderr}(exit {p.returncode})\n")
        return p

    def atrex(self, *args: str, cmd: list[str] = ()) -> tuple[int, dict, str | None]:
        """One CLI call with --json: (exit status, its JSON, why it failed). The JSON is the last object
        its stdout starts on a line of its own (the program a command runs prints first)."""
        p = self.run([*ATREX, *args, "--json", *(["--", *cmd] if cmd else [])])
        text, out = "\n" + p.stdout, None
        for at in reversed([i + 1 for i in range(len(text)) if text.startswith("\n{", i)]):
            try:
                out = json.loads(text[at:])
                break
            except json.JSONDecodeError:
                continue
        if p.returncode == 0:
            return 0, out or {}, None
        why = f"exit {p.returncode}: " + (f"{out['error']} (next: {out.get('hint')})" if out and "error" in out
                                          else (p.stderr or p.stdout).strip()[-600:])
        return p.returncode, out or {}, why


def _measured(art_path: Path, target: float) -> dict:
    try:
        art = json.loads(art_path.read_text())
    except (OSError, json.JSONDecodeError):
        art = {"valid": False, "reasons": [f"{art_path.name} was not written (the row's log.txt says why)"]}
    n = art.get("n", {})
    return {"overhead": art.get("overhead"), "ci95": art.get("overhead_ci95"), "target": target,
            "samples": {"A": n.get("baseline"), "B": n.get("instrumented")}, "median_ms": art.get("median_ms"),
            "valid": art.get("valid", False), "reasons": art.get("reasons", [])}


def recording_argv(manifest: Path, work: Path, cmd: list[str], tracker: Path) -> list[str]:
    """The runner under run-iket as capture runs it (cutedsl/runiket.py), one program run a process,
    reusing the tracker of an earlier `run-iket profile --keep`."""
    from atrex_inject.cutedsl.runiket import prepare_run_iket  # noqa: PLC0415
    from atrex_inject.manifest import load as load_manifest  # noqa: PLC0415
    return prepare_run_iket(load_manifest(manifest), work, cmd, tracker)


def run_row(k: Kernel, out: Path, samples: int = 8) -> dict:
    """Row `k` through the loop in a fresh copy of the benchmark's files; OUT/<row>/ keeps the log,
    the measurements and the capture."""
    art = out / k.name
    shutil.rmtree(art, ignore_errors=True)
    art.mkdir(parents=True)
    r = Row(k, art / "log.txt")
    work = Path(tempfile.mkdtemp(prefix=f"atrex-{k.name}-"))
    (work / ".git").mkdir()
    bench = work / HERE.relative_to(REPO)
    shutil.copytree(HERE, bench, ignore=shutil.ignore_patterns("__pycache__", "wheels"))
    shutil.copytree(REPO / "examples" / "cutedsl", work / "examples" / "cutedsl")  # harness.py: the sample line
    fetched, inst, clean = SRC / k.package.name, bench / ".src" / k.package.name, work / "clean" / k.package.name
    shutil.copytree(fetched, clean)  # the measurement's clean side imports this copy, never applied
    runner, spec = bench / k.harness.relative_to(HERE), bench / k.spec.relative_to(HERE)
    cmd = lambda src, *a: [sys.executable, str(runner), "--src", str(src), *a]  # noqa: E731
    timed = ("--warmup", "{warmup}", "--iters", "{iterations}")
    ctx: dict = {}

    def clean_run():
        p = r.run(cmd(clean, "--warmup", "2", "--iters", "5"))
        return p.returncode == 0, None if p.returncode == 0 else (p.stderr or p.stdout).strip()[-600:]
    r.step("clean_run", clean_run)

    def apply():
        rc, applied, why = r.atrex("apply", str(spec), "--root", str(work))
        ctx.update(applied)
        return rc == 0, why
    r.step("apply", apply, "clean_run")

    def check_iket():
        rc, res, why = r.atrex("check-iket", str(spec), "--root", str(work), cmd=cmd(inst, "--compile-only"))
        problems = [q for e in res.get("entries", []) for q in e["problems"]]
        r.data["check_iket"] = {"ok": rc == 0, "problems": problems}
        return rc == 0, "; ".join(problems) or why
    r.step("check_iket", check_iket, "apply")

    source = work / ctx["source"] if "source" in ctx else None  # the spec's file, instrumented in place
    measure = ["measure", "--warmup", str(WARMUP), "--iterations", str(ITERATIONS), "--rounds", str(max(1, samples // 4)),
               "--baseline", json.dumps(cmd(clean, *timed))] + (
        ["--source", str(clean / source.relative_to(inst)), "--source", str(source)] if source else [])

    def arm(which: str, instrumented: list[str]):
        path = art / f"measure-{which}.json"
        _, _, why = r.atrex(*measure, "--instrumented", json.dumps(instrumented), "--out", str(path),
                            "--capture-dir", str(work / f"{which}-captures"))
        r.data[which] = _measured(path, OFF_TARGET if which == "off" else k.target)
        return r.data[which]["valid"], "; ".join(r.data[which]["reasons"]) or why
    r.step("measure_off", lambda: arm("off", cmd(inst, *timed)), "apply")

    def tracker():  # run-iket's discovery pass, once, at the measured launches
        p = r.run([sys.executable, "-m", "iket.cli.main", "-o", str(work / "trk"), "profile", "--keep",
                   "--postprocess", "none", "--", *cmd(inst, "--warmup", str(WARMUP), "--iters", str(ITERATIONS))])
        return p.returncode == 0, None if p.returncode == 0 else (p.stderr or p.stdout).strip()[-600:]
    r.step("iket_tracker", tracker, "apply")
    r.step("measure_spec", lambda: arm("spec", recording_argv(Path(ctx["manifest"]), work / "rec", cmd(inst, *timed),
                                                              work / "trk" / "tracker")), "iket_tracker")
    cap = art / "cap"

    def capture():
        rc, _, why = r.atrex("capture", "--spec", str(spec), "--root", str(work), "--out", str(cap), "--workload",
                             f"{k.name}:small:seed=1", cmd=cmd(inst, "--warmup", "1", "--iters", "1", "--small"))
        for trace in (cap / "iket").glob("*.trace.json"):  # the decoded trace the capture came from, kept
            shutil.move(trace, art / "iket-trace.json")      # beside it as evidence (a fixture can be cut from it)
        shutil.rmtree(cap / "iket", ignore_errors=True)  # the rest of run-iket's own folder
        return rc == 0, why
    r.step("capture", capture, "apply")

    def validate():
        rc, v, why = r.atrex("validate", str(cap), "--source", str(source))
        r.data["validate"] = {"verdict": v.get("verdict"), "events": v.get("events"),
                              "failed": [c["name"] for c in v.get("checks", []) if not c.get("ok")]}
        return rc == 0, why if not r.data["validate"]["failed"] else f"rejected: {', '.join(r.data['validate']['failed'])}"
    r.step("validate", validate, "capture")

    def summary():
        rc, s, why = r.atrex("summary", str(cap))
        r.data["summary"] = s
        return rc == 0, why
    r.step("summary", summary, "capture")

    def revert():
        rc, _, why = r.atrex("revert", str(spec), "--root", str(work))
        same = source.read_bytes() == (fetched / source.relative_to(inst)).read_bytes()
        return rc == 0 and same, why or (None if same else f"{source.name} is not byte-exact after revert")
    r.step("revert", revert, "apply")
    shutil.rmtree(work, ignore_errors=True)
    return r.data


def line(d: dict) -> str:
    """One row as the run prints it: each measurement, the capture's verdict, what failed."""
    pct = lambda m: "-" if not m or m.get("overhead") is None else f"{100 * m['overhead']:+.2f}% {m.get('ci95')}"  # noqa: E731
    failed = [f"{s}: {v['reason']}" for s, v in d["steps"].items() if not v["ok"] and not v.get("skipped")]
    rv = d["steps"].get("revert", {})
    revert = "byte-exact" if rv.get("ok") else "not run" if rv.get("skipped") else "FAILED"
    return (f"{d['name']}: off {pct(d.get('off'))}; recording {pct(d.get('spec'))} (target {100 * d['target']:.0f}%); "
            f"capture {(d.get('validate') or {}).get('verdict') or '-'}; revert {revert}"
            + (f"\n    {' | '.join(failed)}" if failed else ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download the pinned wheels and extract the rows' files into .src/")
    f.add_argument("--cache", type=Path, help="download folder to keep (default: a temporary one)")
    r = sub.add_parser("run", help="run rows through the loop (GPU host)")
    r.add_argument("out", type=Path)
    r.add_argument("--kernels", help="comma-separated row names (default: every row)")
    r.add_argument("--samples", type=int, default=8, help="processes per side and arm (a multiple of 4)")
    j = sub.add_parser("results", help="the rows under OUT as one results file for `run.py merge` (GPU host)")
    j.add_argument("out", type=Path)
    j.add_argument("--samples", type=int, default=8, help="the processes per side and arm the rows were run with")
    a = ap.parse_args()
    if a.cmd == "results":
        (a.out / "results-h200.json").write_text(json.dumps(results(a.out, a.samples), indent=2) + "\n")
        return 0
    packages, kernels = load()
    if a.cmd == "fetch":
        fetch(packages, a.cache)
        return 0
    names = a.kernels.split(",") if a.kernels else [k.name for k in kernels]
    unknown = sorted(set(names) - {k.name for k in kernels})
    if unknown:
        print(f"error: --kernels: {', '.join(unknown)} not among the rows of {ROWS}", file=sys.stderr)
        return 2
    missing = sorted({k.package.name for k in kernels if k.name in names and not (SRC / k.package.name).is_dir()})
    if missing:
        print(f"error: {SRC / missing[0]} does not exist: run `python3 {Path(__file__).name} fetch` first",
              file=sys.stderr)
        return 2
    ok = True
    for k in (k for k in kernels if k.name in names):
        row = run_row(k, a.out, a.samples)
        (a.out / f"{k.name}.json").write_text(json.dumps(row, indent=2) + "\n")
        ok &= all(s["ok"] for s in row["steps"].values())
        print(line(row), flush=True)
    return 0 if ok else 1


def results(out: Path, samples: int) -> dict:
    """The rows under `out` as one results file in run.py's shape (date, device, driver, nvcc,
    packages, settings, rows), which `run.py merge` folds into results-h200.json beside the CUDA rows."""
    sys.path.insert(0, str(HERE))
    from run import environment  # noqa: PLC0415  (run.py's header: nvidia-smi and nvcc on this host)
    packages, kernels = load()
    env = environment({"package": {n: {"dist": p.dist, "version": p.version, "wheel": p.wheel, "sha256": p.sha256}
                                   for n, p in packages.items()}}, samples)
    env["settings"] = {"samples": samples, "warmup": WARMUP, "iterations": ITERATIONS}
    env["rows"] = [json.loads((out / f"{k.name}.json").read_text()) for k in kernels if (out / f"{k.name}.json").is_file()]
    return env


if __name__ == "__main__":
    sys.exit(main())
