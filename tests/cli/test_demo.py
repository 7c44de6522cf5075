"""`atrex-inject demo` and the bundled `clock = true` capture of its GEMM: where the answer's phases
are a few timer ticks, the demo (its text, its --json and its report) answers the same question in
SM cycles on that capture, says which capture it is, and no longer advises recording the clock; a
bundled clock capture that is not this GEMM's question, or that does not validate, is not shown."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from atrex_inject import demo
from atrex_inject import manifest as mf

FIX = Path(__file__).parent.parent / "fixtures" / "h200"
ADVICE = "record the clock"
CYCLES = ("`stage_ready -> mma_done` takes longer than `copies_issued -> stage_ready` (the pair the question "
          "weighs): median 503 ns / 877 cycles against 129 ns / 226 cycles per instance")


def test_demo_answers_in_cycles_from_the_bundled_clock_capture_instead_of_advising_to_record_it(demo_text):
    code, output, work = demo_text
    assert code == 0, output
    lines = output.splitlines()
    k = next(i for i, line in enumerate(lines) if line.startswith("5. answer: "))
    answer, at_clock, clock = lines[k:k + 3]
    assert ADVICE not in output
    # the timer's answer names its few-tick phases and points at the cycle-resolution answer below it
    assert ("(2 ticks): a median under 10 timer ticks of 32 ns is mostly quantization; the same question in SM "
            f"cycles, on the `clock = true` capture {work / 'clock_capture'}, is below.") in answer
    # which capture it came from, that it validated, and its answer in cycles at the local rate
    assert at_clock.startswith(
        "   At the SM clock's resolution (the same GEMM and intervals, recorded with `[capture] clock = true` on "
        f"NVIDIA H200: {work / 'clock_capture' / 'gemm_bf16-launch200.atrex'}, valid, 14/14 checks pass): "
        + CYCLES)
    assert "`mma_done -> synced` 59 ns / 103 cycles" in at_clock and "quantization" not in at_clock
    assert clock.startswith("   its SM clock 1.7475 GHz ± 0.0269 over the owners' spans") and "local rate" in clock
    # the report the demo writes says the same
    page = (work / "report.html").read_text()
    assert ADVICE not in page and "At the SM clock&#x27;s resolution" in page and "877 cycles" in page


def test_demo_json_carries_the_cycle_resolution_answer(demo_json):
    code, output = demo_json
    assert code == 0, output
    out = json.loads(output)
    assert ADVICE not in out["answer"] and "is below" in out["answer"]
    c = out["clock_answer"]
    assert c["verdict"] == "valid" and c["text"].startswith(CYCLES) and c["file"] == "gemm_bf16-launch200.atrex"
    assert Path(c["capture"]) == Path(out["report"]).parent / "clock_capture" and c["clock"]["rate_ghz"] > 1
    assert out["clock_answer_not_used"] is None


def _bundled_as(tmp_path, monkeypatch, edit) -> Path:
    """The demo's clock capture replaced by an edited copy of it."""
    alt = tmp_path / "bundled"
    shutil.copytree(FIX / "gemm_mma_clock", alt)
    edit(alt)
    real = demo.asset_dir
    monkeypatch.setattr(demo, "asset_dir", lambda kind: alt if kind == "demo_clock_capture" else real(kind))
    return alt


def test_a_clock_capture_of_another_question_is_not_used(tmp_path, monkeypatch):
    def other(alt: Path) -> None:
        m = json.loads((alt / mf.FILE_NAME).read_text())
        m["intervals"] = m["intervals"][:2]
        (alt / mf.FILE_NAME).write_text(json.dumps(m))
    _bundled_as(tmp_path, monkeypatch, other)
    m = mf.load(FIX / "gemm_mma" / mf.FILE_NAME)
    clocked, why = demo._clock_answer(m, tmp_path / "work")
    assert clocked is None and why == (f"{tmp_path / 'work' / 'clock_capture'} is not this GEMM's question "
                                       "recorded with the SM clock")


def test_a_rejected_clock_capture_is_not_used(tmp_path, monkeypatch):
    def stale(alt: Path) -> None:  # built from another instrumented source: stale_provenance fails
        src = alt / "gemm_mma_clock.instrumented.cu"
        src.write_text(src.read_text() + "\n// edited\n")
    _bundled_as(tmp_path, monkeypatch, stale)
    m = mf.load(FIX / "gemm_mma" / mf.FILE_NAME)
    clocked, why = demo._clock_answer(m, tmp_path / "work")
    assert clocked is None and why.endswith("is rejected (failed: stale_provenance)"), why
