"""What run-iket's log says about trace data IKeT lost (issue 14): read from the log `capture` keeps
(relay.py), carried in every sidecar as `iket_log`, counted by validate under overflow (dropped warp
records) and truncation (incomplete trace). Every log line here is synthetic, in the wording of
nvidia-cutlass-dsl 4.8.1's libiket_injection.so; the traces and captures are the real H200
fixtures (tests/fixtures/h200/PROVENANCE.md)."""
from __future__ import annotations

import json
import shutil
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from atrex_inject.cutedsl.iketlog import KEPT, read_log
from atrex_inject.cutedsl.normalize import normalize_run
from atrex_inject.errors import CaptureError
from atrex_inject.launchfile import IKET_LOG_LINE_CHARS
from atrex_inject.layout import HEADER_BYTES, HEADER_DTYPE
from atrex_inject.manifest import load as load_manifest
from atrex_inject.relay import MAX_LINE, relay
from atrex_inject.validate import validate_capture
from test_validate import FIX, failing

IKET = FIX / "cutedsl"
M = load_manifest(IKET / "manifest.json")
OURS = json.loads((IKET / "scale_add_kernel-launch0.json").read_text())["iket_kernel"]
SUBSET_UNCLAIMED = 520 * 8  # the trace subset holds CTAs 0-7 of 528: the other CTAs' warps never claimed


def drop_line(n: int, kernel: str, limit: int = 64) -> str:
    return (f"Trace incomplete: {n} warp record(s) dropped because the warp emitted more events than "
            f"maxTsCntPerWarp={limit} allows => kernel: {kernel}. Raise maxTsCntPerWarp to capture them; a discovery "
            "pass reports a suitable value.")


# IKeT's lines that say trace data was lost, each with its {} filled in
LOSS = [
    "IKET could not register final trace collection; process-exit trace data may be incomplete.",
    "IKET encountered unsupported CUDA kernel parameters; trace data may be incomplete.",
    "IKET could not finish pending trace-data copies within 30s while releasing CUDA context 0x55d0; remaining trace "
    "data will be dropped.",
    "IKET could not read trace data for a CUDA Graph launch because launch information is incomplete.",
    "IKET could not collect trace data for launch 3; its CUDA context is no longer available.",
    "IKET could not collect trace data for launch 3.",
    "IKET could not schedule trace collection for launch 3; trace data will be unavailable.",
    "IKET could not collect trace data for 2 CUDA launches because CUDA context resources are unavailable.",
    "IKET could not collect all deferred trace data.",
    "IKET could not complete deferred trace-data collection.",
    "IKET could not synchronize CUDA work before deferred trace collection; some trace data will be unavailable.",
    "IKET could not verify trace-data copy completion; affected trace data will be unavailable.",
    "IKET could not validate a CUDA Graph launch; trace data for this launch is unavailable.",
    "IKET could not complete CUDA Graph trace collection because launch information is unavailable.",
    f'IKET could not generate trace data for CUDA kernel "{OURS}".',
    f"IKET could not capture trace data for kernel {OURS}.",
    "Trace incomplete: 12 warp record(s) dropped because the warp emitted more ev",  # a drop report cut short
]
# lines that are not a loss of this kernel's trace data
NOT_LOSS = [
    drop_line(5, "kernel_cutlass_other_kernel_0"),
    drop_line(5, "kernel_cutlass_scale_add_kernel2_0"),  # contains the target's name, is not the target
    'IKET could not generate trace data for CUDA kernel "kernel_cutlass_other_kernel_0".',
    'IKET could not enable optional CUDA compatibility support (error 1: "x"). Some CUDA operations may be '
    "unavailable while profiling.",
    "IKET could not inspect a CUDA module for instrumentation; the module will be skipped.",
    "[run-iket] ============= Run application for real profiling... =============",
    "step 3: trace data may be incomplete",  # the program's own output, not IKeT's
]


def _capture(tmp_path: Path, log_text: str | bytes | None) -> tuple[Path, dict]:
    """The real trace subset through normalize_run, with a synthetic run-iket log (None: no log)."""
    iket = tmp_path / "iket"
    iket.mkdir()
    shutil.copy(IKET / "iket_trace.cta0-7.json", iket / "iket_pid_1.trace.json")
    out = tmp_path / "cap"
    out.mkdir()
    log = None
    if log_text is not None:
        log = tmp_path / "synthetic-run-iket.log"
        log.write_bytes(log_text if isinstance(log_text, bytes) else log_text.encode())
    normalize_run(iket, M, out, "w", log)
    return out, validate_capture(out, M)


def _detail(r: dict, check: str, contains: str) -> str:
    return next(d for c in r["checks"] if c["name"] == check for d in c["details"] if contains in d)


def test_no_log_changes_nothing(tmp_path):
    out, r = _capture(tmp_path, None)
    assert failing(r) == {"truncation": SUBSET_UNCLAIMED}
    assert "iket_log" not in json.loads((out / "scale_add_kernel-launch0.json").read_text())


def test_synthetic_drop_of_the_target_kernel_is_overflow(tmp_path):
    log = "\n".join(["[run-iket] ============= Run application for real profiling... =============",
                     "[2026-12-01 10:00:00.000] [iket] [warning] " + drop_line(12, OURS),
                     drop_line(3, OURS, limit=80)]) + "\n"
    out, r = _capture(tmp_path, log)
    assert failing(r) == {"truncation": SUBSET_UNCLAIMED, "overflow": 15}
    d = _detail(r, "overflow", "run-iket's log")
    assert "IKeT dropped 15 warp record(s) of kernel 'scale_add_kernel'" in d
    assert "maxTsCntPerWarp=80" in d and "recapture" in d and "raise maxTsCntPerWarp" in d
    side = json.loads((out / "scale_add_kernel-launch0.json").read_text())
    assert side["iket_log"] == {"file": "synthetic-run-iket.log", "dropped_warp_records": 15,
                                "max_ts_cnt_per_warp": 80, "incomplete_lines": 0, "incomplete": []}


@pytest.mark.parametrize("line", NOT_LOSS)
def test_synthetic_line_about_something_else_keeps_it_valid(tmp_path, line):
    out, r = _capture(tmp_path, line + "\n")
    assert failing(r) == {"truncation": SUBSET_UNCLAIMED}
    assert json.loads((out / "scale_add_kernel-launch0.json").read_text())["iket_log"]["dropped_warp_records"] == 0


@pytest.mark.parametrize("line", LOSS)
def test_synthetic_incomplete_trace_is_truncation(tmp_path, line):
    _, r = _capture(tmp_path, "program output\n" + line + "\n")
    assert failing(r) == {"truncation": SUBSET_UNCLAIMED + 1}
    d = _detail(r, "truncation", "run-iket's log")
    assert "has 1 line(s) saying IKeT's trace data is incomplete" in d and line[:60] in d and "recapture" in d


def test_every_incomplete_line_counts_and_a_few_are_kept(tmp_path):
    out, r = _capture(tmp_path, "\n".join(LOSS) + "\n")
    assert failing(r) == {"truncation": SUBSET_UNCLAIMED + len(LOSS)}
    said = json.loads((out / "scale_add_kernel-launch0.json").read_text())["iket_log"]
    assert said["incomplete_lines"] == len(LOSS) and said["incomplete"] == LOSS[:KEPT]


def test_garbled_log_is_read_without_error(tmp_path):
    """Bytes that are not UTF-8, a NUL, a number that is not one, no final newline: no traceback; what
    reads as a drop of the target still counts."""
    log = (b"\xff\xfe\x00junk\n" + b"Trace incomplete: twelve warp record(s)" + b"\x80\n"
           + b"\xc3" + drop_line(2, OURS).encode() + b"\n" + b"\x1b[33m" + b"[run-iket] done")
    _, r = _capture(tmp_path, log)
    assert failing(r) == {"truncation": SUBSET_UNCLAIMED + 1, "overflow": 2}


@pytest.mark.parametrize("line,incomplete", [
    ("Trace incomplete: 1 warp record(s) dropped maxTsCntPerWarp=1 ", 1),  # a drop report never naming its kernel
    ("IKET trace data ", 0),  # never saying incomplete
    ("IKET could not collect ", 0)])
def test_line_as_long_as_the_relay_keeps_is_read(tmp_path, line, incomplete):
    """A synthetic line of relay.MAX_LINE bytes repeating a pattern's words: each pattern is tried
    once per line (before, every start and every later word was retried: 12 s for a 30 KB line,
    750 s for 120 KB)."""
    log = tmp_path / "synthetic-run-iket.log"
    log.write_text(line * (MAX_LINE // len(line)) + "\n")
    r = read_log(log, M.kernel)
    assert (r["dropped_warp_records"], r["incomplete_lines"], len(r["incomplete"])) == (0, incomplete, incomplete)


@pytest.mark.parametrize("where", ["missing", "directory"])
def test_unreadable_log_refuses_before_writing(tmp_path, where):
    iket = tmp_path / "iket"
    iket.mkdir()
    shutil.copy(IKET / "iket_trace.cta0-7.json", iket / "iket_pid_1.trace.json")
    log = tmp_path / "run-iket.log"
    if where == "directory":
        log.mkdir()
    out = tmp_path / "cap"
    out.mkdir()
    with pytest.raises(CaptureError, match="cannot read run-iket's log") as e:
        normalize_run(iket, M, out, "w", log)
    assert e.value.path == str(log) and "recapture" in e.value.hint
    assert list(out.iterdir()) == []


# ---- the sidecar field, on copies of the real normalized launch (valid as committed) ----

def _full(tmp_path: Path, **iket_log) -> Path:
    d = tmp_path / "full"
    d.mkdir(parents=True)
    for f in IKET.glob("scale_add_kernel-launch0.*"):
        shutil.copy(f, d / f.name)
    if iket_log:
        side = d / "scale_add_kernel-launch0.json"
        side.write_text(json.dumps({**json.loads(side.read_text()), "iket_log": iket_log}))
    return d


def _second_launch(d: Path, **sidecar) -> None:
    """The launch again as launch 1 of the same run, re-signed (header launch number, CRC, sidecar)."""
    raw = np.fromfile(d / "scale_add_kernel-launch0.atrex", dtype=np.uint8)
    raw[:HEADER_BYTES].view(HEADER_DTYPE)["launch_seq"] = 1
    (d / "scale_add_kernel-launch1.atrex").write_bytes(raw.tobytes())
    meta = json.loads((d / "scale_add_kernel-launch0.json").read_text())
    meta.update(crc32=zlib.crc32(raw.tobytes()), launch_seq=1, file="scale_add_kernel-launch1.atrex", **sidecar)
    (d / "scale_add_kernel-launch1.json").write_text(json.dumps(meta))


CLEAN_LOG = {"file": "run-iket.log", "dropped_warp_records": 0, "incomplete_lines": 0, "incomplete": []}


def test_real_clean_log_and_older_sidecars_validate(tmp_path):
    """The H200 capture's run-iket log (its compatibility warnings included) reports no loss; a sidecar
    written before run-iket logs were read (no iket_log) validates too."""
    side = json.loads((IKET / "scale_add_kernel-launch0.json").read_text())
    assert side["iket_log"] == {"file": "run-iket.log", "dropped_warp_records": 0, "incomplete_lines": 0,
                                "incomplete": []}
    assert "IKET could not enable optional CUDA compatibility support" in (IKET / "run-iket.log").read_text()
    assert validate_capture(IKET, M)["verdict"] == "valid"
    older = tmp_path / "older"
    shutil.copytree(IKET, older)
    del side["iket_log"]
    (older / "scale_add_kernel-launch0.json").write_text(json.dumps(side))
    r = validate_capture(older, M)
    assert r["verdict"] == "valid" and failing(r) == {}


def test_planted_drop_counts_once_per_run(tmp_path):
    d = _full(tmp_path, **CLEAN_LOG)
    assert failing(validate_capture(d, M)) == {}
    said = {**CLEAN_LOG, "dropped_warp_records": 3, "max_ts_cnt_per_warp": 64}
    d = _full(tmp_path / "drop", **said)
    _second_launch(d, iket_log=said)  # the same run's second launch restates the run's count
    assert failing(validate_capture(d, M)) == {"overflow": 3}


def test_planted_incomplete_trace(tmp_path):
    r = validate_capture(_full(tmp_path, **{**CLEAN_LOG, "incomplete_lines": 2, "incomplete": [LOSS[0]]}), M)
    assert failing(r) == {"truncation": 2}
    assert "has 2 line(s)" in _detail(r, "truncation", "run-iket's log")


def test_a_huge_kept_line_is_quoted_cut(tmp_path):
    """A sidecar whose kept line is 10 MB (written by hand: the normalizer cuts them) is quoted at
    IKET_LOG_LINE_CHARS, not echoed whole into the report."""
    r = validate_capture(_full(tmp_path, **{**CLEAN_LOG, "incomplete_lines": 1, "incomplete": ["x" * 10_000_000]}), M)
    assert failing(r) == {"truncation": 1}
    detail = _detail(r, "truncation", "run-iket's log")
    assert f"first: {'x' * IKET_LOG_LINE_CHARS!r}; recapture" in detail and len(detail) < 2 * IKET_LOG_LINE_CHARS


def test_launches_that_disagree_on_the_log(tmp_path):
    d = _full(tmp_path, **CLEAN_LOG)
    _second_launch(d, iket_log={**CLEAN_LOG, "dropped_warp_records": 4})
    r = validate_capture(d, M)
    assert failing(r) == {"cross_launch_mixing": 1, "overflow": 4}
    assert "launches disagree on what run-iket's log said" in _detail(r, "cross_launch_mixing", "iket_log")


@pytest.mark.parametrize("field,value,kind", [("dropped_warp_records", "3", "non-negative integer, not str"),
                                              ("dropped_warp_records", -1, "non-negative integer, not -1"),
                                              ("incomplete_lines", True, "non-negative integer, not True"),
                                              ("incomplete", "x", "JSON array, not str"),
                                              ("file", 7, "string, not int")])
def test_mistyped_iket_log_is_refused(tmp_path, field, value, kind):
    r = validate_capture(_full(tmp_path, **{**CLEAN_LOG, field: value}), M)
    assert failing(r) == {"cross_launch_mixing": 1}
    assert f"sidecar field 'iket_log.{field}' must be a {kind}" in _detail(r, "cross_launch_mixing", "iket_log")


def test_read_log_sums_only_the_target(tmp_path):
    log = tmp_path / "synthetic.log"
    log.write_text("\n".join([drop_line(1, OURS), drop_line(100, "kernel_cutlass_other_0"), drop_line(2, OURS)]))
    assert read_log(log, "scale_add_kernel") == {"file": "synthetic.log", "dropped_warp_records": 3,
                                                 "max_ts_cnt_per_warp": 64, "incomplete_lines": 0, "incomplete": []}


# ---- relay: the child's output to the terminal as it comes, and kept ----

CHILD = r"""
import os, sys
out, err = sys.stdout.buffer, sys.stderr.buffer
for i in range(200):
    out.write(b"out %d\n" % i); out.flush()
    err.write(b"err %d\n" % i); err.flush()
out.write(b"not utf-8: \xff\xfe\n" + b"x" * (MAX + 10) + b"\n"); out.flush()
err.write(b"no newline at the end"); err.flush()
sys.exit(3)
"""


def test_relay_shows_and_keeps_both_streams(tmp_path, capfdbinary):
    log = tmp_path / "child.log"
    status = relay([sys.executable, "-c", CHILD.replace("MAX", str(MAX_LINE))], {}, log)
    assert status == 3
    term = capfdbinary.readouterr()
    want_out = b"".join(b"out %d\n" % i for i in range(200)) + b"not utf-8: \xff\xfe\n" + b"x" * (MAX_LINE + 10) + b"\n"
    want_err = b"".join(b"err %d\n" % i for i in range(200)) + b"no newline at the end"
    assert term.out == want_out and term.err == want_err  # every byte, in order, on its own stream
    kept = log.read_bytes().split(b"\n")
    assert [l for l in kept if l.startswith(b"out ")] == [b"out %d" % i for i in range(200)]
    assert [l for l in kept if l.startswith(b"err ")] == [b"err %d" % i for i in range(200)]
    assert b"not utf-8: \xff\xfe" in kept and b"no newline at the end" in kept
    assert b"".join(l for l in kept if l.startswith(b"x")) == b"x" * (MAX_LINE + 10)  # a long line, in parts
    assert len(log.read_bytes()) == len(want_out) + len(want_err) + 1  # only the last line's newline added


def test_relay_onto_a_text_stream(tmp_path):
    """sys.stdout replaced by a stream without a byte layer: the output arrives decoded."""
    import io
    out, err = io.StringIO(), io.StringIO()
    code = "import sys; print('h\\u00e9'); print('e', file=sys.stderr)"
    assert relay([sys.executable, "-c", code], {"PYTHONIOENCODING": "utf-8"}, tmp_path / "l.log", out, err) == 0
    assert out.getvalue() == "h\u00e9\n" and err.getvalue() == "e\n"


def test_capture_keeps_run_iket_log(tmp_path, capfd):
    """The real run-iket, here without a GPU: it runs the program, then fails for want of a discovery
    result; its output and the program's reach the terminal and CAPTURE_DIR/run-iket.log."""
    pytest.importorskip("iket.cli.main", reason="nvidia-cutlass-dsl is not installed")
    from atrex_inject.cutedsl.backend import BACKEND
    import os
    cmd = [sys.executable, "-c", "import sys; print('synthetic program out'); print('synthetic err', file=sys.stderr)"]
    with pytest.raises(CaptureError, match="run-iket exited with status") as e:
        BACKEND.capture(M, cmd, tmp_path, dict(os.environ))
    assert e.value.path == str(tmp_path / "run-iket.log")
    log = (tmp_path / "run-iket.log").read_text()
    term = capfd.readouterr()
    for text in ("[run-iket] ", "synthetic program out", "synthetic err"):
        assert text in log and text in term.out + term.err
    assert "unrecognized arguments" not in log  # run-iket took --log-level warn
