"""Fault injection: make each write step of apply fail in turn; the source stays recoverable
(here: unchanged) and the error says what happened and how to proceed."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from atrex_inject import snapshot
from atrex_inject.errors import SnapshotError
from conftest import sha

SPEC = "examples/specs/gemm_mma.toml"
STEPS = ["saving the clean copy", "writing the patch", "writing the manifest", "writing the instrumented source"]


@pytest.mark.parametrize("fail_at", range(len(STEPS)))
def test_each_write_step_failing(project, monkeypatch, fail_at):
    src = project / "examples/cuda/gemm_mma.cu"
    clean = sha(src)
    calls = {"n": 0}
    real_replace = os.replace

    def flaky(a, b):
        if not Path(b).resolve().is_relative_to(project.resolve()):
            return real_replace(a, b)  # a shared cache's entry (one not written is computed again next time)
        calls["n"] += 1
        if calls["n"] == fail_at + 1:
            raise OSError(28, "No space left on device")
        return real_replace(a, b)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(SnapshotError) as e:
        snapshot.apply(project / SPEC)
    msg = str(e.value)
    assert STEPS[fail_at] in msg and "is unchanged" in msg and "No space left" in msg
    assert sha(src) == clean
    leftovers = [p for p in (project / ".atrex").rglob("*") if p.name != "lock"]
    assert leftovers == []  # no partial workspace that looks applied, not even an empty folder
    monkeypatch.setattr(os, "replace", real_replace)
    snapshot.apply(project / SPEC)  # and a later apply works
    assert sha(src) != clean
