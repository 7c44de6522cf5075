"""`atrex-inject capture`: run a program so that the instrumented kernel's launches land in one
folder as format-v1 raw files with sidecars, whatever the backend.

cuda: the recorder in the instrumented program writes them (ATREX_TIMELINE_OUT); a launch from
Python reads its plan from the manifest named by ATREX_MANIFEST (pycapture.capture_launch).
cutedsl: IKeT's run-iket profiles the program (two passes), and its decoded output for the
target kernel is normalized into the same files (cutedsl/normalize.py).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from . import snapshot
from .decode import capture_files
from .errors import CaptureError
from .fsio import sha256_bytes
from .spec import load_spec


def run_capture(spec_path: Path, root: Path | None, out_dir: Path, cmd: list[str], workload: str | None) -> dict:
    spec = load_spec(spec_path, root)
    manifest = snapshot.load_manifest(snapshot.workspace(spec))
    if manifest is None:
        raise CaptureError(f"spec {spec.name!r} is not applied", hint="atrex-inject apply SPEC, then build and capture")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, ATREX_WORKLOAD=workload or os.environ.get("ATREX_WORKLOAD", ""))
    src = spec.root / manifest["source"]["path"]
    if sha256_bytes(src.read_bytes()) != manifest["source"]["instrumented_sha256"]:
        raise CaptureError(f"{manifest['source']['path']} is not the instrumented source of spec {spec.name!r}",
                           hint="apply the spec (and rebuild) before capturing")
    if spec.backend == "cuda":
        env["ATREX_TIMELINE_OUT"] = str(out_dir)
        # launches from Python (pycapture.capture_launch) read the plan from the manifest
        env["ATREX_MANIFEST"] = str(snapshot.workspace(spec) / "manifest.json")
        proc = subprocess.run(cmd, env=env)
        if proc.returncode != 0:
            raise CaptureError(f"the program exited with status {proc.returncode} under capture")
    else:
        from .cutedsl.normalize import normalize_run
        iket_dir = out_dir / "iket"
        proc = subprocess.run([sys.executable, "-m", "iket.cli.main", "-o", str(iket_dir), "profile",
                               "--postprocess", "json", "--", *cmd], env=env)
        if proc.returncode != 0:
            raise CaptureError(f"run-iket exited with status {proc.returncode}: the program failed, or IKeT could "
                               f"not record or decode its capture", hint=f"run-iket's output is in {iket_dir}")
        normalize_run(iket_dir, manifest, out_dir, env["ATREX_WORKLOAD"])
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    files = capture_files(out_dir)
    return {"out": str(out_dir), "launches": [f.name for f in files]}
