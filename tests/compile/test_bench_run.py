"""bench/perturbation/run.py: each row's builds (here, with nvcc; the measurement needs the GPU),
the recorder the tool chose for each, and the cost table generated from the results file."""
from __future__ import annotations

import importlib.util
import json
import shutil
import tarfile

import pytest

from conftest import REPO

_spec = importlib.util.spec_from_file_location("atrex_bench_run", REPO / "bench" / "perturbation" / "run.py")
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.long
def test_a_row_builds_clean_and_instrumented_with_the_chosen_recorder(tmp_path):
    """reduce_sumsq at 1/32: the spec with stride 32 under its own name, its recorder chosen (resident
    rings: the global path's copy takes 40 registers against 32), and the same with the clock."""
    run.build(tmp_path, ["reduce_sumsq_1in32"])
    plan = json.loads((tmp_path / "plan.json").read_text())["reduce_sumsq_1in32"]
    assert plan["arms"]["off"] == plan["arms"]["spec"] and plan["arms"]["spec"]["recorder"] == "resident"
    assert plan["arms"]["clock"]["clock"] and not plan["arms"]["spec"]["clock"]
    spec = (tmp_path / "examples" / "specs" / "reduce_sumsq_1in32.toml").read_text()
    assert 'name = "reduce_sumsq_1in32"' in spec and spec.count("ctas = { stride = 32 }") == 7
    for b in (plan["clean"], plan["arms"]["spec"]["binary"], plan["arms"]["clock"]["binary"]):
        assert (tmp_path / b).is_file()


def test_the_cost_table_says_whether_each_row_meets_its_target_in_either_direction():
    """SYNTHETIC results: -14% against a 2% target is not met (a recording faster than the clean
    kernel is another kernel), +0.4% with its interval inside 1% is met."""
    row = lambda k, arm, o, ci, target: {"kernel": k, "arm": arm, "recorder": "global", "clock": False,  # noqa: E731
                                         "overhead": o, "ci95": ci, "target": target, "valid": True}
    result = {"date": "SYNTHETIC", "device": "none", "per_event": [],
              "rows": [row("layernorm", "off", 0.0003, [-0.001, 0.002], 0.005),
                       row("layernorm", "spec", -0.1425, [-0.1439, -0.1418], 0.02),
                       row("gemm_mma", "spec", 0.004, [0.003, 0.005], 0.01)]}
    text = run.table(result)
    assert "| -14.25% [-14.39, -14.18] (NOT met) (±2%) |" in text
    assert "+0.40% [+0.30, +0.50] (met) (±1%)" in text and "+0.03% [-0.10, +0.20] (met)" in text


def test_the_per_event_rows_show_the_sass_each_probe_adds_and_iket_on_the_same_loop(tmp_path):
    """SYNTHETIC per-event results: each recorder's cell carries the SASS its probe adds an event, a
    recorder apply refused says so, one not measured is a dash, the rounds of the tool's choice and of
    IKeT span lowest to highest beside IKeT's cell, and the last columns list the tool's
    choice's families of at least 0.1 an event and IKeT's, with the clean loops' instructions an
    iteration, nvcc's and the CuTe DSL's; the paragraph names the call that measured the rows."""
    sass = {"default": {"added": 3.56, "kinds": {"IADD3": 1.12, "CS2R": 1, "STS": 1, "LDC": 0.06}},
            "global": {"added": 7, "kinds": {"IADD3": 3, "CS2R": 1, "ISETP": 1, "MOV": 1, "STG": 1}},
            "iket": {"added": 4, "kinds": {"CS2R": 1, "LOP3": 1, "PMTRIG": 1, "STS": 1}, "cute_clean": 20.5,
                     "cuda_clean": 19.25}}
    row = {"loop": "smem", "what": "shared memory", "site": "loop-begin", "iterations": 1024, "base_ms": 1.0,
           "hand_written": None, "floor": None, "default_recorder": "staged", "default": 0.017, "global": 0.035,
           "iket": 0.05, "sass": sass, "refused": {"resident": "the resident recorder's rings need 131720 bytes"},
           "rounds": {"default": [0.016, 0.019, 0.017], "global": [0.035], "iket": [0.031, 0.05, 0.074]}}
    pc = tmp_path / "probe_cost.json"
    pc.write_text(json.dumps({"date": "SYNTHETIC", "device": "GPU-X", "rows": [row]}))
    result = {"date": "SYNTHETIC", "device": "none", "rows": []}
    run.fold_per_event(result, pc)
    assert result["per_event_measured"] == "SYNTHETIC, GPU-X"
    text = run.table(result)
    assert "(bench/probe_cost/results-h200.json, SYNTHETIC, GPU-X: NVIDIA IKeT's" in text
    lines = text.splitlines()
    assert lines[-1] == ("| shared memory | loop-begin | 1024 | +1.70% (staged, 3.56 SASS) | +3.50% (7 SASS) | — | "
                         "refused | - | - | +5.00% (4 SASS) | +1.60 to +1.90 / +3.10 to +7.40 | "
                         "3.56: IADD3 +1.12, CS2R +1, STS +1 | "
                         "4: CS2R +1, LOP3 +1, PMTRIG +1, STS +1 (19.25 / 20.5) |")


def test_another_call_s_rows_replace_the_same_kernel_and_arm_and_name_their_device():
    """fold --rows: a later call's clock rows take the place of the clock rows they measure again,
    other rows stay, each folded row keeps its call's date and device, and the file names each call
    with its rows (a row that names none, from a file written before rows did, is the file's)."""
    result = {"date": "d1", "device": "GPU-A", "per_event": [],
              "rows": [{"kernel": "k", "arm": "spec", "overhead": 0.01}, {"kernel": "k", "arm": "clock", "overhead": 0.2}]}
    part = {"date": "d2", "device": "GPU-B", "rows": [{"kernel": "k", "arm": "clock", "overhead": 0.005},
                                                      {"kernel": "j", "arm": "clock", "overhead": 0.0}]}
    run.fold_rows(result, part)
    assert [(r["kernel"], r["arm"], r["overhead"], r.get("measured")) for r in result["rows"]] == [
        ("k", "spec", 0.01, None), ("k", "clock", 0.005, "d2, GPU-B"), ("j", "clock", 0.0, "d2, GPU-B")]
    run.name_calls(result)
    assert (result["date"], result["device"]) == ("d2", "GPU-A (d1: k spec); GPU-B (d2: k clock, j clock)")


def test_fold_validates_an_archived_capture_again_with_todays_checks(tmp_path):
    """A measure call's captures.tar.gz (gpu-perturbation.sh) holding the H200 softmax capture in
    8-byte clock events (tests/fixtures/h200/softmax_rows_clock8) under the layout measure archives
    (cap-<row>-<arm>/<sample>/, <row>_clock.manifest.json): the row's recorded rejection becomes
    today's verdict, valid, marked revalidated; a row without its capture in the archive is left as
    it was."""
    fixture = REPO / "tests" / "fixtures" / "h200" / "softmax_rows_clock8"
    archive = tmp_path / "captures.tar.gz"
    with tarfile.open(archive, "w:gz") as t:
        for f in fixture.glob("softmax_rows-launch3.*"):
            t.add(f, f"cap-softmax_rows-clock/sample-1/{f.name}")
        t.add(fixture / "manifest.json", "softmax_rows_clock.manifest.json")
    stale = {"verdict": "rejected", "events": 12288, "failed": ["clock_consistency"]}
    result = {"rows": [{"kernel": "softmax_rows", "arm": "clock", "capture": dict(stale)},
                       {"kernel": "layernorm", "arm": "clock", "capture": dict(stale)}]}
    run.revalidate(result, archive)
    got = result["rows"][0]["capture"]
    assert got["verdict"] == "valid" and got["events"] == 12288 and got["failed"] == [] and got["revalidated"]
    assert result["rows"][1]["capture"] == stale


def test_a_folded_call_names_the_rows_it_measured_and_a_replaced_call_leaves_the_line():
    """The results file's device line is written from its rows' `measured`: a later call's rows
    replace the same kernel's same arms, and a call none of whose rows remain is no longer named."""
    def row(kernel, arm, measured=None):
        return {"kernel": kernel, "arm": arm, "overhead": 0.0, **({"measured": measured} if measured else {})}

    first, later = "NVIDIA H200, GPU-aaaa, 580.159.04", "NVIDIA H200, GPU-bbbb, 580.159.04"
    result = {"date": "2026-12-01", "device": first,
              "rows": [row("gemm_mma", a, f"2026-12-01, {first}") for a in ("off", "spec")]
              + [row("layernorm", "spec", f"2026-12-01, {first}")]}
    run.fold_rows(result, {"date": "2026-12-04", "device": later, "rows": [row("gemm_mma", "off"), row("gemm_mma", "spec")]})
    run.name_calls(result)
    assert (result["date"], result["device"]) == (
        "2026-12-04", f"{later} (2026-12-04: gemm_mma off/spec); {first} (2026-12-01: layernorm spec)")
    run.fold_rows(result, {"date": "2026-12-04", "device": later, "rows": [row("layernorm", "spec")]})
    run.name_calls(result)
    assert result["device"] == f"{later} (2026-12-04: gemm_mma off/spec, layernorm spec)"
    # a file `measure` wrote names its call on its device line, and each row its own
    third = "NVIDIA H200, GPU-cccc, 580.159.04"
    run.fold_rows(result, {"date": "2026-12-05", "device": f"{third} (2026-12-05: layernorm spec)",
                           "rows": [row("layernorm", "spec", f"2026-12-05, {third}")]})
    run.name_calls(result)
    assert result["device"] == f"{later} (2026-12-04: gemm_mma off/spec); {third} (2026-12-05: layernorm spec)"
