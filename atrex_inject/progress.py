"""Progress of long steps: the library names each step as it starts it (`step("decoding ...")`);
where the command line listens (`reporting(emit)`: not under --json or --quiet), a step still
running after THRESHOLD seconds is printed once, on stderr, so every step over a second says what
it is doing and a quick one says nothing. Without a listener (the library called from Python)
`step` does nothing.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

THRESHOLD = 1.0  # seconds a step runs before it is announced
POLL = 0.1


class _Listener:
    """The step now running, and a watcher thread that announces it once it has run THRESHOLD."""

    def __init__(self, emit: Callable[[str], None], threshold: float):
        self.emit, self.threshold = emit, threshold
        self.lock = threading.Lock()
        self.name: str | None = None
        self.since = 0.0
        self.said = True
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="atrex-progress", daemon=True)

    def begin(self, name: str) -> None:
        with self.lock:
            self.name, self.since, self.said = name, time.monotonic(), False

    def _watch(self) -> None:
        while not self.stop.wait(POLL):
            with self.lock:
                if not self.said and time.monotonic() - self.since >= self.threshold:
                    self.said = True
                    self.emit(self.name)


_listener: ContextVar[_Listener | None] = ContextVar("atrex_progress", default=None)


@contextmanager
def reporting(emit: Callable[[str], None], threshold: float = THRESHOLD) -> Iterator[None]:
    """Announce, through `emit`, each step that runs longer than `threshold` seconds in this block."""
    listener = _Listener(emit, threshold)
    token = _listener.set(listener)
    listener.thread.start()
    try:
        yield
    finally:
        listener.stop.set()
        listener.thread.join()
        _listener.reset(token)


def step(name: str) -> None:
    """The step starting now (what it does, as a person would say it: "decoding gemm-launch3")."""
    listener = _listener.get()
    if listener is not None:
        listener.begin(name)
