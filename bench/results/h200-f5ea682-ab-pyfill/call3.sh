#!/usr/bin/env bash
# GPU call 3: the demo's stall split (single callback, pass), the Python fill A/B with bulk submission.
set -u
export PYTHONUNBUFFERED=1
timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1 || echo "wheels failed"
B=$PWD
(cd .ab/H && timeout 180 python3 setup.py build_ext --inplace -q >/dev/null 2>&1) || echo "build failed H"
timeout 180 python3 setup.py build_ext --inplace -q >/dev/null 2>&1 || echo "build failed B"
echo "===== demo steps $(date -u +%T)"
for d in nv:0 cuda:0 nv:0 cuda:0; do PYTHONPATH=/tmp/site:$B timeout 60 python3 .ab/demo_steps.py $d 2>&1 | tail -3; done
for r in 1 2 3; do
  for t in H B; do
    d=$B/.ab/$t; [ $t = B ] && d=$B
    echo "===== pyfill round $r tree $t $(date -u +%T)"
    (cd $d && PYTHONPATH=/tmp/site:$d timeout 80 python3 $B/.ab/probe_python_fill.py --repeat 2 --seconds 1 2>&1 | tail -7)
  done
done
echo "===== end $(date -u +%T)"
