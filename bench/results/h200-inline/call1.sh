#!/usr/bin/env bash
# Call 1: inline Python fills on the H200: the GPU test, then the latency and concurrency benchmarks
# (arig_pyfill and arig_pyfill_inline beside the Launch and torch's busy poll, same run).
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 setup.py build_ext --inplace -q >/dev/null 2>&1 || { echo build failed; exit 1; }
export PYTHONPATH=/tmp/site:$PWD
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_cuda_gpu.py -k "inline or gapless or saxpy" 2>&1 | tail -5 | tee $OUT/tests.log
timeout 300 python3 -m bench --only latency,concurrency --out $OUT/bench --max-seconds 280 2>&1 | tail -80 | tee $OUT/bench.log
