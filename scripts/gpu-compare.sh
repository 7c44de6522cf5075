#!/usr/bin/env bash
# The H200 evidence for `atrex-inject compare` (docs/compare.md), on the GPU host from the repository
# root, with wheels in .whl/ (carry [".whl"]); about 2 minutes:
#   bash scripts/gpu-compare.sh          (results under $OUT/compare, OUT default /tmp/atrex-gpu)
# tests/sources/compare/sumsq.cu and sumsq.after.cu differ in one line (the streaming loop's
# `#pragma unroll 1`, then 4). Each build, in turn copied to the spec's source: clean build, run
# (correct, its workload identity), apply sumsq.toml, instrumented build, capture with `atrex-inject
# capture` (BEFORE twice, in two processes: the A/A pair), revert byte for byte; then each build's
# clean binary against its instrumented one (`atrex-inject measure`, ABBA BAAB, the folder's
# measure.json) and the two clean binaries against each other (the end-to-end change measured
# directly). `compare` runs on both pairs (text, JSON, PNG). One archive comes back, compare.tar.gz;
# `python3 scripts/update_compare_fixtures.py compare.tar.gz` turns it into tests/fixtures/h200/compare/.
set -uo pipefail
T="timeout 120"  # every GPU program under a timeout: a hung kernel must not eat the device budget
OUT=${OUT:-/tmp/atrex-gpu}/compare
mkdir -p "$OUT/cap"
fail=0
source scripts/gpu-env.sh
NV="$NVCC -I$PWD/examples/cuda"  # harness.cuh

log device
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee "$OUT/device.txt"
nvcc --version | tail -2 | tee -a "$OUT/device.txt"
work=$(mktemp -d)
mkdir -p "$work/.git" "$work/compare"
cp tests/sources/compare/sumsq.toml "$work/compare/"
spec="$work/compare/sumsq.toml"
src="$work/compare/sumsq.cu"
$NV -o "$work/before.clean" tests/sources/compare/sumsq.cu & $NV -o "$work/after.clean" tests/sources/compare/sumsq.after.cu &
wait
ARGS=(--warmup 10 --iters 20)  # the spec writes launches 10-17: after the warmup
wl() { python3 -c "import json,sys; l=[x for x in open(sys.argv[1]) if x.startswith('__ATREX_TIMELINE_SAMPLE__=')]; print(json.loads(l[-1].split('=',1)[1])['workload_identity'])" "$1"; }

# build: the variant's file, its folders (one per capture)
for pair in "before:sumsq.cu:before before_rerun" "after:sumsq.after.cu:after"; do
  IFS=: read -r v file folders <<< "$pair"
  log "$v ($file): clean run"
  [ -x "$work/$v.clean" ] || { echo "no clean build"; fail=1; continue; }
  $T "$work/$v.clean" "${ARGS[@]}" | tee "$OUT/$v.clean.txt" || fail=1
  workload=$(wl "$OUT/$v.clean.txt")
  cp "tests/sources/compare/$file" "$src"
  cp "$src" "$work/$v.cu"
  log "$v: apply, instrumented build, capture"
  $ATREX apply "$spec" --root "$work" || { fail=1; continue; }
  cp "$src" "$OUT/cap/$v.instrumented.cu"
  cp "$src" "$work/$v.instrumented.cu"
  $NV -I"$INC" -Xptxas -v -o "$work/$v.inst" "$src" 2>&1 | grep -E "registers|spill" | tail -2
  for f in $folders; do
    $T $ATREX capture --spec "$spec" --root "$work" --out "$OUT/cap/$f" --workload "$workload" \
      -- "$work/$v.inst" "${ARGS[@]}" | tee "$OUT/$f.inst.txt" || fail=1
    $ATREX validate "$OUT/cap/$f" --source "$work/$v.instrumented.cu" || fail=1
  done
  $ATREX revert "$spec" --root "$work" || fail=1
  cmp -s "$src" "tests/sources/compare/$file" && echo "revert byte-exact: yes" || { echo "revert byte-exact: NO"; fail=1; }
done

argv() { printf '["%s", "--warmup", "{warmup}", "--iters", "{iterations}"]' "$1"; }
for v in before after; do
  log "$v: clean vs instrumented (fresh process per sample, ABBA BAAB)"
  $ATREX measure --baseline "$(argv "$work/$v.clean")" --instrumented "$(argv "$work/$v.inst")" \
    --warmup 10 --iterations 200 --source "$work/$v.cu" --source "$work/$v.instrumented.cu" \
    --binary "$work/$v.clean" --binary "$work/$v.inst" --out "$OUT/cap/$v/measure.json" \
    --capture-dir "$work/measure-$v" --timeout 60 || fail=1
done
log "end to end: BEFORE's clean build (A) vs AFTER's (B)"
$ATREX measure --baseline "$(argv "$work/before.clean")" --instrumented "$(argv "$work/after.clean")" \
  --warmup 10 --iterations 200 --source "$work/before.cu" --source "$work/after.cu" \
  --binary "$work/before.clean" --binary "$work/after.clean" --out "$OUT/cap/clean_before_vs_after.json" \
  --timeout 60 || fail=1

log "compare: the A/A pair, then the change"
for p in "before_rerun:aa" "after:change"; do
  IFS=: read -r f name <<< "$p"
  $ATREX compare "$OUT/cap/before" "$OUT/cap/$f" --png "$OUT/$name.png" | tee "$OUT/$name.txt" || fail=1
  $ATREX compare "$OUT/cap/before" "$OUT/cap/$f" --json > "$OUT/$name.json" || fail=1
done

tar -C "$OUT" -czf "$OUT/compare.tar.gz" cap $(cd "$OUT" && ls *.txt *.json *.png 2>/dev/null)
rm -rf "$OUT/cap" && find "$OUT" -maxdepth 1 -type f ! -name compare.tar.gz ! -name "*.png" ! -name "*.txt" -delete
log "done (fail=$fail)"
exit $fail
