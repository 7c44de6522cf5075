#!/usr/bin/env bash
# The CuTe DSL rows of the real-kernel benchmark (bench/realkernels/cutedsl.toml: quack-kernels and
# flash-attn-4) and the CuTe DSL GEMM's first-CTA perturbation row measured 16+16 in both arms
# (scripts/gpu-cutedsl.sh), in one device call, on the GPU host from the repository root. Carried
# with the call: the CuTe DSL bundle (.device/), the wheels of scripts/fetch-gpu-wheels.sh (.whl/)
# and bench/realkernels/.src/ (the packages' files and the apache-tvm-ffi wheel, from
# `python3 bench/realkernels/cutedsl_rows.py fetch` here).
#   [JOBS="gemm-spec gemm-off quack_softmax ..."] [LANES="a,b|c|..."] [BUDGET=500] \
#     bash scripts/gpu-realkernels-cutedsl.sh
# Each job runs on one GPU: gemm-spec and gemm-off are the GEMM's recording and probes-off arms
# (ROUNDS=4: 16+16 processes each), every other job a row of cutedsl.toml (SAMPLES+SAMPLES processes
# an arm, 8 by default; each process imports torch and the DSL, about 10 s on an H200 host).
# LANES lists the jobs each GPU runs in turn, `|` between GPUs. By default a GPU a job where there
# are enough (eight: the GEMM's two arms and five rows, each within about 400 s); else the GEMM's
# arms keep a GPU each and the rows take turns on the others, and on one or two GPUs every job takes
# its turn: then split JOBS over calls so that no GPU has more than about 500 s of work (one quack
# row at 8+8 took 440 s on an H200 host, its two measurements 360 s of it). No job outlives BUDGET seconds from the start.
# Writes under $OUT: device.txt, rows/results-h200.json (the rows as one results file: bench/realkernels/run.py
# merge folds it in) and rows.tar.gz (each row's json, log, measurements, run-iket's trace and
# capture), gemm-spec/ and gemm-off/ (gpu-cutedsl.sh's results.tar.gz: their measure-spec.json and
# measure-off.json, in one folder, are what `bench/perturbation/run.py fold --cutedsl DIR` reads).
set -uo pipefail
OUT=${OUT:-/tmp/atrex-realkernels-cutedsl}
mkdir -p "$OUT/rows"
deadline=$((SECONDS + ${BUDGET:-500}))
eval "$(bash .device/install-cutedsl-bundle.sh .device/cutedsl.tar.xz)" || exit 1
source scripts/gpu-env.sh
python3 -m pip install -q --no-index --no-deps --target /tmp/site bench/realkernels/.src/wheels/*.whl || exit 1
{ nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader; date -u; } | tee "$OUT/device.txt"
rows=$(python3 -c 'import tomllib; print(*(k["name"] for k in tomllib.load(open("bench/realkernels/cutedsl.toml", "rb"))["kernel"]))')
JOBS=${JOBS:-gemm-spec gemm-off $rows}
read -ra jobs <<< "$JOBS"
gpus=$(nvidia-smi -L | wc -l)
if [ -z "${LANES:-}" ]; then  # a GPU a job where there are enough; else the GEMM's arms, the longest
  gemm=(); other=()          # jobs, keep a GPU each if one is left for the rows, which take turns on the rest
  for j in "${jobs[@]}"; do case "$j" in gemm-*) gemm+=("$j") ;; *) other+=("$j") ;; esac; done
  lanes=()
  if [ "$gpus" -ge "${#jobs[@]}" ] || [ "$gpus" -gt "${#gemm[@]}" ]; then
    lanes=("${gemm[@]}"); first=${#gemm[@]}; rest=("${other[@]}")
  else
    first=0; rest=("${jobs[@]}")
  fi
  for i in "${!rest[@]}"; do g=$((first + i % (gpus - first))); lanes[g]="${lanes[g]:+${lanes[g]},}${rest[i]}"; done
  LANES=$(IFS='|'; echo "${lanes[*]}")
fi
job() {  # one job on the GPU CUDA_VISIBLE_DEVICES names, cut at the deadline
  local left=$((deadline - SECONDS))
  [ "$left" -gt 30 ] || { log "$1: no time left"; return 1; }
  case "$1" in
    gemm-spec) OUT="$OUT/gemm-spec" MEASURE_ON=1 MEASURE_OFF=0 ROUNDS=4 ITERS=20 \
                 timeout "$left" bash scripts/gpu-cutedsl.sh hopper_gemm > "$OUT/gemm-spec.log" 2>&1 ;;
    gemm-off) OUT="$OUT/gemm-off" MEASURE_ON=0 MEASURE_OFF=1 ROUNDS=4 ITERS=20 \
                timeout "$left" bash scripts/gpu-cutedsl.sh hopper_gemm > "$OUT/gemm-off.log" 2>&1 ;;
    *) timeout "$left" python3 bench/realkernels/cutedsl_rows.py run "$OUT/rows" --kernels "$1" --samples "${SAMPLES:-8}" ;;
  esac
}
IFS='|' read -ra lanes <<< "$LANES"
[ "${#lanes[@]}" -le "$gpus" ] || { echo "LANES has ${#lanes[@]} lanes for $gpus GPU(s): one lane a GPU" >&2; exit 2; }
log "$gpus GPU(s); lanes: $LANES"
pids=()
for g in "${!lanes[@]}"; do
  ( export CUDA_VISIBLE_DEVICES=$g; fail=0
    IFS=',' read -ra mine <<< "${lanes[g]}"
    for j in "${mine[@]}"; do t0=$SECONDS; job "$j" || fail=1; log "$j on GPU $CUDA_VISIBLE_DEVICES: $((SECONDS - t0)) s"; done
    exit $fail ) &
  pids+=($!)
done
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
for f in gemm-spec gemm-off; do [ -f "$OUT/$f.log" ] && grep -E "^== |overhead|revert" "$OUT/$f.log" | tail -8; done
python3 bench/realkernels/cutedsl_rows.py results "$OUT/rows" --samples "${SAMPLES:-8}" || fail=1
tar -C "$OUT" -czf "$OUT/rows.tar.gz" rows && find "$OUT/rows" -mindepth 1 ! -name results-h200.json -exec rm -rf {} +
log "done (fail=$fail, $SECONDS s)"
exit $fail
