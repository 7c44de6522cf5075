"""apply's last check before it writes: the instrumented source compiles whole, host side included.

The recorder choice compiles device code only (`-cubin`), and with an explicit recorder nothing is
compiled at all, so a rewrite the host compiler refuses (a launch through `(on ? k__atrex : k)`
that drops a default argument) or one the device compiler refuses (a payload out of scope) would be
written with exit 0. Where nvcc is available the instrumented text is compiled to an object with the
build's flags; if it fails while the clean text compiles the same way, apply refuses, naming nvcc's
first error and the instrumented line. A clean text that does not compile on its own (it needs
flags or a build context the spec does not give) cannot judge the rewrite: that is a warning.
Successes are remembered in the build cache (sass.BUILD_CACHE_ENV) under a key of everything the
compile read. The source id is zeroed before the compile: no code reads it, and two rewrites that
differ in it alone (a kernel.py whose text changed outside its string) share one cache entry.
`#line` directives are kept: code may read `__LINE__` (a static_assert on it compiles only with them).
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

from . import choice
from .assets import asset_dir
from .errors import AtrexError
from .fsio import sha256_bytes, write_atomic
from .sass import BUILD_CACHE_ENV, dependency_digest, nvcc
from .source_id import zeroed
from .spec import ProbeSpec

_ERROR_AT = re.compile(r"^(?P<file>[^:\s]+)\((?P<line>\d+)\): (?:fatal )?error"
                       r"|^(?P<file2>[^:\s]+):(?P<line2>\d+):\d+: (?:fatal )?error", re.M)


def _compile(t: choice.Target, tmp: Path, name: str, text: str, launchers: dict[str, str] | None = None) -> str | None:
    """nvcc's error output when `text` (with `launchers`, for a header) does not compile to an
    object as the spec's source (choice.Target.unit), or None."""
    unit, include = t.unit(tmp, name, text, launchers)
    folders = [str(asset_dir("runtime")), *include]
    cmd = [nvcc(), "-c", *(f"-I{d}" for d in folders), *t.flags, "-o", str(tmp / f"{name}.o"), str(unit)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=t.spec.path.parent)
    except OSError as e:
        return f"cannot run nvcc: {e}"
    return None if p.returncode == 0 else p.stderr.strip() or p.stdout.strip() or f"nvcc exit {p.returncode}"


def _cache_mark(t: choice.Target, text: str, launchers: dict[str, str] | None) -> Path | None:
    """Where a compile that passed is remembered: keyed by every file it reads (dependency_digest)."""
    folder = os.environ.get(BUILD_CACHE_ENV)
    if not folder:
        return None
    with tempfile.TemporaryDirectory(prefix="atrex-host-") as tmp:
        unit, include = t.unit(Path(tmp), "instrumented", text, launchers)
        deps = dependency_digest(unit, [str(asset_dir("runtime")), *include], t.flags, t.spec.path.parent)
    if deps is None:
        return None
    return Path(folder) / f"host-{sha256_bytes(deps.encode())[:32]}.ok"


def _first_error(log: str, name: str) -> tuple[int | None, str]:
    """(line in the compiled text, the error's line of nvcc's output) of the first error."""
    for m in _ERROR_AT.finditer(log):
        file = m["file"] or m["file2"]
        if Path(file).name.startswith(name) or f"/{name}/shadow/" in file:
            end = log.find("\n", m.end())
            said = log[m.start():end if end >= 0 else len(log)].split(": ", 1)[1]  # no temporary path
            return int(m["line"] or m["line2"]), said.strip()[:300]
    lines = [re.sub(r"(?<!\S)/\S*/", "", l.strip()) for l in log.splitlines() if l.strip()]  # no temporary folder
    return None, next((l for l in lines if "error" in l), lines[-1] if lines else log)[:300]


def check(spec: ProbeSpec, clean: str, instrumented: str, flags: list[str] | None = None,
          clean_launchers: dict[str, str] | None = None, launchers: dict[str, str] | None = None) -> list[str]:
    """Refuse (AtrexError, exit 2) an instrumented text that does not compile where its clean text
    does; the warnings to keep where it could not be judged. `clean_launchers`, `launchers`: the
    spec's launchers (rel path -> text) clean and rewritten, through which a header is compiled.
    Nothing to do without nvcc or for a backend that records to buffers of its own."""
    t = choice.target(spec, instrumented, flags, launchers=clean_launchers)  # its text: the CUDA a .py holds
    if t is None:
        return []
    instrumented = t.text
    compiled = zeroed(instrumented)
    launchers = {rel: zeroed(text) for rel, text in launchers.items()} if launchers else launchers
    mark = _cache_mark(t, compiled, launchers)
    if mark is not None and mark.is_file():
        return []
    with tempfile.TemporaryDirectory(prefix="atrex-host-") as tmp:  # not beside the source: -I names its folder
        err = _compile(t, Path(tmp), "instrumented", compiled, launchers)
        if err is None:
            if mark is not None:
                try:
                    write_atomic(mark, b"")
                except OSError:
                    pass  # an unwritable cache is checked again next time
            return []
        clean_err = _compile(t, Path(tmp), "clean", choice.Target.of(spec, clean, flags, clean_launchers).text)
    if clean_err is not None:
        return [f"the instrumented source was not compiled as a whole (host side included): the clean source does "
                f"not compile on its own with {' '.join(t.flags)} ({_first_error(clean_err, 'clean')[1]}); pass "
                "your build's flags with --nvcc-flag or [build] nvcc_flags"]
    line, said = _first_error(err, "instrumented")
    text = instrumented.split("\n")[line - 1].strip() if line and line <= instrumented.count("\n") + 1 else ""
    where = f" at line {line} of the instrumented text ({text[:160]!r})" if line else ""
    raise AtrexError(f"the instrumented {spec.source_rel} does not compile while the clean one does: nvcc says "
                     f"{said}{where}; nothing was written", path=str(spec.path),
                     hint="this rewrite is a defect of atrex-inject: anchor the site elsewhere or pick another "
                          "recorder (--recorder), and report the spec and the source")
