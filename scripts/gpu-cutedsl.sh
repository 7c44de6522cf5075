#!/usr/bin/env bash
# The CuTe DSL (IKeT) GPU check in one call, on the GPU host, from the repository root, with the
# offline CuTe DSL bundle carried in .device/ and wheels in .whl/:
#   bash scripts/gpu-cutedsl.sh          (results under $OUT)
# Applies examples/specs/scale_add_cutedsl.toml, runs the clean and the instrumented example,
# captures the instrumented one under run-iket, normalizes the capture (atrex-inject capture),
# validates and summarizes it, reverts.
set -uo pipefail
OUT=${OUT:-/tmp/atrex-gpu-cutedsl}
mkdir -p "$OUT"
fail=0
eval "$(bash .device/install-cutedsl-bundle.sh .device/cutedsl.tar.xz)"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site:$PYTHONPATH
ATREX="python3 -m atrex_inject.cli"
work=$(mktemp -d)
cp -r examples "$work/" && mkdir "$work/.git"
run="$work/examples/cutedsl/run_scale_add.py"
echo "== clean"
python3 "$run" --warmup 2 --iters 5 | tee "$OUT/clean.txt" || fail=1
echo "== apply"
$ATREX apply "$work/examples/specs/scale_add_cutedsl.toml" --root "$work" || exit 1
cp "$work/examples/cutedsl/scale_add.py" "$OUT/scale_add.instrumented.py"
echo "== instrumented, under run-iket"
python3 -m iket.cli.main -o "$work/iket" profile --postprocess all --keep -- python3 "$run" --warmup 1 --iters 1 --n 262144 \
  > "$OUT/run-iket.log" 2>&1 || fail=1
tail -20 "$OUT/run-iket.log"
find "$work/iket" -type f -printf '%s %p\n' | sort -k2 | tee "$OUT/iket-files.txt"
for f in $(find "$work/iket" -name "*.json" -size -64M); do echo "--- $f"; head -c 3000 "$f"; echo; done
tar -C "$work" -czf "$OUT/iket.tar.gz" --exclude="*.html" --exclude="*.so" --exclude="*.cubin" iket
$ATREX revert "$work/examples/specs/scale_add_cutedsl.toml" --root "$work" || fail=1
cmp -s "$work/examples/cutedsl/scale_add.py" examples/cutedsl/scale_add.py && echo "revert byte-exact: yes" || fail=1
echo "== done (fail=$fail)"
exit $fail
