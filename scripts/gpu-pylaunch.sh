#!/usr/bin/env bash
# The GPU check of launches from Python captured without editing the program (docs/launches.md), in
# one call on the GPU host, from the repository root, with wheels in .whl/ (bash
# scripts/fetch-gpu-wheels.sh here, then carry [".whl"]); about 2 minutes, most of it load_inline
# building the instrumented extension:
#   bash scripts/gpu-pylaunch.sh        (results in $OUT/pylaunch/results.tar.gz, OUT default /tmp/atrex-gpu)
# For each launch path, an example whose kernel.py imports nothing of atrex-inject: NVRTC through
# cuda-python (examples/kernelpy/nvrtc, cuLaunchKernel), CuPy (examples/kernelpy/cupy, RawKernel),
# torch load_inline (examples/kernelpy/load_inline, the launcher inside the string): apply, capture
# with `atrex-inject capture --workload W -- python3 run.py kernel.py` (the hooks, or the C++
# session for load_inline, write the spec's launch; the run checks every output element), validate
# against the instrumented file, revert and compare the file with the clean one byte for byte.
# Then scripts/pylaunch_check.py launches the CuPy example's string through every hooked API in one
# process (a spec copy writing every launch): cupy RawKernel and RawModule, cuLaunchKernel,
# cuLaunchKernelEx, cuda.core where installed, and a launch into a CUDA graph, which must be
# reported as not captured. Back here: python scripts/pylaunch_fixtures.py RESULTS.tar.gz LABEL.
set -uo pipefail
T="timeout 240"  # every GPU program under a timeout: a hang must not eat the device budget
OUT=${OUT:-/tmp/atrex-gpu}
R="$OUT/pylaunch"
rm -rf "$R" && mkdir -p "$R/cap"
fail=0
source scripts/gpu-env.sh
export TORCH_CUDA_ARCH_LIST=9.0a TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/atrex-torch-ext}

log device
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee "$R/device.txt"
python3 - <<'EOF' | tee -a "$R/device.txt"
import importlib
for name in ("torch", "cupy", "cuda.bindings", "cuda.core"):
    try:
        print(name, importlib.import_module(name).__version__)
    except Exception as e:  # noqa: BLE001 - a missing one is reported, and its path skipped
        print(name, "not available:", type(e).__name__)
EOF

work=$(mktemp -d)
cp -r examples "$work/" && mkdir "$work/.git"
run="$work/examples/kernelpy/run.py"
# the workload identity run.py prints in its sample line (problem NAME, input shape, seed)
wl() { python3 -c "import sys; sys.path.insert(0, sys.argv[1]); import problem as p; print(p.NAME + ':' + 'x'.join(map(str, p.get_inputs()[0].shape)) + ':seed=1')" "$1"; }
for pair in rmsnorm_nvrtc:nvrtc absmax_cupy:cupy softmax_inline:load_inline; do
  ex=${pair%%:*} dir=${pair#*:}
  src="$work/examples/kernelpy/$dir/kernel.py"
  spec="$work/examples/specs/$ex.toml"
  cap="$R/cap/$ex"
  workload=$(wl "$work/examples/kernelpy/$dir")
  log "$ex ($dir): apply"
  $ATREX apply "$spec" --root "$work" > "$R/$ex.apply.txt" || { cat "$R/$ex.apply.txt"; fail=1; continue; }
  head -1 "$R/$ex.apply.txt"
  log "$ex: capture, workload $workload (the program as written; the spec's [capture] picks the launch written)"
  $T $ATREX capture --spec "$spec" --root "$work" --out "$cap" --workload "$workload" \
    -- python3 "$run" "$src" --warmup 3 --iters 10 2>&1 | tee "$R/$ex.capture.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || fail=1
  cp "$src" "$cap/kernel.instrumented.py" 2>/dev/null
  $ATREX validate "$cap" --source "$src" --workload "$workload" --json > "$cap/validate.json"
  [ $? = 0 ] || { echo "== $ex: validate did not accept the capture"; fail=1; }
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('validate:', r.get('verdict'), r.get('events'), 'events;', *r.get('notes', []))" "$cap/validate.json"
  log "$ex: revert"
  $ATREX revert "$spec" --root "$work" || fail=1
  cmp -s "$src" "examples/kernelpy/$dir/kernel.py" && echo "revert byte-exact: yes" || { echo "revert byte-exact: NO"; fail=1; }
done

log "every hooked API in one process (scripts/pylaunch_check.py)"
all="$work/examples/specs/absmax_all.toml"
sed -e 's/^name = "absmax_cupy"/name = "absmax_all"/' -e 's/^skip = 2 .*/skip = 0/' -e 's/^count = 1/count = 0/' \
  "$work/examples/specs/absmax_cupy.toml" > "$all"
src="$work/examples/kernelpy/cupy/kernel.py"
cap="$R/cap/apis"
if $ATREX apply "$all" --root "$work" > /dev/null; then
  $T $ATREX capture --spec "$all" --root "$work" --out "$cap" --workload absmax_scale:1024x2048:apis \
    -- python3 scripts/pylaunch_check.py "$src" "$R/apis.json" 2>&1 | tee "$R/apis.capture.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || fail=1
  cp "$src" "$cap/kernel.instrumented.py" && cp "$R/apis.json" "$all" "$cap/" 2>/dev/null
  $ATREX validate "$cap" --source "$src" --json > "$cap/validate.json" || fail=1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('validate:', r.get('verdict'), r.get('launches'), *r.get('notes', []))" "$cap/validate.json"
  $ATREX revert "$all" --root "$work" || fail=1
  cmp -s "$src" examples/kernelpy/cupy/kernel.py && echo "revert byte-exact: yes" || { echo "revert byte-exact: NO"; fail=1; }
else
  fail=1
fi

# one archive: the device machine returns only a few files from $OUT
tar -C "$R" -czf "$OUT/pylaunch-results.tar.gz" cap device.txt $(cd "$R" && ls *.txt *.json 2>/dev/null | grep -v device.txt)
rm -rf "$R" && mkdir -p "$R" && mv "$OUT/pylaunch-results.tar.gz" "$R/results.tar.gz"
log "done (fail=$fail)"
exit $fail
