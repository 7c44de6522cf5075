#!/usr/bin/env bash
# Real captures with the SM clock (`[capture] clock = true`) for tests/captures/test_clock.py:
# on the GPU host, from the repository root, with wheels in .whl/ (carry [".whl"]):
#   bash scripts/gpu-clock.sh            (results under $OUT/clock/, default OUT=/tmp/atrex-gpu; ~1 minute)
# Captures, each applied, built for sm_90a, run once with probes off, captured through
# `atrex-inject capture`, reverted byte for byte, validated and summarized:
#   clock_phases           tests/sources/clock_phases.toml as written: the ground-truth kernel (spins of
#                          0, 40, 200 and 2000 cycles and 5000 ns between sites) on the global path
#   clock_phases_resident  the same spec with resident staging rings (spec.with_recorder(spec, 'resident', 4))
#   clock_phases8, clock_phases8_resident   the same two without the payloads (the spins' own counts):
#                          the clock in 8-byte events {clock, timer | site}, as the examples record it
#   clock_phases_loaded    tests/sources/clock_phases_loaded.toml: the same phases timed by warps 0-3
#                          while warps 4-7 of each CTA stream a 256 MB buffer from global memory
#   gemm_mma_clock         examples/specs/gemm_mma.toml renamed, with `clock = true` and 200 warmup
#                          launches before the written one: a real kernel's clock
#   layernorm_clock, softmax_rows_clock, reduce_sumsq_clock   the examples' specs as written, `clock = true`
#                          added (renamed so): memory-bound kernels after their harness's normal warm-up
#   rmsnorm_nvrtc_clock    the same for a kernel in a Python string, NVRTC-compiled and launched from Python
# Everything goes into one archive, $OUT/clock/clock.tar.gz; here, `python3 scripts/clock_fixtures.py
# clock.tar.gz RUN_LABEL` turns it into tests/fixtures/h200/<name>/ with their provenance.
set -uo pipefail
T="timeout 60"  # every GPU program: a kernel that hangs must not eat the device budget
OUT=${OUT:-/tmp/atrex-gpu}
D="$OUT/clock"
mkdir -p "$D/cap"
fail=0
source scripts/gpu-env.sh

log device
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee "$D/device.txt"
nvcc --version | tail -1 | tee -a "$D/device.txt"
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv | tee "$D/sm_clock.txt"  # idle, and the most it may run at

work=$(mktemp -d)
mkdir -p "$work/tests" "$work/.git" && cp -r tests/sources "$work/tests/" && cp -r examples "$work/"
cp_spec=$(python3 -c "import sys; from atrex_inject.spec import with_recorder; print(with_recorder(sys.argv[1], 'resident', 4))" \
  "$work/tests/sources/clock_phases.toml")
gemm_spec="$work/examples/specs/gemm_mma_clock.toml"
# 200 warmup launches (about 60 ms) before the written one: the SM clock has left its idle speed
sed -e 's/^name = "gemm_mma"$/name = "gemm_mma_clock"/' -e 's/^\[capture\]$/[capture]\nclock = true/' \
  -e 's/^skip = 3 .*/skip = 200/' "$work/examples/specs/gemm_mma.toml" > "$gemm_spec"
wl() { python3 -c "import json,sys; l=[x for x in open(sys.argv[1]) if x.startswith('__ATREX_TIMELINE_SAMPLE__=')]; print(json.loads(l[-1].split('=',1)[1])['workload_identity'])" "$1"; }

# name, spec, source (relative to the work tree), program arguments
capture_one() {
  local name=$1 spec=$2 rel=$3; shift 3
  [ -n "${ONLY:-}" ] && [[ ",$ONLY," != *",$name,"* ]] && return  # ONLY=name,name: these captures alone
  local src="$work/$rel" bin="$work/$name.inst"
  log "$name: apply, build, probes off, capture"
  grep -E "^(name|capacity|clock|staging)" "$spec"
  $ATREX apply "$spec" --root "$work" || { fail=1; return; }
  mkdir -p "$D/cap/$name"
  cp "$src" "$D/cap/$name/$name.instrumented.cu"
  cp "$work/.atrex/$name/manifest.json" "$D/cap/$name/"
  $NVCC -I"$INC" -Xptxas -v -o "$bin" "$src" 2>&1 | grep -E "registers|spill" | tail -2
  $T "$bin" "$@" | tee "$D/$name.off.txt" || fail=1
  local workload="$name:132x128:rounds=16"
  grep -q __ATREX_TIMELINE_SAMPLE__ "$D/$name.off.txt" && workload=$(wl "$D/$name.off.txt")
  $T $ATREX capture --spec "$spec" --root "$work" --out "$D/cap/$name" --workload "$workload" -- "$bin" "$@" \
    | tee "$D/$name.capture.txt" || fail=1
  $ATREX revert "$spec" --root "$work" || fail=1
  cmp -s "$src" "$rel" && echo "revert byte-exact: yes" || { echo "revert byte-exact: NO"; fail=1; }
  $ATREX validate "$D/cap/$name" --source "$D/cap/$name/$name.instrumented.cu" || fail=1
  $ATREX summary "$D/cap/$name" | tee "$D/$name.summary.txt"
  python3 - "$D/cap/$name" <<'PY' | tee "$D/$name.spread.txt"  # what docs/validate.md reports of the model
import sys
from pathlib import Path
import numpy as np
from atrex_inject.decode import decode_file
from atrex_inject.manifest import load
from atrex_inject.smclock import impossible, readings, speed
d = Path(sys.argv[1])
l = decode_file(next(d.glob("*.atrex")), load(d / "manifest.json"))
c, ev, o, tick = l.meta["clock"], l.events, l.owners, l.meta["timer_resolution_ns"]
r = readings(ev["owner"], ev["t_ns"], ev["cycles"], o["t0"], o["clk0"])
im = impossible(r, tick)
has = np.isfinite(im.neighbours_ghz)
used = np.abs(im.dc[has] / im.neighbours_ghz[has] - im.dt[has]) / im.allowed_ns[has]
print(f"rate over the owners' spans {c['rate_ghz']:.5f} GHz; owners {c['owner_rate_ghz']}, SMs {c['sm_rate_ghz']}; "
      f"local rates {speed(r, tick, o['smid'])}; steps: {int(im.backward.sum())} backward, "
      f"{int(im.out_of_range.sum())} out of range, {int(im.jump.sum())} jumps; the largest uses "
      f"{used.max():.3f} of what the local model allows, p99 {np.quantile(used, 0.99):.3f}")
PY
}

capture_one clock_phases "$work/tests/sources/clock_phases.toml" tests/sources/clock_phases.cu
capture_one clock_phases_resident "$cp_spec" tests/sources/clock_phases.cu
sed -e 's/^name = "clock_phases"$/name = "clock_phases8"/' -e '/^payload = /d' "$work/tests/sources/clock_phases.toml" \
  > "$work/tests/sources/clock_phases8.toml"
capture_one clock_phases8 "$work/tests/sources/clock_phases8.toml" tests/sources/clock_phases.cu
cp8_spec=$(python3 -c "import sys; from atrex_inject.spec import with_recorder; print(with_recorder(sys.argv[1], 'resident', 4))" \
  "$work/tests/sources/clock_phases8.toml")
capture_one clock_phases8_resident "$cp8_spec" tests/sources/clock_phases.cu
capture_one clock_phases_loaded "$work/tests/sources/clock_phases_loaded.toml" tests/sources/clock_phases_loaded.cu
capture_one gemm_mma_clock "$gemm_spec" examples/cuda/gemm_mma.cu --warmup 200 --iters 10
# the examples as a new user records their clock: the spec as written, `clock = true` added, renamed <ex>_clock
clock_of() {
  sed -e "s/^name = \"$1\"$/name = \"$1_clock\"/" -e 's/^\[capture\]$/[capture]\nclock = true/' \
    "$work/examples/specs/$1.toml" > "$work/examples/specs/$1_clock.toml" && echo "$work/examples/specs/$1_clock.toml"
}
for ex in layernorm softmax_rows reduce_sumsq; do
  capture_one "${ex}_clock" "$(clock_of $ex)" "examples/cuda/$ex.cu"
done
# the softmax's clock in 16-byte events too (`wide = true`): the two layouts side by side on one kernel
sed -e 's/^name = "softmax_rows_clock"$/name = "softmax_rows_clock_wide"/' -e 's/^clock = true$/clock = true\nwide = true/' \
  "$work/examples/specs/softmax_rows_clock.toml" > "$work/examples/specs/softmax_rows_clock_wide.toml"
capture_one softmax_rows_clock_wide "$work/examples/specs/softmax_rows_clock_wide.toml" examples/cuda/softmax_rows.cu
# a kernel in a Python string, compiled with NVRTC and launched from Python, captured by the launch hooks
name=rmsnorm_nvrtc_clock spec=$(clock_of rmsnorm_nvrtc) src="$work/examples/kernelpy/nvrtc/kernel.py"
log "$name: apply, capture through the launch hooks"
if [ -n "${ONLY:-}" ] && [[ ",$ONLY," != *",$name,"* ]]; then
  :
elif $ATREX apply "$spec" --root "$work"; then
  mkdir -p "$D/cap/$name" && cp "$src" "$D/cap/$name/$name.instrumented.py" && cp "$work/.atrex/$name/manifest.json" "$D/cap/$name/"
  workload=$(python3 -c "import sys; sys.path.insert(0, sys.argv[1]); import problem as p; print(p.NAME + ':' + 'x'.join(map(str, p.get_inputs()[0].shape)) + ':seed=1')" "$work/examples/kernelpy/nvrtc")
  $T $ATREX capture --spec "$spec" --root "$work" --out "$D/cap/$name" --workload "$workload" \
    -- python3 "$work/examples/kernelpy/run.py" "$src" --warmup 3 --iters 10 | tee "$D/$name.capture.txt" || fail=1
  $ATREX revert "$spec" --root "$work" || fail=1
  $ATREX validate "$D/cap/$name" --source "$D/cap/$name/$name.instrumented.py" || fail=1
  $ATREX summary "$D/cap/$name" | tee "$D/$name.summary.txt"
else
  fail=1
fi
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$D/sm_clock.txt"

# one archive: the device machine returns only a few files from $OUT
tar -C "$D" -czf "$D/clock.tar.gz" cap $(cd "$D" && ls *.txt)
rm -rf "$D/cap" "$work" && find "$D" -maxdepth 1 -type f ! -name clock.tar.gz -delete
log "done (fail=$fail)"
exit $fail
