#!/usr/bin/env bash
# After the refactor 88876c2: the GPU tests, the Python fill probe, the demos (device time left is too short for the whole suite).
set -u
export PYTHONUNBUFFERED=1
timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1 || echo "wheels failed"
timeout 180 python3 setup.py build_ext --inplace -q >/dev/null 2>&1 || echo "build failed"
export PYTHONPATH=/tmp/site:$PWD
echo "===== GPU tests $(date -u +%T)"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tail -2
echo "===== probe_python_fill $(date -u +%T)"
timeout 40 python3 scripts/probe_python_fill.py --repeat 1 2>&1 | head -5
echo "===== demos $(date -u +%T)"
for d in cuda:0 nv:0; do timeout 30 python3 -m arig demo --device $d --quiet 2>&1 | tail -3; done
echo "===== end $(date -u +%T)"
