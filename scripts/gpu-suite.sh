#!/usr/bin/env bash
# The whole GPU check, on the GPU host from the repository root, in parts that each fit one device
# call (10 minutes); wheels in .whl/ (bash scripts/fetch-gpu-wheels.sh), the CuTe DSL bundle in
# .device/ for the per-event part, the recorder choices made here in ATREX_CHOICE_CACHE:
#   bash scripts/gpu-suite.sh captures      the examples (scripts/gpu-examples.sh, the demo's GEMM
#                                           included: gpu-demo.sh) and the SM clock (gpu-clock.sh)
#   bash scripts/gpu-suite.sh launches      compare's pairs (gpu-compare.sh) and the Python launch
#                                           paths (gpu-pylaunch.sh)
#   bash scripts/gpu-suite.sh perturbation  the kernel rows of the perturbation table
#   bash scripts/gpu-suite.sh per-event     per-event costs with IKeT on the same loops, the CuTe DSL GEMM
#                                           (builds prepared here and carried in .pcprep/:
#                                           scripts/gpu-perturbation.sh says how)
#   bash scripts/gpu-suite.sh realkernels   the public kernels of bench/realkernels (their sources fetched
#                                           here by bench/realkernels/fetch.py and carried in .src/):
#                                           results-h200.json and the capture folders (as archives) under $OUT; the
#                                           kernels `realkernels-prepare` built in an earlier call on the
#                                           same (warm) machine are taken as they are, the others built
#   bash scripts/gpu-suite.sh realkernels-prepare   their builds, applies and check-sass only (no GPU)
#   bash scripts/gpu-suite.sh multikernel   kernels that talk to each other: the handoff example's two kernels in
#                                           one run, two processes on one GPU, two GPUs where lent, each
#                                           calibrated (scripts/gpu-multikernel.sh)
#   bash scripts/gpu-suite.sh realkernels-cutedsl   the CuTe DSL rows of bench/realkernels and the CuTe
#                                           DSL GEMM's first-CTA row, 16+16 in both arms
#                                           (scripts/gpu-realkernels-cutedsl.sh: a GPU a job, on eight)
# Each part's archives land under $OUT; scripts/update_fixtures.py, clock_fixtures.py,
# update_compare_fixtures.py and pylaunch_fixtures.py turn them into fixtures here, and
# bench/perturbation/run.py fold/table the perturbation figures into docs/cost.md.
set -uo pipefail
export OUT=${OUT:-/tmp/atrex-gpu}
mkdir -p "$OUT"
source scripts/gpu-env.sh
fail=0
case "${1:-}" in
  captures) LARGE=${LARGE:-0} bash scripts/gpu-examples.sh || fail=1; bash scripts/gpu-clock.sh || fail=1 ;;
  launches) bash scripts/gpu-compare.sh || fail=1; bash scripts/gpu-pylaunch.sh || fail=1 ;;
  perturbation) bash scripts/gpu-perturbation.sh examples || fail=1 ;;
  per-event) bash scripts/gpu-perturbation.sh per-event || fail=1 ;;
  realkernels-prepare)
    timeout 580 python3 bench/realkernels/run.py --prepare-only --work /tmp/atrex-realkernels --out "$OUT" \
      --json "$OUT/prepared.json" ${ONLY:+--only $ONLY} || fail=1 ;;
  realkernels)
    { nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader; nvcc --version | tail -2; date -u; } \
      | tee "$OUT/device.txt"
    # kernels prepared where nvcc is but no GPU (--prepare-only --work /tmp/atrex-realkernels, archived
    # with tar -C /tmp -cJf .rkprep/prepared.tar.xz atrex-realkernels; carry [".rkprep"])
    [ -f .rkprep/prepared.tar.xz ] && tar -C /tmp -xJf .rkprep/prepared.tar.xz
    timeout 580 python3 bench/realkernels/run.py --resume --work /tmp/atrex-realkernels --out "$OUT" \
      --json "$OUT/results-h200.json" --samples "${SAMPLES:-8}" --budget "${BUDGET:-470}" ${ONLY:+--only $ONLY} \
      || fail=1
    # only a few files come back from a device call: the capture folders and measurements as one archive each
    for d in captures clock-captures measure; do
      [ -d "$OUT/$d" ] && tar -C "$OUT" -cJf "$OUT/$d.tar.xz" "$d" && rm -rf "${OUT:?}/$d"
    done ;;
  realkernels-cutedsl) bash scripts/gpu-realkernels-cutedsl.sh || fail=1 ;;
  multikernel) bash scripts/gpu-multikernel.sh || fail=1 ;;
  *) echo "usage: bash scripts/gpu-suite.sh captures|launches|perturbation|per-event|realkernels-prepare|realkernels|realkernels-cutedsl|multikernel" >&2; exit 2 ;;
esac
echo "== gpu-suite $1: fail=$fail"
exit $fail
