#!/usr/bin/env bash
# One real capture with resident staging rings, for tests/fixtures/h200/reduce_sumsq_resident/: on the
# GPU host, from the repository root, with wheels in .whl/ (carry [".whl"]):
#   bash scripts/gpu-resident.sh            (results under $OUT, default /tmp/atrex-gpu-resident)
#   CLOCK=1 CAPACITY=81 bash scripts/gpu-resident.sh   (16-byte events with %clock; an odd capacity:
#                                           the exit's other copy and header paths; not a fixture)
#   PACKED=1 [RESIDENT=0] bash scripts/gpu-resident.sh (4-byte events, `packed = true`: the fixtures
#                                           reduce_sumsq_resident_packed/ and, without the rings,
#                                           reduce_sumsq_packed/)
#   EXAMPLE=saxpy_tail bash scripts/gpu-resident.sh    (an example whose spec has its own resident
#                                           rings, as written: the fixture saxpy_tail/)
#   RUNTIME=DIR ...                         (built against the recorder runtime in DIR, another
#                                           checkout's runtime/, instead of this one's)
# The reduce_sumsq spec with `recorder = "resident"`, `warps = 8` (atrex_inject.spec.with_recorder)
# is applied, built, captured with `atrex-inject capture`, validated and reverted byte for byte; the
# capture, its manifest and the instrumented source go into one archive.
set -uo pipefail
T="timeout 120"
OUT=${OUT:-/tmp/atrex-gpu-resident}
mkdir -p "$OUT/cap"
fail=0
source scripts/gpu-env.sh
INC=${RUNTIME:-$INC}
EX=${EXAMPLE:-reduce_sumsq}
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee "$OUT/device.txt"
work=$(mktemp -d)
cp -r examples "$work/" && mkdir "$work/.git"
src="$work/examples/cuda/$EX.cu"
$NVCC -o "$work/clean" "$src" || exit 1
$T "$work/clean" --warmup 3 --iters 10 | tee "$OUT/clean.txt"
workload=$(python3 -c "import json,sys; l=[x for x in open(sys.argv[1]) if x.startswith('__ATREX_TIMELINE_SAMPLE__=')]; print(json.loads(l[-1].split('=',1)[1])['workload_identity'])" "$OUT/clean.txt")
spec="$work/examples/specs/$EX.toml"
[ "$EX" = reduce_sumsq ] && spec=$(python3 -c "import sys; from atrex_inject.spec import with_recorder; w = int(sys.argv[2]); print(with_recorder(sys.argv[1], 'resident' if w else 'global', w, packed=sys.argv[3] == '1'))" \
  "$spec" "$([ "${RESIDENT:-1}" = 1 ] && echo 8 || echo 0)" "${PACKED:-0}")
name=$(python3 -c "import sys; from atrex_inject.spec import load_spec; print(load_spec(sys.argv[1]).name)" "$spec")
[ -n "${CLOCK:-}" ] && sed -i 's/^\[capture\]$/[capture]\nclock = true/' "$spec"
[ -n "${CAPACITY:-}" ] && sed -i "s/^capacity = [0-9]*/capacity = $CAPACITY/" "$spec"
grep -E "^(capacity|clock|recorder|warps|packed)" "$spec"
$ATREX apply "$spec" --root "$work" || exit 1
cp "$src" "$OUT/cap/$name.instrumented.cu"
$NVCC -I"$INC" -Xptxas -v -o "$work/inst" "$src" 2>&1 | grep -E "registers|spill" | tail -2
mkdir -p "$OUT/cap/$name"
cp "$work/.atrex/$name/manifest.json" "$OUT/cap/$name/"
$T $ATREX capture --spec "$spec" --root "$work" --out "$OUT/cap/$name" --workload "$workload" \
  -- "$work/inst" --warmup 3 --iters 10 | tee "$OUT/inst.txt" || fail=1
$ATREX revert "$spec" --root "$work" || fail=1
cmp -s "$src" "examples/cuda/$EX.cu" && echo "revert byte-exact: yes" || { echo "revert byte-exact: NO"; fail=1; }
$ATREX validate "$OUT/cap/$name" --source "$OUT/cap/$name.instrumented.cu" || fail=1
$ATREX summary "$OUT/cap/$name" | head -6
tar -C "$OUT" -czf "$OUT/$name.tar.gz" cap device.txt clean.txt inst.txt && rm -rf "$OUT/cap"
echo "== done (fail=$fail)"
exit $fail
