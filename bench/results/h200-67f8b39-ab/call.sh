#!/usr/bin/env bash
# Call 1: GPU tests at H (the working tree), then probes of B (c391506) and H, and never-seen of B, H, N.
set -u
R=$PWD
timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || echo "wheels failed"
for d in "$R" "$R/.ab/B" "$R/.ab/N"; do
  (cd "$d" && timeout 120 python3 setup.py build_ext --inplace -q > /dev/null 2>&1; echo "build $d rc=$?"; PYTHONPATH=/tmp/site:$d python3 -c "import arig._native as n; print(n.status())")
done 2>&1 | tee "$OUT/build.log"
export PYTHONUNBUFFERED=1
S=$SECONDS
PYTHONPATH=/tmp/site:$R ARIG_GPU_REQUIRED=1 timeout 220 python3 -m pytest tests/gpu -q -p no:cacheprovider --timeout 120 -rfEs > "$OUT/tests.log" 2>&1
echo "tests rc=$? in $((SECONDS-S))s" | tee -a "$OUT/tests.log"
tail -5 "$OUT/tests.log"
S=$SECONDS
for dev in cuda nv; do for loop in asyncio uvloop; do for t in B H; do
  d=$R; [ $t = B ] && d=$R/.ab/B
  echo "=== $t $dev $loop" >> "$OUT/probe.log"
  (cd "$d" && PYTHONPATH=/tmp/site:$d timeout 45 python3 scripts/probe_latency.py --device $dev --loop $loop --us 1000,10000 --n 100 --trace >> "$OUT/probe.log" 2>&1; echo "rc=$?" >> "$OUT/probe.log")
done; done; done
echo "probes in $((SECONDS-S))s"
S=$SECONDS
for t in B H N; do
  d=$R; [ $t = B ] && d=$R/.ab/B; [ $t = N ] && d=$R/.ab/N
  (cd "$d" && PYTHONPATH=/tmp/site:$d timeout 60 python3 "$R/.ab/never.py" $t 2>&1 | grep -v "^\[bench" >> "$OUT/never.log")
done
echo "never in $((SECONDS-S))s"
cat "$OUT/never.log"
grep -E "^===|late\(|seen->|trace|last wake" "$OUT/probe.log" | head -120
