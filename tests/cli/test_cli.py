"""The CLI layer over the library: each command's text and --json output and exit status."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from atrex_inject.cli import app

FIX = Path(__file__).parent.parent / "fixtures" / "h200"
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_validate_summary_export(tmp_path):
    d = tmp_path / "cap"
    shutil.copytree(FIX / "reduce_sumsq", d)
    r = invoke("validate", d, "--json")
    assert r.exit_code == 0 and json.loads(r.output)["verdict"] == "valid"
    r = invoke("validate", d)
    assert r.exit_code == 0 and "interval_pairing" in r.output
    assert ("provenance not checked: source file (--source FILE), workload (--workload ID), device (--device UUID)"
            in r.output), r.output
    r = invoke("summary", d)
    assert r.exit_code == 0 and "stream_done -> tail_done" in r.output
    s = json.loads(invoke("summary", d, "--json").output)
    assert s["launches"][0]["intervals"][0]["count"] == 528
    r = invoke("export", d, "--perfetto", tmp_path / "t.pftrace", "--png", tmp_path / "t.png", "--json")
    assert r.exit_code == 0 and (tmp_path / "t.pftrace").stat().st_size > 0 and (tmp_path / "t.png").exists()


def test_validate_rejects_with_exit_1(tmp_path):
    d = tmp_path / "cap"
    shutil.copytree(FIX / "reduce_sumsq", d)
    r = invoke("validate", d, "--workload", "something else", "--json")
    assert r.exit_code == 1
    failed = [c for c in json.loads(r.output)["checks"] if not c["ok"]]
    assert [c["name"] for c in failed] == ["stale_provenance"]


def test_usage_error_exit_2(tmp_path):
    r = invoke("validate", tmp_path / "nowhere")
    assert r.exit_code == 2 and "does not exist" in r.output


def test_verdict_json(tmp_path):
    d = tmp_path / "cap"
    shutil.copytree(FIX / "gemm_mma", d)
    r = invoke("verdict", d, "--correctness", "passed", "--json")
    out = json.loads(r.output)
    assert r.exit_code == 0 and out["grade"] == "diagnostic" and out["notes"]


def test_demo(demo_json):
    code, output = demo_json
    assert code == 0, output
    out = json.loads(output)
    assert out["validation"] == "valid" and out["reverted_byte_exact"] is True
    # the spec's question weighs the barrier wait against the MMAs: the answer is about that pair
    assert out["answer"].startswith("`stage_ready -> mma_done` takes longer than `copies_issued -> stage_ready` "
                                    "(the pair the question weighs): median 512 ns against 128 ns per instance, 4.00×")
    # its 2-7-tick phases in cycles, on the bundled clock = true capture of the GEMM: tests/cli/test_demo.py
    assert Path(out["perfetto"]).stat().st_size > 100_000 and Path(out["png"]).exists()
    assert "<table class=\"validation\">" in Path(out["report"]).read_text()


def test_demo_live_without_a_gpu_says_so_before_applying(tmp_path, monkeypatch):
    """--live on a machine without a GPU stops at once (exit 2), before copying or applying anything."""
    monkeypatch.setattr("atrex_inject.gpu.gpu_available", lambda: False)
    r = invoke("demo", "--live", "--out", tmp_path / "demo")
    assert r.exit_code == 2 and "--live needs nvcc and a CUDA GPU" in r.output, r.output
    assert "1. apply" not in r.output and not (tmp_path / "demo").exists()


def test_include_dir():
    r = invoke("include-dir")
    assert (Path(r.output.strip()) / "atrex_timeline.cuh").is_file()


def test_gpu_probe_without_driver():
    """On a machine without an NVIDIA driver (CI), probing for a GPU answers False instead of raising
    cuda-python's DynamicLibNotFoundError."""
    import os

    import pytest

    from atrex_inject.gpu import gpu_available
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("a GPU is present")
    assert gpu_available() is False


def test_capture_command_cuda(project, tmp_path):
    """`capture` refuses a source that is not the applied instrumented one, and otherwise runs the
    program with ATREX_TIMELINE_OUT set and leaves a folder that validates (a stand-in program
    copies the real H200 capture of this same instrumented source where the recorder would write)."""
    import sys as _sys

    spec = project / "examples/specs/gemm_mma.toml"
    prog = tmp_path / "prog.py"
    prog.write_text("import os, shutil, glob\n"
                    f"for f in glob.glob({str(FIX / 'gemm_mma')!r} + '/*-launch*'):\n"
                    "    shutil.copy(f, os.environ['ATREX_TIMELINE_OUT'])\n")
    out = tmp_path / "cap"
    r = invoke("capture", "--spec", spec, "--out", out, "--", _sys.executable, prog)
    assert r.exit_code == 2 and "not applied" in r.output
    assert invoke("apply", spec).exit_code == 0
    r = invoke("capture", "--spec", spec, "--out", out, "--json", "--", _sys.executable, prog)
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["launches"] == ["gemm_bf16-launch3.atrex"]
    assert invoke("validate", out).exit_code == 0
    src = project / "examples/cuda/gemm_mma.cu"
    src.write_text(src.read_text() + "// edited after apply\n")
    r = invoke("capture", "--spec", spec, "--out", tmp_path / "cap2", "--", _sys.executable, prog)
    assert r.exit_code == 2 and "not the instrumented source" in r.output


def test_a_relative_out_reaches_a_program_that_changes_its_working_folder(project, tmp_path, monkeypatch):
    """`--out cap`, given relative, names the folder where capture was started: a program that
    changes its working folder before its recorder writes (a stand-in copying the real H200
    capture) still writes there, and capture finds the launch."""
    import sys as _sys

    spec = project / "examples/specs/gemm_mma.toml"
    assert invoke("apply", spec).exit_code == 0
    (tmp_path / "elsewhere").mkdir()
    prog = tmp_path / "prog.py"
    prog.write_text("import os, shutil, glob\nos.chdir('elsewhere')\n"
                    f"for f in glob.glob({str(FIX / 'gemm_mma')!r} + '/*-launch*'):\n"
                    "    shutil.copy(f, os.environ['ATREX_TIMELINE_OUT'])\n")
    monkeypatch.chdir(tmp_path)
    r = invoke("capture", "--spec", spec, "--out", "cap", "--json", "--", _sys.executable, prog)
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) | {"program": None} == {
        "out": str(tmp_path / "cap"), "launches": ["gemm_bf16-launch3.atrex"], "program": None}
    assert not (tmp_path / "elsewhere" / "cap").exists()


def test_manifest_option_takes_any_file_name(tmp_path):
    """--manifest names a file, whatever it is called (a copy kept next to the program, say)."""
    cap = tmp_path / "cap"
    shutil.copytree(FIX / "reduce_sumsq", cap)
    (cap / "manifest.json").rename(tmp_path / "reduce.manifest.json")
    r = invoke("validate", cap, "--manifest", tmp_path / "reduce.manifest.json", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["verdict"] == "valid", r.output
    r = invoke("validate", cap, "--manifest", tmp_path / "missing.json")
    assert r.exit_code == 2 and "no manifest at" in r.output


def test_a_tree_without_git_is_marked_by_its_atrex_folder(tmp_path):
    """A checkout that is not a git clone (a tarball) finds its root at a .atrex folder."""
    shutil.copytree(Path(__file__).parents[2] / "examples", tmp_path / "examples")
    spec = tmp_path / "examples" / "specs" / "reduce_sumsq.toml"
    r = invoke("apply", spec)
    assert r.exit_code == 2 and "leaves the project tree" in r.output and "mkdir .atrex" in r.output
    (tmp_path / ".atrex").mkdir()
    assert invoke("apply", spec).exit_code == 0
    assert invoke("revert", spec).exit_code == 0


def test_capture_of_a_program_that_launched_nothing_says_what_capture_did(project, tmp_path):
    """A program that exits 0 without launching the kernel: the message says capture set
    ATREX_TIMELINE_OUT itself, and what to check (the build, the launches past `skip`, status)."""
    import shlex
    import sys as _sys

    spec = project / "examples/specs/reduce_sumsq.toml"
    assert invoke("apply", spec).exit_code == 0
    out = tmp_path / "cap"
    cmd = [_sys.executable, "-c", "pass"]
    r = invoke("capture", "--spec", spec, "--out", out, "--", *cmd)
    assert r.exit_code == 2, r.output
    assert (f"error: no launch of 'reduce_sumsq' was captured: capture ran `{shlex.join(cmd)}` with "
            f"ATREX_TIMELINE_OUT={out} and ATREX_MANIFEST set (capture sets both)") in r.output
    assert ("check that the program runs a build of the instrumented examples/cuda/reduce_sumsq.cu (rebuilt after "
            "apply") in r.output
    assert "launches reduce_sumsq at least 3 time(s) (the spec's [capture] skip = 2 writes from launch 3 on)" in r.output
    assert f"`atrex-inject status {spec}`" in r.output
    assert "with ATREX_TIMELINE_OUT set to this folder" not in r.output  # the hint for a bare run, not for capture


def test_folder_of_a_failed_capture_says_it_failed(project, tmp_path):
    """After a capture whose program fails, validate and summary on its folder name that failure,
    not a missing manifest; a later successful capture into the folder clears it."""
    import sys as _sys

    spec = project / "examples/specs/gemm_mma.toml"
    assert invoke("apply", spec).exit_code == 0
    out = tmp_path / "cap"
    r = invoke("capture", "--spec", spec, "--out", out, "--", _sys.executable, "-c", "raise SystemExit(3)")
    assert r.exit_code == 2 and "exited with status 3" in r.output
    for cmd in ("validate", "summary"):
        r = invoke(cmd, out)
        assert r.exit_code == 2 and f"the capture into {out} failed" in r.output and "exited with status 3" in r.output
        assert "no manifest" not in r.output and "Traceback" not in r.output
    prog = tmp_path / "prog.py"
    prog.write_text("import os, shutil, glob\n"
                    f"for f in glob.glob({str(FIX / 'gemm_mma')!r} + '/*-launch*'):\n"
                    "    shutil.copy(f, os.environ['ATREX_TIMELINE_OUT'])\n")
    assert invoke("capture", "--spec", spec, "--out", out, "--", _sys.executable, prog).exit_code == 0
    assert invoke("validate", out).exit_code == 0


def test_folder_of_captures_lists_them(tmp_path):
    """A command that reads one capture (decode), given a folder that holds capture folders, lists
    them (summary, export and validate read them together: test_timeline_many.py)."""
    for name in ("before", "after"):
        shutil.copytree(FIX / "reduce_sumsq", tmp_path / "both" / name)
    r = invoke("decode", tmp_path / "both")
    assert r.exit_code == 2, r.output
    assert "holds 2 capture folder(s)" in r.output and str(tmp_path / "both" / "after") in r.output
    assert str(tmp_path / "both" / "before") in r.output and "no manifest" not in r.output


def _slowed(monkeypatch, module: str, name: str, seconds: float = 1.3) -> None:
    """Make one step of the library take over a second (the function it calls, delayed)."""
    import importlib
    import time
    mod = importlib.import_module(module)
    real = getattr(mod, name)

    def slow(*args, **kwargs):
        time.sleep(seconds)
        return real(*args, **kwargs)
    monkeypatch.setattr(mod, name, slow)


SLOW_STEPS = {  # command -> (its arguments, the call slowed, what stderr then says)
    "report": (lambda tmp, project: ["report", FIX / "gemm_mma", "-o", tmp / "r.html"], "atrex_inject.validate",
               "decode_parts", "... decoding and checking gemm_bf16-launch3.atrex"),
    "export": (lambda tmp, project: ["export", FIX / "gemm_mma", "--perfetto", tmp / "t.pftrace"], "atrex_inject.export",
               "write_trace", "... writing the Perfetto trace "),
    "check-sass": (lambda tmp, project: ["check-sass", project / "examples" / "specs" / "reduce_sumsq.toml"],
                   "atrex_inject.choice", "assess", "... reading the builds' SASS"),
    "demo": (lambda tmp, project: ["demo", "--out", tmp / "demo"], "atrex_inject.demo", "render_report",
             "... writing the report"),
}


@pytest.mark.parametrize("command", sorted(SLOW_STEPS))
def test_a_step_over_a_second_says_what_it_is_doing(command, project, tmp_path, monkeypatch):
    """A step that runs over a second prints what it is doing on stderr, once; stdout is untouched."""
    args, module, name, said = SLOW_STEPS[command]
    _slowed(monkeypatch, module, name)
    r = runner.invoke(app, [str(a) for a in args(tmp_path, project)], catch_exceptions=False)
    assert r.exit_code in (0, 1), r.output
    assert said in r.stderr and r.stderr.count(said) == 1 and said not in r.stdout, r.stderr


@pytest.mark.parametrize("flag", ["--json", "--quiet"])
def test_no_progress_under_json_or_quiet(flag, tmp_path, monkeypatch):
    _slowed(monkeypatch, "atrex_inject.validate", "decode_parts")
    r = runner.invoke(app, ["report", str(FIX / "gemm_mma"), "-o", str(tmp_path / "r.html"), flag],
                      catch_exceptions=False)
    assert r.exit_code == 0 and r.stderr == "", r.stderr
