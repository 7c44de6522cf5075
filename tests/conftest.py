"""Shared test helpers: a throwaway project tree holding the examples, and real nvcc compiles.

The tests are grouped by kind, a folder each: unit/ (one module on its own), compile/ (rewrites
compiled by nvcc and read in SASS, no GPU), captures/ (real H200 captures decoded, validated,
summarized, exported, compared), cli/ (the command line as a user meets it: help, errors, the
README and the demo), golden/ (every user-visible output against tests/golden/outputs/). A test
may use another's helpers (test_validate's planted captures, test_sass's SASS diff), so every
kind's folder is importable from every other."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from atrex_inject.snapshot import runtime_header

REPO = Path(__file__).resolve().parent.parent
KINDS = ("unit", "compile", "captures", "cli", "golden")
sys.path[:0] = [str(Path(__file__).resolve().parent / kind) for kind in KINDS]
EXAMPLE_SPECS = sorted((REPO / "examples" / "specs").glob("*.toml"))
# CUDA source in a .cu file; KERNELPY_SPECS: in a Python string (tests/compile/test_kernelpy.py)
CUDA_SPECS = [p for p in EXAMPLE_SPECS if 'backend = "cuda"' in p.read_text() and '.py"' not in p.read_text()]
KERNELPY_SPECS = [p for p in EXAMPLE_SPECS if 'backend = "cuda"' in p.read_text() and '.py"' in p.read_text()]
CUTEDSL_SPECS = [p for p in EXAMPLE_SPECS if 'backend = "cutedsl"' in p.read_text()]
NVCC_FLAGS = ["-gencode=arch=compute_90a,code=sm_90a", "-std=c++17"]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree_hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): sha(p) for p in sorted(root.rglob("*")) if p.is_file()}


def nvcc_compile(src: Path, out: Path | None = None, extra: list[str] | None = None) -> subprocess.CompletedProcess:
    """Compile for sm_90a; returns the process (stdout+stderr in .stdout)."""
    out = out or src.with_suffix(".o")
    cmd = ["nvcc", *NVCC_FLAGS, f"-I{runtime_header().parent}", f"-I{src.parent}", *(extra or ["-c"]), "-o",
           str(out), str(src)]
    return subprocess.run(cmd, capture_output=True, text=True)


HOST_CHECKED: list[str] = []  # this test's instrumented texts that apply's compile check passed (host_checked)


@pytest.fixture(autouse=True)
def host_checked(monkeypatch) -> list[str]:
    """Watches apply's own compile check (hostcheck.check: the instrumented text whole, host side
    included, with the spec's flags): the texts it passed in this test, for compiles_whole. Every
    call goes through to the real check."""
    from atrex_inject import hostcheck

    HOST_CHECKED.clear()
    real = hostcheck.check

    def check(spec, clean, instrumented, *args, **kw):
        warnings = real(spec, clean, instrumented, *args, **kw)
        if not warnings:
            HOST_CHECKED.append(instrumented)
        return warnings

    monkeypatch.setattr(hostcheck, "check", check)
    return HOST_CHECKED


def compiles_whole(path: Path) -> None:
    """`path` compiles for sm_90a, host side included: apply's compile check passed on the very
    text it holds in this test (host_checked), or nvcc compiles it here. An apply that compiled a
    text is not followed by a second compile of it."""
    if path.read_bytes().decode(errors="replace") in HOST_CHECKED:
        return
    proc = nvcc_compile(path, path.with_suffix(".o"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def cli(*args) -> tuple[int, str]:
    """Run `atrex-inject ARGS` in-process: (exit code, output)."""
    from typer.testing import CliRunner

    from atrex_inject.cli import app

    r = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.output


def refused(spec: Path, *needles: str) -> str:
    """apply SPEC must exit 2 with every needle in its message and leave the spec's tree unchanged."""
    before = tree_hashes(spec.parent)
    code, out = cli("apply", spec)
    assert code == 2, out
    for n in needles:
        assert n in out, out
    assert tree_hashes(spec.parent) == before
    return out


def edit_file(path: Path, *edits: tuple[str, str]) -> Path:
    """Apply (old, new) replacements, first occurrence each; every `old` must be there."""
    text = path.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    path.write_text(text)
    return path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `long` (a quarter of a minute or more on a 2-core machine) run first, in their
    order, the others after them in theirs. Under pytest -n the first tests are dealt to the workers
    in turn, so the long ones are shared out at the start rather than one of them left running
    alone at the end while the other workers wait."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


def _run_folder(tmp_path_factory) -> Path:
    """The run's base folder, which parallel workers (pytest -n) share: each has a folder of its
    own under it."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session", autouse=True)
def shared_caches(tmp_path_factory) -> Path:
    """One recorder-choice cache (choice.CACHE_ENV) and one build cache (sass.BUILD_CACHE_ENV) for
    the run: an example's recorder is chosen, and a source compiled for the SASS check, once,
    whatever number of tests do it, in whichever worker; the caches' writes are atomic."""
    from atrex_inject.choice import CACHE_ENV
    from atrex_inject.sass import BUILD_CACHE_ENV
    folder = _run_folder(tmp_path_factory) / "shared-cache"
    folder.mkdir(exist_ok=True)
    mp = pytest.MonkeyPatch()
    mp.setenv(CACHE_ENV, str(folder))
    mp.setenv(BUILD_CACHE_ENV, str(folder))
    yield folder
    mp.undo()


def _demo_once(tmp_path_factory, name: str, *flags: str) -> tuple[int, str, Path]:
    """`atrex-inject demo --out DIR FLAGS`, run once in the whole run (the first worker to ask runs
    it, holding a lock; the others read what it printed): its exit code, its output and DIR."""
    import fcntl
    import json

    root = _run_folder(tmp_path_factory)
    work, said = root / name / "demo", root / f"{name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not said.is_file():
            work.parent.mkdir(exist_ok=True)
            said.write_text(json.dumps(cli("demo", "--out", work, *flags)))
        code, out = json.loads(said.read_text())
    return code, out, work


@pytest.fixture(scope="session")
def demo_json(tmp_path_factory) -> tuple[int, str]:
    """`atrex-inject demo --out DIR --json`, run once in the run: its exit code and output, for the
    tests that read what it printed and wrote (its work folder, DIR) and change nothing there."""
    return _demo_once(tmp_path_factory, "demo-json", "--json")[:2]


@pytest.fixture(scope="session")
def demo_text(tmp_path_factory) -> tuple[int, str, Path]:
    """`atrex-inject demo --out DIR --quiet`, run once in the run: its exit code, its output and
    DIR, for the tests that read what it printed and wrote and change nothing there."""
    return _demo_once(tmp_path_factory, "demo-text", "--quiet")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of examples/ in a fresh project root (a .git folder marks the root)."""
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    (tmp_path / ".git").mkdir()
    return tmp_path


@pytest.fixture
def sources_project(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "tests" / "sources", tmp_path / "src")
    (tmp_path / ".git").mkdir()
    return tmp_path
