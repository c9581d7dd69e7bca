#!/usr/bin/env bash
# A/B of the example server at c=64: 573179b (.ab/Q) against this checkout, interleaved.
set -u
timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1 || echo "wheels failed"
export PYTHONUNBUFFERED=1
for d in .ab/Q .; do (cd $d && timeout 180 python3 setup.py build_ext --inplace -q >/dev/null 2>&1) || echo "build failed $d"; done
for r in 1 2; do
  for side in Q new; do
    d=$PWD/.ab/Q; [ $side = new ] && d=$PWD
    echo "===== round $r $side $(date -u +%T)"
    (cd $d && PYTHONPATH=/tmp/site:$d timeout 100 python3 -m examples.serve.bench --device cuda:0 --levels 64 --requests 6000 --clients 4 --max-seconds 12 --out $OUT/serve-$side-$r 2>&1 | grep -E "^\[c=")
  done
done
