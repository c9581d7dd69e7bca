#!/usr/bin/env bash
# Call 1: the GPU's join of a user's stream three ways (probe_join.c), each library's wake-up floor
# (loop_floor.py), where the time of awaiting a torch stream goes (probe_interop.py).
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 setup.py build_ext --inplace -q >/dev/null 2>&1 || { echo build failed; exit 1; }
export PYTHONPATH=/tmp/site:$PWD
gcc -O2 -o /tmp/pj scripts/probe_join.c -ldl || exit 1
for r in 1 2; do echo "== probe_join round $r"; timeout 60 /tmp/pj arig/kernels/kernels.cubin 2000; done 2>&1 | tee $OUT/join.log
timeout 60 python3 scripts/loop_floor.py --repeat 3 2>&1 | tee $OUT/loop_floor.log
(cd scripts && timeout 120 python3 probe_interop.py) 2>&1 | tee $OUT/interop.log
