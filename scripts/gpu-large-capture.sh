#!/usr/bin/env bash
# A large real capture (17.3M events, 138 MB) timed through the CLI by bench/large_capture/run.py, on the GPU
# host, from the repository root, with carry [".whl"]; scripts/gpu-suite.sh runs it too. Results: $OUT/large_capture.json
set -uo pipefail
T="timeout 180"
OUT=${OUT:-/tmp/atrex-gpu}
mkdir -p "$OUT"
fail=0
source scripts/gpu-env.sh
work=$(mktemp -d)
mkdir "$work/.git"
mkdir -p "$work/bench" && cp -r bench/large_capture bench/probe_cost "$work/bench/"
log "large capture: the probe-cost FMA loop, every warp, 2 events per iteration; CLI timed on this host"
lspec="$work/bench/large_capture/fma.toml"
if $ATREX apply "$lspec" --root "$work" > /dev/null; then
  $NVCC -I"$INC" -o "$work/fma_large" "$work/bench/probe_cost/probe_cost.cu" || fail=1
  mkdir -p "$work/large"
  cp "$work/.atrex/bench_fma_large/manifest.json" "$work/large/"
  $ATREX revert "$lspec" --root "$work" > /dev/null || fail=1
  ATREX_TIMELINE_OUT="$work/large" ATREX_WORKLOAD="probe_cost:fma:large" $T "$work/fma_large" 1 > /dev/null || fail=1
  ls -la "$work/large"
  $T python3 bench/large_capture/run.py "$work/large" --repeat 3 --json "$OUT/large_capture.json" || fail=1
else
  fail=1
fi
exit $fail
