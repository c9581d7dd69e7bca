#!/usr/bin/env bash
# GPU call 1: the GPU tests not yet run, the demo's stalls, the Python fill A/B (H against B = this
# tree), the sweep's nap and pre-wake variants (B, BN, BW) by probe_latency.
set -u
export PYTHONUNBUFFERED=1
timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1 || echo "wheels failed"
B=$PWD
for t in H BN BW; do (cd .ab/$t && timeout 180 python3 setup.py build_ext --inplace -q >/dev/null 2>&1) || echo "build failed $t"; done
timeout 180 python3 setup.py build_ext --inplace -q >/dev/null 2>&1 || echo "build failed B"
git log --oneline -1
echo "===== gpu tests $(date -u +%T)"
PYTHONPATH=/tmp/site:$B timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_trio_gpu.py tests/gpu/test_interop_gpu.py tests/test_python_fills_landing_together_run_behind_one_gate.py 2>&1 | tail -5
PYTHONPATH=/tmp/site:$B timeout 120 python3 -m pytest -q -p no:cacheprovider tests/gpu -k "fill or python or after or peer" 2>&1 | tail -3
echo "===== demo stalls $(date -u +%T)"
for d in nv:0 cuda:0; do PYTHONPATH=/tmp/site:$B timeout 60 python3 .ab/stallwho.py $d 2>&1 | head -40; done
for r in 1 2; do
  for t in H B; do
    d=$B/.ab/$t; [ $t = B ] && d=$B
    echo "===== pyfill round $r tree $t $(date -u +%T)"
    (cd $d && PYTHONPATH=/tmp/site:$d timeout 60 python3 $B/scripts/probe_python_fill.py --repeat 2 --seconds 1 2>&1 | tail -6)
  done
done
for r in 1 2; do
  for t in B BN BW; do
    d=$B/.ab/$t; [ $t = B ] && d=$B
    for spec in "cuda asyncio 1000,10000,50000" "nv asyncio 1000,10000"; do
      set -- $spec
      [ $t = BN ] && [ $1 = nv ] && continue
      echo "===== sweep round $r tree $t $1 $2 $3 $(date -u +%T)"
      (cd $d && PYTHONPATH=/tmp/site:$d timeout 60 python3 scripts/probe_latency.py --device $1 --loop $2 --us $3 --n 30 2>&1 | grep -v "^loop:")
    done
  done
done
echo "===== end $(date -u +%T)"
