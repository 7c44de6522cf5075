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
from . import calibrate, registry, runrecord, snapshot
from .decode import capture_files
from .launchfile import FILE_NAME as CAPTURE_NAME
from .errors import CaptureError
from .fsio import sha256_bytes
from .cuda.python.hooks import ledger
from .spec import ProbeSpec, load_spec


def _applied(spec_path: Path, root: Path | None) -> tuple[ProbeSpec, mf.Manifest]:
    """The spec and its manifest, refused unless applied and its source is the instrumented one."""
    spec = load_spec(spec_path, root)
    manifest = snapshot.load_manifest(snapshot.workspace(spec))
    if manifest is None:
        raise CaptureError(f"spec {spec.name!r} is not applied", hint="atrex-inject apply SPEC, then build and capture")
    src = spec.root / manifest.source.path
    if sha256_bytes(src.read_bytes()) != manifest.source.instrumented_sha256:
        raise CaptureError(f"{manifest.source.path} is not the instrumented source of spec {spec.name!r}",
                           hint="apply the spec (and rebuild) before capturing")
    return spec, manifest


def _several(applied: list[tuple[ProbeSpec, mf.Manifest]]) -> None:
    """Several specs captured in one run write their files into one folder first, told apart by
    kernel name: one backend that writes its own files (cuda), distinct kernels and spec names."""
    names = [s.name for s, _ in applied]
    kernels = [m.kernel for _, m in applied]
    if any(m.backend != "cuda" for _, m in applied):
        raise CaptureError("several specs are captured in one run with the cuda backend only",
                           hint="capture a CuTe DSL spec alone: run-iket records one kernel's trace per run here")
    for what, values in (("spec names", names), ("kernels", kernels)):
        if len(set(values)) != len(values):
            raise CaptureError(f"the specs' {what} repeat ({', '.join(values)})",
                               hint="capture specs of different kernels together; their files are named by kernel")


def run_capture(spec_paths: list[Path], root: Path | None, out_dir: Path, cmd: list[str], workload: str | None,
                calibrator: Path | None = None) -> dict:
    """Run `cmd` under capture into `out_dir`: {"out", "launches" (file names), "program" {path, sha256},
    "python" (what the launch hooks did, ledger.summary; absent when no Python process was hooked)}.
    With several specs (one run, several instrumented kernels) each kernel's launches go into
    `out_dir/<spec name>/`, a capture folder of its own with its manifest and the run record:
    {"out", "captures": [{"spec", "out", "launches"}], "program"}. With a calibrator, the device's
    timer is calibrated before and after the run and clock.json written into each folder ("clock")."""
    applied = [_applied(p, root) for p in spec_paths]
    if len(applied) > 1:
        _several(applied)
    spec, manifest = applied[0]
    # ATREX_MANIFEST: the launch hooks (cuda/python/hooks/) read the kernel and its capture plan there; they
    # follow one spec, so with several they capture nothing and say so
    env = dict(os.environ, ATREX_WORKLOAD=workload or os.environ.get("ATREX_WORKLOAD", ""))
    if len(applied) == 1:
        env["ATREX_MANIFEST"] = str(snapshot.workspace(spec) / mf.FILE_NAME)
    ran = runrecord.record(cmd, env)  # a program that cannot be recorded is refused before anything is written
    out_dir = Path(out_dir).absolute()  # the program's processes may change their working folder before writing
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in ledger.read_paths(out_dir):  # a ledger speaks for its run: an earlier run's would be added in
        old.unlink()
    runrecord.clear_failure(out_dir)
    try:
        before = calibrate.window(calibrator, env, "before") if calibrator else None
        registry.get(manifest.backend).capture(manifest, cmd, out_dir, env)
        runrecord.check_unchanged(ran)
        after = calibrate.window(calibrator, env, "after") if calibrator else None
    except CaptureError as e:  # the folder says so: validate/summary on it name the failure, not a missing file
        runrecord.write_failure(out_dir, e.message)
        raise
    if len(applied) > 1:
        return _sorted(applied, spec_paths, out_dir, ran, shlex.join(cmd), before, after)
    shutil.copyfile(snapshot.workspace(spec) / mf.FILE_NAME, out_dir / mf.FILE_NAME)
    runrecord.write(out_dir, ran)
    python = ledger.summary(out_dir)
    if python is None and not any(out_dir.glob("*.atrex")):
        raise _nothing_captured(spec_paths[0], manifest, out_dir, shlex.join(cmd))
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
    if before is not None:
        r["clock"] = calibrate.write([out_dir], before, after).to_json()
    return r if python is None else {**r, "python": python}


def _sorted(applied, spec_paths: list[Path], out_dir: Path, ran: runrecord.RunRecord, command: str,
            before: calibrate.Window | None, after: calibrate.Window | None) -> dict:
    """Each kernel's files moved into `out_dir/<spec name>/` with its manifest and the run record:
    one capture folder per kernel, all of one run on one device's timer."""
    folders = []
    for (spec, manifest), path in zip(applied, spec_paths):
        sub = out_dir / spec.name
        sub.mkdir(exist_ok=True)
        mine = [f for f in out_dir.iterdir() if (m := CAPTURE_NAME.match(f.with_suffix(".atrex").name))
                and m["kernel"] == manifest.kernel and f.suffix in (".atrex", ".json")]
        if not any(f.suffix == ".atrex" for f in mine):
            raise _nothing_captured(path, manifest, out_dir, command)
        for f in mine:
            os.replace(f, sub / f.name)
        shutil.copyfile(snapshot.workspace(spec) / mf.FILE_NAME, sub / mf.FILE_NAME)
        runrecord.write(sub, ran)
        folders.append(sub)
    r = {"out": str(out_dir), "captures": [{"spec": s.name, "out": str(f), "launches": [x.name for x in
                                                                                       capture_files(f)]}
                                           for (s, _), f in zip(applied, folders)],
         "program": ran.program.to_json()}
    if before is not None:
        r["clock"] = calibrate.write(folders, before, after).to_json()
    return r


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
