"""Patch each launch API as the program imports it: a finder at the head of sys.meta_path hands
the modules named in PATCHES to their own loader, then patches them before the importing
statement gets them (so `from cuda.bindings.driver import cuLaunchKernel` binds the hook).
A module imported before install() is patched at once. Only the standard library is imported here
until one of them is imported: the hooks cost a process that never touches them nothing.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

# module -> (hooks module, function): cuda.core before 1.0 kept its API in cuda.core.experimental
PATCHES = {"cuda.bindings.driver": ("driver", "patch_driver"), "cuda.bindings.nvrtc": ("driver", "patch_nvrtc"),
           "cuda.core": ("cudacore", "patch"), "cuda.core.experimental": ("cudacore", "patch"),
           "cupy": ("cupyhooks", "patch")}
_done: set[str] = set()


def _patch(name: str, module) -> None:
    if name in _done:
        return
    _done.add(name)
    from .session import current
    s = current()
    if s is None:  # probes off, or no manifest (said on stderr): every launch runs as written
        return
    where, fn = PATCHES[name]
    try:
        getattr(importlib.import_module(f"{__package__}.{where}"), fn)(module)
    except Exception as e:  # noqa: BLE001 - the program must run; the ledger and stderr say what is not hooked
        s.hooked(name, e)
    else:
        s.hooked(name)


class _Loader(importlib.abc.Loader):
    def __init__(self, name: str, loader):
        self.name, self.loader = name, loader  # the name imported (a package may rename its module)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = module.__spec__.loader = self.loader  # the module sees its own loader
        self.loader.exec_module(module)
        _patch(self.name, sys.modules.get(self.name, module))


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self):
        self.finding: set[str] = set()

    def find_spec(self, name, path, target=None):
        if name not in PATCHES or name in self.finding or name in _done:
            return None
        self.finding.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.finding.discard(name)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(name, spec.loader)
        return spec


def install() -> None:
    """Patch the launch APIs already imported, and each of the others when it is imported."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    for name in PATCHES:
        if name in sys.modules:
            _patch(name, sys.modules[name])
