# Sourced by the scripts/gpu-*.sh checks on the GPU host: installs the project and the wheels the
# image lacks (.whl/, from scripts/fetch-gpu-wheels.sh) under /tmp/site, once per call (a script
# sourcing it after another did finds ATREX_ENV_READY set), and defines the commands they share.
if [ -z "${ATREX_ENV_READY:-}" ]; then
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
  fi
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site . || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 ATREX_ENV_READY=1
  # the recorder choices made where the call was prepared (carry [".gpu-cache"]): the host compiles only the builds
  [ -d .gpu-cache ] && export ATREX_CHOICE_CACHE=$PWD/.gpu-cache
fi
ATREX="python3 -m atrex_inject.cli"
INC=$($ATREX include-dir)
NVCC="nvcc -O3 -gencode=arch=compute_90a,code=sm_90a"
log() { echo "== $*"; }
