#!/usr/bin/env bash
# The CUDA examples on the GPU host, from the repository root (part of scripts/gpu-suite.sh):
#   bash scripts/gpu-examples.sh         (results under $OUT, default /tmp/atrex-gpu)
# For each example: build clean and instrumented for sm_90a, run both (each checks its output
# against a float64 reference and prints the sample line), capture through `atrex-inject capture`
# (run.json names the binary) with the workload identity the program prints, revert, decode, validate; the GEMM
# by scripts/gpu-demo.sh (its capture, the staged GEMM's, their measurements, the evaluator records and
# the verdict); the undersized-ring refusal; a large capture (17.3M events) timed by bench/large_capture/run.py. Python packages the GPU image lacks (lark, libcst)
# travel as wheels in .whl/ (bash scripts/fetch-gpu-wheels.sh, here, then carry [".whl"]).
# The perturbation figures come from scripts/gpu-perturbation.sh; fixtures from this suite's
# archive through `python3 scripts/update_fixtures.py results.tar.gz RUN_LABEL`.
set -uo pipefail
# every GPU program runs under a timeout: a kernel that hangs must not eat the device budget
T="timeout 180"
OUT=${OUT:-/tmp/atrex-gpu}
mkdir -p "$OUT/cap"
fail=0
source scripts/gpu-env.sh

log device
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee "$OUT/device.txt"
nvcc --version | tail -2 | tee -a "$OUT/device.txt"

work=$(mktemp -d)
cp -r examples "$work/" && mkdir "$work/.git"
examples="reduce_sumsq layernorm softmax_rows sgemm_smem"  # their captures are fixtures (update_fixtures.py; the GEMM: gpu-demo.sh)
for ex in $examples; do $NVCC -o "$work/$ex.clean" "$work/examples/cuda/$ex.cu" & done; wait
wl() { python3 -c "import json,sys; l=[x for x in open(sys.argv[1]) if x.startswith('__ATREX_TIMELINE_SAMPLE__=')]; print(json.loads(l[-1].split('=',1)[1])['workload_identity'])" "$1"; }
for ex in $examples; do
  src="$work/examples/cuda/$ex.cu"
  spec="$work/examples/specs/$ex.toml"
  log "$ex: clean run"
  [ -x "$work/$ex.clean" ] || { fail=1; continue; }
  $T "$work/$ex.clean" --warmup 3 --iters 10 | tee "$OUT/$ex.clean.txt" || fail=1
  workload=$(wl "$OUT/$ex.clean.txt")
  log "$ex: apply, instrumented build + capture"
  $ATREX apply "$spec" --root "$work" || { fail=1; continue; }
  cp "$src" "$OUT/cap/$ex.instrumented.cu"; cp "$src" "$work/$ex.instrumented.cu"
  $NVCC -I"$INC" -Xptxas -v -o "$work/$ex.inst" "$src" 2>&1 | grep -E "registers|spill" | tail -2
  mkdir -p "$OUT/cap/$ex"
  cp "$work/.atrex/$ex/manifest.json" "$work/.atrex/$ex/instrumented.patch" "$OUT/cap/$ex/"
  $T $ATREX capture --spec "$spec" --root "$work" --out "$OUT/cap/$ex" --workload "$workload" \
    -- "$work/$ex.inst" --warmup 3 --iters 10 | tee "$OUT/$ex.inst.txt" || fail=1
  $ATREX revert "$spec" --root "$work" || fail=1
  cmp -s "$src" "examples/cuda/$ex.cu" && echo "revert byte-exact: yes" || { echo "revert byte-exact: NO"; fail=1; }
  log "$ex: decode"
  $ATREX decode "$OUT/cap/$ex" || fail=1
  $ATREX decode "$OUT/cap/$ex" --json > "$OUT/cap/$ex/decode.json" || fail=1
  rm -rf "$OUT/cap/$ex/decoded"
  $ATREX validate "$OUT/cap/$ex" --source "$OUT/cap/$ex.instrumented.cu" || fail=1
done

log "rowscale_split: kernel in a header, launched from main.cu through CHECK(cudaLaunchKernelEx(...))"
spec="$work/examples/specs/rowscale_split.toml"
split="$work/examples/cuda/split"
if $NVCC -o "$work/rowscale.clean" "$split/main.cu"; then
  $T "$work/rowscale.clean" --warmup 3 --iters 10 | tee "$OUT/rowscale_split.clean.txt" || fail=1
  workload=$(wl "$OUT/rowscale_split.clean.txt")
  if $ATREX apply "$spec" --root "$work"; then
    cp "$split/rowscale.cuh" "$OUT/cap/rowscale_split.instrumented.cuh"
    cp "$split/main.cu" "$OUT/cap/rowscale_split.main.instrumented.cu"
    mkdir -p "$OUT/cap/rowscale_split"
    cp "$work/.atrex/rowscale_split/manifest.json" "$OUT/cap/rowscale_split/"
    $NVCC -I"$INC" -o "$work/rowscale.inst" "$split/main.cu" || fail=1
    log "rowscale_split: probes off (the clean kernel runs), then capture"
    $T "$work/rowscale.inst" --warmup 3 --iters 10 | tee "$OUT/rowscale_split.off.txt" || fail=1
    ATREX_TIMELINE_OUT="$OUT/cap/rowscale_split" ATREX_WORKLOAD="$workload" $T "$work/rowscale.inst" --warmup 3 \
      --iters 10 | tee "$OUT/rowscale_split.inst.txt" || fail=1
    $ATREX revert "$spec" --root "$work" || fail=1
    for f in rowscale.cuh main.cu; do
      cmp -s "$split/$f" "examples/cuda/split/$f" && echo "revert $f byte-exact: yes" || { echo "revert $f byte-exact: NO"; fail=1; }
    done
    $ATREX validate "$OUT/cap/rowscale_split" --source "$OUT/cap/rowscale_split.instrumented.cuh" || fail=1
    $ATREX summary "$OUT/cap/rowscale_split" | head -4
  else
    fail=1
  fi
else
  fail=1
fi

log "cuda-python capture"
$T python3 scripts/pycapture_check.py "$OUT/cap" || fail=1

log "the demo's GEMM: scripts/gpu-demo.sh, its results unpacked into this run's"
bash scripts/gpu-demo.sh || fail=1
tar -C "$OUT" -xzf "$OUT/demo/demo.tar.gz" && rm -rf "$OUT/demo" || fail=1

log "staging rings sized for 4 warps, launched with 8: refused (probes off, nothing written, output correct)"
sspec=$(python3 -c "import sys; from atrex_inject.spec import with_recorder; print(with_recorder(sys.argv[1], 'staged', 4, 32))" \
  "$work/examples/specs/gemm_mma.toml")
src="$work/examples/cuda/gemm_mma.cu"
$ATREX apply "$sspec" --root "$work" > /dev/null && $NVCC -I"$INC" -o "$work/gemm_mma.small_rings" "$src" \
  && $ATREX revert "$sspec" --root "$work" > /dev/null || fail=1
mkdir -p "$work/refused"
ATREX_TIMELINE_OUT="$work/refused" $T "$work/gemm_mma.small_rings" --warmup 3 --iters 10 2> "$OUT/refused.stderr" \
  | tee "$OUT/refused.txt" || fail=1
head -2 "$OUT/refused.stderr"
grep -q "staging rings were sized for" "$OUT/refused.stderr" && [ -z "$(ls -A "$work/refused")" ] \
  && echo "refused as expected, nothing written" || { echo "NOT refused as expected"; fail=1; }

[ "${LARGE:-1}" = 1 ] && { bash scripts/gpu-large-capture.sh || fail=1; }  # LARGE=0: skip (fixtures only)

# one archive: the device machine returns only a few files from $OUT
tar -C "$OUT" -czf "$OUT/results.tar.gz" cap $(cd "$OUT" && ls *.txt *.json *.stderr 2>/dev/null)
rm -rf "$OUT/cap" && find "$OUT" -maxdepth 1 -type f ! -name results.tar.gz ! -name large_capture.json -delete
log "done (fail=$fail)"
exit $fail
