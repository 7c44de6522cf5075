"""The CuTe DSL rows of the real-kernel benchmark (cutedsl.toml): fetch their packages at the pinned
versions, and run each row through the loop under NVIDIA IKeT as a user would, one CLI call a step:
a clean run of the runner, apply, check-iket, measure with probes compiled in and off, measure
recording (the runner under run-iket, as capture runs it), capture at the small shape, validate,
summary, revert (byte-exact against the clean copy). A step that fails ends the row there and is
its result, with the tool's message.

    python3 bench/realkernels/cutedsl_rows.py fetch           (here, with package access: .src/)
    python3 bench/realkernels/cutedsl_rows.py run OUT [--kernels a,b] [--samples 8]   (the GPU host)

`run` writes OUT/<row>.json (what run_row returns) and each row's artifacts under OUT/<row>/; the
GPU host needs the CuTe DSL bundle and the wheels `fetch` keeps in .src/wheels/ installed
(scripts/gpu-realkernels-cutedsl.sh does both).
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
from pathlib import Path

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
    version: str
    wheel: str
    sha256: str
    files: tuple[str, ...]  # extracted into .src/<name>/; none: the wheel is installed on the GPU host
    platform: str | None


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
        packages = {n: Package(n, *(_field(p, f, str, f"[package.{n}]") for f in ("version", "wheel", "sha256")),
                               tuple(p.get("files", ())), p.get("platform"))
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
    extracted into .src/<name>/, or the wheel kept in .src/wheels/ for the GPU host. The download
    cache is a temporary folder unless given: .src/ is what travels to the GPU host."""
    if cache is None:
        with tempfile.TemporaryDirectory(prefix="atrex-wheels-") as tmp:
            return fetch(packages, Path(tmp))
    for p in packages.values():
        where = ["--python-version", "3.12", "--implementation", "cp", "--platform", p.platform] if p.platform else []
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", *where,
                        "-d", str(cache), f"{p.name}=={p.version}"], check=True)
        wheel = cache / p.wheel
        sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if sha != p.sha256:
            print(f"error: {wheel}: sha256 {sha}, {ROWS.name} pins {p.sha256}: the registry served another file; "
                  "check the pin", file=sys.stderr)
            sys.exit(2)
        if not p.files:
            (SRC / "wheels").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(wheel, SRC / "wheels" / p.wheel)
            continue
        dest = SRC / p.name
        shutil.rmtree(dest, ignore_errors=True)
        with zipfile.ZipFile(wheel) as z:
            for f in p.files:
                z.extract(f, dest)
        print(f"{p.name} {p.version}: {len(p.files)} files in {dest.relative_to(REPO)}")


def _atrex(log: Path, *args: str, cmd: list[str] = ()) -> tuple[int, dict]:
    """One CLI call with --json: (exit status, its JSON: the result, or the error with its hint). The
    JSON is the last object its stdout starts on a line of its own (a program it ran prints first)."""
    p = _run([*ATREX, *args, "--json", *(["--", *cmd] if cmd else [])], log)
    text = "\n" + p.stdout
    for at in reversed([i + 1 for i in range(len(text)) if text.startswith("\n{", i)]):
        try:
            return p.returncode, json.loads(text[at:])
        except json.JSONDecodeError:
            continue
    return p.returncode, {"error": (p.stdout + p.stderr)[-2000:]}


def _run(argv: list[str], log: Path) -> subprocess.CompletedProcess:
    """Run argv, its output appended to `log` under the command line; a call past STEP_TIMEOUT fails."""
    with open(log, "a") as f:
        f.write(f"$ {' '.join(argv)}\n")
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=STEP_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        p = subprocess.CompletedProcess(argv, 124, (e.stdout or b"").decode(errors="replace"), f"timed out after {STEP_TIMEOUT} s")
    with open(log, "a") as f:
        f.write(p.stdout + p.stderr + f"(exit {p.returncode})\n")
    return p


def _measured(art: dict, target: float) -> dict:
    n = art.get("n", {})
    return {"overhead": art.get("overhead"), "ci95": art.get("overhead_ci95"), "target": target,
            "samples": {"A": n.get("baseline"), "B": n.get("instrumented")}, "median_ms": art.get("median_ms"),
            "valid": art.get("valid", False), "reasons": art.get("reasons", [])}


def run_row(k: Kernel, out: Path, samples: int = 8) -> dict:
    """Row `k` through the loop in a fresh copy of the tree's benchmark files (OUT/<row>/ keeps the
    log, the measurements and the capture); the dict is the row of the results file."""
    art = out / k.name
    shutil.rmtree(art, ignore_errors=True)
    art.mkdir(parents=True)
    log = art / "log.txt"
    row = {"kernel": k.name, "backend": "cutedsl", "what": k.what, "package": k.package.name,
           "version": k.package.version, "recorder": "iket", "target": k.target}
    work = Path(tempfile.mkdtemp(prefix=f"atrex-{k.name}-"))
    (work / ".git").mkdir()
    bench = work / HERE.relative_to(REPO)
    shutil.copytree(HERE, bench, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "examples" / "cutedsl", work / "examples" / "cutedsl")  # harness.py: the sample line
    clean = work / "clean" / k.package.name
    shutil.copytree(SRC / k.package.name, clean)
    runner, spec = bench / k.harness.relative_to(HERE), bench / k.spec.relative_to(HERE)
    inst = bench / ".src" / k.package.name
    cmd = lambda src, *a: [sys.executable, str(runner), "--src", str(src), *a]  # noqa: E731
    timed = ("--warmup", "{warmup}", "--iters", "{iterations}")

    def fail(step: str, why) -> dict:
        return {**row, "failed_at": step, "why": why}

    t0 = time.time()
    p = _run(cmd(clean, "--warmup", "2", "--iters", "5"), log)
    if p.returncode != 0:
        return fail("clean run", (p.stdout + p.stderr)[-1500:])
    rc, applied = _atrex(log, "apply", str(spec), "--root", str(work))
    if rc != 0:
        return fail("apply", applied)
    source = work / applied["source"]
    rc, r = _atrex(log, "check-iket", str(spec), "--root", str(work), cmd=cmd(inst, "--compile-only"))
    row["check_iket"] = {"ok": rc == 0, "problems": [q for e in r.get("entries", []) for q in e["problems"]]
                         if rc in (0, 1) else [r]}
    measure = ["measure", "--warmup", str(WARMUP), "--iterations", str(ITERATIONS), "--rounds", str(max(1, samples // 4)),
               "--baseline", json.dumps(cmd(clean, *timed)), "--source", str(clean / source.relative_to(inst)),
               "--source", str(source)]
    _atrex(log, *measure, "--instrumented", json.dumps(cmd(inst, *timed)), "--out", str(art / "measure-off.json"),
           "--capture-dir", str(work / "off-captures"))
    row["off"] = _measured(_load(art / "measure-off.json"), OFF_TARGET)
    # the recording side runs the program once a process under run-iket, reusing the tracker of one
    # earlier run (run-iket's discovery pass), as scripts/gpu-cutedsl.sh does
    trk = work / "trk"
    _run([sys.executable, "-m", "iket.cli.main", "-o", str(trk), "profile", "--keep", "--postprocess", "none", "--",
          *cmd(inst, "--warmup", str(WARMUP), "--iters", str(ITERATIONS))], log)
    recording = _recording_argv(Path(applied["manifest"]), work / "rec", cmd(inst, *timed), trk / "tracker")
    _atrex(log, *measure, "--instrumented", json.dumps(recording), "--out", str(art / "measure-spec.json"),
           "--capture-dir", str(work / "spec-captures"))
    row["recording"] = _measured(_load(art / "measure-spec.json"), k.target)
    cap = art / "cap"
    rc, r = _atrex(log, "capture", "--spec", str(spec), "--root", str(work), "--out", str(cap), "--workload",
                   f"{k.name}:small:seed=1", cmd=cmd(inst, "--warmup", "1", "--iters", "1", "--small"))
    if rc != 0:
        row["capture"] = {"verdict": "not captured", "why": r}
    else:
        _, v = _atrex(log, "validate", str(cap), "--source", str(source))
        _, s = _atrex(log, "summary", str(cap))
        row["capture"] = {"verdict": v.get("verdict"), "events": v.get("events"),
                          "failed": [c["name"] for c in v.get("checks", []) if not c["ok"]],
                          "median_ns": {i["name"]: i["median"] for i in (s.get("launches") or [{}])[-1].get("intervals", [])}}
        shutil.rmtree(cap / "iket", ignore_errors=True)  # run-iket's own folder: its decoded trace is normalized in cap/
    rc, r = _atrex(log, "revert", str(spec), "--root", str(work))
    row["revert"] = {"byte_exact": rc == 0 and source.read_bytes() == (clean / source.relative_to(inst)).read_bytes()}
    row["seconds"] = round(time.time() - t0)
    shutil.rmtree(work, ignore_errors=True)
    return row


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {"valid": False, "reasons": [f"{path.name} was not written: the measurement failed (see log.txt)"]}


def _recording_argv(manifest_path: Path, rec: Path, cmd: list[str], tracker: Path) -> list[str]:
    """The runner under run-iket as capture runs it (cutedsl/runiket.py), one program run a process."""
    from atrex_inject.cutedsl.runiket import prepare_run_iket  # noqa: PLC0415
    from atrex_inject.manifest import load as load_manifest  # noqa: PLC0415
    return prepare_run_iket(load_manifest(manifest_path), rec, cmd, tracker)


def _line(row: dict) -> str:
    """One row as the log shows it: where it failed, or each arm's overhead, the capture and the revert."""
    if "failed_at" in row:
        return f"{row['kernel']}: failed at {row['failed_at']}: {json.dumps(row['why'])[:600]}"
    pct = lambda m: "-" if m.get("overhead") is None else f"{100 * m['overhead']:+.2f}% {m.get('ci95')}"  # noqa: E731
    return (f"{row['kernel']}: check-iket {'ok' if row['check_iket']['ok'] else 'FAILED'}; off {pct(row['off'])}; "
            f"recording {pct(row['recording'])} (target {100 * row['target']:.0f}%); capture "
            f"{row['capture']['verdict']}; revert byte-exact {row['revert']['byte_exact']}; {row['seconds']} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download the pinned wheels and extract the rows' files into .src/")
    f.add_argument("--cache", type=Path, help="download folder to keep (default: a temporary one)")
    r = sub.add_parser("run", help="run rows through the loop (GPU host)")
    r.add_argument("out", type=Path)
    r.add_argument("--kernels", help="comma-separated row names (default: every row)")
    r.add_argument("--samples", type=int, default=8, help="processes per side and arm (a multiple of 4)")
    a = ap.parse_args()
    packages, kernels = load()
    if a.cmd == "fetch":
        fetch(packages, a.cache)
        return 0
    names = a.kernels.split(",") if a.kernels else [k.name for k in kernels]
    unknown = sorted(set(names) - {k.name for k in kernels})
    if unknown:
        print(f"error: --kernels: {', '.join(unknown)} not among the rows of {ROWS}", file=sys.stderr)
        return 2
    missing = [k.package.name for k in kernels if not (SRC / k.package.name).is_dir()]
    if missing:
        print(f"error: {SRC}/{missing[0]} does not exist: run `python3 {Path(__file__).name} fetch` first",
              file=sys.stderr)
        return 2
    ok = True
    for k in (k for k in kernels if k.name in names):
        row = run_row(k, a.out, a.samples)
        (a.out / f"{k.name}.json").write_text(json.dumps(row, indent=2) + "\n")
        ok &= "failed_at" not in row
        print(_line(row), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
