"""The capture header's host helpers (runtime/atrex_capture.cuh), run on the CPU: the text and
arrays it keeps on malloc instead of <string> and <vector> (each would slow every host compile of an
instrumented unit), the sidecar's JSON escaping, and the atomic write. Built with nvcc, no GPU call."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from atrex_inject import snapshot
from conftest import NVCC_FLAGS

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")

PROGRAM = r"""#include "atrex_timeline.cuh"
using namespace atrex::host;
int main(int argc, char** argv) {
  const char* dir = argv[1];
  Text base;
  base.addf("%s/%s-launch%llu", dir, "_Z6kernelPf", 42ull);
  std::printf("base=%s size=%zu good=%d\n", base.c_str(), base.size(), base.good());
  Text long_text;
  for (int i = 0; i < 600; ++i) long_text.add("0123456789");
  std::printf("long=%zu last=%c\n", long_text.size(), long_text.c_str()[long_text.size() - 1]);
  std::printf("escaped=%s\n", json_escape("a\"b\\c\nd").c_str());
  std::printf("empty=[%s]\n", json_escape(nullptr).c_str());
  Grow<unsigned long long> g;
  for (unsigned long long i = 0; i < 1000; ++i) g.push(i * i);
  unsigned long long sum = 0;
  for (unsigned long long v : g) sum += v;
  std::printf("grow=%zu sum=%llu\n", g.n, sum);
  const char data[] = "payload";
  std::printf("written=%d\n", write_atomic(Text().addf("%s.atrex", base.c_str()).c_str(), data, 7));
  std::printf("unnamed=%d\n", write_atomic("", data, 7));
  return 0;
}
"""


def test_capture_text_arrays_escaping_and_atomic_write(tmp_path):
    (tmp_path / "host.cu").write_text(PROGRAM)
    prog = tmp_path / "host"
    r = subprocess.run(["nvcc", *NVCC_FLAGS, f"-I{snapshot.runtime_header().parent}", "-o", str(prog),
                        str(tmp_path / "host.cu")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    r = subprocess.run([str(prog), str(out_dir)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    base = f"{out_dir}/_Z6kernelPf-launch42"
    assert r.stdout.splitlines() == [
        f"base={base} size={len(base)} good=1",
        "long=6000 last=9",
        'escaped=a\\"b\\\\cd',
        "empty=[]",
        f"grow=1000 sum={sum(i * i for i in range(1000))}",
        "written=1",
        "unnamed=0",
    ]
    assert (out_dir / "_Z6kernelPf-launch42.atrex").read_bytes() == b"payload"
    assert sorted(p.name for p in out_dir.iterdir()) == ["_Z6kernelPf-launch42.atrex"]  # no .part left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["host", "host.cu", "out"]  # nothing written for ""


def test_capture_header_includes_neither_string_nor_vector():
    """Either would add a third or a tenth of a second to every host compile of an instrumented unit."""
    text = (snapshot.runtime_header().parent / "atrex_capture.cuh").read_text()
    includes = [line.split()[1] for line in text.splitlines() if line.startswith("#include")]
    assert "<string>" not in includes and "<vector>" not in includes, includes
