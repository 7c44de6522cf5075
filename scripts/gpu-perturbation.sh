#!/usr/bin/env bash
# The perturbation benchmarks on the GPU host, from the repository root (wheels in .whl/; the CuTe
# DSL bundle in .device/ for IKeT and the CuTe DSL GEMM), each part within one device call:
#   bash scripts/gpu-perturbation.sh examples   every kernel row of bench/perturbation/run.py: off, at the
#                                               spec's density with the tool's recorder, with the clock
#   bash scripts/gpu-perturbation.sh per-event  bench/probe_cost (every loop shape, every recorder, both
#                                               sites, 1024 and 2048 iterations, IKeT's iket.mark on the
#                                               same loops in the same rounds), and the CuTe DSL GEMM
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
    # with the CuTe DSL bundle, IKeT on the same loops in the same rounds (--iket): its SASS read at
    # build, its processes (clean and under run-iket, one a trip count) run beside the tool's builds
    iket=()
    if [ -f .device/cutedsl.tar.xz ]; then
      eval "$(bash .device/install-cutedsl-bundle.sh .device/cutedsl.tar.xz)" || exit 1
      iket=(--iket)
    fi
    # builds prepared where nvcc is (python3 bench/probe_cost/run.py build /tmp/atrex-probe-cost --iket, archived
    # with tar -C /tmp -cJf .pcprep/probe_cost.tar.xz atrex-probe-cost; carry [".pcprep"]) are run as they are:
    # the recorder choice compiles its candidates, minutes of device time a call
    pc="$work/probe_cost"
    if [ -f .pcprep/probe_cost.tar.xz ]; then
      tar -C /tmp -xJf .pcprep/probe_cost.tar.xz && pc=/tmp/atrex-probe-cost || exit 1
      python3 bench/probe_cost/run.py plan "$pc" | tee "$OUT/probe_cost-sass.txt"
    else
      python3 bench/probe_cost/run.py build "$pc" "${iket[@]}" | tee "$OUT/probe_cost-sass.txt" || exit 1
    fi
    # 37 processes a round (each shape's clean run and its 32 builds, every trip count in one process),
    # about a second each, and IKeT's 4 (about 20 s each), then 32 captures validated
    timeout "${PC_TIMEOUT:-520}" python3 bench/probe_cost/run.py run "$pc" --rounds "${PC_ROUNDS:-3}" \
      "${iket[@]}" --json "$OUT/probe_cost.json" || fail=1
    if [ "${#iket[@]}" -gt 0 ] && [ "${CUTE_GEMM:-1}" = 1 ]; then  # CUTE_GEMM=0: its own call (it and the rest do not fit one)
      log "the CuTe DSL GEMM under IKeT"
      OUT="$OUT" bash scripts/gpu-cutedsl.sh hopper_gemm || fail=1
    fi
    # a device call returns only a few files: the part's output as one archive
    tar -C "$OUT" -czf "$work/per-event.tar.gz" . && find "$OUT" -mindepth 1 -delete && mv "$work/per-event.tar.gz" "$OUT/"
    ;;
  *) echo "usage: bash scripts/gpu-perturbation.sh examples|per-event" >&2; exit 2 ;;
esac
log "done (fail=$fail)"
exit $fail
