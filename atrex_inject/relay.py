"""Run a tool whose output the user watches and a later step reads (run-iket, whose log is the only
place IKeT reports the events it dropped): the child's stdout and stderr each go to ours as they
arrive, chunk by chunk (so a prompt without a newline still shows, and each stream keeps its
order), and into one log file a whole line at a time (so there the two streams' lines never mix
mid-line). Bytes are relayed and kept as they are; only a last line without a newline gets one in
the log, and a line longer than MAX_LINE goes there in parts rather than waiting in memory.
"""
from __future__ import annotations

import codecs
import selectors
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO, TextIO

from .proc import read_ready

MAX_LINE = 1 << 16


class _Text:
    """Bytes onto a text stream that has no byte layer (sys.stdout replaced by a StringIO)."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def write(self, data: bytes) -> None:
        self.stream.write(self.decoder.decode(data))

    def flush(self) -> None:
        self.stream.flush()


class _Tee:
    """One of the child's pipes: each chunk to the terminal at once, complete lines to the log."""

    def __init__(self, term, log: BinaryIO):
        self.term, self.log, self.line = term, log, bytearray()

    def feed(self, data: bytes) -> None:
        self.term.write(data)
        self.term.flush()
        self.line += data
        cut = self.line.rfind(b"\n") + 1 or (len(self.line) if len(self.line) > MAX_LINE else 0)
        if cut:
            self.log.write(self.line[:cut])
            del self.line[:cut]

    def finish(self) -> None:
        if self.line:
            self.log.write(bytes(self.line) + b"\n")


def _bytes_of(stream: TextIO):
    stream.flush()  # what was printed before the child's output goes out first
    return getattr(stream, "buffer", None) or _Text(stream)


def relay(argv: list[str], env: dict[str, str], log_path: Path, out: TextIO | None = None,
          err: TextIO | None = None) -> int:
    """Run `argv` (stdin inherited) relaying its stdout to `out` and stderr to `err` (default: ours)
    and keeping both in `log_path`: its exit status. OSError when it cannot start or the log cannot
    be written; the child is killed if relaying fails or is interrupted."""
    term_out, term_err = _bytes_of(out or sys.stdout), _bytes_of(err or sys.stderr)
    with open(log_path, "wb") as log:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        tees = (_Tee(term_out, log), _Tee(term_err, log))
        sel = selectors.DefaultSelector()
        try:
            sel.register(p.stdout, selectors.EVENT_READ, tees[0])
            sel.register(p.stderr, selectors.EVENT_READ, tees[1])
            while sel.get_map():
                read_ready(sel, None)
            for t in tees:
                t.finish()
            return p.wait()
        finally:
            sel.close()
            p.stdout.close()
            p.stderr.close()
            if p.poll() is None:
                p.kill()
                p.wait()
