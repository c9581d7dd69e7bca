#!/usr/bin/env bash
# The final call: the GPU suite at this commit, then probes of B (2227c0b) beside this tree, appended to suite.log.
set -u
H=$PWD
(cd .ab/B && timeout 150 python3 setup.py build_ext --inplace -q >/dev/null 2>&1 || echo "B BUILD FAILED") &
BPID=$!
ARIG_COMMIT=$1 SUITE_SECONDS=${2:-515} bash scripts/gpu_suite.sh
wait $BPID
{
echo; echo "===== A/B probes: B = 2227c0b beside this tree ($(date -u +%H:%M:%S))"
for loop in asyncio uvloop; do for d in cuda nv; do for side in B H; do
  dd=$H/.ab/B; [ $side = H ] && dd=$H
  echo "== probe $d $loop $side"
  (cd $dd && PYTHONPATH=/tmp/site:$dd timeout 20 python3 scripts/probe_latency.py --device $d --loop $loop --us 1000,10000 --n 40 2>&1 | grep -E "kernel|late|core:|cpu")
done; done; done
echo "===== A/B done ($(date -u +%H:%M:%S))"
} >> "${OUT:-$H/out}/suite.log" 2>&1
