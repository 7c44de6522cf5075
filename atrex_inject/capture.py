"""`atrex-inject capture`: run a program so that the instrumented kernel's launches land in one
folder as format-2 raw files with sidecars, whatever the backend (backend.Backend.capture: the
CUDA recorder writes them itself, the CuTe DSL route runs IKeT's run-iket and normalizes its
output), with the manifest copied in as it is, so the folder decodes by itself, and the run
record (runrecord.py: the program and its argument files, hashed before and after the run), so
the folder names the binary it is evidence of. With the cuda backend every Python process of the
program gets the launch hooks (cuda/python/hooks/): the kernel's launches from cuda-python, cuda.core and
CuPy are captured with no change to the program, and what each process did with them is reported
here (its ledger, cuda/python/hooks/ledger.py).
"""
from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

from . import manifest as mf
from . import registry, runrecord, snapshot
from .decode import capture_files
from .errors import CaptureError
from .fsio import sha256_bytes
from .cuda.python.hooks import ledger
from .spec import load_spec


def run_capture(spec_path: Path, root: Path | None, out_dir: Path, cmd: list[str], workload: str | None) -> dict:
    """Run `cmd` under capture into `out_dir`: {"out", "launches" (file names), "program" {path, sha256},
    "python" (what the launch hooks did, ledger.summary; absent when no Python process was hooked)}."""
    spec = load_spec(spec_path, root)
    manifest = snapshot.load_manifest(snapshot.workspace(spec))
    if manifest is None:
        raise CaptureError(f"spec {spec.name!r} is not applied", hint="atrex-inject apply SPEC, then build and capture")
    # ATREX_MANIFEST: the launch hooks (cuda/python/hooks/) read the kernel and its capture plan there
    env = dict(os.environ, ATREX_WORKLOAD=workload or os.environ.get("ATREX_WORKLOAD", ""),
               ATREX_MANIFEST=str(snapshot.workspace(spec) / mf.FILE_NAME))
    src = spec.root / manifest.source.path
    if sha256_bytes(src.read_bytes()) != manifest.source.instrumented_sha256:
        raise CaptureError(f"{manifest.source.path} is not the instrumented source of spec {spec.name!r}",
                           hint="apply the spec (and rebuild) before capturing")
    ran = runrecord.record(cmd, env)  # a program that cannot be recorded is refused before anything is written
    out_dir = Path(out_dir).absolute()  # the program's processes may change their working folder before writing
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in ledger.read_paths(out_dir):  # a ledger speaks for its run: an earlier run's would be added in
        old.unlink()
    runrecord.clear_failure(out_dir)
    try:
        registry.get(manifest.backend).capture(manifest, cmd, out_dir, env)
        runrecord.check_unchanged(ran)
    except CaptureError as e:  # the folder says so: validate/summary on it name the failure, not a missing file
        runrecord.write_failure(out_dir, e.message)
        raise
    shutil.copyfile(snapshot.workspace(spec) / mf.FILE_NAME, out_dir / mf.FILE_NAME)
    runrecord.write(out_dir, ran)
    python = ledger.summary(out_dir)
    if python is None and not any(out_dir.glob("*.atrex")):
        raise _nothing_captured(spec_path, manifest, out_dir, shlex.join(cmd))
    if python is not None and not list(out_dir.glob("*.atrex")):
        raise CaptureError(f"no launch of {manifest.kernel} was captured in {out_dir}: the launch hooks saw "
                           f"{python['launches']} launch(es) of it from Python ({python['skipped']} left out by the "
                           f"spec's [capture] skip/count, {len(python['not_captured'])} not captured), hooking "
                           + (", ".join(python["hooked"]) or "no launch API (none was imported)"),
                           hint=python["not_captured"][0]["hint"] if python["not_captured"] else
                           "launch the kernel through cuda.bindings, cuda.core or CuPy (docs/launches.md), with "
                           "enough launches for the spec's [capture] skip")
    files = capture_files(out_dir)
    r = {"out": str(out_dir), "launches": [f.name for f in files], "program": ran.program.to_json()}
    return r if python is None else {**r, "python": python}


def _nothing_captured(spec_path, manifest: mf.Manifest, out_dir: Path, command: str) -> CaptureError:
    """The program exited 0 and no launch was written: what capture did, and what to check."""
    did = (f"ran `{command}` with ATREX_TIMELINE_OUT={out_dir} and ATREX_MANIFEST set (capture sets both), where "
           "the recorder of an instrumented build writes one file per launch it captures"
           if manifest.backend == "cuda" else f"ran `{command}` under IKeT's run-iket")
    skip = manifest.capture.skip
    return CaptureError(
        f"no launch of {manifest.kernel!r} was captured: capture {did}, the program exited 0, and nothing was written",
        hint=f"check that the program runs a build of the instrumented {manifest.source.path} (rebuilt after apply: a "
             f"build of the clean source records nothing), or for a kernel.py that it imports that file; that it "
             f"launches {manifest.kernel} at least {skip + 1} time(s) (the spec's [capture] skip = {skip} writes "
             f"from launch {skip + 1} on); and `atrex-inject status {spec_path}`, which lists the launches apply "
             "wrapped and any it could not")
