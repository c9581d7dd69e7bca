#!/usr/bin/env bash
# GPU call 4 (no code change): CUDA's long-work watch by ARIG_CUDA_BACKSTOP, at the head's code.
set -u
export PYTHONUNBUFFERED=1
timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1 || echo "wheels failed"
timeout 180 python3 setup.py build_ext --inplace -q >/dev/null 2>&1 || echo "build failed"
git log --oneline -1
for r in 1 2; do
  for how in poll early poll:2000; do
    echo "===== round $r ARIG_CUDA_BACKSTOP=$how $(date -u +%T)"
    ARIG_CUDA_BACKSTOP=$how PYTHONPATH=/tmp/site:$PWD timeout 60 python3 scripts/probe_latency.py --device cuda --us 1000,10000,50000 --n 60 2>&1 | grep -v "^loop:" | grep -v "core:"
  done
done
echo "===== end $(date -u +%T)"
