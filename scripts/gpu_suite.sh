#!/usr/bin/env bash
# The whole GPU suite in one call on a GPU machine (the H200 of the device tool):
# facts, the demo, top, the GPU tests, the CPU tests, then the benchmarks.
# Writes under $OUT: suite.log (everything), gpu_tests.xml, bench/ (results.json, table, plots).
# Usage: bash scripts/gpu_suite.sh [--no-bench] [--only-tests PATTERN]
# pytest-asyncio (and a matching pytest) travel as wheels in .whl/ (see the device tool's README).
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 ARIG_GPU_REQUIRED=1
BENCH=1; TESTS=tests/gpu; KEXPR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-bench) BENCH=0 ;;
    -k) KEXPR="$2"; shift ;;
    --tests) TESTS="$2"; shift ;;
  esac
  shift
done
exec > >(tee -a "$OUT/suite.log") 2>&1
step() { echo; echo "===== $* ($(date -u +%H:%M:%S))"; }
step "machine"
echo "commit: ${ARIG_COMMIT:-unknown}"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,pci.bus_id --format=csv
python3 -c 'import sys; from importlib.metadata import version as v; print(sys.version.split()[0], *(f"{p} {v(p)}" for p in ("numpy", "anyio", "pytest", "pytest-asyncio")))'
step "python -m arig info"
timeout 120 python3 -m arig info
step "python -m arig top --json --count 1"
timeout 60 python3 -m arig top --json --count 1
step "python -m arig demo --device cuda:0"
timeout 180 python3 -m arig demo --device cuda:0 --quiet
step "python -m arig demo --device host"
timeout 120 python3 -m arig demo --device host --tasks 16 --iters 50 --quiet
step "GPU tests"
if [ -n "$KEXPR" ]; then
  timeout 420 python3 -m pytest "$TESTS" -v -rA -p no:cacheprovider -x --timeout 120 --junitxml "$OUT/gpu_tests.xml" -k "$KEXPR"
else
  timeout 420 python3 -m pytest "$TESTS" -v -rA -p no:cacheprovider --timeout 120 --junitxml "$OUT/gpu_tests.xml"
fi
echo "gpu tests exit: $?"
if [ "$BENCH" = 1 ]; then
  step "benchmarks"
  timeout 300 python3 -m bench --out "$OUT/bench"
  echo "bench exit: $?"
fi
step "done"
