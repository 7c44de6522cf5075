"""Perturbation measurement: baseline (A) vs instrumented (B), one fresh process per sample, in
blocks of four that are ABBA or BAAB (ABBA then BAAB by default), the two arms two programs.
docs/measure.md documents the sample protocol.

Each command is a JSON argv array (never a shell string); `{warmup}` and `{iterations}` in it are
replaced by the requested counts. A sample is valid only if its process exits 0 within the
timeout and prints exactly one `__ATREX_TIMELINE_SAMPLE__={...}` line whose fields have the right
types, say the output was checked and the device synchronized, and match the request and the
first sample's workload and device. Any invalid sample rejects the whole measurement, naming it.
The artifact keeps the schedule, every raw line and exit status, and sha256 of the sources and
binaries, so `validate_measurement` can recompute medians, overhead and its interval.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .checks import Artifact, Route
from .errors import AtrexError
from .fsio import sha256_file, write_atomic
from .proc import MAX_LINE, run_sample
from .stats import interval, median, resample

PREFIX = "__ATREX_TIMELINE_SAMPLE__="
FORMAT = "atrex-measurement"
ARMS = {"A": "baseline", "B": "instrumented"}
SEED = 20261130  # fixed: validation recomputes the same interval
BLOCKS = ("ABBA", "BAAB")  # a schedule is made of these: drift falls on both arms alike
MIN_LATENCY_MS = 1e-6  # 1 ns: no launch is shorter; a smaller number is a timer or unit error (and overflows ratios)


@dataclass(frozen=True)
class Request:
    baseline: list[str]
    instrumented: list[str]
    warmup: int = 10
    iterations: int = 100
    pattern: str = "ABBA,BAAB"
    rounds: int = 1
    timeout_s: float = 300.0
    sources: tuple[str, ...] = ()
    binaries: tuple[str, ...] = ()
    capture_dir: str | None = None  # arm B records into capture_dir/sample-<i> (probes active)
    root: str | None = None  # sources and binaries are stored relative to it (default: the current folder)

    def schedule(self) -> list[str]:
        seq = "".join(self.pattern.replace(",", "").split()) * self.rounds
        if not seq or set(seq) - set(ARMS) or "A" not in seq or "B" not in seq:
            raise AtrexError(f"pattern {self.pattern!r} must use both A (baseline) and B (instrumented) and nothing else")
        blocks = [seq[i:i + 4] for i in range(0, len(seq), 4)]
        if any(b not in BLOCKS for b in blocks):
            raise AtrexError(f"pattern {self.pattern!r} gives the schedule {seq}: every block of four samples must be "
                             "ABBA or BAAB, so that drift (clocks, temperature, other work on the machine) falls on "
                             "both arms alike; a blocked schedule such as AAAABBBB lets drift pass for overhead",
                             hint="keep the default pattern ABBA,BAAB and raise --rounds for more samples")
        if self.baseline == self.instrumented:
            raise AtrexError("the baseline and instrumented commands are the same: that measures nothing",
                             hint="arm B must run the instrumented build, arm A the clean one")
        return list(seq)

    def argv(self, arm: str) -> list[str]:
        cmd = self.baseline if arm == "A" else self.instrumented
        return [a.replace("{warmup}", str(self.warmup)).replace("{iterations}", str(self.iterations)) for a in cmd]


def _file_of(arg: str, base: Path, program: bool) -> Path | None:
    """The file an argument names here, resolved, or None; a program named without a slash is found on
    PATH, as exec finds it."""
    try:
        path = shutil.which(arg) if program and "/" not in arg else Path(base, arg)
        return Path(path).resolve() if path and Path(path).is_file() else None
    except (OSError, ValueError):  # a name too long, a NUL byte, a loop of links: no file
        return None


def _sha_or_none(path: Path) -> str | None:
    try:
        return sha256_file(path)
    except OSError:
        return None


def _one_inode(x: Path, y: Path) -> bool:
    """Two names of one file: a hard link is the same (device, inode) wherever it lies."""
    try:
        sx, sy = x.stat(), y.stat()
    except OSError:
        return False
    return (sx.st_dev, sx.st_ino) == (sy.st_dev, sy.st_ino)


SCRIPTS = (".py", ".sh", ".pl", ".rb", ".js")  # run by an interpreter, importing what lies beside them
INTERPRETERS = re.compile(r"(python|pypy)[0-9.]*|bash|sh|dash|zsh|perl|ruby|node")
ENV_TAKES_VALUE = {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}
PY_TAKES_VALUE = {"-W", "-X"}  # an interpreter flag whose value is the next argument


def run_argv(argv: list[str]) -> list[str]:
    """What an argv runs, without what only changes how it is started: an `env` prefix (its options
    and NAME=VALUE settings) and an interpreter's flags (`python3 -B x.py` runs x.py; `-c` and `-m`
    stay, they name what runs)."""
    i = 0
    if argv and Path(argv[0]).name == "env":
        i = 1
        while i < len(argv) and (argv[i].startswith("-") or "=" in argv[i]):
            if argv[i] == "--":
                i += 1
                break
            i += 2 if argv[i] in ENV_TAKES_VALUE else 1
    rest = argv[i:]
    if rest and INTERPRETERS.fullmatch(Path(rest[0]).name):
        j = 1
        while j < len(rest) and rest[j].startswith("-") and rest[j] not in ("-", "-c", "-m"):
            j += 2 if rest[j] in PY_TAKES_VALUE else 1
        rest = rest[:1] + rest[j:]
    return rest


def same_program(a: list[str], b: list[str], base: Path) -> str | None:
    """Why two commands that differ in spelling run the same thing, or None. Each is read as what it
    runs (run_argv: no `env` prefix, no interpreter flags); wherever those differ, the two arguments
    are one path spelled two ways (dir/prog, dir/./prog), one file (a link, hard or symbolic: one
    device and inode), or two files with one sha256 (but for two scripts in two folders: a runner
    copied beside each build imports that build, as the CuTe DSL runners do). Relative paths are taken
    under `base` (the folder the samples ran in)."""
    ra, rb = run_argv(a), run_argv(b)
    if len(ra) != len(rb):
        return None
    if ra == rb and a != b:
        return (f"the baseline and instrumented commands both run {' '.join(ra)} (an env prefix and interpreter "
                "flags set how a program starts, not which): that measures nothing")
    same = []
    for i, (x, y) in enumerate(zip(ra, rb)):
        if x == y:
            continue
        fx, fy = _file_of(x, base, i == 0), _file_of(y, base, i == 0)
        if fx and fy and (fx == fy or _one_inode(fx, fy)):
            same.append(f"{x} and {y} are one file")
        elif fx and fy and not (fx.suffix in SCRIPTS and fx.parent != fy.parent) \
                and (sha := _sha_or_none(fx)) and sha == _sha_or_none(fy):
            same.append(f"{x} and {y} are two files with one sha256 {sha[:16]}…")
        elif not (fx or fy) and (i or "/" in x and "/" in y) and os.path.normpath(x) == os.path.normpath(y):
            same.append(f"{x} and {y} are one path")
        else:
            return None
    return ("the baseline and instrumented commands run the same program (" + "; ".join(same) + "): that measures "
            "nothing") if same else None


def one_build(binaries: list[dict]) -> str | None:
    """Why the hashed binaries show one build measured against itself: two paths with one sha256."""
    paths: dict[str, list[str]] = {}
    for h in binaries:
        paths.setdefault(h["sha256"], []).append(h["path"])
    twins = next((sorted(set(ps)) for ps in paths.values() if len(set(ps)) > 1), None)
    return (f"binaries {' and '.join(twins)} have one sha256: the clean and the instrumented build are one program "
            "(rebuild the instrumented one after apply)") if twins else None


def parse_argv(text: str, what: str) -> list[str]:
    try:
        v = json.loads(text)
    except ValueError as e:
        raise AtrexError(f"{what} must be a JSON array of strings: {e}", hint='e.g. \'["./gemm", "--iters", "{iterations}"]\'')
    if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
        raise AtrexError(f"{what} must be a non-empty JSON array of strings (argv, no shell)")
    return v


def check_sample(stdout: str, exit_status: int | None, req: Request, first: dict | None) -> tuple[dict | None, str, str | None]:
    """(parsed sample or None, the raw line, the reason it is invalid or None)."""
    lines = [l for l in (stdout if isinstance(stdout, str) else "").split("\n")  # \n only, as the sample printed it
             if l.startswith(PREFIX)]
    raw = lines[0] if len(lines) == 1 else ""
    if exit_status is None:
        return None, raw, "timed out"
    if exit_status != 0:
        return None, raw, f"exited with status {exit_status}"
    if not lines:
        return None, raw, "printed no sample line"
    if len(lines) > 1:
        return None, lines[0], f"printed {len(lines)} sample lines"
    try:
        s = json.loads(raw[len(PREFIX):])
    except (ValueError, RecursionError):
        return None, raw, "sample line is not JSON"
    if not isinstance(s, dict):
        return None, raw, "sample is not a JSON object"
    types = {"latency_ms": (int, float), "correctness": str, "synchronized": bool, "workload_identity": str,
             "device_identity": dict, "warmup": int, "iterations": int}
    for k, t in types.items():
        if k not in s:
            return None, raw, f"field {k!r} is missing"
        if not isinstance(s[k], t) or (t is int and isinstance(s[k], bool)) or (
                k == "latency_ms" and isinstance(s[k], bool)):
            return None, raw, f"field {k!r} has the wrong type ({type(s[k]).__name__})"
    if not isinstance(s["device_identity"].get("uuid"), str):
        return None, raw, "field 'device_identity.uuid' is missing or not a string"
    if not 0 < s["latency_ms"] < 1e300:  # exact for huge ints (math.isfinite would overflow); false for nan and inf
        return None, raw, f"latency_ms {str(s['latency_ms'])[:40]} is not a finite positive number"
    if s["latency_ms"] < MIN_LATENCY_MS:
        return None, raw, (f"latency_ms {s['latency_ms']!r} is below {MIN_LATENCY_MS:g} ms (1 ns): no launch is that "
                           "short, so the sample's timer or unit is wrong")
    if s["correctness"] != "passed":
        return None, raw, f"correctness is {s['correctness']!r}"
    if s["synchronized"] is not True:
        return None, raw, "synchronized is false"
    if s["warmup"] != req.warmup or s["iterations"] != req.iterations:
        return None, raw, (f"ran warmup={s['warmup']} iterations={s['iterations']}, "
                           f"requested warmup={req.warmup} iterations={req.iterations}")
    if first is not None:
        if s["workload_identity"] != first["workload_identity"]:
            return None, raw, f"workload drifted: {s['workload_identity']!r} != {first['workload_identity']!r}"
        if s["device_identity"]["uuid"] != first["device_identity"]["uuid"]:
            return None, raw, f"device drifted: {s['device_identity']['uuid']} != {first['device_identity']['uuid']}"
    return s, raw, None


def summarize(samples: list[dict]) -> dict:
    """Midpoint medians per arm, overhead = median(B)/median(A) - 1, and its 95% interval from a
    plain bootstrap of each arm's samples (fresh processes are independent), seeded."""
    a = np.array([s["sample"]["latency_ms"] for s in samples if s["arm"] == "A"], dtype=float)
    b = np.array([s["sample"]["latency_ms"] for s in samples if s["arm"] == "B"], dtype=float)
    rng = np.random.default_rng(SEED)
    ra = median(resample(a, rng), axis=1)
    rb = median(resample(b, rng), axis=1)
    return {"median_ms": {"baseline": float(median(a)), "instrumented": float(median(b))},
            "overhead": float(median(b) / median(a) - 1),
            "overhead_ci95": interval(rb / ra - 1),
            "n": {"baseline": int(a.size), "instrumented": int(b.size)}}


def _hashes(paths, root: str | None) -> list[dict]:
    """sha256 of each file, its path relative to root where it lies inside (so the artifact can be
    rechecked in another checkout with --root), absolute otherwise."""
    base = Path(root or ".").resolve()
    out = []
    for p in paths:
        if not Path(p).is_file():
            raise AtrexError(f"{p} does not exist", hint="pass the exact sources and built binaries that were measured")
        full = Path(p).resolve()
        out.append({"path": full.relative_to(base).as_posix() if full.is_relative_to(base) else str(full),
                    "sha256": sha256_file(p)})
    return out


def _check_request(req: Request, out: Path) -> None:
    """Refuse what would waste every sample: a timeout or counts that cannot work, an --out that
    cannot be written."""
    if not (math.isfinite(req.timeout_s) and req.timeout_s > 0):
        raise AtrexError(f"--timeout {req.timeout_s} must be a positive number of seconds")
    if req.warmup < 0 or req.iterations < 1 or req.rounds < 1:
        raise AtrexError(f"--warmup {req.warmup}, --iterations {req.iterations}, --rounds {req.rounds}: "
                         "warmup must be >= 0, iterations and rounds >= 1")
    out = Path(out)
    if out.is_dir() or not out.parent.is_dir() or not os.access(out.parent, os.W_OK):
        raise AtrexError(f"--out {out} is a folder, or its folder does not exist or is not writable",
                         hint="name a file in an existing, writable folder")


def measure(req: Request, out: Path, progress: Callable[[int, int, str], None] | None = None) -> dict:
    schedule = req.schedule()
    _check_request(req, out)
    binaries = _hashes(req.binaries, req.root)
    why = same_program(req.baseline, req.instrumented, Path.cwd()) or one_build(binaries)
    if why:
        raise AtrexError(why, hint="arm A must run the clean build and arm B the instrumented one, two different "
                                   "programs: build the instrumented one after apply, to another path")
    art = {"format": FORMAT, "version": 1, "schedule": "".join(schedule),
           "requested": {"warmup": req.warmup, "iterations": req.iterations, "pattern": req.pattern,
                         "rounds": req.rounds, "timeout_s": req.timeout_s},
           "commands": {"A": req.baseline, "B": req.instrumented},
           "sources": _hashes(req.sources, req.root), "binaries": binaries, "samples": [],
           "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    first, reasons = None, []
    for i, arm in enumerate(schedule):
        if progress:
            progress(i, len(schedule), arm)
        argv = req.argv(arm)
        env = dict(os.environ)
        if arm == "B" and req.capture_dir:
            # probes record exactly as in capture; writes wait for process exit (docs/measure.md)
            env.update(ATREX_TIMELINE_OUT=str(Path(req.capture_dir) / f"sample-{i}"), ATREX_TIMELINE_DEFER="1")
            Path(env["ATREX_TIMELINE_OUT"]).mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        run = run_sample(argv, env, req.timeout_s, PREFIX)
        s, raw, why = check_sample("\n".join(run.sample_lines), run.exit_status, req, first)
        if run.exit_status is not None and run.long_lines:
            s, raw, why = None, "", f"printed a sample line longer than {MAX_LINE} bytes"
        elif run.exit_status is not None and run.n_sample_lines > len(run.sample_lines):
            s, raw, why = None, run.sample_lines[0], f"printed {run.n_sample_lines} sample lines"
        art["samples"].append({"index": i, "arm": arm, "argv": argv, "exit_status": run.exit_status, "line": raw,
                               "sample": s, "wall_s": round(time.perf_counter() - t0, 3),
                               "stderr_tail": run.stderr_tail[-2000:], "output_bytes": {
                                   "stdout": run.stdout_bytes, "stderr": run.stderr_bytes},
                               "valid": why is None, "reason": why})
        if why:
            reasons.append(f"sample {i} ({ARMS[arm]}): {why}")
            break  # the measurement is rejected; no point in spending more GPU time
        first = first or s
    if progress:
        progress(len(schedule), len(schedule), "")
    art["valid"] = not reasons
    art["reasons"] = reasons
    if not reasons:
        art.update(summarize(art["samples"]))
    write_atomic(out, json.dumps(art, indent=2) + "\n")
    return art


def load_measurement(path: Path) -> dict:
    """The artifact as a dict; a file that is not one is a usage error (exit 2), not a rejection."""
    try:
        art = json.loads(Path(path).read_text())
    except OSError as e:
        raise AtrexError(f"cannot read the measurement: {e.strerror}", path=str(path),
                         hint="pass the artifact `atrex-inject measure --out` wrote") from None
    except ValueError as e:
        raise AtrexError(f"not JSON ({e})", path=str(path), hint="pass the artifact `atrex-inject measure --out` wrote")
    if not isinstance(art, dict) or art.get("format") != FORMAT:
        raise AtrexError("not an atrex measurement (format is not 'atrex-measurement')", path=str(path),
                         hint="pass the artifact `atrex-inject measure --out` wrote")
    return art


def _is(v, t) -> bool:
    return isinstance(v, t) and not (isinstance(v, bool) and t is not bool)


def _str_list(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, str) for x in v)


def _shape(art: dict) -> list[str]:
    """Every field validation reads, with its type: a hand-edited or truncated artifact is rejected by
    name instead of crashing the recheck."""
    bad = []
    r, c = art.get("requested"), art.get("commands")
    if not isinstance(r, dict) or not all(_is(r.get(k), t) for k, t in
                                          (("warmup", int), ("iterations", int), ("pattern", str), ("rounds", int))):
        bad.append("field 'requested' needs integer warmup, iterations, rounds and a string pattern")
    if not isinstance(c, dict) or not (_str_list(c.get("A")) and _str_list(c.get("B"))):
        bad.append("field 'commands' needs A and B, each a non-empty argv list of strings")
    for kind in ("sources", "binaries"):
        v = art.get(kind, [])
        if not isinstance(v, list) or not all(isinstance(h, dict) and _is(h.get("path"), str)
                                              and _is(h.get("sha256"), str) for h in v):
            bad.append(f"field {kind!r} must be a list of {{path, sha256}}")
    if not _is(art.get("schedule"), str):
        bad.append("field 'schedule' must be a string of A and B")
    samples = art.get("samples")
    if not isinstance(samples, list):
        return bad + ["field 'samples' must be a list"]
    for i, s in enumerate(samples):
        if not (isinstance(s, dict) and s.get("arm") in ("A", "B") and _is(s.get("line"), str)
                and isinstance(s.get("argv"), list) and "exit_status" in s and "sample" in s
                and (s["exit_status"] is None or _is(s["exit_status"], int))
                and (s["sample"] is None or isinstance(s["sample"], dict))):
            bad.append(f"sample {i}: needs arm A or B, an argv list, a string line, an integer or null exit_status "
                       "and an object or null sample")
    return bad


def _recheck_files(art: dict, root: Path | None) -> tuple[list[str], list[str]]:
    """(problems, unchecked): a file that is on this machine must still have its sha256; one that is not
    (a GPU host's temporary path) is listed as not rehashed; verdict still compares its sha256 with the
    capture's manifest."""
    problems, unchecked = [], []
    for kind, what in (("sources", "source"), ("binaries", "binary")):
        for h in art.get(kind, []):
            p = Path(h["path"])
            where = "on this machine" if p.is_absolute() else f"under {root or 'the current folder'}"
            p = p if p.is_absolute() else (root or Path.cwd()) / p
            if not p.is_file():
                unchecked.append(f"{what} {h['path']} is not {where}: not rehashed")
            elif sha256_file(p) != h["sha256"]:
                problems.append(f"{what} {p} changed since the measurement (sha256 differs): measure again")
    return problems, unchecked


def validate_measurement(path: Path, root: Path | None = None) -> dict:
    """Recheck a measurement artifact: hashes against the files on disk (relative paths under root),
    each sample's argv against its arm's command and its raw line against its parsed sample and the
    rules, and n, medians, overhead and interval recomputed from the raw samples."""
    art = load_measurement(path)
    problems, unchecked = _shape(art), []
    if not problems:
        if art.get("valid") is not True:
            reasons = art.get("reasons")
            problems += ([f"measurement was rejected when taken: {r}" for r in reasons] if _str_list(reasons)
                         else ["the measurement is not marked valid"])
        files, unchecked = _recheck_files(art, root)
        problems += files
        r = art["requested"]
        req = Request(art["commands"]["A"], art["commands"]["B"], r["warmup"], r["iterations"], r["pattern"],
                      r["rounds"])
        try:
            if "".join(req.schedule()) != art["schedule"] or [s["arm"] for s in art["samples"]] != list(art["schedule"]):
                problems.append("schedule does not match the requested pattern and rounds, or samples are missing")
        except AtrexError as e:
            problems.append(e.message)
        problems += filter(None, [same_program(req.baseline, req.instrumented, root or Path.cwd()),
                                  one_build(art.get("binaries", []))])
        first = None
        for i, s in enumerate(art["samples"]):
            if s["argv"] != req.argv(s["arm"]):
                problems.append(f"sample {i}: ran {s['argv']}, not arm {s['arm']}'s command {req.argv(s['arm'])}")
            parsed, _, why = check_sample(s["line"], s["exit_status"], req, first)
            if why:
                problems.append(f"sample {i}: {why}")
            elif parsed != s["sample"]:
                problems.append(f"sample {i}: parsed sample differs from its raw line")
            first = first or parsed
    if not problems:
        rec = summarize(art["samples"])
        for k in ("median_ms", "overhead", "overhead_ci95", "n"):
            if json.dumps(rec[k]) != json.dumps(art.get(k)):
                problems.append(f"{k} {art.get(k)} does not recompute from the raw samples ({rec[k]})")
    return {"valid": not problems, "problems": problems, "unchecked": unchecked,
            "next_step": "measure again (atrex-inject measure), the clean build as --baseline and the instrumented "
                         "one as --instrumented" if problems else None, "overhead": art.get("overhead"),
            "overhead_ci95": art.get("overhead_ci95"), "median_ms": art.get("median_ms")}


# `validate --measurement M.json` rechecks a measurement beside (or without) a capture
# (registry.CHECK_MODULES, checks.py)
ROUTE = Route(artifacts=(Artifact("measurement", "--measurement M.json", validate_measurement),))
