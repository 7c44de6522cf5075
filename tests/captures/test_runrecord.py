"""The run record (run.json): `capture` names the program it ran, validate puts it in the capture's
identity, and verdict requires that arm B of the measurement ran it. The programs are real (an
nvcc-built host program, a shell script, a Python script; none needs a GPU): they copy the real
H200 capture of the applied gemm_mma source to where the recorder would write it. One planted
fault per test; measurements and run records edited here are synthetic."""
from __future__ import annotations

import json
import os
import shutil
import sys
import threading
from pathlib import Path

import pytest

from atrex_inject import runrecord
from atrex_inject.errors import CaptureError
from atrex_inject.grade import grade
from atrex_inject.manifest import load as load_manifest
from atrex_inject.validate import validate_capture
from conftest import NVCC_FLAGS, REPO, cli, sha

FIX = REPO / "tests" / "fixtures" / "h200"
LAUNCH = [str(FIX / "gemm_mma" / "gemm_bf16-launch3.atrex"), str(FIX / "gemm_mma" / "gemm_bf16-launch3.json")]
MEAS = FIX / "measure" / "gemm_mma.json"
RECORDS = FIX / "measure" / "evaluations.jsonl"
STAND_IN = """#include <cstdlib>
#include <filesystem>
// copies each file named on its command line into ATREX_TIMELINE_OUT, as the recorder writes its launches
int main(int argc, char** argv) {
  const char* out = std::getenv("ATREX_TIMELINE_OUT");
  if (!out) return 3;
  for (int i = 1; i < argc; ++i)
    std::filesystem::copy_file(argv[i], std::filesystem::path(out) / std::filesystem::path(argv[i]).filename());
  return 0;
}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    d = tmp_path_factory.mktemp("built")
    (d / "stand_in.cu").write_text(STAND_IN)
    import subprocess
    subprocess.run(["nvcc", *NVCC_FLAGS, "-o", str(d / "stand_in"), str(d / "stand_in.cu")], check=True)
    return d / "stand_in"


@pytest.fixture
def applied(project) -> Path:
    """The project with gemm_mma applied: the source the bundled H200 capture was recorded from."""
    spec = project / "examples/specs/gemm_mma.toml"
    assert cli("apply", spec)[0] == 0
    return spec


def capture(spec: Path, out: Path, *cmd) -> tuple[int, dict]:
    code, text = cli("capture", "--spec", spec, "--out", out, "--json", "--", *cmd)
    return code, json.loads(text)


def test_capture_records_the_built_program(applied, built, tmp_path):
    code, r = capture(applied, tmp_path / "cap", built, *LAUNCH)
    assert code == 0, r
    files = [{"path": p, "sha256": sha(Path(p))} for p in LAUNCH]
    assert r["program"] == {"path": str(built), "sha256": sha(built)}
    assert json.loads((tmp_path / "cap" / "run.json").read_text()) == {
        "format": "atrex-run", "version": 1, "argv": [str(built), *LAUNCH], "program": r["program"], "files": files}
    code, text = cli("validate", tmp_path / "cap", "--json")
    v = json.loads(text)
    assert code == 0 and v["verdict"] == "valid", text
    assert v["identity"]["run"] == {"argv": [str(built), *LAUNCH], "program": r["program"], "files": files}
    assert "binary" not in v["unchecked_provenance"]  # the run record names it


def test_the_program_is_found_on_path_as_the_os_finds_it(applied, built, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{tmp_path / 'nothing here'}{os.pathsep}{built.parent}{os.pathsep}{os.environ['PATH']}")
    code, r = capture(applied, tmp_path / "cap", built.name, *LAUNCH)
    assert code == 0 and r["program"] == {"path": str(built), "sha256": sha(built)}
    code, r = capture(applied, tmp_path / "cap2", "no_such_program_xyz")
    assert code == 2 and r["error"] == "program 'no_such_program_xyz' is not an executable file on PATH"
    assert not (tmp_path / "cap2" / "run.json").exists()


def test_validate_binary_must_be_what_the_capture_ran(applied, built, tmp_path):
    cap = tmp_path / "cap"
    assert capture(applied, cap, built, *LAUNCH)[0] == 0
    for opts in (["--binary", built], ["--binary", built, "--binary-sha256", sha(built)],
                 ["--binary-sha256", sha(built)], ["--binary", LAUNCH[0]]):  # an argument file ran too
        code, text = cli("validate", cap, *opts, "--json")
        assert code == 0 and json.loads(text)["verdict"] == "valid", (opts, text)
    other = tmp_path / "other"
    shutil.copy(built, other)
    with other.open("ab") as f:
        f.write(b"\0")  # another build
    code, text = cli("validate", cap, "--binary", other, "--json")
    (c,) = [c for c in json.loads(text)["checks"] if not c["ok"]]
    assert code == 1 and (c["name"], c["count"]) == ("stale_provenance", 1)
    assert c["details"] == [f"binary {other}: sha256 {sha(other)[:16]}… is not a file the capture ran (run.json "
                            f"hashed {built} {sha(built)[:16]}…, {LAUNCH[0]} {sha(Path(LAUNCH[0]))[:16]}…, "
                            f"{LAUNCH[1]} {sha(Path(LAUNCH[1]))[:16]}…)"]


def without_run_record(tmp_path: Path) -> Path:
    """The real gemm_mma capture as a folder written without `capture` (or before run records) holds it."""
    cap = tmp_path / "legacy"
    shutil.copytree(FIX / "gemm_mma", cap)
    (cap / "run.json").unlink(missing_ok=True)
    return cap


def test_binary_options_on_a_capture_without_run_record(tmp_path):
    """Without run.json, --binary needs --binary-sha256, as before."""
    cap = without_run_record(tmp_path)
    code, text = cli("validate", cap, "--json")
    assert code == 0 and "run" not in json.loads(text)["identity"]
    assert "binary" in json.loads(text)["unchecked_provenance"]
    prog = tmp_path / "prog"
    prog.write_bytes(b"a build")
    code, text = cli("validate", cap, "--binary", prog, "--binary-sha256", sha(prog), "--json")
    assert code == 0 and json.loads(text)["verdict"] == "valid"
    code, text = cli("validate", cap, "--binary", prog, "--json")
    assert code == 2 and json.loads(text)["error"].startswith("--binary and --binary-sha256 go together")


REBUILD_SH = """#!/bin/sh
cp "$@" "$ATREX_TIMELINE_OUT"
printf '# rebuilt\\n' >> "$0"
"""


def test_a_program_rebuilt_during_the_capture_is_refused(applied, tmp_path):
    prog = tmp_path / "prog.sh"
    prog.write_text(REBUILD_SH)
    prog.chmod(0o755)
    before = sha(prog)
    code, r = capture(applied, tmp_path / "cap", prog, *LAUNCH)
    assert code == 2 and r["error"] == (f"changed during the capture, so the capture names no single build: program "
                                        f"{prog} (sha256 {sha(prog)[:16]}…, was {before[:16]}… when the run started)")
    assert "finish building first" in r["hint"]
    assert not (tmp_path / "cap" / "run.json").exists() and not (tmp_path / "cap" / "manifest.json").exists()


def test_a_script_edited_during_the_capture_is_refused(applied, tmp_path):
    """`python3 SCRIPT`: the script is an argument file, hashed before and after like the program."""
    script = tmp_path / "prog.py"
    script.write_text("import os, shutil, sys\n"
                      f"for f in {LAUNCH!r}:\n    shutil.copy(f, os.environ['ATREX_TIMELINE_OUT'])\n"
                      "open(sys.argv[0], 'a').write('# edited\\n')\n")
    before = sha(script)
    code, r = capture(applied, tmp_path / "cap", sys.executable, script)
    assert code == 2 and r["error"].endswith(f"argument file {script} (sha256 {sha(script)[:16]}…, was "
                                             f"{before[:16]}… when the run started)")


def test_which_arguments_are_recorded(tmp_path, monkeypatch):
    """Every later argv entry naming an existing regular file, once, path as given; nothing else
    (a folder, a missing file, an option, an argument too long to be a path)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.py").write_text("pass\n")
    (tmp_path / "data").mkdir()
    rec = runrecord.record([sys.executable, "run.py", "--n", "4", "data", "missing.bin", "x" * 300, "run.py",
                            "--in=run.py"], dict(os.environ))
    assert rec.program == runrecord.FileHash(sys.executable, sha(Path(sys.executable)))
    assert rec.files == (runrecord.FileHash("run.py", sha(tmp_path / "run.py")),)
    runrecord.check_unchanged(rec)  # nothing changed: no error


def test_a_program_that_cannot_be_recorded_writes_nothing(applied, tmp_path):
    """A folder given as the program: exit 2 before the capture folder is created."""
    (tmp_path / "prog").mkdir()
    code, r = capture(applied, tmp_path / "cap", tmp_path / "prog")
    assert code == 2 and r["error"] == f"program {str(tmp_path / 'prog')!r} is not an executable file"
    assert not (tmp_path / "cap").exists()


def test_a_fifo_is_not_a_program(tmp_path):
    """An executable FIFO passes shutil.which; hashing it would wait for a writer (forever). A
    writer is waiting here so that, were it opened, the test ends instead of hanging."""
    fifo = tmp_path / "prog"
    os.mkfifo(fifo)
    fifo.chmod(0o755)
    writer = threading.Thread(target=lambda: os.close(os.open(fifo, os.O_WRONLY)), daemon=True)
    writer.start()
    try:
        with pytest.raises(CaptureError) as e:
            runrecord.record([str(fifo)], dict(os.environ))
        assert e.value.message == f"program {str(fifo)!r} is not an executable file"
    finally:
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # lets the writer's open return
        writer.join()
        os.close(reader)


# ---- verdict: arm B ran the captured program ----

def _meas(tmp_path: Path, binaries: list[dict]) -> Path:
    doc = json.loads(MEAS.read_text())
    doc["binaries"] = binaries  # synthetic: what measure --binary would have hashed
    p = tmp_path / "synthetic_measure.json"
    p.write_text(json.dumps(doc))
    return p


def _as_applied_here(cap: Path, evidence: Path, out: Path) -> Path:
    """An H200 evaluator record or measurement, synthetic in one field: the instrumented source it
    names is the file apply writes here, #line directives included (linemap.py), where the GPU
    host's file had none."""
    ran = "ac7398f1089983e8d9323811096abe6002006dfc3ca8ff9881a0554afdcd0ed4"  # what the GPU host's file hashed
    now = json.loads((cap / "manifest.json").read_text())["source"]["instrumented_sha256"]
    out.write_text(evidence.read_text().replace(ran, now))
    return out


def _verdict(cap: Path, meas: Path, root: Path) -> dict:
    """`root`: where the measurement's relative paths are rehashed (not the project: its source is applied)."""
    root.mkdir(exist_ok=True)
    records = _as_applied_here(cap, RECORDS, root / "evaluations.jsonl")
    meas = _as_applied_here(cap, meas, root / "measurement.json")
    code, text = cli("verdict", cap, "--measurement", meas, "--correctness-evidence", records, "--root", root, "--json")
    assert code == 0, text
    return json.loads(text)


def test_measurement_of_another_binary_disagrees(applied, built, tmp_path):
    """The committed measurement hashed the GPU host's gemm_mma.clean and .inst, not this program."""
    cap = tmp_path / "cap"
    assert capture(applied, cap, built, *LAUNCH)[0] == 0
    hashed = [h["sha256"] for h in json.loads(MEAS.read_text())["binaries"]]
    g = _verdict(cap, MEAS, tmp_path / "elsewhere")
    assert g["grade"] == "diagnostic" and g["missing"] == [] and g["disagreements"] == [
        f"binary: the capture ran {built} with sha256 {sha(built)[:16]}…, the measurement hashed {hashed[0][:16]}…, "
        f"{hashed[1][:16]}… (arm B must run the captured program: measure with --binary {built}, or capture the "
        "binary that was measured)"]
    assert g["identity"]["measurement"]["binaries"] == hashed
    code, text = cli("report", cap, "-o", tmp_path / "r.html", "--measurement", MEAS, "--root", tmp_path / "elsewhere",
                     "--json")
    assert code == 0 and json.loads(text)["grade"] == "diagnostic", text
    assert f"<li>disagrees: binary: the capture ran {built} with sha256" in (tmp_path / "r.html").read_text()


def test_measurement_of_the_captured_binary_is_decision_grade(applied, built, tmp_path):
    cap = tmp_path / "cap"
    assert capture(applied, cap, built, *LAUNCH)[0] == 0
    meas = _meas(tmp_path, [{"path": "clean", "sha256": "0" * 64}, {"path": built.name, "sha256": sha(built)}])
    g = _verdict(cap, meas, built.parent)
    assert g["grade"] == "decision_grade" and g["disagreements"] == []
    assert not any(n.startswith("binary") for n in g["notes"])


def test_no_binary_on_either_side_is_a_note_only(applied, built, tmp_path):
    cap = tmp_path / "cap"
    assert capture(applied, cap, built, *LAUNCH)[0] == 0
    g = _verdict(cap, _meas(tmp_path, []), tmp_path / "elsewhere")
    assert g["grade"] == "decision_grade" and g["disagreements"] == []
    assert [n for n in g["notes"] if n.startswith("binary")] == [
        "binary not bound: the measurement hashed no binaries (measure --binary), so nothing shows that arm B ran "
        "the captured program"]
    g = _verdict(without_run_record(tmp_path), MEAS, tmp_path / "elsewhere")
    assert g["grade"] == "decision_grade" and g["disagreements"] == []
    assert [n for n in g["notes"] if n.startswith("binary")] == [
        "binary not bound: the capture has no run record (run.json: capture with atrex-inject capture), so nothing "
        "shows that arm B ran the captured program"]


# ---- the file: one writer, one reader, damaged ones refused by field ----

PROGRAM = {"path": "/usr/bin/prog", "sha256": "ab" * 32}
GOOD = {"format": "atrex-run", "version": 1, "argv": ["prog", "in.bin"], "program": PROGRAM,
        "files": [{"path": "in.bin", "sha256": "cd" * 32}]}


def test_round_trip_is_byte_exact(tmp_path):
    rec = runrecord.RunRecord(("prog", "in.bin"), runrecord.FileHash(**PROGRAM),
                              (runrecord.FileHash("in.bin", "cd" * 32),))
    p = runrecord.write(tmp_path, rec)
    assert runrecord.read(tmp_path) == rec and json.loads(p.read_text()) == GOOD
    data = p.read_bytes()
    runrecord.write(tmp_path, runrecord.read(tmp_path))
    assert p.read_bytes() == data and runrecord.read(tmp_path / "absent") is None


def _without(k):
    return {key: v for key, v in GOOD.items() if key != k}


@pytest.mark.parametrize("doc,msg", [
    (_without("program"), "field 'program' must be an object {path, sha256}, not NoneType"),
    (_without("argv"), "field 'argv' must be a non-empty list of strings"),
    (_without("files"), "field 'files' must be a list, not NoneType"),
    (_without("format"), "field 'format' is None, not 'atrex-run'"),
    ({**GOOD, "version": "1"}, "field 'version' must be an integer, not str"),
    ({**GOOD, "version": float("nan")}, "field 'version' must be an integer, not float"),
    ({**GOOD, "version": 2}, "field 'version' is 2: this atrex-inject reads version 1"),
    ({**GOOD, "argv": "prog in.bin"}, "field 'argv' must be a non-empty list of strings"),
    ({**GOOD, "program": {"path": "p", "sha256": float("nan")}}, "field 'program.sha256' must be 64 lowercase hex"),
    ({**GOOD, "program": {"sha256": "ab" * 32}}, "field 'program.path' must be a non-empty string"),
    ({**GOOD, "files": [GOOD["files"][0], {"path": "x", "sha256": "AB" * 32}]},
     "field 'files[1].sha256' must be 64 lowercase hex"),
    ({**GOOD, "files": [7]}, "field 'files[0]' must be an object {path, sha256}, not int"),
    ([GOOD], "must be a JSON object, not list"),
    ("{not json", "not a run record: Expecting property name"),
], ids=["no_program", "no_argv", "no_files", "no_format", "version_str", "version_nan", "version_2", "argv_str",
        "sha_nan", "no_path", "sha_upper", "file_int", "list", "not_json"])
def test_damaged_run_record_exits_2_naming_the_field(tmp_path, doc, msg):
    cap = without_run_record(tmp_path)
    (cap / "run.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))
    for verb in ("validate", "verdict"):
        code, text = cli(verb, cap, "--json")
        err = json.loads(text)
        assert code == 2 and msg in err["error"] and err["path"] == str(cap / "run.json"), text
        assert "capture again" in err["hint"]
    with pytest.raises(CaptureError, match="run.json: not a run record"):
        validate_capture(cap, load_manifest(cap / "manifest.json"))


def test_grade_reads_the_run_from_the_report():
    """grade() binds what validate put in the identity (the library path verdict takes)."""
    m = load_manifest(FIX / "gemm_mma" / "manifest.json")
    r = validate_capture(FIX / "gemm_mma", m)
    meas = json.loads(MEAS.read_text())
    r["identity"]["run"] = {"argv": ["gemm.inst"], "program": {"path": "gemm.inst", "sha256": meas["binaries"][1][
        "sha256"]}, "files": []}  # synthetic: as if the GPU host had captured through atrex-inject capture
    g = grade(r, m, meas, {"valid": True, "problems": []}, RECORDS)
    assert g["grade"] == "decision_grade" and not [n for n in g["notes"] if n.startswith("binary")]
