#!/usr/bin/env bash
set -u
exec > >(tee -a "$OUT/call.log") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
H=$PWD
pids=""; for d in $H $H/.ab/B; do (cd $d && timeout 150 python3 setup.py build_ext --inplace -q >/dev/null 2>&1 || echo "BUILD FAILED $d") & pids="$pids $!"; done; wait $pids
export PYTHONUNBUFFERED=1 ARIG_GPU_REQUIRED=1
for loop in asyncio uvloop; do for d in cuda nv; do for side in B H; do
  dd=$H/.ab/B; [ $side = H ] && dd=$H
  echo "===== probe $d $loop $side"
  (cd $dd && PYTHONPATH=/tmp/site:$dd timeout 30 python3 scripts/probe_latency.py --device $d --loop $loop --us 1000,10000 --n 50 2>&1 | grep -E "kernel|late|core:|cpu")
done; done; done
