#!/usr/bin/env bash
# Real captures of kernels that talk to each other, for the several-captures timeline, the causality
# check and the clock alignment (docs/summary.md "Several captures on one axis", docs/validate.md
# "Causality"): on the GPU host, from the repository root, with wheels in .whl/ (carry [".whl"]):
#   bash scripts/gpu-multikernel.sh      (results under $OUT/multikernel/, default OUT=/tmp/atrex-gpu; ~2 minutes)
# What it captures, on the first GPU (an H200):
#   handoff/            examples/cuda/handoff/ (producer and consumer kernels on two streams, tiles
#                       handed over through flags in global memory): both specs of
#                       examples/specs/handoff/ applied, the three units built clean and instrumented,
#                       the clean build run alone (its sample line: the workload), then ONE run captured
#                       with `capture --spec producer.toml --spec consumer.toml --calibrate clockcal`:
#                       handoff/handoff_producer/ and handoff/handoff_consumer/, each with clock.json;
#                       validated together (each spec's [[causality]] against the other's capture),
#                       summarized, exported as one Perfetto trace (handoff.pftrace), reverted byte for byte
#   twoproc/a, twoproc/b  the same instrumented program captured twice at once, in two processes on the one
#                       GPU, each with its own calibration: `validate twoproc/a/handoff_consumer
#                       twoproc/b/handoff_consumer` compares the two calibrations of one device, whose true
#                       offset is zero (check `alignment`); calibration.txt prints both fits' offsets and bounds
#   clockcal/           the calibrator run alone 5 times (its windows as printed), to see the bracket widths
#   oneunit/            tests/sources/oneunit/: two kernels in one translation unit, each with its own spec
#                       (another geometry, capacity and CTA stride), launched in turn; both captures must
#                       validate, so each launch binds its own buffer and launch header (one capture run)
# With a second GPU (nvidia-h200-x2), also:
#   twogpu/gpu0, twogpu/gpu1  the handoff program captured on each GPU (CUDA_VISIBLE_DEVICES), calibrated,
#                       summarized and exported together on the host clock (the two-GPU example with peer
#                       memory is not written yet: this checks the alignment across devices only)
# Everything goes into one archive, $OUT/multikernel/multikernel.tar.gz, with device.txt and the logs.
set -uo pipefail
source scripts/gpu-env.sh
D="${OUT:-/tmp/atrex-gpu}/multikernel" && mkdir -p "$D"
T="timeout 120" fail=0  # every GPU program: a handoff that deadlocks must not eat the device budget
# a written launch reads its buffer back as it finishes, waiting for its kernel, which here waits for
# the other kernel, launched next: the writes are deferred to the program's exit (docs/spec.md, "Several kernels")
export ATREX_TIMELINE_DEFER=1

log device
{ nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version --format=csv,noheader; nvcc --version | tail -1;
  date -u; } | tee "$D/device.txt"
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)

work=$(mktemp -d)
mkdir -p "$work/.git" && cp -r examples "$work/"
P="$work/examples/specs/handoff/producer.toml"
C="$work/examples/specs/handoff/consumer.toml"
H="$work/examples/cuda/handoff"
wl() { python3 -c "import json,sys; l=[x for x in open(sys.argv[1]) if x.startswith('__ATREX_TIMELINE_SAMPLE__=')]; print(json.loads(l[-1].split('=',1)[1])['workload_identity'])" "$1"; }
build() {  # out: the three units compiled and linked
  local out=$1
  for u in producer consumer main; do $NVCC -std=c++17 -I"$INC" -c -o "$out.$u.o" "$H/$u.cu" || return 1; done
  $NVCC -o "$out" "$out.producer.o" "$out.consumer.o" "$out.main.o"
}

log "calibrator"
$NVCC -o "$work/clockcal" runtime/atrex_clockcal.cu || fail=1
mkdir -p "$D/clockcal"
for i in 1 2 3 4 5; do $T "$work/clockcal" > "$D/clockcal/window$i.json" || fail=1; done

log "handoff: clean build, probes off"
sha_before=$(cat "$H"/*.cu | sha256sum)
build "$work/handoff.clean" || fail=1
$T "$work/handoff.clean" --warmup 3 --iters 10 | tee "$D/handoff.clean.txt" || fail=1
workload=$(wl "$D/handoff.clean.txt")

log "handoff: apply both specs, instrumented build, one run captured"
$ATREX apply "$P" --root "$work" | tee "$D/apply.producer.txt" || fail=1
$ATREX apply "$C" --root "$work" | tee "$D/apply.consumer.txt" || fail=1
cp "$H/producer.cu" "$D/producer.instrumented.cu"; cp "$H/consumer.cu" "$D/consumer.instrumented.cu"
build "$work/handoff.inst" || fail=1
$T "$work/handoff.inst" --warmup 3 --iters 10 | tee "$D/handoff.off.txt" || fail=1
$T $ATREX capture --spec "$P" --spec "$C" --root "$work" --out "$D/handoff" --workload "$workload" \
  --calibrate "$work/clockcal" -- "$work/handoff.inst" --warmup 3 --iters 10 | tee "$D/capture.txt" || fail=1
$ATREX validate "$D/handoff" --json > "$D/validate.json"; echo "validate: exit $?" | tee -a "$D/capture.txt"
$ATREX validate "$D/handoff" | tee "$D/validate.txt"
$ATREX summary "$D/handoff" | tee "$D/summary.txt" || fail=1
$ATREX summary "$D/handoff" --json > "$D/summary.json" || fail=1
$ATREX export "$D/handoff" --perfetto "$D/handoff.pftrace" | tee -a "$D/summary.txt" || fail=1

log "two processes on one GPU, each calibrated: the true offset between them is zero"
mkdir -p "$D/twoproc"
for p in a b; do
  $T $ATREX capture --spec "$P" --spec "$C" --root "$work" --out "$D/twoproc/$p" --workload "$workload" \
    --calibrate "$work/clockcal" -- "$work/handoff.inst" --warmup 3 --iters 10 > "$D/twoproc/$p.txt" 2>&1 &
done
wait
$ATREX validate "$D/twoproc/a/handoff_consumer" "$D/twoproc/b/handoff_consumer" | tee "$D/twoproc/validate.txt"
python3 - "$D/twoproc" <<'EOF' | tee "$D/calibration.txt"
import sys
from pathlib import Path
from atrex_inject import clockalign
for p in ("a", "b"):
    a = clockalign.read(Path(sys.argv[1]) / p / "handoff_consumer")
    print(f"{p}: offset host-device {a.start.offset_ns} ns at the start, {a.end.offset_ns} ns at the end, "
          f"drift {a.drift_ppm:+.4f} ppm, bound {a.start.half_ns:.0f} / {a.end.half_ns:.0f} ns, "
          f"kept {a.start.kept} of {a.start.samples} samples")
EOF

if [ "$gpus" -ge 2 ]; then
  log "the same program on each of two GPUs, on the host clock"
  for g in 0 1; do
    CUDA_VISIBLE_DEVICES=$g $T $ATREX capture --spec "$P" --spec "$C" --root "$work" --out "$D/twogpu/gpu$g" \
      --workload "$workload" --calibrate "$work/clockcal" -- "$work/handoff.inst" --warmup 3 --iters 10 \
      | tee "$D/twogpu/gpu$g.txt" || fail=1
  done
  $ATREX summary "$D/twogpu/gpu0" "$D/twogpu/gpu1" | tee "$D/twogpu/summary.txt" || fail=1
  $ATREX export "$D/twogpu/gpu0" "$D/twogpu/gpu1" --perfetto "$D/twogpu/twogpu.pftrace" || fail=1
fi

log "one unit: two instrumented kernels compiled into one translation unit, launched in turn"
# they share the unit's recorder symbols: each launch must bind its own buffer and launch header
O="$work/oneunit" && cp -r tests/sources/oneunit "$O" && mkdir -p "$O/.git"
ou_before=$(cat "$O"/*.cu "$O"/*.cuh | sha256sum)
$ATREX apply "$O/scale.toml" --root "$O" > "$D/oneunit.apply.txt" || fail=1
$ATREX apply "$O/shift.toml" --root "$O" >> "$D/oneunit.apply.txt" || fail=1
$NVCC -I"$INC" -o "$O/oneunit" "$O/main.cu" || fail=1
$T $ATREX capture --spec "$O/scale.toml" --spec "$O/shift.toml" --root "$O" --out "$D/oneunit" -- "$O/oneunit" \
  | tee "$D/oneunit.capture.txt" || fail=1
for k in oneunit_scale oneunit_shift; do
  $ATREX validate "$D/oneunit/$k" | tee "$D/oneunit.validate.$k.txt" || fail=1
done
$ATREX revert "$O/shift.toml" --root "$O" && $ATREX revert "$O/scale.toml" --root "$O" || fail=1
[ "$(cat "$O"/*.cu "$O"/*.cuh | sha256sum)" = "$ou_before" ] || { echo "revert left oneunit changed"; fail=1; }

log "revert, byte for byte"
$ATREX revert "$C" --root "$work" || fail=1
$ATREX revert "$P" --root "$work" || fail=1
[ "$(cat "$H"/*.cu | sha256sum)" = "$sha_before" ] || { echo "revert left the sources changed"; fail=1; }

tar -C "$(dirname "$D")" -czf "$D.tar.gz" multikernel && mv "$D.tar.gz" "$D/"
echo "== gpu-multikernel: fail=$fail"
exit $fail
