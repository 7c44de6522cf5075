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
cp -r examples "$work/clean-examples"
echo "== clean"
python3 "$work/clean-examples/cutedsl/run_scale_add.py" --warmup 2 --iters 5 | tee "$OUT/clean.txt" || fail=1
echo "== apply"
$ATREX apply "$work/examples/specs/scale_add_cutedsl.toml" --root "$work" || exit 1
cp "$work/examples/cutedsl/scale_add.py" "$OUT/scale_add.instrumented.py"
echo "== capture under run-iket (atrex-inject capture), then validate and summarize"
$ATREX capture --spec "$work/examples/specs/scale_add_cutedsl.toml" --root "$work" --out "$OUT/cap" \
  --workload "scale_add:n=262144:seed=1" -- python3 "$run" --warmup 1 --iters 1 --n 262144 || fail=1
rm -rf "$OUT/cap/iket"
$ATREX validate "$OUT/cap" --source "$work/examples/cutedsl/scale_add.py" || fail=1
$ATREX summary "$OUT/cap" | head -14
echo "== IKeT perturbation: clean vs instrumented under run-iket (tracker reused: one sample line per process)"
python3 -m iket.cli.main -o "$work/trk" profile --keep --postprocess none -- python3 "$run" --warmup 3 --iters 20 \
  > "$OUT/tracker.log" 2>&1 || fail=1
base="[\"python3\", \"$work/clean-examples/cutedsl/run_scale_add.py\", \"--warmup\", \"{warmup}\", \"--iters\", \"{iterations}\"]"
inst="[\"python3\", \"-m\", \"iket.cli.main\", \"-o\", \"$work/iket-sample\", \"--clobber\", \"profile\", \"--use-tracker-dir\", \"$work/trk/tracker\", \"--postprocess\", \"none\", \"--\", \"python3\", \"$run\", \"--warmup\", \"{warmup}\", \"--iters\", \"{iterations}\"]"
$ATREX measure --baseline "$base" --instrumented "$inst" --warmup 3 --iterations 20 --rounds 1 \
  --source "$work/clean-examples/cutedsl/scale_add.py" --source "$work/examples/cutedsl/scale_add.py" \
  --out "$OUT/measure.json" --timeout 300 || fail=1
$ATREX revert "$work/examples/specs/scale_add_cutedsl.toml" --root "$work" || fail=1
cmp -s "$work/examples/cutedsl/scale_add.py" examples/cutedsl/scale_add.py && echo "revert byte-exact: yes" || fail=1
tar -C "$OUT" -czf "$OUT/results.tar.gz" cap measure.json && rm -rf "$OUT/cap"
echo "== done (fail=$fail)"
exit $fail
