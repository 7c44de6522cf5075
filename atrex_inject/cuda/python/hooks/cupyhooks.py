"""Hooks on CuPy: `cupy.RawKernel` and `cupy.RawModule` become subclasses that route each launch of
the kernel through Session.launch (docs/launches.md, "Launches from Python").

- `RawKernel(code, name, ...)(grid, block, args, ...)`: the text is the kernel's `code`; the copy is
  taken from the module CuPy built for it (`kernel.module.get_function`) and launched by CuPy with
  the same arguments, stream and shared memory.
- `RawModule(code=..., name_expressions=...)`: where `code` is the instrumented source, a name
  expression of the kernel is followed by the copy's (a template kernel's copy must be instantiated
  too); `get_function(name)` of the kernel
  returns the RawKernel CuPy made, wrapped so its calls come here (every attribute read or set goes
  to it); any other function is returned as CuPy made it.

Not seen: a RawKernel's `.kernel` (a cupy Function) called directly, and modules loaded by hand
with `cupy.cuda.Module`; a RawModule loaded from a `path` is seen, and its launches are not
captured (its text is unknown).
"""
from __future__ import annotations

from .driver import capturing, mirror_attributes
from .session import Origin, current

API = "cupy"


def _dims(d) -> tuple:
    d = (d,) if isinstance(d, int) else tuple(d)
    return d + (1,) * (3 - len(d))


def _launch(ker, call, grid, block, args, kwargs):
    """A call of RawKernel `ker`; `call(grid, block, args, **kwargs)` is CuPy's own."""
    s = current()
    if s is None or not s.is_kernel(ker.name):
        return call(grid, block, args, **kwargs)
    import cupy
    from cuda.bindings import driver
    stream = kwargs.get("stream") or cupy.cuda.get_current_stream()

    def origin():
        if ker.code is None:
            return Origin(None, f"a CuPy module loaded from {ker.file_path}")
        return Origin(ker.code, "a CuPy RawKernel/RawModule compiled from its code")

    def instrumented(copy: bytes):
        fn = ker.kernel
        twin = fn.module.get_function(copy.decode())
        mirror_attributes(driver.CUfunction(fn.ptr), driver.CUfunction(twin.ptr))
        return twin(grid, block, args, enable_cooperative_groups=ker.enable_cooperative_groups, **kwargs)

    return s.launch(API, ker.name, _dims(grid), _dims(block), stream.ptr, lambda: call(grid, block, args, **kwargs),
                    instrumented, origin, lambda: driver.CUmodule(ker.kernel.module.ptr),
                    lambda: capturing(stream.ptr))


class _Hooked:
    """A RawKernel that RawModule.get_function made: calls come to _launch, attributes go to it."""
    __slots__ = ("_ker",)

    def __init__(self, ker):
        object.__setattr__(self, "_ker", ker)

    def __call__(self, grid, block, args, **kwargs):
        return _launch(self._ker, self._ker.__call__, grid, block, args, kwargs)

    def __getattr__(self, name):
        return getattr(self._ker, name)

    def __setattr__(self, name, value):
        setattr(self._ker, name, value)

    def __repr__(self):
        return repr(self._ker)


def patch(cupy) -> None:
    Kernel, Module = cupy.RawKernel, cupy.RawModule

    class RawKernel(Kernel):
        __doc__ = Kernel.__doc__

        def __call__(self, grid, block, args, **kwargs):
            return _launch(self, super().__call__, grid, block, args, kwargs)

    class RawModule(Module):
        __doc__ = Module.__doc__

        def __init__(self, *args, **kwargs):
            s, names = current(), kwargs.get("name_expressions")
            if s is not None and names is not None:
                names = list(names)
                code = kwargs.get("code", args[0] if args else None)
                kwargs["name_expressions"] = names + [c for c in (s.copy_expression(n, code) for n in names)
                                                      if c is not None]
            super().__init__(*args, **kwargs)

        def get_function(self, name):
            ker, s = super().get_function(name), current()
            return _Hooked(ker) if s is not None and s.is_kernel(ker.name) else ker  # others as CuPy made them

    for cls, base in ((RawKernel, Kernel), (RawModule, Module)):
        cls.__module__, cls.__qualname__ = base.__module__, base.__qualname__
    cupy.RawKernel, cupy.RawModule = RawKernel, RawModule
