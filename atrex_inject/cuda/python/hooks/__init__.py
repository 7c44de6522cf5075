"""Launch hooks: the launches of an instrumented kernel that a Python program makes by the
kernel's name (NVRTC through cuda-python, cuda.core, CuPy) captured with no line of the program
changed, and every such launch that cannot be captured counted, with why (docs/launches.md,
"Launches from Python").

`atrex-inject capture` puts boot/ first on the program's PYTHONPATH (child_env); its
sitecustomize.py calls imports.install, which patches cuda.bindings.driver and .nvrtc, cuda.core
and cupy as each is imported, before the program can bind their functions. From then on:

- compiling records which CUDA text each program, image, module and library came from
  (driver.py, cudacore.py, cupyhooks.py), so a launch's source is known, not assumed;
- a launch of the manifest's kernel goes through session.Session.launch: counted in the process,
  and, for the launches the spec's [capture] skip/count selects, run as the instrumented copy
  under a capture.LaunchCapture (the clean kernel runs when it cannot be captured, and the
  launch is recorded as not captured with the reason);
- each process writes its ledger (ledger.py, `pylaunch-<pid>.json` in the capture folder), which
  `capture` reports and `validate` notes.
"""
from __future__ import annotations

import os
from pathlib import Path

BOOT = Path(__file__).resolve().parent / "boot"  # holds sitecustomize.py, and nothing else


def child_env(env: dict[str, str]) -> dict[str, str]:
    """`env` with boot/ first on PYTHONPATH, so every Python process the program starts installs
    the hooks (the package itself must be importable there, as it is for the program's own
    `import`s; a process that cannot import it says so on stderr)."""
    rest = env.get("PYTHONPATH", "")
    return dict(env, PYTHONPATH=str(BOOT) + (os.pathsep + rest if rest else ""))
