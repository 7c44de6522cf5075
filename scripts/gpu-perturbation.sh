#!/usr/bin/env bash
# The perturbation benchmarks on the GPU host, from the repository root (wheels in .whl/; the CuTe
# DSL bundle in .device/ for IKeT and the CuTe DSL GEMM), each part within one device call:
#   bash scripts/gpu-perturbation.sh examples   every kernel row of bench/perturbation/run.py: off, at the
#                                               spec's density with the tool's recorder, with the clock
#   bash scripts/gpu-perturbation.sh per-event  bench/probe_cost (every loop shape, every recorder, both
#                                               sites, 1024 and 2048 iterations), IKeT's iket.mark on the
#                                               same shapes and trip counts, and the CuTe DSL GEMM
#                                               (scripts/gpu-cutedsl.sh)
# Results under $OUT (default /tmp/atrex-perturbation; examples' validated captures as captures.tar.gz,
# per-event's output as per-event.tar.gz, since a device call returns only a few files); back here, `python3 bench/perturbation/run.py fold`
# puts the per-event and CuTe DSL figures into results-h200.json and `run.py table` writes docs/cost.md.
# ATREX_CHOICE_CACHE (a folder carried with the call) holds the recorder choices made here, so the
# GPU host compiles only the builds.
set -uo pipefail
OUT=${OUT:-/tmp/atrex-perturbation}
mkdir -p "$OUT"
T="timeout 560"
fail=0
source scripts/gpu-env.sh
{ nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader; nvcc --version | tail -2; date -u; } \
  | tee "$OUT/device.txt"
work=$(mktemp -d)
case "${1:-}" in
  examples)
    log "perturbation of the examples"
    python3 bench/perturbation/run.py build "$work/examples" ${KERNELS:+--kernels $KERNELS} || exit 1
    $T python3 bench/perturbation/run.py measure "$work/examples" --samples "${SAMPLES:-8}" --arms "${ARMS:-off,spec,clock}" \
      --json "$OUT/results-h200.json" || fail=1
    # the capture each recording arm validated, with the manifests, as one archive: a rejection is
    # studied here (a device call returns only a few files)
    (cd "$work/examples" && for d in cap-*; do [ -d "$d" ] && echo "$d/$(ls "$d" | sort | head -1)"; done; ls ./*.manifest.json) \
      > "$work/firsts" 2>/dev/null
    tar -C "$work/examples" -czf "$OUT/captures.tar.gz" -T "$work/firsts" || fail=1
    ;;
  per-event)
    log "probe cost, per event"
    # 37 processes a round (each shape's clean run and its 32 builds, every trip count in one process),
    # about a second each, then 32 captures validated
    python3 bench/probe_cost/run.py build "$work/probe_cost" | tee "$OUT/probe_cost-sass.txt" || exit 1
    timeout 240 python3 bench/probe_cost/run.py run "$work/probe_cost" --rounds "${PC_ROUNDS:-2}" \
      --json "$OUT/probe_cost.json" || fail=1
    if [ -f .device/cutedsl.tar.xz ]; then
      eval "$(bash .device/install-cutedsl-bundle.sh .device/cutedsl.tar.xz)" || exit 1
      # a call a trip count, every shape in each process: run-iket sizes its buffer for every launch of a
      # process at the most events a warp records in any (the copy's are its data's: the first call)
      for n in 1024 2048; do
        log "IKeT per event, every shape at $n iterations (4 processes a round)"
        shapes=$([ "$n" = 1024 ] && echo fma,fma_dep,copy,smem,mma || echo fma,fma_dep,smem,mma)
        timeout 150 python3 bench/perturbation/iket.py --iters "$n" --shapes "$shapes" --rounds "${IKET_ROUNDS:-1}" \
          --json "$OUT/iket-$n.json" || fail=1
      done
      if [ "${CUTE_GEMM:-1}" = 1 ]; then  # CUTE_GEMM=0: its own call (it and the rest do not fit one)
        log "the CuTe DSL GEMM under IKeT"
        OUT="$OUT" bash scripts/gpu-cutedsl.sh hopper_gemm || fail=1
      fi
    fi
    # a device call returns only a few files: the part's output as one archive
    tar -C "$OUT" -czf "$work/per-event.tar.gz" . && find "$OUT" -mindepth 1 -delete && mv "$work/per-event.tar.gz" "$OUT/"
    ;;
  *) echo "usage: bash scripts/gpu-perturbation.sh examples|per-event" >&2; exit 2 ;;
esac
log "done (fail=$fail)"
exit $fail
