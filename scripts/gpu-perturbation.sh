#!/usr/bin/env bash
# The perturbation check in one GPU call, from the repository root, with carry [".whl", ".device"]
# (scripts/fetch-gpu-wheels.sh; the CuTe DSL bundle of ../shared/device/ in .device/):
#   bash scripts/gpu-perturbation.sh          (results under $OUT, default /tmp/atrex-perturbation)
# 1. bench/perturbation/designs.cu: recorder designs side by side on the per-event FMA and copy loops
#    and reduce_sumsq's strip-mined loop (one process);
# 2. bench/probe_cost/run.py: per-event cost of atrex probes, hand-written probe and floor;
# 3. bench/perturbation/iket.py: IKeT's per-event cost on the same FMA loop (CuTe DSL);
# 4. bench/perturbation/run.py: clean vs off / spec / every-CTA for each CUDA example (8+8 processes),
#    with the CuTe DSL GEMM's rows of bench/perturbation/cutedsl_gemm/ folded in.
# DESIGNS=0, PER_EVENT=0 (2 and 3) and EXAMPLES=0 (4) leave steps out; PACKED=1 adds the packed builds to
# 2; PROBE_COST=F and IKET=F fold an earlier call's JSON of 2 and 3 into 4 (the table in two calls).
set -uo pipefail
OUT=${OUT:-/tmp/atrex-perturbation}
mkdir -p "$OUT"
T="timeout 280"
fail=0
source scripts/gpu-env.sh
{ nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader; nvcc --version | tail -2; date -u; } \
  | tee "$OUT/device.txt"
if [ "${DESIGNS:-1}" = 1 ]; then
  echo "== recorder designs side by side"
  nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/designs bench/perturbation/designs.cu \
    && $T /tmp/designs | tee "$OUT/designs.json" || fail=1
fi
if [ "${PER_EVENT:-1}" = 1 ]; then
  echo "== probe cost (per event)"
  $T python3 bench/probe_cost/run.py --rounds ${PC_ROUNDS:-2} --reps 21 $([ "${PACKED:-0}" = 1 ] && echo --packed) \
    --json "$OUT/probe_cost.json" || fail=1
  if [ -f .device/cutedsl.tar.xz ]; then
    echo "== IKeT per event (CuTe DSL FMA loop)"
    ( eval "$(bash .device/install-cutedsl-bundle.sh .device/cutedsl.tar.xz)" \
      && $T python3 bench/perturbation/iket.py --rounds ${IKET_ROUNDS:-1} --json "$OUT/iket.json" ) || fail=1
  fi
fi
if [ "${EXAMPLES:-1}" = 1 ]; then
  echo "== perturbation of the examples"
  timeout ${EXAMPLES_TIMEOUT:-420} python3 bench/perturbation/run.py --samples ${SAMPLES:-8} \
    --probe-cost "${PROBE_COST:-$OUT/probe_cost.json}" --iket "${IKET:-$OUT/iket.json}" \
    --cutedsl bench/perturbation/cutedsl_gemm --arms "${ARMS:-off,spec,resident,all,packed,resident_packed}" \
    --json "$OUT/results-h200.json" || fail=1
fi
echo "== done (fail=$fail)"
exit $fail
