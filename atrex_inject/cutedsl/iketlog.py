"""What run-iket's log says about trace data IKeT lost: the one reader of that log, its patterns here.

IKeT's decoded JSON has no drop counter. Its injection library (libiket_injection.so, inside the
profiled process) says so in its log instead, which run-iket relays on its stdout; the lines are
warnings, shown only with `--log-level warn` (run-iket's default, `error`, hides them), so
`atrex-inject capture` runs it so and keeps its output in CAPTURE_DIR/run-iket.log (relay.py).
Two kinds of line count (nvidia-cutlass-dsl 4.8.1's wording, searched anywhere in a line):

- DROPPED, "Trace incomplete: N warp record(s) dropped because the warp emitted more events than
  maxTsCntPerWarp=M allows => kernel: NAME": warps of NAME lost events past IKeT's per-warp buffer
  (sized from run-iket's first, discovery pass). Counted when NAME is the target kernel's
  (iket_kernel_name); the launch is not named, so the count is the run's.
- INCOMPLETE, an `IKET` line saying trace data may be incomplete, was dropped or is unavailable
  (process-exit collection not registered, unsupported kernel parameters, copies unfinished when a
  context was released, a CUDA Graph launch read without its launch information, a launch's data
  not collected): it names no launch, and a kernel only sometimes (then only the target's count).

A line that starts a drop report ("Trace incomplete:") but does not read as one (cut or garbled)
counts as INCOMPLETE: the kernel it was about cannot be ruled out. Any other line (the program's
output, run-iket's own, another kernel's drop) is ignored; bytes that are not UTF-8 are replaced.
A log that cannot be read is a CaptureError (exit 2), before anything is written.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import CaptureError
from ..launchfile import IKET_LOG_LINE_CHARS

# Each pattern is tried once per line, from its first possible start, with no nested backtracking
# (atomic groups; a lookahead keeps each stretch scanned once): linear in the line's length, since a
# program's output may hold a 64 KiB line (relay.MAX_LINE) repeating these words
DROPPED = re.compile(r"Trace incomplete: (?P<n>[0-9]+) warp record\(s\) dropped\b(?>.*?maxTsCntPerWarp=)(?P<max>[0-9]+)"
                     r"(?>.*?=> kernel: )(?P<rest>.+)")
RAISE = ". Raise maxTsCntPerWarp"  # what IKeT writes after the kernel's name
IKET_WORD = re.compile(r"\bIKET\b")
# (what starts an INCOMPLETE line, what must follow it later in the line)
INCOMPLETE = (
    (IKET_WORD,
     re.compile(r"\btrace[ -]data\b(?:(?!\btrace[ -]data\b)[^.;])*?\b(?:incomplete|unavailable|dropped)\b")),
    (re.compile(r"\bIKET could not (?:collect|capture|generate|read)\b"), re.compile(r"\btrace data\b")),
    (re.compile(r"\bIKET could not complete\b"), re.compile(r"\btrace(?:-data)? collection\b")),
)
DROP_STARTED = "Trace incomplete:"
NAMED_KERNEL = re.compile(r'\bkernel "?(?P<kernel>[^\s"]+?)"?\.?\s*$')  # an INCOMPLETE line about one kernel
KEPT = 5  # incomplete lines kept verbatim in the sidecar (all are counted)


def iket_kernel_name(kernel: str) -> re.Pattern:
    """CuTe DSL names a kernel `kernel_cutlass_<function>_<signature>`; a spec may qualify a method
    with its class (`RMSNorm.kernel`): the function's own name is what appears."""
    return re.compile(rf"(^|_){re.escape(kernel.rsplit('.', 1)[-1])}(_|$)")


def _follows(line: str, head: re.Pattern, tail: re.Pattern) -> bool:
    """`head` somewhere in the line and `tail` after its first occurrence (a later one finds less)."""
    h = head.search(line)
    return h is not None and tail.search(line, h.end()) is not None


def read_log(path: Path, kernel: str) -> dict:
    """The sidecar's `iket_log` (docs/format.md) for `kernel` from run-iket's log at `path`."""
    ours = iket_kernel_name(kernel)
    dropped, most, incomplete, n_incomplete = 0, None, [], 0
    try:
        with open(path, "rb") as f:
            for raw in f:
                line = raw.decode(errors="replace")
                d = DROPPED.match(line, line.find(DROP_STARTED)) if DROP_STARTED in line else None
                kernel = d and d["rest"].split(RAISE, 1)[0].rstrip()
                if kernel:
                    if ours.search(kernel):
                        dropped += int(d["n"])
                        most = max(most or 0, int(d["max"]))
                    continue
                if DROP_STARTED in line or any(_follows(line, head, tail) for head, tail in INCOMPLETE):
                    named = NAMED_KERNEL.search(line)
                    if named is None or ours.search(named["kernel"]):
                        n_incomplete += 1
                        if len(incomplete) < KEPT:
                            incomplete.append(line.strip()[:IKET_LOG_LINE_CHARS])
    except OSError as e:
        raise CaptureError(f"cannot read run-iket's log: {e.strerror}", path=str(path),
                           hint="recapture: without its log, events IKeT dropped cannot be ruled out") from None
    out = {"file": Path(path).name, "dropped_warp_records": dropped}
    if most is not None:
        out["max_ts_cnt_per_warp"] = most
    return {**out, "incomplete_lines": n_incomplete, "incomplete": incomplete}
