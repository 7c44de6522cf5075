"""The recorder-choice cache and the build cache are keyed by everything that decides their value
and checked when read (choice.py, sass.py; docs/recovery.md, "Caches"): a header changed in a
subfolder is a miss, an entry that is not what the tool could have written is refused and said,
a project cache reached through a link is not read, and a run killed while the choice compiles
leaves nothing beside the source. Each test plants one fault in a small synthetic project."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from atrex_inject import choice, sass, snapshot
from conftest import REPO, edit_file, tree_hashes

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")

KERNEL = """\
#include "detail/cfg.cuh"
__global__ void BOUNDS scale(const float* __restrict__ x, float* __restrict__ y, int n) {
  __shared__ float stage[SMEM_FLOATS];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    stage[threadIdx.x % SMEM_FLOATS] = x[i];
    y[i] = 2.0f * stage[threadIdx.x % SMEM_FLOATS];
  }
}
"""
CFG = "#pragma once\n#define BOUNDS __launch_bounds__(256)\n#define SMEM_FLOATS 1024\n"
SPEC = """\
version = 1
name = "s"
question = "q"
backend = "cuda"
source = "k.cu"
kernel = "scale"

[[site]]
name = "start"
anchor = { entry = true }

[[site]]
name = "done"
anchor = { exit = true }
"""


@pytest.fixture
def proj(tmp_path: Path, monkeypatch) -> Path:
    """A kernel whose launch bounds and shared memory come from a header in a subfolder, with the
    project's own choice cache (.atrex/cache/) and no shared one."""
    monkeypatch.delenv(choice.CACHE_ENV, raising=False)
    (tmp_path / ".git").mkdir()
    (tmp_path / "detail").mkdir()
    (tmp_path / "detail" / "cfg.cuh").write_text(CFG)
    (tmp_path / "k.cu").write_text(KERNEL)
    (tmp_path / "s.toml").write_text(SPEC)
    return tmp_path


def applied_once(proj: Path) -> Path:
    """Apply and revert once: the choice is computed and cached; its cache file."""
    snapshot.apply(proj / "s.toml")
    snapshot.revert(proj / "s.toml")
    (entry,) = (proj / ".atrex" / "cache").glob("choice-*.json")
    return entry


def counting_choose(monkeypatch) -> list[int]:
    """choice.choose, counted: how many times the choice was computed rather than read."""
    calls, real = [], choice.choose
    monkeypatch.setattr(choice, "choose", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


@needs_nvcc
def test_a_header_changed_in_a_subfolder_is_a_choice_cache_miss(proj, monkeypatch):
    """The launch bounds move out of the header: the next apply chooses again (the block size it
    read is gone, so the rings are no candidates), and the apply after that reads the new entry."""
    applied_once(proj)
    calls = counting_choose(monkeypatch)
    edit_file(proj / "detail" / "cfg.cuh", ("__launch_bounds__(256)", ""))
    rec = snapshot.apply(proj / "s.toml").manifest.recorder
    assert calls == [1] and any("staged and resident rings are sized for the block" in n for n in rec.notes), rec
    snapshot.revert(proj / "s.toml")
    assert snapshot.apply(proj / "s.toml").manifest.recorder == rec and calls == [1]


def forge(entry: Path, **mode) -> None:
    obj = json.loads(entry.read_text())
    obj["mode"].update(mode)
    entry.write_text(json.dumps(obj))


@needs_nvcc
@pytest.mark.parametrize("mode,why", [
    ({"event_bytes": 4}, "recorder global with 4-byte events is not a candidate of this spec"),
    ({"max_registers": 8}, "registers held to 8, not the clean kernel's allocation"),
    ({"path": "staged", "ring": 32, "warps": 40}, "rings sized for 40 warps"),
    ({"max_registers": 40, "held": [[["0); asm(\"trap;\"); //"], 40]]},
     "not a recorder choice: ValueError held registers [[['0); asm(\"trap;\"); //'], 40]] are not integer "
     "arguments and register counts")])
def test_a_forged_choice_is_refused_and_chosen_again(proj, monkeypatch, capfd, mode, why):
    """One field of the cached choice edited (synthetic): apply does not use it, says why on stderr,
    and records the choice it computes."""
    entry = applied_once(proj)
    computed = json.loads(entry.read_text())
    forge(entry, **mode)
    calls = counting_choose(monkeypatch)
    rec = snapshot.apply(proj / "s.toml").manifest.recorder
    assert calls == [1] and rec.mode.path == computed["recorder"] and not rec.mode.max_registers
    err = capfd.readouterr().err
    assert f"atrex: the cached recorder choice {entry} is not used ({why}); choosing again" in err, err


@needs_nvcc
def test_a_choice_the_rules_of_another_build_made_is_a_cache_miss(proj, monkeypatch, tmp_path_factory):
    """The judging code (choice.py, sass.py) is part of the key: the same spec and sources judged by
    rules that changed since are chosen again (here sass.py read from a copy with one line added)."""
    applied_once(proj)
    changed = tmp_path_factory.mktemp("rules") / "sass.py"
    changed.write_bytes(Path(sass.__file__).read_bytes() + b"# another rule\n")
    monkeypatch.setattr(sass, "__file__", str(changed))
    calls = counting_choose(monkeypatch)
    snapshot.apply(proj / "s.toml")
    assert calls == [1]


@needs_nvcc
def test_a_cache_folder_linked_out_of_the_project_is_not_read(proj, tmp_path_factory, monkeypatch, capfd):
    """.atrex/cache is a link to a folder outside the tree holding a forged entry under the right
    key (synthetic): the entry is not read, and stderr says why."""
    entry = applied_once(proj)
    outside = tmp_path_factory.mktemp("outside")
    shutil.move(str(entry), outside / entry.name)
    forge(outside / entry.name, event_bytes=4)
    (proj / ".atrex" / "cache").rmdir()
    (proj / ".atrex" / "cache").symlink_to(outside, target_is_directory=True)
    calls = counting_choose(monkeypatch)
    assert snapshot.apply(proj / "s.toml").manifest.recorder.mode.path == "global" and calls == [1]
    err = capfd.readouterr().err
    assert f"atrex: the recorder-choice cache is not read: {proj / '.atrex' / 'cache'} is a symbolic link" in err


@needs_nvcc
def test_apply_in_a_copy_of_the_project_reads_its_compile_check_back(proj, tmp_path_factory, monkeypatch):
    """The spec in a subfolder: the instrumented text's `#line` directives name the source from the
    project's root, which from the spec's folder is no file (nvcc -M lists it all the same). The
    compile check apply makes is still kept by content: the same project applied again in another
    folder compiles nothing, and writes the same source."""
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv(choice.CACHE_ENV, str(cache))
    monkeypatch.setenv(sass.BUILD_CACHE_ENV, str(cache))
    (proj / "specs").mkdir()
    (proj / "specs" / "s.toml").write_text((proj / "s.toml").read_text().replace('source = "k.cu"', 'source = "../k.cu"'))
    (proj / "s.toml").unlink()
    copy = tmp_path_factory.mktemp("copy") / "proj"
    shutil.copytree(proj, copy)
    snapshot.apply(proj / "specs" / "s.toml")
    assert '#line 1 "k.cu"' in (proj / "k.cu").read_text() and len(list(cache.glob("host-*.ok"))) == 1
    run = subprocess.run

    def no_compile(cmd, *a, **k):
        assert "-c" not in cmd and "-cubin" not in cmd, f"nvcc compiled: {cmd}"
        return run(cmd, *a, **k)
    monkeypatch.setattr(subprocess, "run", no_compile)
    snapshot.apply(copy / "specs" / "s.toml")
    assert (copy / "k.cu").read_bytes() == (proj / "k.cu").read_bytes()


FLAGS = list(choice.DEFAULT_FLAGS)


def build_kernel(proj: Path) -> sass.Build:
    """The kernel built as the SASS check builds it, from a copy (the build cache keys by content)."""
    unit = proj / "build" / "k.cu"
    unit.parent.mkdir(exist_ok=True)
    unit.write_text(KERNEL)
    return sass.build(unit, [str(proj)], FLAGS, cwd=proj)


@needs_nvcc
def test_a_header_changed_in_a_subfolder_is_a_build_cache_miss(proj, tmp_path_factory, monkeypatch):
    monkeypatch.setenv(sass.BUILD_CACHE_ENV, str(tmp_path_factory.mktemp("builds")))
    assert build_kernel(proj).kernel("scale")[1].shared == 4096
    edit_file(proj / "detail" / "cfg.cuh", ("SMEM_FLOATS 1024", "SMEM_FLOATS 12288"))
    assert build_kernel(proj).kernel("scale")[1].shared == 49152


@needs_nvcc
@pytest.mark.parametrize("damage,why", [
    (lambda b: b["resources"][next(iter(b["resources"]))].update(registers="16"),
     "are not integer registers, shared and spills"),
    (lambda b: b["resources"].clear(), "are not integer registers, shared and spills"),
    (lambda b: b["funcs"].update(x=[[0, "EXIT"]]), "the instructions of x are not [address, opcode, text] triples"),
    (lambda b: b.pop("threads"), "not an object with funcs, resources and threads")])
def test_a_damaged_build_cache_entry_is_built_again_and_said(proj, tmp_path_factory, monkeypatch, capfd, damage, why):
    """One fault planted in a build cache entry (synthetic): the build is made again, the same as the
    first, and stderr names the entry and what is wrong with it."""
    cache = tmp_path_factory.mktemp("builds")
    monkeypatch.setenv(sass.BUILD_CACHE_ENV, str(cache))
    first = build_kernel(proj)
    (entry,) = cache.glob("build-*.json")
    obj = json.loads(entry.read_text())
    damage(obj)
    entry.write_text(json.dumps(obj))
    assert build_kernel(proj) == first
    err = capfd.readouterr().err
    assert f"atrex: the build cache entry {entry} is not a build (" in err and why in err, err


KILLER = """#!/bin/sh
# nvcc, except that a compile (not the dependency listing) kills the process that asked for it
case " $* " in *" -cubin "*) kill -9 $PPID; sleep 5;; esac
exec {nvcc} "$@"
"""


@needs_nvcc
def test_a_run_killed_while_the_choice_compiles_leaves_nothing_beside_the_source(proj, tmp_path_factory):
    """apply killed (SIGKILL) while nvcc compiles the choice's builds: the next apply and revert
    leave the project as it was, no build folder beside the source."""
    before = tree_hashes(proj)
    nvcc = tmp_path_factory.mktemp("bin") / "nvcc"
    nvcc.write_text(KILLER.format(nvcc=shutil.which("nvcc")))
    nvcc.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != sass.BUILD_CACHE_ENV}  # every build compiled here
    env.update(ATREX_NVCC=str(nvcc), PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-m", "atrex_inject.cli", "apply", str(proj / "s.toml")], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == -9, p.stderr
    snapshot.apply(proj / "s.toml")
    snapshot.revert(proj / "s.toml")
    assert {k: v for k, v in tree_hashes(proj).items() if not k.startswith(".atrex/")} == before


@needs_nvcc
def test_one_dependency_listing_serves_another_folder_until_a_header_changes_or_is_shadowed(tmp_path, monkeypatch):
    """sass._dependencies asks nvcc -M once for units of the same directives wherever they lie (each
    scratch folder, each copy of a project); a header changed under its root, one of the same name
    that appears in a root searched before it, or a file that would shadow a toolkit header, is a
    miss, and the digest follows the files. Each case plants its one difference in a fresh copy."""
    calls = []
    run = subprocess.run
    monkeypatch.setattr(sass.subprocess, "run", lambda cmd, **kw: ("-M" in cmd and calls.append(cmd)) or run(cmd, **kw))

    def unit(name: str) -> tuple[Path, Path]:
        (tmp_path / name / "inc" / "detail").mkdir(parents=True)
        (tmp_path / name / "inc" / "detail" / "cfg.cuh").write_text(CFG)
        (tmp_path / name / "unit").mkdir()
        (tmp_path / name / "unit" / "k.cu").write_text(KERNEL)
        return tmp_path / name / "unit" / "k.cu", tmp_path / name

    def digest(src: Path) -> str | None:
        return sass.dependency_digest(src, [str(src.parent.parent / "inc")], ["-std=c++17"], src.parent)

    def listed_from(src: Path) -> str:
        monkeypatch.setattr(sass, "_LISTED", {})
        calls.clear()
        first = digest(src)
        assert first is not None and len(calls) == 1
        return first

    first = listed_from(unit("a")[0])
    src, root = unit("b")
    assert digest(src) == first and len(calls) == 1  # another folder, the same files: no nvcc
    edit_file(root / "inc" / "detail" / "cfg.cuh", ("1024", "512"))
    assert digest(src) not in (None, first) and len(calls) == 2  # a header changed: asked again

    first = listed_from(unit("c")[0])
    src, root = unit("d")
    (root / "unit" / "detail").mkdir()
    (root / "unit" / "detail" / "cfg.cuh").write_text(CFG.replace("1024", "256"))
    assert digest(src) not in (None, first) and len(calls) == 2  # the unit's folder shadows the -I one

    first = listed_from(unit("e")[0])
    src, root = unit("f")
    (root / "unit" / "cuda_runtime.h").write_text("#error shadowed\n")  # nvcc includes cuda_runtime.h first
    assert digest(src) is None and len(calls) == 2  # asked again: nvcc reads the copy beside the unit
