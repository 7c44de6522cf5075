#!/usr/bin/env bash
# The CuTe DSL (IKeT) GPU check in one call, on the GPU host, from the repository root, with the
# offline CuTe DSL bundle carried in .device/ and wheels in .whl/:
#   [ROUNDS=1] [ITERS=20] [MEASURE=1] [MEASURE_ON=1] [MEASURE_OFF=0] bash scripts/gpu-cutedsl.sh [scale_add|hopper_gemm]
# Applies examples/specs/<example>_cutedsl.toml, runs the clean example, captures the
# instrumented one (small size) under run-iket through `atrex-inject capture` (with IKeT's
# selection where the spec makes one: hopper_gemm records its first CTA), validates and
# summarizes it, measures IKeT's perturbation at full size with `atrex-inject measure`, reverts.
# The two measured arms, each clean (A) against (B), ABBA BAAB x ROUNDS, ITERS launches a process:
#   measure-spec.json  (MEASURE_ON=1)  B: the instrumented runner under run-iket as capture runs it,
#       the spec's selection included (cutedsl/backend.py prepare_run_iket), with a tracker from
#       one earlier run so each process runs the program once and prints one sample line;
#   measure-off.json   (MEASURE_OFF=1) B: the instrumented runner without run-iket (probes compiled
#       in, off).
# MEASURE=0 leaves both out. Writes under $OUT (default /tmp/atrex-gpu-cutedsl): clean.txt,
# apply.json, <example>.instrumented.py, tracker.log, and results.tar.gz holding device.txt, cap/
# (the capture folder: launches, manifest.json, run.json, run-iket.log, iket-select.json when the
# spec selects), iket_trace.json (run-iket's decoded trace of that capture) and the measure-*.json.
# The perturbation table's CuTe DSL rows: `MEASURE_OFF=1 ROUNDS=4 ITERS=20 bash scripts/gpu-cutedsl.sh
# hopper_gemm` (16+16 processes an arm, each about 6 s, mostly start-up: both arms and the capture
# in about 8 minutes, one call), then here `python3 bench/perturbation/run.py fold --cutedsl DIR` with
# DIR holding its measure-*.json and device.txt. The first-CTA capture fixture: `MEASURE_OFF=1 ROUNDS=2
# ITERS=300 bash scripts/gpu-cutedsl.sh hopper_gemm`, then here
# `python3 scripts/cutedsl_fixtures.py results.tar.gz`.
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
took() { echo "   ($((SECONDS - $1)) s)"; }
{ nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader; date -u; } | tee "$OUT/device.txt"
work=$(mktemp -d)
cp -r examples "$work/" && mkdir "$work/.git"
run="$work/examples/cutedsl/run_$EX.py"
clean_run="$work/clean-examples/cutedsl/run_$EX.py"
spec="$work/examples/specs/${EX}_cutedsl.toml"
cp -r examples "$work/clean-examples"
echo "== clean"
# a clean run that fails or hangs ends the check: the instrumented runs would only repeat it
t0=$SECONDS
$T python3 "$clean_run" --warmup 2 --iters 5 | tee "$OUT/clean.txt"
[ "${PIPESTATUS[0]}" = 0 ] || { echo "== clean run failed: stopping"; exit 1; }
took $t0
echo "== apply"
$ATREX apply "$spec" --root "$work" --json > "$OUT/apply.json" || exit 1
src=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['source'])" "$OUT/apply.json")
manifest="$work/.atrex/${EX}_cutedsl/manifest.json"
cp "$work/$src" "$OUT/$EX.instrumented.py"
echo "== capture under run-iket (atrex-inject capture), then validate and summarize"
t0=$SECONDS
$T $ATREX capture --spec "$spec" --root "$work" --out "$OUT/cap" --workload "$EX:small:seed=1" \
  -- python3 "$run" --warmup 1 --iters 1 --small || fail=1
cp "$OUT"/cap/iket/iket_pid_*.trace.json "$OUT/iket_trace.json" || fail=1
rm -rf "$OUT/cap/iket"
$ATREX validate "$OUT/cap" --source "$work/$src" || fail=1
$ATREX summary "$OUT/cap" | head -14
took $t0
if [ "${MEASURE:-1}" = 1 ]; then
base="[\"python3\", \"$clean_run\", \"--warmup\", \"{warmup}\", \"--iters\", \"{iterations}\"]"
if [ "${MEASURE_ON:-1}" = 1 ]; then
  echo "== recording: clean vs the instrumented runner under run-iket, as capture runs it"
  t0=$SECONDS
  # the tracker (run-iket's discovery pass) of one run at the measured size, reused by every process
  $T python3 -m iket.cli.main -o "$work/trk" profile --keep --postprocess none -- python3 "$run" --warmup 3 \
    --iters "$ITERS" > "$OUT/tracker.log" 2>&1 || fail=1
  inst=$(python3 -c 'import json, sys
from pathlib import Path
from atrex_inject.cutedsl.backend import prepare_run_iket
from atrex_inject.manifest import load
print(json.dumps(prepare_run_iket(load(Path(sys.argv[1])), Path(sys.argv[2]), sys.argv[4:], Path(sys.argv[3]))))' \
    "$manifest" "$work/rec" "$work/trk/tracker" python3 "$run" --warmup "{warmup}" --iters "{iterations}") || fail=1
  echo "   B: $inst"
  $ATREX measure --baseline "$base" --instrumented "$inst" --warmup 3 --iterations "$ITERS" --rounds "$ROUNDS" \
    --source "$work/clean-$src" --source "$work/$src" \
    --out "$OUT/measure-spec.json" --timeout 300 || fail=1
  took $t0
fi
if [ "${MEASURE_OFF:-0}" = 1 ]; then
  echo "== probes compiled in, off: clean vs the instrumented runner without run-iket"
  t0=$SECONDS
  off="[\"python3\", \"$run\", \"--warmup\", \"{warmup}\", \"--iters\", \"{iterations}\"]"
  $ATREX measure --baseline "$base" --instrumented "$off" --warmup 3 --iterations "$ITERS" --rounds "$ROUNDS" \
    --out "$OUT/measure-off.json" --timeout 300 || fail=1
  took $t0
fi
fi
$ATREX revert "$spec" --root "$work" || fail=1
cmp -s "$work/$src" "$src" && echo "revert byte-exact: yes" || fail=1
tar -C "$OUT" -czf "$OUT/results.tar.gz" cap device.txt $(cd "$OUT" && ls iket_trace.json measure-*.json 2>/dev/null) \
  && rm -rf "$OUT/cap"
echo "== done (fail=$fail, $SECONDS s)"
exit $fail
