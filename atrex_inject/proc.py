"""Run one measured sample as a process with bounded time and memory.

The sample starts in its own session (so its own process group, no shell). When it exits, or
when the timeout kills it, the whole group is killed, and so is any descendant that left the
group (setsid, a daemon): each carries a random token in its environment and is found by it in
/proc. Output is read as it comes: of stdout only the lines that start with the sample prefix are
kept (each up to MAX_LINE bytes; a longer one is cut and flagged), of stderr only the last
TAIL bytes; every byte is counted. A pipe held open by an escaped process is read for at most
DRAIN_S after the sample ends. Bytes that are not UTF-8 are replaced, never fatal. relay.py
reads its child's pipes with the same step (read_ready).
"""
from __future__ import annotations

import os
import secrets
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

TAIL = 4096  # bytes of stderr kept (the artifact stores the last 2000 characters)
MAX_LINE = 1 << 16  # bytes of one sample line
MAX_SAMPLE_LINES = 16  # more sample lines than this are counted, not kept
DRAIN_S = 1.0
TOKEN_VAR = "ATREX_SAMPLE_TOKEN"


@dataclass
class _Stream:
    prefix: bytes | None  # stdout: keep lines starting with it; None (stderr): keep the tail
    tail: bytearray = field(default_factory=bytearray)
    line: bytearray = field(default_factory=bytearray)  # the current line, at most MAX_LINE + 1 bytes
    total: int = 0
    lines: list[bytes] = field(default_factory=list)
    sample_lines: int = 0
    long_lines: int = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        if self.prefix is None:
            self.tail += data
            del self.tail[:-TAIL]
            return
        *done, rest = data.split(b"\n")
        for part in done:
            self._add(part)
            self._end_line()
        self._add(rest)

    def _add(self, part: bytes) -> None:
        room = MAX_LINE + 1 - len(self.line)
        self.line += part[:max(room, 0)]

    def _end_line(self) -> None:
        if self.line.startswith(self.prefix):
            self.sample_lines += 1
            if len(self.line) > MAX_LINE:
                self.long_lines += 1
            if len(self.lines) < MAX_SAMPLE_LINES:
                self.lines.append(bytes(self.line[:MAX_LINE]))
        self.line.clear()

    def finish(self) -> None:
        if self.prefix is not None and self.line:
            self._end_line()


@dataclass(frozen=True)
class Finished:
    exit_status: int | None  # None: killed at the timeout
    sample_lines: list[str]  # the lines starting with the prefix, each cut to MAX_LINE bytes
    n_sample_lines: int
    long_lines: int  # sample lines longer than MAX_LINE
    stdout_bytes: int
    stderr_bytes: int
    stderr_tail: str


def _kill_tagged(token: bytes) -> None:
    """SIGKILL every process of ours whose environment holds the sample's token."""
    needle = f"{TOKEN_VAR}=".encode() + token + b"\0"
    for d in Path("/proc").glob("[0-9]*"):
        try:
            if int(d.name) != os.getpid() and needle in (d / "environ").read_bytes():
                os.kill(int(d.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue  # gone, or not ours to read


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def read_ready(sel: selectors.BaseSelector, timeout: float | None) -> None:
    """Feed what each ready pipe holds to the sink registered with it (its `feed`); a pipe at
    end of file is unregistered, so a loop ends when `sel.get_map()` is empty."""
    for key, _ in sel.select(timeout=timeout):
        data = os.read(key.fd, 1 << 16)
        if data:
            key.data.feed(data)
        else:
            sel.unregister(key.fileobj)


def run_sample(argv: list[str], env: dict[str, str], timeout_s: float, prefix: str) -> Finished:
    token = secrets.token_hex(16)
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env={**env, TOKEN_VAR: token}, start_new_session=True)
    except (OSError, ValueError) as e:
        return Finished(127, [], 0, 0, 0, 0, str(e))
    out, err = _Stream(prefix.encode()), _Stream(None)
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ, out)
    sel.register(p.stderr, selectors.EVENT_READ, err)
    deadline = time.monotonic() + timeout_s
    timed_out, ended_at = False, None
    try:
        while sel.get_map():
            now = time.monotonic()
            if ended_at is None and (p.poll() is not None or now >= deadline):
                timed_out = p.returncode is None
                _kill_group(p.pid)
                _kill_tagged(token.encode())
                p.wait()
                ended_at = now
            if ended_at is not None and now >= ended_at + DRAIN_S:
                break  # a process outside our reach still holds the pipe
            read_ready(sel, 0.05)
        if ended_at is None:  # both pipes closed first: wait for the exit, within the timeout
            try:
                p.wait(timeout=max(deadline - time.monotonic(), 0))
            except subprocess.TimeoutExpired:
                timed_out = True
            _kill_group(p.pid)
            _kill_tagged(token.encode())
            p.wait()
    finally:
        sel.close()
        p.stdout.close()
        p.stderr.close()
    out.finish()
    return Finished(None if timed_out else p.returncode, [line.decode(errors="replace") for line in out.lines],
                    out.sample_lines, out.long_lines, out.total, err.total,
                    err.tail[-2000:].decode(errors="replace"))
