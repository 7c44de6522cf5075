"""measure's process handling with real, misbehaving processes: each sample runs in its own
process group and its descendants die with it (also on timeout, also when they left the group);
output is read with bounded memory; bytes that are not UTF-8, oversized or deeply nested sample
lines and absurd numbers are rejected with a reason, never a traceback."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from atrex_inject.cli import app
from atrex_inject.measure import Request, measure
from atrex_inject.proc import MAX_LINE

GOOD = {"latency_ms": 1.0, "correctness": "passed", "synchronized": True, "workload_identity": "wl-1",
        "device_identity": {"uuid": "GPU-test"}, "warmup": 3, "iterations": 7}
PRELUDE = f"""
import json, os, subprocess, sys, time
GOOD = {GOOD!r}
LINE = "__ATREX_TIMELINE_SAMPLE__=" + json.dumps(GOOD)
"""


def prog(body: str) -> list[str]:
    return [sys.executable, "-c", PRELUDE + body]


GOOD_PROG = prog("print(LINE)")


def one(tmp_path, body: str, timeout: float = 20.0, arm: str = "A") -> tuple[dict, dict]:
    """Measure with the misbehaving program in one arm (the first sample of the schedule; a schedule
    is ABBA or BAAB blocks)."""
    bad = prog(body)
    req = Request(bad if arm == "A" else GOOD_PROG, bad if arm == "B" else GOOD_PROG, warmup=3, iterations=7,
                  pattern="ABBA" if arm == "A" else "BAAB", timeout_s=timeout)
    art = measure(req, tmp_path / "m.json")
    return art, art["samples"][0]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def wait_dead(pid: int, within: float = 5.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def spawn_child(tmp_path, detach: bool) -> str:
    """Program text: start a child that sleeps holding stdout open (in a new session if `detach`)
    and record its pid."""
    pre = "start_new_session=True, " if detach else ""
    return (f"c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], {pre}stdout=sys.stdout)\n"
            f"open({str(tmp_path / 'child.pid')!r}, 'w').write(str(c.pid))\n")


@pytest.mark.parametrize("detach", [False, True], ids=["grandchild", "detached"])
def test_child_holding_stdout_neither_delays_nor_survives_a_good_sample(tmp_path, detach):
    t0 = time.monotonic()
    art, s = one(tmp_path, spawn_child(tmp_path, detach) + "print(LINE, flush=True)\n")
    assert s["valid"], s["reason"]
    assert s["wall_s"] < 5 and time.monotonic() - t0 < 15  # not "timed out" after 20 s
    assert wait_dead(int((tmp_path / "child.pid").read_text()))


def test_timeout_kills_the_whole_group(tmp_path):
    art, s = one(tmp_path, spawn_child(tmp_path, False) + "time.sleep(60)\n", timeout=1.0)
    assert s["reason"] == "timed out" and s["exit_status"] is None
    assert art["reasons"] == ["sample 0 (baseline): timed out"]
    assert wait_dead(int((tmp_path / "child.pid").read_text()))


def test_big_output_is_counted_not_kept(tmp_path):
    """64 MiB of stdout and 4 MiB of stderr from one sample: measure, in a process of its own so
    its peak memory is its own, keeps neither."""
    mib = 64
    body = (f"blob = b'x' * (1 << 20)\nfor _ in range({mib}): sys.stdout.buffer.write(blob)\n"
            "sys.stdout.buffer.write(b'\\n'); sys.stderr.buffer.write(blob * 4)\nprint(LINE)\n")
    driver = ("import json, resource; from pathlib import Path; from atrex_inject.measure import Request, measure\n"
              f"bad = {prog(body)!r}; good = {GOOD_PROG!r}\n"
              "req = Request(bad, good, warmup=3, iterations=7, pattern='ABBA')\n"
              f"art = measure(req, Path({str(tmp_path / 'm.json')!r}))\n"
              f"print(json.dumps([art['samples'][0], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]))")
    base = subprocess.run([sys.executable, "-c", "import resource, atrex_inject.measure; "
                           "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"],
                          capture_output=True, text=True, check=True)
    out = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, check=True)
    s, peak_kib = json.loads(out.stdout)
    assert s["valid"], s["reason"]
    assert s["output_bytes"] == {"stdout": mib * (1 << 20) + 1 + len(s["line"]) + 1, "stderr": 4 << 20}
    assert len(s["stderr_tail"]) == 2000
    grown_mib = (peak_kib - int(base.stdout)) / 1024
    assert grown_mib < 16, grown_mib  # neither the 64 MiB of stdout nor the 4 MiB of stderr was held


def test_many_sample_lines_are_counted(tmp_path):
    art, s = one(tmp_path, "for _ in range(1000): print(LINE)")
    assert s["reason"] == "printed 1000 sample lines"


@pytest.mark.parametrize("body,reason", [
    ("print(LINE + ' ' * %d)" % MAX_LINE, f"printed a sample line longer than {MAX_LINE} bytes"),
    ("print('__ATREX_TIMELINE_SAMPLE__=' + '[' * 200000)", f"printed a sample line longer than {MAX_LINE} bytes"),
    ("print('__ATREX_TIMELINE_SAMPLE__=' + '[' * 30000 + ']' * 30000)", "sample line is not JSON"),
    ("print(LINE.replace('1.0', '1' + '0' * 400))", "latency_ms 1000000000000000000000000000000000000000 is not a "
                                                     "finite positive number"),
    ("print(LINE.replace('1.0', 'NaN'))", "latency_ms nan is not a finite positive number"),
])
def test_bad_sample_lines_are_reasons(tmp_path, body, reason):
    art, s = one(tmp_path, body, arm="B")
    assert s["reason"] == reason and not art["valid"]
    assert len(s["line"]) <= MAX_LINE
    json.loads((tmp_path / "m.json").read_text())  # the artifact is written


def test_non_utf8_output_is_replaced(tmp_path):
    art, s = one(tmp_path, "sys.stdout.buffer.write(b'\\xff\\xfe junk\\n'); sys.stderr.buffer.write(b'\\xc3(\\n')\n"
                           "sys.stdout.flush(); print(LINE)\n")
    assert s["valid"], s["reason"]
    assert "\ufffd(" in s["stderr_tail"]


@pytest.mark.parametrize("opt,msg", [
    (["--timeout", "nan"], "--timeout nan must be a positive number of seconds"),
    (["--timeout", "-1"], "--timeout -1.0 must be a positive number of seconds"),
    (["--iterations", "-5"], "iterations and rounds >= 1"),
    (["--out", "."], "is a folder, or its folder does not exist"),
    (["--pattern", "AAAABBBB"], "every block of four samples must be ABBA or BAAB"),
])
def test_bad_options_refused_before_any_sample(tmp_path, monkeypatch, opt, msg):
    marker = tmp_path / "ran"
    argv = prog(f"open({str(marker)!r}, 'w').close()\nprint(LINE)")
    monkeypatch.chdir(tmp_path)  # the arms differ (measure refuses one command for both) only by an ignored argument
    r = CliRunner().invoke(app, ["measure", "--baseline", json.dumps(argv), "--instrumented", json.dumps(argv + ["B"]),
                                 *opt], catch_exceptions=False)
    assert r.exit_code == 2 and msg in r.output, r.output
    assert not marker.exists()
