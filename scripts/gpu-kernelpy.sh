#!/usr/bin/env bash
# The GPU check of CUDA source kept in Python (kernel.py, docs/kernelpy.md) in one call, on the
# GPU host, from the repository root, with wheels in .whl/ (bash scripts/fetch-gpu-wheels.sh here,
# then carry [".whl"]):
#   bash scripts/gpu-kernelpy.sh            (results under $OUT, default /tmp/atrex-gpu-kernelpy)
# For each example (load_inline: kernel and launcher in one string, built by PyTorch; NVRTC: built
# by cuda-python, launched from Python and captured by the launch hooks): run the clean candidate
# against its reference, apply, run the instrumented one with probes off, capture it with
# `atrex-inject capture`, decode, validate (source id from the file's CUDA string) and summarize,
# revert and check the file is byte for byte the clean one.
set -uo pipefail
# every GPU program runs under a timeout: a kernel that hangs must not eat the device budget;
# load_inline's first build of an instrumented string takes about a minute
T="timeout 300"
OUT=${OUT:-/tmp/atrex-gpu-kernelpy}
mkdir -p "$OUT/cap"
fail=0
source scripts/gpu-env.sh
export TORCH_CUDA_ARCH_LIST=9.0a TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/atrex-torch-ext}

log device
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee "$OUT/device.txt"
python3 -c "import torch, cuda.bindings; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cuda-bindings', cuda.bindings.__version__)" \
  | tee -a "$OUT/device.txt"

work=$(mktemp -d)
cp -r examples "$work/" && mkdir "$work/.git"
wl() { python3 -c "import json,sys; l=[x for x in open(sys.argv[1]) if x.startswith('__ATREX_TIMELINE_SAMPLE__=')]; print(json.loads(l[-1].split('=',1)[1])['workload_identity'])" "$1"; }
run="$work/examples/kernelpy/run.py"
for pair in softmax_inline:load_inline rmsnorm_nvrtc:nvrtc; do
  ex=${pair%%:*} dir=${pair#*:}
  src="$work/examples/kernelpy/$dir/kernel.py"
  spec="$work/examples/specs/$ex.toml"
  log "$ex: clean run"
  $T python3 "$run" "$src" --warmup 3 --iters 10 | tee "$OUT/$ex.clean.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "== $ex: clean run failed"; fail=1; continue; }
  workload=$(wl "$OUT/$ex.clean.txt")
  log "$ex: apply"
  $ATREX apply "$spec" --root "$work" || { fail=1; continue; }
  cp "$src" "$OUT/cap/$ex.instrumented.py"
  log "$ex: instrumented, probes off (the clean kernel runs)"
  $T python3 "$run" "$src" --warmup 3 --iters 10 | tee "$OUT/$ex.off.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || fail=1
  log "$ex: capture (the spec's [capture] picks the launch written), decode, validate, summary"
  $T $ATREX capture --spec "$spec" --root "$work" --out "$OUT/cap/$ex" --workload "$workload" \
    -- python3 "$run" "$src" --warmup 3 --iters 10 | tee "$OUT/$ex.capture.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || fail=1
  cp "$work/.atrex/$ex/instrumented.patch" "$OUT/cap/$ex/"
  $ATREX decode "$OUT/cap/$ex" || fail=1
  $ATREX validate "$OUT/cap/$ex" --source "$OUT/cap/$ex.instrumented.py" --workload "$workload" || fail=1
  $ATREX validate "$OUT/cap/$ex" --source "$OUT/cap/$ex.instrumented.py" --json > "$OUT/cap/$ex/validate.json"
  rm -rf "$OUT/cap/$ex/decoded"
  $ATREX summary "$OUT/cap/$ex" | head -8
  log "$ex: revert"
  $ATREX revert "$spec" --root "$work" || fail=1
  cmp -s "$src" "examples/kernelpy/$dir/kernel.py" && echo "revert byte-exact: yes" || { echo "revert byte-exact: NO"; fail=1; }
done

# one archive: the device machine returns only a few files from $OUT
tar -C "$OUT" -czf "$OUT/results.tar.gz" cap $(cd "$OUT" && ls *.txt 2>/dev/null)
rm -rf "$OUT/cap" && find "$OUT" -maxdepth 1 -type f ! -name results.tar.gz -delete
log "done (fail=$fail)"
exit $fail
