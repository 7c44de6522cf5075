"""The .cu route's `#line` directives (linemap.py): an instrumented file names its clean lines to
the compiler (its errors, `__LINE__` in the program's own messages), the source id a capture
carries stays that of the text without them, so the committed H200 captures of the examples still
match their instrumented sources, and revert restores the clean file byte for byte."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from atrex_inject import snapshot
from atrex_inject.linemap import MARK
from atrex_inject.source_id import source_id_of

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures" / "h200"
CHECK = '  static_assert(__LINE__ == {line}, "__LINE__ names the clean line");\n'


def _project(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    (tmp_path / ".git").mkdir()
    return tmp_path


def test_line_in_host_code_after_the_kernel_names_the_clean_line(tmp_path):
    """A static_assert on __LINE__ in main(), after the kernel and its instrumented copy: the clean
    build and the instrumented build both pass it."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    root = _project(tmp_path)
    src = root / "examples" / "cuda" / "gemm_mma.cu"
    lines = src.read_text().splitlines(keepends=True)
    at = next(i for i, l in enumerate(lines) if l.startswith("int main(")) + 1
    lines.insert(at, CHECK.format(line=at + 1))
    src.write_text("".join(lines))
    clean = src.read_bytes()
    snapshot.apply(root / "examples" / "specs" / "gemm_mma.toml", options=snapshot.Options(recorder="global"))
    assert len(src.read_text().splitlines()) > len(lines) + 100  # the instrumented copy and probes went in above
    proc = subprocess.run(["nvcc", "-c", "-O0", "-gencode=arch=compute_90a,code=sm_90a",
                           f"-I{snapshot.runtime_header().parent}", "-o", str(tmp_path / "g.o"), str(src)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    snapshot.revert(root / "examples" / "specs" / "gemm_mma.toml")
    assert src.read_bytes() == clean


def test_the_source_id_leaves_the_directives_out(tmp_path):
    """The committed H200 capture of gemm_mma was recorded before the directives: its source id is
    still the instrumented file's, and a directive more or less does not change it."""
    import json
    root = _project(tmp_path)
    snapshot.apply(root / "examples" / "specs" / "gemm_mma.toml")
    text = (root / "examples" / "cuda" / "gemm_mma.cu").read_text()
    assert text.count(MARK) >= 2
    recorded = json.loads((FIX / "gemm_mma" / "manifest.json").read_text())["source"]["source_id"]
    assert source_id_of(text) == recorded
    assert source_id_of(text.replace(f" {MARK}\n", " // another\n", 1)) != recorded


def test_a_second_spec_rewriting_a_file_names_the_clean_lines_too(tmp_path):
    """Two specs whose launches are in one launcher (tests/sources/oneunit/main.cu): the second
    rewrites a file the first already did. Every line of the launcher that is clean code (a launch
    with its kernel chosen at run time undone) is presumed by the compiler, following the
    directives, to be the clean file's line of that text (before, the second spec's directives
    named lines of the first's output)."""
    import re
    (tmp_path / ".git").mkdir()
    for f in (REPO / "tests" / "sources" / "oneunit").iterdir():
        shutil.copy(f, tmp_path / f.name)
    clean = {f: (tmp_path / f).read_text() for f in ("main.cu", "scale.cuh", "shift.cuh")}
    for spec in ("scale.toml", "shift.toml"):
        snapshot.apply(tmp_path / spec)
    lines, presumed, checked = clean["main.cu"].splitlines(), 1, 0
    for line in (tmp_path / "main.cu").read_text().splitlines():
        if (m := re.match(r'#line (\d+) "main.cu" ', line)) and line.endswith(MARK):
            presumed = int(m.group(1))
            continue
        if "// atrex:" not in line:  # a line of the clean file, not one a spec inserted
            assert lines[presumed - 1] == re.sub(r"\(__atrex_cap\.on\(\) \? (\w+)__atrex : \1\)", r"\1", line), \
                (presumed, line)
            checked += 1
        presumed += 1
    assert checked == len(lines)
    for spec in ("shift.toml", "scale.toml"):
        snapshot.revert(tmp_path / spec)
    assert {f: (tmp_path / f).read_text() for f in clean} == clean
