"""apply/revert under hostile or unlucky conditions: a second writer, concurrent and killed runs,
manifests that point elsewhere or were tampered with, a clean copy left only in history, stale
temps, a failing archive step, and the modes and owners of the files written."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from atrex_inject import registry, snapshot
from atrex_inject.cli import app
from atrex_inject.errors import SnapshotError
from atrex_inject.fsio import locked
from conftest import sha, tree_hashes

SPEC = "examples/specs/gemm_mma.toml"
SRC = "examples/cuda/gemm_mma.cu"


def cli(*args) -> tuple[int, str]:
    r = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.output


def manifest_path(project: Path) -> Path:
    return project / ".atrex" / "gemm_mma" / "manifest.json"


def edit_manifest(project: Path, fn) -> None:
    p = manifest_path(project)
    m = json.loads(p.read_text())
    fn(m)
    p.write_text(json.dumps(m))


def test_second_writer_is_refused_with_the_holder(project):
    src = project / SRC
    clean = src.read_bytes()
    (project / ".atrex").mkdir()
    with locked(project / ".atrex" / "lock", "test"):
        before = tree_hashes(project)
        code, out = cli("apply", project / SPEC)
        assert code == 2 and "another atrex-inject apply/revert is working on the project" in out
        assert f"(process {os.getpid()})" in out and "wait for it to finish" in out
        assert tree_hashes(project) == before
    assert cli("apply", project / SPEC)[0] == 0 and src.read_bytes() != clean


def _reach_clean(project: Path, clean: bytes) -> str:
    """Bring the source back to clean through status/revert only; return the state status saw."""
    spec = project / SPEC
    state = snapshot.status(spec)["state"]
    if state == "instrumented":
        snapshot.revert(spec)
    elif state == "instrumented-archived":
        snapshot.revert(spec, from_history=True)
    else:
        assert state in ("clean", "not-applied"), state
    assert (project / SRC).read_bytes() == clean, state
    return state


# A CLI process that imports first, then sleeps until a given moment, so that two of them run
# their commands within milliseconds of each other (imports take far longer than apply itself).
AT = ("import sys, time; from atrex_inject.cli import app; "
      "time.sleep(max(0, float(sys.argv.pop(1)) - time.time())); app()")


@pytest.mark.long
def test_concurrent_and_killed_apply_revert_always_leave_the_clean_source_reachable(project):
    """Synthetic race: apply and revert as separate processes released together with a random
    offset of up to 40 ms, sometimes with apply killed at a random moment, 12 rounds (4 of them
    from an applied tree, 3 with apply killed); after each, status + revert reach the clean bytes."""
    rng = random.Random(15)
    clean = (project / SRC).read_bytes()
    seen = []
    for round_ in range(12):
        if round_ % 3 == 0:  # start from an applied tree: the race is then revert vs. a refused apply
            snapshot.apply(project / SPEC)
        go = time.time() + 0.6  # both processes imported (about 0.5 s) before they are released
        procs = [subprocess.Popen([sys.executable, "-c", AT, str(go + rng.uniform(0, 0.04)), verb, str(project / SPEC)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for verb in ("apply", "revert")]
        if round_ % 5 == 1:
            time.sleep(max(0, go - time.time()) + rng.uniform(0, 0.08))
            procs[0].send_signal(signal.SIGKILL)
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert b"Traceback" not in err, err.decode()
        seen.append(_reach_clean(project, clean))
    assert "instrumented" in seen  # the rounds did reach applied states, not only refusals


def test_lost_workspace_found_in_history_and_restored(project):
    spec, src = project / SPEC, project / SRC
    clean = src.read_bytes()
    snapshot.apply(spec)
    # the interleaving the lock now prevents: the workspace archived while the source stays instrumented
    (project / ".atrex" / "history").mkdir()
    (project / ".atrex" / "gemm_mma").rename(project / ".atrex" / "history" / "gemm_mma-20260101T000000-1")
    st = snapshot.status(spec)
    assert st["state"] == "instrumented-archived" and "revert --from-history" in st["hint"]
    code, out = cli("revert", spec)
    assert code == 2 and "no applied snapshot" in out and "--from-history" in out
    code, out = cli("revert", spec, "--from-history")
    assert code == 0 and src.read_bytes() == clean
    assert snapshot.status(spec)["state"] == "not-applied"


def test_from_history_refuses_a_tampered_archive(project):
    spec, src = project / SPEC, project / SRC
    snapshot.apply(spec)
    inst = src.read_bytes()
    h = project / ".atrex" / "history" / "gemm_mma-20260101T000000-1"
    h.parent.mkdir()
    (project / ".atrex" / "gemm_mma").rename(h)
    fake = b"// not the clean source\n"
    (h / "clean" / "gemm_mma.cu").write_bytes(fake)
    m = json.loads((h / "manifest.json").read_text())
    m["source"]["clean_sha256"] = sha(h / "clean" / "gemm_mma.cu")
    (h / "manifest.json").write_text(json.dumps(m))
    code, out = cli("revert", spec, "--from-history")
    assert code == 2 and "do not reproduce the instrumented hash" in out
    assert src.read_bytes() == inst


@pytest.mark.parametrize("fault,msg", [
    (lambda m, p: m["source"].update(path="../victim.cu"), "leaves the project tree"),
    (lambda m, p: m["source"].update(path=".atrex/gemm_mma/clean/gemm_mma.cu"), "is inside .atrex/"),
    (lambda m, p: m.update(clean_copy="../../../victim.cu"), "clean copy '../../../victim.cu' is missing or outside"),
    (lambda m, p: m["patch"].update(path="../../victim.cu"), "patch '../../victim.cu' is missing or outside"),
    (lambda m, p: m["source"].update(instrumented_sha256="0" * 64), "do not reproduce the instrumented hash"),
    (lambda m, p: (p / "clean" / "gemm_mma.cu").unlink(), "clean copy 'clean/gemm_mma.cu' is missing"),
    (lambda m, p: (p / "instrumented.patch").write_text("@@ -1 +1 @@\n-x\n+y\n"),
     "does not match the manifest's patch"),
    (lambda m, p: m.pop("clean_copy"), "field clean_copy is missing or not a str"),
    (lambda m, p: m["source"].pop("clean_sha256"), "field source.clean_sha256 is missing or not a str"),
    (lambda m, p: m.update(intervals=None), "field intervals is missing or not a list"),
    (lambda m, p: m["intervals"][0].update(start="nowhere"), "names unknown site 'nowhere'"),
    (lambda m, p: m.update(expect={"nowhere": 1}), "expect names unknown site 'nowhere'"),
    (lambda m, p: m["capture"].update(capacity=2 ** 40), "field capture.capacity = 1099511627776 is outside"),
    (lambda m, p: m["groups"][0].update(cta_stride=0), "every group's cta_stride >= 1"),
])
def test_revert_refuses_a_manifest_that_points_elsewhere_or_lies(project, fault, msg):
    victim = project.parent / "victim.cu"
    victim.write_text("// a file outside the project\n")
    (project / "victim.cu").write_text("// inside the project, not the source\n")
    snapshot.apply(project / SPEC)
    edit_manifest(project, lambda m: fault(m, manifest_path(project).parent))
    before = tree_hashes(project)
    victim_before = victim.read_bytes()
    code, out = cli("revert", project / SPEC)
    assert code == 2 and msg in out, out
    assert "your edits" not in out
    assert tree_hashes(project) == before and victim.read_bytes() == victim_before


def test_manifest_that_is_not_an_object(project):
    snapshot.apply(project / SPEC)
    manifest_path(project).write_text("[1, 2]")
    for verb in ("status", "revert"):
        code, out = cli(verb, project / SPEC, "--json")
        assert code == 2 and json.loads(out)["error"].endswith("the manifest is not a JSON object")


def test_symlinked_atrex_is_never_written_through(project, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (project / ".atrex").symlink_to(outside, target_is_directory=True)
    code, out = cli("apply", project / SPEC)
    assert code == 2 and "is a symlink or not a folder" in out
    assert list(outside.iterdir()) == []


def test_stale_temps_of_a_killed_run_are_removed(project):
    stale = [project / "examples/cuda/.gemm_mma.cu.ab12cd34.tmp",
             project / ".atrex/gemm_mma/.manifest.json.zz99yy88.tmp"]
    keep = project / "examples/cuda/.gemm_mma.cu.notours.tmp.bak"
    for p in (*stale, keep):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("half an instrumented copy")
    snapshot.apply(project / SPEC)
    assert not any(p.exists() for p in stale) and keep.exists()


def test_archive_failure_after_restore_is_a_warning_and_retried(project, monkeypatch):
    spec, src = project / SPEC, project / SRC
    clean = src.read_bytes()
    snapshot.apply(spec)
    real = Path.rename

    def no_space(self, target):
        if "history" in str(target):
            raise OSError(28, "No space left on device")
        return real(self, target)

    monkeypatch.setattr(Path, "rename", no_space)
    r = snapshot.revert(spec)
    assert r["reverted"] and r["archived"] is None and "could not be archived (No space left" in r["warnings"][0]
    assert src.read_bytes() == clean
    monkeypatch.setattr(Path, "rename", real)
    r = snapshot.revert(spec)
    assert not r["reverted"] and r["archived"] and snapshot.status(spec)["state"] == "not-applied"


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600)])
def test_new_files_follow_the_umask_and_the_source_keeps_its_mode(project, umask, mode):
    src = project / SRC
    src.chmod(0o640)
    old = os.umask(umask)
    try:
        snapshot.apply(project / SPEC)
    finally:
        os.umask(old)
    ws = project / ".atrex" / "gemm_mma"
    for p in (ws / "manifest.json", ws / "instrumented.patch", ws / "clean" / "gemm_mma.cu"):
        assert p.stat().st_mode & 0o777 == mode, p
    assert src.stat().st_mode & 0o777 == 0o640
    snapshot.revert(project / SPEC)
    assert src.stat().st_mode & 0o777 == 0o640


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_apply_and_revert_keep_the_owner(project):
    src = project / SRC
    os.chown(src, 1234, 4321)
    snapshot.apply(project / SPEC)
    assert (src.stat().st_uid, src.stat().st_gid) == (1234, 4321)
    snapshot.revert(project / SPEC)
    assert (src.stat().st_uid, src.stat().st_gid) == (1234, 4321)


def test_no_snapshot_error_on_a_never_applied_project_creates_nothing(project):
    before = tree_hashes(project)
    with pytest.raises(SnapshotError, match="no applied snapshot"):
        snapshot.revert(project / SPEC)
    assert tree_hashes(project) == before and not (project / ".atrex").exists()


def test_source_changed_during_rewrite_is_not_overwritten(project, monkeypatch):
    src = project / SRC
    cuda = registry.get("cuda")
    real = cuda.rewrite

    def racing(plan, text):
        out = real(plan, text)
        src.write_text(text + "// a user edit while apply was rewriting\n")
        return out

    monkeypatch.setattr(cuda, "rewrite", racing)
    with pytest.raises(SnapshotError, match="changed while apply was rewriting it"):
        snapshot.apply(project / SPEC)
    assert src.read_text().endswith("// a user edit while apply was rewriting\n")
    assert not (project / ".atrex" / "gemm_mma").exists()


def test_revert_in_apply_s_write_window_is_refused(project, monkeypatch):
    """The interleaving that lost the clean copy before the lock, made deterministic: a revert
    process runs just before apply writes the instrumented source (manifest already written)."""
    spec, src = project / SPEC, project / SRC
    clean = src.read_bytes()
    real = snapshot.write_atomic
    seen = []

    def revert_first(path, data, root=None):
        if Path(path) == src:
            seen.append(subprocess.run([sys.executable, "-m", "atrex_inject.cli", "revert", str(spec)],
                                       capture_output=True, text=True))
        return real(path, data, root)

    monkeypatch.setattr(snapshot, "write_atomic", revert_first)
    snapshot.apply(spec)
    assert seen[0].returncode == 2 and "another atrex-inject apply/revert is working" in seen[0].stderr
    monkeypatch.setattr(snapshot, "write_atomic", real)
    assert snapshot.status(spec)["state"] == "instrumented"
    snapshot.revert(spec)
    assert src.read_bytes() == clean


@pytest.mark.parametrize("prefix,msg", [
    (b"// \xff\n", "is not UTF-8 (byte 3, line 1)"),
])
def test_unreadable_source_encodings_named(project, prefix, msg):
    src = project / SRC
    src.write_bytes(prefix + src.read_bytes())
    before = tree_hashes(project)
    code, out = cli("apply", project / SPEC)
    assert code == 2 and msg in out and tree_hashes(project) == before


def test_a_source_shared_by_two_project_trees_has_one_writer(project):
    """The same source reached through another --root (an inner tree, with its own .atrex) is
    locked per file."""
    from atrex_inject.fsio import source_lock_path
    inner = project / "examples"
    with locked(source_lock_path(project / SRC), "test"):
        code, out = cli("apply", project / SPEC, "--root", inner)
        assert code == 2 and f"another atrex-inject apply/revert is working on {SRC.removeprefix('examples/')}" in out
    assert cli("apply", project / SPEC, "--root", inner)[0] == 0
    assert (inner / ".atrex" / "gemm_mma" / "manifest.json").is_file()
