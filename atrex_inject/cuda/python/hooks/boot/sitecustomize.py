# atrex-inject's start-up hook, on PYTHONPATH only under `atrex-inject capture` (atrex_inject/cuda/python/hooks):
# it installs the launch hooks, then runs the sitecustomize this one hides, if there is one.
import os
import sys


def _atrex_boot():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from atrex_inject.cuda.python.hooks.imports import install
        install()
    except Exception as e:  # noqa: BLE001 - the program must run; the user must know its launches are not hooked
        sys.stderr.write(f"atrex: launches from Python are not hooked in this process ({type(e).__name__}: {e}); "
                         "install atrex-inject in the interpreter that runs the program\n")
    import importlib.machinery
    import importlib.util
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)


_atrex_boot()
del _atrex_boot
