"""Hostile-input machinery shared by tests/cli/test_no_tracebacks.py (hypothesis, in the default run)
and bench/fuzz_inputs.py (the long seeded fuzz run): synthetic mutations of real specs, manifests,
sidecars, capture buffers and file names, and the one property every run asserts.

The property: the command ends with exit 0, 1 (a rejection) or 2 (an error with a message),
never with an exception, nor with the error boundary's "internal error" (an exception nobody
turned into a specific message); on exit 2 no file in the tree changed; no output shows an enum's
repr (`<Role.THREAD: 'thread'>`) where the spec's word belongs.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
import zlib
from pathlib import Path

from typer.testing import CliRunner

from atrex_inject.cli import app

REPO = Path(__file__).resolve().parent.parent
SPECS = ("reduce_sumsq", "gemm_mma", "scale_add_cutedsl")
CAPTURES = ("reduce_sumsq", "gemm_mma")
HOSTILE_TOML = ['"}"', '"kt /* "', '"kt\\n#error x"', '"\\u2028"', '"\\u0000"', "-1", "0", "4294967296",
                "9223372036854775807", "-9223372036854775808", "1e400", "nan", "true", "{}", "[]", '"history"',
                '"../../../etc/passwd"', '"/etc/hostname"', '".atrex/x"', '".git/config"', '"' + "a" * 5000 + '"',
                "[" * 300 + "]" * 300, '"a; b"', '"(a"', '""', '"x"', "{ entry = true }", '{ call = "" }']
HOSTILE_JSON = [None, True, -1, 0, 2 ** 32, 10 ** 400, 1e308, "", "x", "../../etc/passwd", [], {}, [1, 2],
                {"a": 1}, "\u2028", "\x00"]
ENUM_REPR = re.compile(r"<[A-Z]\w*\.[A-Z][A-Z0-9_]*: ")
ODD_NAMES = ["x.atrex", "k-launchX.atrex", "-launch.atrex", "k-launch99999999999999999999.atrex",
             "k-launch-1.atrex", "k-launch1.atrex.atrex", "k.launch1.atrex", ".atrex", "k-launch 1.atrex"]


def tree_hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


class Outcome(Exception):
    """The property failed: a traceback, an unexpected exit status, or a change on error."""


def check_cli(root: Path, *args: str) -> int:
    """Run one CLI command in-process and assert the property; returns the exit status."""
    before = tree_hashes(root)
    r = CliRunner().invoke(app, [str(a) for a in args])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise Outcome(f"{args[0]}: {type(r.exception).__name__}: {r.exception}") from r.exception
    if r.exit_code not in (0, 1, 2):
        raise Outcome(f"{args[0]}: exit {r.exit_code}: {r.output[-500:]}")
    if ENUM_REPR.search(r.output):
        raise Outcome(f"{args[0]}: an enum's repr in the output: {ENUM_REPR.search(r.output)[0]}")
    if r.exit_code == 2:
        if "error" not in r.output or "internal error" in r.output:
            raise Outcome(f"{args[0]}: exit 2 without a specific message: {r.output[-500:]}")
        if tree_hashes(root) != before:
            raise Outcome(f"{args[0]}: exit 2 but files changed")
    return r.exit_code


def project(tmp: Path) -> Path:
    shutil.copytree(REPO / "examples", tmp / "examples")
    (tmp / ".git").mkdir()
    return tmp


def mutate_text(rng: random.Random, text: bytes) -> bytes:
    """One synthetic mutation of a text file: a hostile value, a dropped, doubled or swapped
    line, random bytes (not always UTF-8), a flipped byte, or a truncation."""
    lines = text.split(b"\n")
    kind = rng.randrange(7)
    i = rng.randrange(len(lines))
    if kind == 0 and b"=" in lines[i]:
        key = lines[i].split(b"=", 1)[0]
        lines[i] = key + b"= " + rng.choice(HOSTILE_TOML).encode()
    elif kind == 1:
        del lines[i]
    elif kind == 2:
        lines.insert(i, lines[i])
    elif kind == 3:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == 4:
        pos = rng.randrange(len(text) + 1)
        return text[:pos] + rng.randbytes(rng.randrange(1, 8)) + text[pos:]
    elif kind == 5:
        pos = rng.randrange(len(text))
        return text[:pos] + bytes([text[pos] ^ (1 << rng.randrange(8))]) + text[pos + 1:]
    else:
        return text[:rng.randrange(len(text))]
    return b"\n".join(lines)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def mutate_json(rng: random.Random, obj):
    """One synthetic mutation of a JSON document: some value replaced by a hostile one, or a key
    deleted."""
    path = rng.choice([p for p in _paths(obj) if p])
    parent = obj
    for k in path[:-1]:
        parent = parent[k]
    if isinstance(parent, dict) and rng.random() < 0.3:
        del parent[path[-1]]
    else:
        parent[path[-1]] = rng.choice(HOSTILE_JSON)
    return obj


def mutate_capture(rng: random.Random, folder: Path) -> None:
    """One synthetic mutation of a capture folder (raw buffer, sidecar, manifest, or file name).
    A mutated buffer gets a matching CRC half the time, so decode's later checks are reached."""
    raw = next(folder.glob("*.atrex"))
    side = raw.with_suffix(".json")
    kind = rng.randrange(4)
    if kind == 0:
        data = bytearray(raw.read_bytes())
        for _ in range(rng.randrange(1, 4)):
            pos = rng.randrange(640) if rng.random() < 0.8 else rng.randrange(len(data))
            data[pos] = rng.randrange(256)
        raw.write_bytes(bytes(data))
        if rng.random() < 0.5:
            meta = json.loads(side.read_text())
            meta["crc32"] = zlib.crc32(bytes(data))
            side.write_text(json.dumps(meta))
    elif kind == 1:
        side.write_text(json.dumps(mutate_json(rng, json.loads(side.read_text()))))
    elif kind == 2:
        m = folder / "manifest.json"
        m.write_text(json.dumps(mutate_json(rng, json.loads(m.read_text()))))
    else:
        name = rng.choice(ODD_NAMES)
        raw.rename(folder / name)
        side.rename((folder / name).with_suffix(".json"))


def spec_case(rng: random.Random, root: Path) -> tuple[Path, int]:
    """Mutate one example spec in the project `root` 1-3 times; return (spec, exit of apply).
    An applied mutant is reverted so the next case starts clean."""
    name = rng.choice(SPECS)
    spec = root / "examples" / "specs" / f"{name}.toml"
    original = spec.read_bytes()
    data = original
    for _ in range(rng.randrange(1, 4)):
        data = mutate_text(rng, data) or data
    spec.write_bytes(data)
    try:
        code = check_cli(root, "apply", spec, "--json")
        if code == 0:
            check_cli(root, "status", spec)
            if check_cli(root, "revert", spec) != 0:
                raise Outcome("an applied mutant did not revert")
        return spec, code
    finally:
        spec.write_bytes(original)
        shutil.rmtree(root / ".atrex", ignore_errors=True)


def capture_case(rng: random.Random, tmp: Path) -> list[int]:
    """Mutate a copy of a real H200 capture 1-2 times; decode and validate it."""
    folder = tmp / "cap"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(REPO / "tests" / "fixtures" / "h200" / rng.choice(CAPTURES), folder)
    for _ in range(rng.randrange(1, 3)):
        mutate_capture(rng, folder)
    out = tmp / "decoded"
    shutil.rmtree(out, ignore_errors=True)
    return [check_cli(folder, "decode", folder, "--out", out, "--json"),
            check_cli(folder, "validate", folder, "--json")]
