#!/usr/bin/env bash
# Fetch, here (with package access), the wheels of the project's pure-Python dependencies that the
# GPU host's image lacks, into .whl/ (ignored by git; carried to the GPU host with carry [".whl"]).
# The GPU host has python3.12, numpy, protobuf, typer, rich, matplotlib, cuda-python and torch already.
#   bash scripts/fetch-gpu-wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx "/.whl/" .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo /.whl/ >> .git/info/exclude; }
py=(--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
    --platform manylinux2014_x86_64 --platform any)
python3 -m pip download -q --no-deps --only-binary=:all: "${py[@]}" -d .whl "lark==1.3.1" "libcst==1.8.6" "pyyaml==6.0.3" "perfetto==0.59.1"
ls -la .whl
