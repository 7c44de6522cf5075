"""The buffer format has two definitions, the C++ structs of runtime/atrex_recorder.cuh and the numpy
dtypes of atrex_inject/layout.py: a host program built with nvcc prints every field's offset and
every struct's size, and they must equal the dtypes' (a field added on one side only fails here);
likewise every `atrex::Role` enumerator named by layout.Role, and the format constants."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from atrex_inject import layout
from atrex_inject.layout import TAG_VALID, Role
from conftest import nvcc_compile

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")

STRUCTS = {"LaunchHeader": layout.HEADER_DTYPE, "OwnerHeader": layout.OWNER_DTYPE,
           "GroupDesc": layout.HEADER_DTYPE["groups"].base}


def _program() -> str:
    lines = ['#include <cstddef>', '#include <cstdio>', '#include "atrex_timeline.cuh"', "int main() {",
             '  std::printf("{");']
    for name, dt in STRUCTS.items():
        lines.append(f'  std::printf("\\"{name}\\": {{\\"size\\": %zu", sizeof(atrex::{name}));')
        for field in dt.names:
            lines.append(f'  std::printf(", \\"{field}\\": %zu", offsetof(atrex::{name}, {field}));')
        lines.append('  std::printf("}, ");')
    roles = ", ".join(f'\\"{r.value}\\": %u' for r in Role)
    role_args = ", ".join(f"(unsigned)atrex::{r.cpp}" for r in Role)
    lines += [f'  std::printf("\\"roles\\": {{{roles}}}, ", {role_args});',
              '  std::printf("\\"magic\\": %llu, \\"version\\": %u, \\"max_groups\\": %u, \\"tag_valid\\": %u}\\n",'
              ' (unsigned long long)atrex::kMagic, atrex::kFormatVersion, atrex::kMaxGroups, atrex::kTagValid);',
              "  return 0;", "}"]
    return "\n".join(lines) + "\n"


def test_cpp_structs_match_the_python_dtypes(tmp_path):
    src = tmp_path / "offsets.cu"
    src.write_text(_program())
    exe = tmp_path / "offsets"
    proc = nvcc_compile(src, exe, ["-O1"])  # a host program: links, runs on the CPU (no CUDA call)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout)
    for name, dt in STRUCTS.items():
        want = {"size": dt.itemsize, **{f: dt.fields[f][1] for f in dt.names}}
        assert got[name] == want, name
    assert got["roles"] == {r.value: r.code for r in Role}
    assert (got["magic"], got["version"], got["max_groups"], got["tag_valid"]) == (
        layout.MAGIC, layout.FORMAT_VERSION, layout.MAX_GROUPS, TAG_VALID)
