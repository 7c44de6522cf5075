#!/usr/bin/env bash
# Does IKeT's drop report reach run-iket's log, in the wording atrex_inject/cutedsl/iketlog.py reads,
# and does validation reject the capture? On the GPU host, from the repository root, with the
# offline CuTe DSL bundle in .device/ and wheels in .whl/ (as scripts/gpu-cutedsl.sh):
#   bash scripts/gpu-iket-drops.sh        (logs and reports under $OUT)
# Applies examples/specs/scale_add_cutedsl.toml, then: (1) `atrex-inject capture` as users run it:
# expected valid, no drop line; (2) run-iket with --max-ts-cnt-per-warp 2 (fewer than one warp's
# events) and --log-level warn, normalized with its log: expected rejected under overflow;
# (3) the same at run-iket's default log level: how many drop lines it shows (0 expected: the
# reason capture passes --log-level warn). Reverts.
set -uo pipefail
T="timeout 180"
OUT=${OUT:-/tmp/atrex-gpu-iket-drops}
mkdir -p "$OUT"
eval "$(bash .device/install-cutedsl-bundle.sh .device/cutedsl.tar.xz)"
source scripts/gpu-env.sh
work=$(mktemp -d)
cp -r examples "$work/" && mkdir "$work/.git"
spec="$work/examples/specs/scale_add_cutedsl.toml"
run=(python3 "$work/examples/cutedsl/run_scale_add.py" --warmup 1 --iters 1 --n 262144)
$ATREX apply "$spec" --root "$work" --json > "$OUT/apply.json" || exit 1
manifest="$work/.atrex/scale_add_cutedsl/manifest.json"
normalize() {  # $1: run-iket's -o folder, $2: its log, $3: capture folder
  mkdir -p "$3" && cp "$manifest" "$3/" && python3 -c "
import sys; from pathlib import Path
from atrex_inject.cutedsl.normalize import normalize_run
from atrex_inject.manifest import load
print(normalize_run(Path(sys.argv[1]), load(Path(sys.argv[4])), Path(sys.argv[3]), 'scale_add:drops', Path(sys.argv[2])))
" "$1" "$2" "$3" "$manifest"
}
echo "== 1: atrex-inject capture (expected: valid, no drop line)"
$T $ATREX capture --spec "$spec" --root "$work" --out "$OUT/cap" --workload scale_add:drops -- "${run[@]}"
$ATREX validate "$OUT/cap"; echo "validate exit $?"
echo "drop lines: $(grep -c 'Trace incomplete' "$OUT/cap/run-iket.log")"
for level in warn error; do
  echo "== max-ts-cnt-per-warp 2, --log-level $level"
  $T python3 -m iket.cli.main -o "$work/iket-$level" --log-level "$level" profile --max-ts-cnt-per-warp 2 \
    --postprocess json -- "${run[@]}" > "$OUT/run-iket-$level.log" 2>&1
  echo "run-iket exit $?; drop lines: $(grep -c 'Trace incomplete' "$OUT/run-iket-$level.log")"
  grep -m3 -E 'Trace incomplete|IKET ' "$OUT/run-iket-$level.log"
  normalize "$work/iket-$level" "$OUT/run-iket-$level.log" "$OUT/cap-$level"
  $ATREX validate "$OUT/cap-$level" --json > "$OUT/validate-$level.json"; echo "validate exit $?"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['verdict'], [(c['name'], c['count'], c['details'][:1]) for c in r['checks'] if not c['ok']])" "$OUT/validate-$level.json"
done
$ATREX revert "$spec" --root "$work"
rm -rf "$OUT"/cap*/iket "$OUT"/cap*/*.atrex
echo "== done"
