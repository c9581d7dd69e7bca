#!/usr/bin/env bash
set -u
exec > >(tee -a "$OUT/call.log") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
H=$PWD
pids=""; for d in $H .ab/M .ab/P .ab/X; do (cd $d && timeout 150 python3 setup.py build_ext --inplace -q >/dev/null 2>&1 || echo "BUILD FAILED $d") & pids="$pids $!"; done; wait $pids; echo "built $SECONDS s"
export PYTHONUNBUFFERED=1 ARIG_GPU_REQUIRED=1 PYTHONPATH=/tmp/site:$H
echo "== copies between devices (native)"; timeout 120 python3 -m pytest tests/gpu/test_copies_between_devices_gpu.py -v -rA -p no:cacheprovider --timeout 60 2>&1 | tail -15
for i in 1 2; do echo "== after= GPU tests on the pure engine, run $i"; ARIG_PURE=1 timeout 90 python3 -m pytest tests/gpu/test_work_after_another_device_gpu.py -q -rfEs -p no:cacheprovider --timeout 30 2>&1 | tail -6; done
echo "== faults (NV stall) with the plugin"; timeout 90 python3 -m pytest -q -p arig.testing.plugin tests/test_testing_faults.py -rfEs -p no:cacheprovider --timeout 30 2>&1 | tail -6
echo "== demo --pipeline"; timeout 60 python3 -m arig demo --pipeline 2>&1 | tail -12
echo "== info"; timeout 30 python3 -m arig info 2>&1 | tail -8
for r in 1 2; do for t in M P X H; do d=$H/.ab/$t; [ $t = H ] && d=$H; (cd $d && PYTHONPATH=/tmp/site:$d timeout 40 python3 $H/.ab/t64.py $t asyncio uvloop 2>&1 | grep -E "T64|Error|error" | tail -3); done; done
echo "== bench peers"; timeout 120 python3 -m bench --only peers --out $OUT/peers --max-seconds 90 2>&1 | tail -30
