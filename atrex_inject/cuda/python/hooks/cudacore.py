"""Hooks on cuda-python's cuda.core (`cuda.core`, or `cuda.core.experimental` before 1.0):
`Program` becomes a subclass that keeps the text of each ObjectCode it compiles (and, compiling
the instrumented text, adds the copy's name expression to the kernel's), and `launch(stream,
config, kernel, *args)` routes each launch of the kernel through Session.launch
(docs/launches.md, "Launches from Python").

The launched Kernel's name and library come from the driver (cuKernelGetName,
cuKernelGetLibrary); the library is matched to an ObjectCode compiled here; the copy is that
ObjectCode's `get_kernel`, launched by cuda.core with the same stream, configuration and
arguments. An ObjectCode made another way (`ObjectCode.from_cubin`, ...) has no known text: its
launches are not captured.
"""
from __future__ import annotations

import inspect

from .driver import capturing, mirror_attributes
from .session import Origin, current

API = "cuda.core"
_objects: list[tuple[object, Origin]] = []  # (ObjectCode, where its code came from), kept alive with the program


def _dims(d) -> tuple:
    d = (d,) if isinstance(d, int) else tuple(d or (1,))
    return d + (1,) * (3 - len(d))


def _stream_handle(stream):
    if hasattr(stream, "handle"):
        return stream.handle
    return stream.__cuda_stream__()[1]  # an object following the CUDA stream protocol


def _launch(orig, stream, config, kernel, args):
    s = current()
    if s is None:
        return orig(stream, config, kernel, *args)
    from cuda.bindings import driver as d
    handle = d.CUkernel(int(kernel.handle))
    err, name = d.cuKernelGetName(handle)
    if err != d.CUresult.CUDA_SUCCESS or not s.is_kernel(name):
        return orig(stream, config, kernel, *args)
    lib = d.cuKernelGetLibrary(handle)[1]
    found = [(oc, o) for oc, o in _objects if int(oc.handle) == int(lib)]

    def origin():
        return found[0][1] if found else Origin(None, "a cuda.core ObjectCode no Program of this process compiled")

    def instrumented(copy: bytes):
        twin = found[0][0].get_kernel(copy.decode())
        mirror_attributes(d.cuKernelGetFunction(handle)[1], d.cuKernelGetFunction(d.CUkernel(int(twin.handle)))[1])
        return orig(stream, config, twin, *args)

    grid, cluster = _dims(config.grid), _dims(getattr(config, "cluster", None))
    grid = tuple(g * c for g, c in zip(grid, cluster))  # with a cluster, config.grid counts clusters
    sh = _stream_handle(stream)
    return s.launch(API, name, grid, _dims(config.block), sh, lambda: orig(stream, config, kernel, *args),
                    instrumented, origin, lambda: d.cuLibraryGetModule(lib)[1], lambda: capturing(sh))


def patch(core) -> None:
    if not (hasattr(core, "Program") and hasattr(core, "launch")):
        return  # cuda.core 1.x's package, or 0.x's cuda.core.experimental: whichever holds them
    Base, orig_launch = core.Program, core.launch
    first = next(iter(inspect.signature(orig_launch).parameters), None)
    if first != "stream":  # cuda.core before 0.3 took launch(kernel, config, *args)
        raise RuntimeError(f"this cuda.core's launch takes {first!r} first; the hooks know launch(stream, config, "
                           "kernel, *args) (cuda.core 0.3 and later)")

    class Program(Base):
        __doc__ = Base.__doc__

        def __init__(self, code, code_type, *args, **kwargs):
            super().__init__(code, code_type, *args, **kwargs)
            self._atrex_origin = Origin(code if isinstance(code, str) else None, f"a cuda.core Program ({code_type})")

        def compile(self, target_type, *args, **kwargs):
            s = current()
            names = args[0] if args else kwargs.get("name_expressions")
            if s is not None and names:
                names = tuple(names) + tuple(c for c in (s.copy_expression(n, self._atrex_origin.text) for n in names)
                                             if c is not None)
                args, kwargs = ((names,) + args[1:], kwargs) if args else (args, dict(kwargs, name_expressions=names))
            oc = super().compile(target_type, *args, **kwargs)
            _objects.append((oc, self._atrex_origin))
            return oc

    def launch(stream, config, kernel, *kernel_args):
        return _launch(orig_launch, stream, config, kernel, kernel_args)

    Program.__module__, Program.__qualname__ = Base.__module__, Base.__qualname__
    launch.__doc__, launch.__qualname__ = orig_launch.__doc__, "launch"
    core.Program, core.launch = Program, launch
