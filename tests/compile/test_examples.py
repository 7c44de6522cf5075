"""Every example spec: apply, compile the instrumented file for sm_90a with nvcc, revert byte-exact;
and the emitted patch undoes the change under `git apply -R`."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from atrex_inject import snapshot
from atrex_inject.manifest import load as load_manifest
from conftest import CUDA_SPECS, EXAMPLE_SPECS, nvcc_compile, sha

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("spec_path", CUDA_SPECS, ids=lambda p: p.stem)
def test_apply_compile_revert(project, spec_path):
    spec = project / "examples" / "specs" / spec_path.name
    res = snapshot.apply(spec)
    m = res.manifest
    src = project / m.source.path
    clean_sha = m.source.clean_sha256
    assert sha(src) == m.source.instrumented_sha256 != clean_sha
    assert (res.workspace / m.clean_copy).read_bytes() == (REPO / m.source.path).read_bytes()
    text = src.read_text()
    for s in m.sites:  # every site is placed and marked in the instrumented file
        assert f"atrex: site {s.name} (id {s.id}" in text
        assert s.instrumented_line > 0
    units = [project / f.path for f in m.launchers] or [src]  # a header compiles in the files that launch it
    for unit in units:
        proc = nvcc_compile(unit, project / "inst.o")
        assert proc.returncode == 0, proc.stderr
        assert "atrex_recorder.cuh" not in proc.stderr, proc.stderr  # the recorder compiles without a warning
    out = snapshot.revert(spec)
    assert out["reverted"] is True
    assert sha(src) == clean_sha
    for f in [m.source.path, *(f.path for f in m.launchers)]:
        assert (project / f).read_bytes() == (REPO / f).read_bytes()


@pytest.mark.parametrize("spec_path", EXAMPLE_SPECS, ids=lambda p: p.stem)
def test_patch_reverses_with_git_apply(project, spec_path):
    spec = project / "examples" / "specs" / spec_path.name
    res = snapshot.apply(spec)
    patch = res.workspace / "instrumented.patch"
    m = load_manifest(res.workspace / "manifest.json")
    subprocess.run(["git", "apply", "-R", str(patch)], cwd=project, check=True, capture_output=True)
    assert sha(project / m.source.path) == m.source.clean_sha256
    subprocess.run(["git", "apply", str(patch)], cwd=project, check=True, capture_output=True)
    assert sha(project / m.source.path) == m.source.instrumented_sha256


def test_examples_use_every_anchor_kind_and_position():
    from atrex_inject.spec import ANCHOR_KINDS, POSITIONS, load_spec
    kinds, positions = set(), set()
    for p in CUDA_SPECS:
        for s in load_spec(p).sites:
            kinds.add(s.anchor.kind)
            positions.add(s.position)
    assert kinds == set(ANCHOR_KINDS)
    assert positions == set(POSITIONS)
