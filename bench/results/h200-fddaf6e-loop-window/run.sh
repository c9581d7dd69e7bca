#!/usr/bin/env bash
# A/B of the loop's spin window: trees under .ab, probe_latency interleaved; then the poll floor.
set -u
timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1 || echo "wheels failed"
export PYTHONUNBUFFERED=1
TREES=${TREES:-"H V15 V50"}
for t in $TREES; do (cd .ab/$t && timeout 180 python3 setup.py build_ext --inplace -q >/dev/null 2>&1) || echo "build failed $t"; done
python3 .ab/probe_poll_floor.py --n 30 2>&1 | tee $OUT/floor.txt
for r in 1 2; do
  for t in $TREES; do
    d=$PWD/.ab/$t
    for spec in "cuda asyncio 1000,10000,50000" "nv asyncio 1000,10000,50000" "cuda uvloop 10000"; do
      set -- $spec
      echo "===== round $r tree $t $1 $2 $3 $(date -u +%T)"
      (cd $d && PYTHONPATH=/tmp/site:$d timeout 60 python3 scripts/probe_latency.py --device $1 --loop $2 --us $3 --n 30 --trace 2>&1 | grep -v "^loop:")
    done
  done
done 2>&1 | tee $OUT/ab.txt
