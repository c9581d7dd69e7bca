#!/usr/bin/env bash
# GPU call 5 (experiment tree .ab/I = HEAD + per-phase CPU accounting of the native thread).
set -u
export PYTHONUNBUFFERED=1
timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1 || echo "wheels failed"
cd .ab/I && timeout 180 python3 setup.py build_ext --inplace -q >/dev/null 2>&1 || echo "build failed"
for spec in "cuda asyncio 1000 100" "cuda asyncio 10000 100" "nv asyncio 10000 100" "cuda asyncio 50000 60" "nv asyncio 50000 60" "cuda uvloop 10000 100"; do
  set -- $spec
  echo "===== $1 $2 $3 n=$4 $(date -u +%T)"
  PYTHONPATH=/tmp/site:$PWD timeout 60 python3 scripts/probe_latency.py --device $1 --loop $2 --us $3 --n $4 2>&1 | grep -v "^loop:" | grep -v "core:"
done
echo "===== end $(date -u +%T)"
