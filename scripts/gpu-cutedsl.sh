#!/usr/bin/env bash
# The CuTe DSL (IKeT) GPU check in one call, on the GPU host, from the repository root, with the
# offline CuTe DSL bundle carried in .device/ and wheels in .whl/:
#   [ROUNDS=1] [ITERS=20] [MEASURE=1] [MEASURE_ON=1] [MEASURE_OFF=0] bash scripts/gpu-cutedsl.sh [scale_add|hopper_gemm]
# (results under $OUT; MEASURE=0 skips the perturbation measurement, MEASURE_OFF=1 adds clean against
# the instrumented runner without run-iket: IKeT's probes compiled in, off; MEASURE_ON=0 leaves out
# clean against run-iket, for the off arm alone)
# Applies examples/specs/<example>_cutedsl.toml, runs the clean example, captures the
# instrumented one (small size) under run-iket through `atrex-inject capture`, validates and
# summarizes it, measures IKeT's perturbation at full size with `atrex-inject measure`, reverts.
set -uo pipefail
# every GPU program runs under a timeout: a kernel that hangs must not eat the device budget
T="timeout 180"
EX=${1:-scale_add}
ROUNDS=${ROUNDS:-1}
ITERS=${ITERS:-20}
OUT=${OUT:-/tmp/atrex-gpu-cutedsl}
mkdir -p "$OUT"
fail=0
eval "$(bash .device/install-cutedsl-bundle.sh .device/cutedsl.tar.xz)"
source scripts/gpu-env.sh
work=$(mktemp -d)
cp -r examples "$work/" && mkdir "$work/.git"
run="$work/examples/cutedsl/run_$EX.py"
clean_run="$work/clean-examples/cutedsl/run_$EX.py"
spec="$work/examples/specs/${EX}_cutedsl.toml"
cp -r examples "$work/clean-examples"
echo "== clean"
# a clean run that fails or hangs ends the check: the instrumented runs would only repeat it
$T python3 "$clean_run" --warmup 2 --iters 5 | tee "$OUT/clean.txt"
[ "${PIPESTATUS[0]}" = 0 ] || { echo "== clean run failed: stopping"; exit 1; }
echo "== apply"
$ATREX apply "$spec" --root "$work" --json > "$OUT/apply.json" || exit 1
src=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['source'])" "$OUT/apply.json")
cp "$work/$src" "$OUT/$EX.instrumented.py"
echo "== capture under run-iket (atrex-inject capture), then validate and summarize"
$T $ATREX capture --spec "$spec" --root "$work" --out "$OUT/cap" --workload "$EX:small:seed=1" \
  -- python3 "$run" --warmup 1 --iters 1 --small || fail=1
rm -rf "$OUT/cap/iket"
$ATREX validate "$OUT/cap" --source "$work/$src" || fail=1
$ATREX summary "$OUT/cap" | head -14
if [ "${MEASURE:-1}" = 1 ]; then
base="[\"python3\", \"$clean_run\", \"--warmup\", \"{warmup}\", \"--iters\", \"{iterations}\"]"
if [ "${MEASURE_ON:-1}" = 1 ]; then
echo "== IKeT perturbation: clean vs instrumented under run-iket (tracker reused: one sample line per process)"
$T python3 -m iket.cli.main -o "$work/trk" profile --keep --postprocess none -- python3 "$run" --warmup 3 --iters "$ITERS" \
  > "$OUT/tracker.log" 2>&1 || fail=1
inst="[\"python3\", \"-m\", \"iket.cli.main\", \"-o\", \"$work/iket-sample\", \"--clobber\", \"profile\", \"--use-tracker-dir\", \"$work/trk/tracker\", \"--postprocess\", \"none\", \"--\", \"python3\", \"$run\", \"--warmup\", \"{warmup}\", \"--iters\", \"{iterations}\"]"
$ATREX measure --baseline "$base" --instrumented "$inst" --warmup 3 --iterations "$ITERS" --rounds "$ROUNDS" \
  --source "$work/clean-$src" --source "$work/$src" \
  --out "$OUT/measure.json" --timeout 300 || fail=1
fi
if [ "${MEASURE_OFF:-0}" = 1 ]; then
  echo "== probes compiled in, off: clean vs the instrumented runner without run-iket"
  off="[\"python3\", \"$run\", \"--warmup\", \"{warmup}\", \"--iters\", \"{iterations}\"]"
  $ATREX measure --baseline "$base" --instrumented "$off" --warmup 3 --iterations "$ITERS" --rounds "$ROUNDS" \
    --out "$OUT/measure-off.json" --timeout 300 || fail=1
fi
fi
$ATREX revert "$spec" --root "$work" || fail=1
cmp -s "$work/$src" "$src" && echo "revert byte-exact: yes" || fail=1
tar -C "$OUT" -czf "$OUT/results.tar.gz" cap $(cd "$OUT" && ls measure*.json 2>/dev/null) && rm -rf "$OUT/cap"
echo "== done (fail=$fail)"
exit $fail
