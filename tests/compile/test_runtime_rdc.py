"""Two instrumented translation units in one program built with separate compilation (-rdc): each
unit's capture sessions bind their own buffer symbol, so the device link must not see two
definitions of atrex_tl_buffer (runtime/atrex_recorder.cuh). Built and linked with nvcc, no GPU."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from atrex_inject import snapshot
from conftest import NVCC_FLAGS

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")

UNIT = """__global__ void {k}(float* x) {{
  x[threadIdx.x] += 1.f;
}}
void launch_{k}(float* x) {{
  {k}<<<1, 32>>>(x);
}}
"""
SPEC = """version = 1
name = "{k}"
question = "q"
backend = "cuda"
source = "{k}.cu"
kernel = "{k}"

[[site]]
name = "s"
anchor = {{ entry = true }}
"""
MAIN = """void launch_a(float*);
void launch_b(float*);
int main() { launch_a(nullptr); launch_b(nullptr); return 0; }
"""


@pytest.mark.long
@pytest.mark.parametrize("rdc", [True, False])
def test_two_instrumented_units_link(tmp_path, rdc):
    (tmp_path / ".git").mkdir()
    for k in ("a", "b"):
        (tmp_path / f"{k}.cu").write_text(UNIT.format(k=k))
        (tmp_path / f"{k}.toml").write_text(SPEC.format(k=k))
        snapshot.apply(tmp_path / f"{k}.toml")
    (tmp_path / "main.cu").write_text(MAIN)
    inc = f"-I{snapshot.runtime_header().parent}"
    objs = []
    for k in ("a", "b", "main"):
        obj = tmp_path / f"{k}.o"
        r = subprocess.run(["nvcc", *NVCC_FLAGS, inc, *(["-rdc=true"] if rdc else []), "-c", "-o", str(obj),
                            str(tmp_path / f"{k}.cu")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        objs.append(str(obj))
    r = subprocess.run(["nvcc", *NVCC_FLAGS, *(["-rdc=true"] if rdc else []), "-o", str(tmp_path / "prog"), *objs],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
