"""One process's capture of the kernel's launches from Python: counting them, choosing those the
spec's [capture] skip/count selects, running each chosen one as the instrumented copy under a
capture.LaunchCapture (../capture.py), and keeping the ledger (ledger.py). The API hooks (driver.py,
cudacore.py, cupyhooks.py) each turn a launch into one Session.launch call.

A chosen launch is not captured, and runs the clean kernel as the program asked, when:
- the CUDA text its module was compiled from is unknown to the hooks (a cubin loaded from a file,
  a module compiled before they were installed) or is not the instrumented source (its source
  id differs: a stale build, or a string changed before compiling);
- its stream is capturing a CUDA graph (the launch would run, without a buffer, at replay);
- the capture cannot be set up, the copy's launch fails, or its buffer cannot be read back.
Each is in the ledger and on stderr with the reason and what to do.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .... import manifest as mf
from ....errors import AtrexError, CaptureError
from ..capture import RUN_ID, LaunchCapture, copy_expression, kernel_copy
from ....source_id import source_id_of
from . import ledger

COMPILE_HERE = ("compile the instrumented string in this process, through NVRTC (cuda.bindings.nvrtc), a cuda.core "
                "Program or CuPy's RawKernel/RawModule(code=...), and launch from what it built")


@dataclass(frozen=True)
class Origin:
    """Where a module's code came from: the CUDA text it was compiled from (None: unknown), and how
    it was built or loaded, for messages."""
    text: str | None
    how: str


class Session:
    """The kernel's launches from Python in this process (module docstring)."""

    def __init__(self, manifest: mf.Manifest, out_dir: Path):
        self.manifest, self.out = manifest, out_dir
        self.lock = threading.Lock()
        self.local = threading.local()  # .busy: inside a launch being handled (a nested hook passes it on)
        self.record = {"run_id": RUN_ID, "kernel": manifest.kernel, "hooked": [], "failed_hooks": [],
                       "launches": 0, "skipped": 0, "written": [], "not_captured": []}

    # the ledger
    def save(self) -> None:
        try:
            ledger.write(self.out, os.getpid(), self.record)
        except OSError as e:
            sys.stderr.write(f"atrex: cannot write the launch ledger into {self.out}: {e}\n")

    def hooked(self, api: str, error: Exception | None = None) -> None:
        with self.lock:
            self.record["failed_hooks" if error else "hooked"].append(api)
            self.save()
        if error:
            sys.stderr.write(f"atrex: launches through {api} are not hooked ({type(error).__name__}: {error}); "
                             "any launch of the kernel through it runs without probes and is not counted\n")

    def _missed(self, seq: int, api: str, reason: str, hint: str) -> None:
        with self.lock:
            self.record["not_captured"].append({"seq": seq, "api": api, "reason": reason, "hint": hint})
            self.save()
        what = f"launch {seq}" if seq >= 0 else "a launch"
        sys.stderr.write(f"atrex: {what} of {self.manifest.kernel} through {api} was not captured: {reason}\n"
                         f"atrex:   to capture it: {hint}\n")

    def not_a_launch(self, api: str, reason: str, hint: str) -> None:
        """Something that launches the kernel later, uncaptured (a graph node): recorded with launch
        number -1, since it is no launch of the program's count."""
        self._missed(-1, api, reason, hint)

    def copy_expression(self, expression: str | bytes, text: str | None) -> str | None:
        """The copy's name expression to add beside `expression` in a compile of `text`; None unless
        `text` is the instrumented source: any other compile (the clean string, another program with
        a kernel of the same name) goes to the compiler exactly as the program made it."""
        if text is None or source_id_of(text) != self.manifest.source.source_id:
            return None
        return copy_expression(self.manifest, expression)

    # one launch
    def is_kernel(self, symbol: str | bytes | None) -> bool:
        return symbol is not None and kernel_copy(self.manifest, symbol) is not None

    def _problem(self, origin: Origin, capturing: Callable[[], bool]) -> tuple[str, str] | None:
        """Why a launch from a module of this origin, on a stream `capturing()` says is capturing a
        graph or not, cannot be captured (reason, what to do); None when it can."""
        if origin.text is None:
            return f"its module came from {origin.how}: the CUDA text it was built from is unknown", COMPILE_HERE
        sid = source_id_of(origin.text)
        if sid != self.manifest.source.source_id:
            return (f"its module came from {origin.how}, compiled from a text that is not the instrumented source "
                    f"(source id {sid[:16]}…, the manifest's {self.manifest.source.source_id[:16]}…)",
                    "compile the string exactly as `apply` wrote it (no .replace or formatting on it); after editing "
                    "the source, revert, apply and rebuild")
        if capturing():
            return ("its stream is capturing a CUDA graph: the launch would run at replay, with no buffer bound",
                    "launch the kernel outside graph capture while recording")
        return None

    def launch(self, api: str, symbol: str | bytes | None, grid, block, stream, clean: Callable,
               instrumented: Callable[[bytes], object], origin: Callable[[], Origin], module: Callable,
               capturing: Callable[[], bool] = lambda: False):
        """A launch through `api` of the function named `symbol`. `clean()` makes the launch as the
        program asked and returns what the API returns; `instrumented(copy_symbol)` makes it with the
        instrumented copy instead (raising on failure); `origin()` says where the function's module
        came from, `module()` is its CUmodule, `capturing()` whether the stream is capturing a graph."""
        if getattr(self.local, "busy", False) or not self.is_kernel(symbol):
            return clean()
        self.local.busy = True
        try:
            with self.lock:
                seq = self.record["launches"]
                self.record["launches"] += 1
            cap = self.manifest.capture
            if seq < cap.skip or (cap.count and seq >= cap.skip + cap.count):
                with self.lock:
                    self.record["skipped"] += 1
                return clean()
            return self._capture(seq, api, kernel_copy(self.manifest, symbol), grid, block, stream, clean,
                                 instrumented, origin, module, capturing)
        finally:
            self.local.busy = False

    def _capture(self, seq, api, copy, grid, block, stream, clean, instrumented, origin, module, capturing):
        try:
            o = origin()
            problem = self._problem(o, capturing)
            if problem:
                self._missed(seq, api, *problem)
                return clean()
            lc = LaunchCapture(module(), self.manifest, grid, block, self.out, launch_seq=seq, stream=stream,
                               source_id=source_id_of(o.text), api=api)
            lc.bind()
        except AtrexError as e:
            self._missed(seq, api, f"the capture could not be set up: {e.message}", e.hint or COMPILE_HERE)
            return clean()
        except Exception as e:  # noqa: BLE001 - a driver that cannot be reached: the program still runs
            self._missed(seq, api, f"the capture could not be set up ({type(e).__name__}: {e})",
                         "check that cuda-python's driver bindings work in this process")
            return clean()
        try:
            result = instrumented(copy)
        except Exception as e:  # noqa: BLE001 - the program gets the clean launch and its own error, if any
            lc.release()
            self._missed(seq, api, f"the instrumented copy {copy.decode()} failed to launch ({e}); the clean kernel "
                         "ran instead", "check that the copy fits the launch (registers, shared memory): atrex-inject "
                                        "check-sass SPEC")
            return clean()
        try:
            lc.write()
        except AtrexError as e:
            self._missed(seq, api, f"its buffer could not be read back or written: {e.message}",
                         e.hint or "check the capture folder's free space and that the kernel did not fail")
        else:
            with self.lock:
                self.record["written"].append(seq)
                self.save()
        finally:
            lc.release()
        return result


_session: Session | None = None
_tried = False


def current() -> Session | None:
    """This process's session, made on first use from ATREX_TIMELINE_OUT and ATREX_MANIFEST (set by
    `atrex-inject capture`); None when they are not set (probes off: every launch runs as written)."""
    global _session, _tried
    if not _tried:
        _tried = True
        out, path = os.environ.get("ATREX_TIMELINE_OUT", ""), os.environ.get("ATREX_MANIFEST", "")
        if not out:
            return None
        try:
            if not path:
                raise CaptureError("ATREX_MANIFEST is not set", hint="run the program under atrex-inject capture")
            m = mf.load_if_present(Path(path))
            if m is None:
                raise CaptureError(f"ATREX_MANIFEST names {path}, which does not exist", hint="apply the spec first")
            Path(out).mkdir(parents=True, exist_ok=True)
        except AtrexError as e:
            sys.stderr.write(f"atrex: launches from Python are not captured: {e}\n")
            return None
        except (OSError, ValueError) as e:  # the program runs as written; only its capture is lost
            sys.stderr.write(f"atrex: launches from Python are not captured: ATREX_TIMELINE_OUT={out!r} is not a "
                             f"folder this process can make or write ({type(e).__name__}: {e}); give capture's "
                             "--out a writable folder\n")
            return None
        _session = Session(m, Path(out))
        atexit.register(_session.save)
    return _session
