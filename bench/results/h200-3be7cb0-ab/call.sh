#!/usr/bin/env bash
# A/B: B = 2227c0b (base), P2 = cc7e984 (pre-wake again), H = this tree (+ no eventfd write for what the loop read).
set -u
exec > >(tee -a "$OUT/call.log") 2>&1
step() { echo; echo "===== $* ($(date -u +%H:%M:%S), ${SECONDS}s)"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
H=$PWD
pids=""; for d in $H $H/.ab/B $H/.ab/P2; do (cd $d && timeout 150 python3 setup.py build_ext --inplace -q >/dev/null 2>&1 || echo "BUILD FAILED $d") & pids="$pids $!"; done; wait $pids
export PYTHONUNBUFFERED=1 ARIG_GPU_REQUIRED=1
dir_of() { [ $1 = H ] && echo $H || echo $H/.ab/$1; }
for loop in asyncio uvloop; do for d in cuda nv; do for side in B P2 H; do
  step "probe $d $loop $side"
  dd=$(dir_of $side)
  (cd $dd && PYTHONPATH=/tmp/site:$dd timeout 40 python3 scripts/probe_latency.py --device $d --loop $loop --us 1000,10000 --n 40 2>&1 | grep -vE "^\s*$")
done; done; done
sec() { sed -n "/^### $2/,/^### /p" $1 | sed '$d'; }
for side in B H; do
  dd=$(dir_of $side); step "sweep $side"
  (cd $dd && PYTHONPATH=/tmp/site:$dd timeout 80 python3 -m bench --only sweep --out /tmp/sw-$side --max-seconds 62 2>&1 | tail -1)
  cp /tmp/sw-$side/results.json $OUT/sweep-$side.json 2>/dev/null
done
for side in B H; do echo "== sweep $side"; sec /tmp/sw-$side/table.md "11\." ; sec /tmp/sw-$side/table.md "11b" ; sec /tmp/sw-$side/table.md "11c"; done
for side in B H; do
  dd=$(dir_of $side); step "latency,interop $side"
  (cd $dd && PYTHONPATH=/tmp/site:$dd timeout 70 python3 -m bench --only latency,interop --out /tmp/li-$side --max-seconds 55 2>&1 | tail -1)
done
step "interop H with ARIG_NO_GPU_STAMPS=1"
ARIG_NO_GPU_STAMPS=1 PYTHONPATH=/tmp/site:$H timeout 40 python3 -m bench --only interop --out /tmp/li-HN --max-seconds 30 2>&1 | tail -1
for side in B H; do echo "== latency/interop $side"; sec /tmp/li-$side/table.md "1\." ; sec /tmp/li-$side/table.md "9\."; done
echo "== interop H, ARIG_NO_GPU_STAMPS=1"; sec /tmp/li-HN/table.md "9\."
step done
