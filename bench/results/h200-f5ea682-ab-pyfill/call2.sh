#!/usr/bin/env bash
# GPU call 2: the Python fill A/B (H against this tree), the demo's stalls (all threads), the fill tests.
set -u
export PYTHONUNBUFFERED=1
timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1 || echo "wheels failed"
B=$PWD
(cd .ab/H && timeout 180 python3 setup.py build_ext --inplace -q >/dev/null 2>&1) || echo "build failed H"
timeout 180 python3 setup.py build_ext --inplace -q >/dev/null 2>&1 || echo "build failed B"
which perf strace ltrace 2>&1 | head -3
echo "===== gpu tests $(date -u +%T)"
PYTHONPATH=/tmp/site:$B timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_python_fills_landing_together_run_behind_one_gate.py tests/gpu -k "fill or python or after or peer or adopt or graph" 2>&1 | tail -3
echo "===== demo stalls $(date -u +%T)"
for d in nv:0 cuda:0; do PYTHONPATH=/tmp/site:$B timeout 60 python3 .ab/stallwho.py $d 2>&1 | tail -16; done
for r in 1 2 3; do
  for t in H B; do
    d=$B/.ab/$t; [ $t = B ] && d=$B
    echo "===== pyfill round $r tree $t $(date -u +%T)"
    (cd $d && PYTHONPATH=/tmp/site:$d timeout 60 python3 $B/scripts/probe_python_fill.py --repeat 2 --seconds 1 2>&1 | tail -6)
  done
done
echo "===== end $(date -u +%T)"
