#!/usr/bin/env bash
# The demo's GEMM recorded on the GPU host, from the repository root (about 100 s of wall time):
#   bash scripts/gpu-demo.sh            (results under $OUT/demo, default /tmp/atrex-gpu/demo)
# examples/specs/gemm_mma.toml, and its staged copy (spec.with_recorder: 32-event rings for 8
# warps), applied to a copy of examples/ in turn: each instrumented source kept, then reverted;
# the clean, instrumented and staged builds compiled side by side for sm_90a; the clean build run
# (its sample line names the workload); each spec applied again to capture its build through
# `atrex-inject capture` (run.json names the binary), reverted (byte for byte, checked), the
# capture validated; the demo capture's report printed with its answer line. Then what the
# fixtures bind to the same build: the perturbation (`atrex-inject measure`, clean against
# instrumented and clean against staged, ABBA BAAB x 2, a fresh process per sample), the
# example evaluator's records and the verdict. Every GPU program runs under a timeout.
# Everything comes back in $OUT/demo/demo.tar.gz; on the CPU side
#   python3 scripts/update_fixtures.py --demo demo.tar.gz "LABEL" && python3 tests/golden_outputs.py tests/golden/outputs
# replaces tests/fixtures/h200/{gemm_mma,gemm_mma_staged,measure} with their PROVENANCE.md section,
# then the golden outputs. scripts/gpu-suite.sh runs this script for its GEMM.
set -uo pipefail
T="timeout 180"
OUT=${OUT:-/tmp/atrex-gpu}
D="$OUT/demo"
mkdir -p "$D/cap/gemm_mma" "$D/cap/gemm_mma_staged" "$D/cap/measure"
fail=0
source scripts/gpu-env.sh

log device
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee "$D/device.txt"
nvcc --version | tail -2 | tee -a "$D/device.txt"

work=$(mktemp -d)
cp -r examples "$work/" && mkdir "$work/.git"
spec="$work/examples/specs/gemm_mma.toml"
src="$work/examples/cuda/gemm_mma.cu"
sspec=$(python3 -c "import sys; from atrex_inject.spec import with_recorder; print(with_recorder(sys.argv[1], 'staged', 8, 32))" "$spec")
for s in "$spec" "$sspec"; do  # each instrumented source, kept for its build and the evaluator
  name=$(basename "$s" .toml)
  $ATREX apply "$s" --root "$work" > /dev/null || { fail=1; continue; }
  cp "$src" "$work/$name.instrumented.cu"
  cp "$src" "$D/cap/$name.instrumented.cu"
  $ATREX revert "$s" --root "$work" > /dev/null || fail=1
done
cmp -s "$src" examples/cuda/gemm_mma.cu || { echo "revert byte-exact: NO"; fail=1; }

log "build: clean, instrumented, staged (side by side)"
inc="-I$INC -I$work/examples/cuda"
$NVCC -o "$work/gemm_mma.clean" "$src" &
$NVCC $inc -Xptxas -v -o "$work/gemm_mma.inst" "$work/gemm_mma.instrumented.cu" > "$D/build.inst.txt" 2>&1 &
$NVCC $inc -o "$work/gemm_mma.staged" "$work/gemm_mma_staged.instrumented.cu" &
wait
grep -E "registers|spill" "$D/build.inst.txt" | tail -2
for b in clean inst staged; do [ -x "$work/gemm_mma.$b" ] || { echo "build $b failed"; cat "$D/build.inst.txt"; exit 1; }; done

log "clean run"
$T "$work/gemm_mma.clean" --warmup 3 --iters 10 | tee "$D/gemm_mma.clean.txt" || fail=1
workload=$(python3 -c "import json,sys; l=[x for x in open(sys.argv[1]) if x.startswith('__ATREX_TIMELINE_SAMPLE__=')]; print(json.loads(l[-1].split('=',1)[1])['workload_identity'])" "$D/gemm_mma.clean.txt")

capture() {  # capture SPEC NAME BUILD: apply, capture the build, revert, validate
  local s=$1 name=$2 build=$3
  log "$name: apply, capture, revert"
  $ATREX apply "$s" --root "$work" > /dev/null || { fail=1; return; }
  cmp -s "$src" "$work/$name.instrumented.cu" || { echo "apply wrote other bytes than before"; fail=1; }
  cp "$work/.atrex/$name/manifest.json" "$work/.atrex/$name/instrumented.patch" "$D/cap/$name/"
  $T $ATREX capture --spec "$s" --root "$work" --out "$D/cap/$name" --workload "$workload" \
    -- "$build" --warmup 3 --iters 10 | tee "$D/$name.capture.txt" || fail=1
  $ATREX revert "$s" --root "$work" > /dev/null || fail=1
  cmp -s "$src" examples/cuda/gemm_mma.cu && echo "revert byte-exact: yes" || { echo "revert byte-exact: NO"; fail=1; }
  $ATREX validate "$D/cap/$name" --source "$D/cap/$name.instrumented.cu" || fail=1
}
capture "$spec" gemm_mma "$work/gemm_mma.inst"
capture "$sspec" gemm_mma_staged "$work/gemm_mma.staged"
$ATREX summary "$D/cap/gemm_mma"
$ATREX report "$D/cap/gemm_mma" -o "$work/report.html" || fail=1  # prints the answer line

log "perturbation: clean vs instrumented, clean vs staged (ABBA BAAB x 2 each); evaluator records"
argv() { printf '["%s", "--warmup", "{warmup}", "--iters", "{iterations}"]' "$1"; }
measure() {  # measure BUILD INSTRUMENTED_SOURCE OUT
  $ATREX measure --baseline "$(argv "$work/gemm_mma.clean")" --instrumented "$(argv "$1")" \
    --warmup 10 --iterations 200 --rounds 2 --root "$work" --source "$src" --source "$2" \
    --binary "$work/gemm_mma.clean" --binary "$1" --out "$3" --capture-dir "$work/measure-$(basename "$1")" || fail=1
}
measure "$work/gemm_mma.inst" "$work/gemm_mma.instrumented.cu" "$D/cap/measure/gemm_mma.json"
python3 -c "import json,sys; from atrex_inject.measure import validate_measurement as v; r=v(sys.argv[1]); print(json.dumps(r)); sys.exit(not r['valid'])" \
  "$D/cap/measure/gemm_mma.json" | tee "$D/cap/measure/gemm_mma.validate.json" || fail=1
measure "$work/gemm_mma.staged" "$work/gemm_mma_staged.instrumented.cu" "$D/cap/measure/gemm_mma_staged.json"
python3 examples/evaluator.py --source "$work/gemm_mma.instrumented.cu" --out "$D/cap/measure/evaluations.jsonl" \
  -- "$work/gemm_mma.inst" --warmup 3 --iters 10 || fail=1
python3 examples/evaluator.py --source "$src" --out "$D/cap/measure/evaluations.jsonl" \
  -- "$work/gemm_mma.clean" --warmup 3 --iters 10 || fail=1

log "evidence grade: capture + measurement + evaluator record"
$ATREX verdict "$D/cap/gemm_mma" --measurement "$D/cap/measure/gemm_mma.json" --root "$work" \
  --correctness-evidence "$D/cap/measure/evaluations.jsonl" --source "$D/cap/gemm_mma.instrumented.cu" --json \
  | tee "$D/cap/measure/verdict.json" || fail=1

# one archive: the device machine returns only a few files from $OUT
tar -C "$D" -czf "$D/demo.tar.gz" cap $(cd "$D" && ls *.txt)
rm -rf "$D/cap" && find "$D" -maxdepth 1 -type f ! -name demo.tar.gz -delete
log "done (fail=$fail)"
exit $fail
