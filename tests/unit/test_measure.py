"""measure with real processes: good samples give the right medians and overhead; each kind of
bad sample rejects the run naming the sample and the reason; validate catches tampering."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from atrex_inject.errors import AtrexError
from atrex_inject.fsio import sha256_file
from atrex_inject.measure import Request, measure, same_program, validate_measurement

PROG = str(Path(__file__).parent.parent / "sample_prog.py")


def cmd(mode: str, lat: float) -> list[str]:
    return [sys.executable, PROG, mode, str(lat), "{warmup}", "{iterations}"]


def run(tmp_path, a_mode="good", b_mode="good", a=1.0, b=1.05, timeout=20.0, **kw):
    src = tmp_path / "k.cu"
    src.write_text("// kernel\n")
    req = Request(cmd(a_mode, a), cmd(b_mode, b), warmup=3, iterations=7, timeout_s=timeout, sources=(str(src),), **kw)
    return measure(req, tmp_path / "m.json"), tmp_path / "m.json", src


def test_good_run_medians_and_overhead(tmp_path):
    art, path, _ = run(tmp_path)
    assert art["valid"] and art["schedule"] == "ABBABAAB"
    assert art["median_ms"] == {"baseline": 1.0, "instrumented": 1.05}
    assert art["overhead"] == pytest.approx(0.05)
    lo, hi = art["overhead_ci95"]
    assert lo == pytest.approx(0.05) and hi == pytest.approx(0.05)  # constant samples: a degenerate interval
    assert [s["arm"] for s in art["samples"]] == list("ABBABAAB")
    assert all(s["line"].startswith("__ATREX_TIMELINE_SAMPLE__=") and s["exit_status"] == 0 for s in art["samples"])
    assert validate_measurement(path)["valid"]


@pytest.mark.parametrize("b_mode,reason", [
    ("drift_workload", "workload drifted"), ("drift_device", "device drifted"), ("two_lines", "printed 2 sample lines"),
    ("none", "printed no sample line"), ("failed", "correctness is 'failed'"), ("nonzero", "exited with status 3"),
    ("bad_field", "field 'latency_ms' has the wrong type"), ("wrong_iters", "requested warmup=3 iterations=7"),
])
def test_bad_sample_rejects(tmp_path, b_mode, reason):
    art, path, _ = run(tmp_path, b_mode=b_mode)
    assert not art["valid"]
    assert art["reasons"] == [f"sample 1 (instrumented): {art['samples'][1]['reason']}"]
    assert reason in art["reasons"][0]
    assert "overhead" not in art
    assert not validate_measurement(path)["valid"]


def test_hang_times_out(tmp_path):
    art, _, _ = run(tmp_path, a_mode="hang", timeout=1.0)
    assert not art["valid"] and art["reasons"] == ["sample 0 (baseline): timed out"]


def test_tampered_artifact_and_changed_source(tmp_path):
    art, path, src = run(tmp_path)
    doc = json.loads(path.read_text())
    doc["overhead"] = 0.01
    path.write_text(json.dumps(doc))
    v = validate_measurement(path)
    assert not v["valid"] and any("does not recompute" in p for p in v["problems"])
    doc["overhead"] = art["overhead"]
    doc["samples"][2]["line"] = doc["samples"][2]["line"].replace("1.05", "0.5")
    path.write_text(json.dumps(doc))
    v = validate_measurement(path)
    assert not v["valid"] and any("sample 2: parsed sample differs" in p for p in v["problems"])
    doc["samples"][2]["line"] = doc["samples"][2]["line"].replace("0.5", "1.05")
    path.write_text(json.dumps(doc))
    assert validate_measurement(path)["valid"]
    src.write_text("// edited\n")
    v = validate_measurement(path)
    assert not v["valid"] and any("changed since the measurement" in p for p in v["problems"])


def test_bootstrap_interval_brackets_overhead(tmp_path):
    """Varying latencies: the recomputed interval contains the point estimate."""
    from atrex_inject.measure import summarize
    rng = np.random.default_rng(1)
    samples = [{"arm": arm, "sample": {"latency_ms": float(rng.normal(1.0 if arm == "A" else 1.1, 0.01))}}
               for arm in "ABBABAABABBABAAB"]
    r = summarize(samples)
    assert r["overhead_ci95"][0] <= r["overhead"] <= r["overhead_ci95"][1]
    assert 0.05 < r["overhead"] < 0.15


def test_a_blocked_schedule_is_refused_before_any_sample(tmp_path):
    """AAAABBBB puts drift between the arms' blocks into the overhead: every block of four must be
    ABBA or BAAB (the strict reading), checked before a sample runs."""
    for pattern in ("AAAABBBB", "AB", "ABBA,ABAB"):
        with pytest.raises(AtrexError, match="every block of four samples must be ABBA or BAAB"):
            run(tmp_path, pattern=pattern)
        assert not (tmp_path / "m.json").exists()
    art, _, _ = run(tmp_path, pattern="BAAB", rounds=2)
    assert art["valid"] and art["schedule"] == "BAABBAAB"


@pytest.mark.parametrize("spelling,why", [
    (lambda tmp: (PROG, f"{Path(PROG).parent}/./{Path(PROG).name}"), "are one file"),  # pathlib would drop the "."
    (lambda tmp: (shutil.copy(PROG, tmp / "a.py"), shutil.copy(PROG, tmp / "b.py")), "are two files with one sha256"),
])
def test_one_program_under_two_names_is_refused(tmp_path, spelling, why):
    """The baseline and instrumented arms running one program, spelled two ways or copied beside
    it: refused like identical commands, before any sample."""
    first, other = map(str, spelling(tmp_path))
    req = Request([sys.executable, first, *cmd("good", 1.0)[2:]], [sys.executable, other, *cmd("good", 1.0)[2:]],
                  warmup=3, iterations=7)
    with pytest.raises(AtrexError) as e:
        measure(req, tmp_path / "m.json")
    assert e.value.message == (f"the baseline and instrumented commands run the same program ({first} and {other} "
                               f"{why}{' ' + sha256_file(PROG)[:16] + '…' if 'sha256' in why else ''}): that "
                               "measures nothing")
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("prefix_a,prefix_b", [
    ([sys.executable, "-B"], [sys.executable]),
    (["env", "ATREX_ARM=instrumented", sys.executable], [sys.executable]),
    (["/usr/bin/env", "-u", "HOME", sys.executable, "-W", "ignore", "-u"], ["env", sys.executable, "-X", "dev"]),
])
def test_one_program_started_two_ways_is_refused(tmp_path, prefix_a, prefix_b):
    """One script as both arms, one started through an `env` prefix or with interpreter flags: what
    runs is the same, so it is refused before any sample, naming it."""
    rest = [PROG, *cmd("good", 1.0)[2:]]
    req = Request(prefix_a + rest, prefix_b + rest, warmup=3, iterations=7)
    with pytest.raises(AtrexError) as e:
        measure(req, tmp_path / "m.json")
    assert e.value.message == (f"the baseline and instrumented commands both run {sys.executable} {PROG} good 1.0 "
                               "{warmup} {iterations} (an env prefix and interpreter flags set how a program starts, "
                               "not which): that measures nothing")
    assert not (tmp_path / "m.json").exists()


def test_a_hard_link_in_another_folder_is_one_program(tmp_path):
    """The script hard-linked into another folder is one file (one device and inode), not a runner
    copied beside another build: refused, here and when an artifact is rechecked."""
    (tmp_path / "other").mkdir()
    link = tmp_path / "other" / "prog.py"
    link.hardlink_to(PROG)
    why = same_program([sys.executable, PROG, "good"], ["env", sys.executable, "-B", str(link), "good"], tmp_path)
    assert why == (f"the baseline and instrumented commands run the same program ({PROG} and {link} are one file): "
                   "that measures nothing")


def test_one_runner_beside_each_build_is_two_programs(tmp_path):
    """A script copied beside each build (the CuTe DSL runners: one runner, importing the kernel module
    beside it) runs two programs: the same bytes in two folders are not refused."""
    for side in ("clean", "inst"):
        (tmp_path / side).mkdir()
        shutil.copy(PROG, tmp_path / side / "run.py")
    assert same_program([sys.executable, str(tmp_path / "clean" / "run.py")],
                        [sys.executable, str(tmp_path / "inst" / "run.py")], tmp_path) is None


def test_two_binaries_with_one_sha256_are_refused(tmp_path):
    """The clean and instrumented builds hashed with --binary are one program (built before apply)."""
    clean, inst = tmp_path / "k.clean", tmp_path / "k.inst"
    clean.write_bytes(b"\x7fELF same bytes")
    inst.write_bytes(b"\x7fELF same bytes")
    req = Request(cmd("good", 1.0), cmd("good", 1.05), 3, 7, binaries=(str(clean), str(inst)), root=str(tmp_path))
    with pytest.raises(AtrexError, match="binaries k.clean and k.inst have one sha256: the clean and the "
                                         "instrumented build are one program"):
        measure(req, tmp_path / "m.json")


def test_a_subnormal_latency_is_refused(tmp_path):
    """1e-320 ms made the overhead +inf and its interval NaN (an artifact that is not standard JSON)."""
    art, path, _ = run(tmp_path, a=1e-320)
    assert not art["valid"] and "overhead" not in art
    assert art["reasons"] == ["sample 0 (baseline): latency_ms 1e-320 is below 1e-06 ms (1 ns): no launch is that "
                              "short, so the sample's timer or unit is wrong"]
    json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the artifact"))
