#!/usr/bin/env bash
# The GPU suite's core in about 3 minutes, for a session whose device time cannot hold the whole
# suite (scripts/gpu_suite.sh, ~8 minutes): the native core built in place, every GPU test
# (tests/gpu, watched at exit), trio's round trip in its task steps (one task and 64), and the
# trio bench (table 7c: every device under asyncio, trio and trio with its spin, alternating).
# Writes under $OUT: short.log, gpu_tests.xml, bench/results.json, bench/table.md.
# With AB_BASE=<dir> (a base tree: see scripts/ab_probe.sh), first an A/B of scripts/probe_interop.py,
# base then this checkout, AB_ROUNDS times (default 1), into ab.log; with INTEROP=1, last, the bench's
# interop section (awaiting a torch stream on each loop) into interop/results.json and interop/table.md.
# Usage: ARIG_COMMIT=<sha> [AB_BASE=.ab/base] [INTEROP=1] bash scripts/gpu_short.sh
set -u
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/short.log") 2>&1
echo "commit: ${ARIG_COMMIT:-unknown}; cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
if ls .whl/*.whl >/dev/null 2>&1; then
  timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 ARIG_GPU_REQUIRED=1
timeout 120 python3 setup.py build_ext --inplace -q >/dev/null || { echo "build failed"; exit 1; }
if [ -n "${AB_BASE:-}" ]; then
  echo "===== A/B of probe_interop.py against $AB_BASE ($(date -u +%T))"
  timeout -k 10 240 bash scripts/ab_probe.sh "$AB_BASE" "${AB_ROUNDS:-1}" 'cd $NEW/scripts && python3 probe_interop.py' > "$OUT/ab.log" 2>&1
  echo "ab exit: $?"; grep -E "^=====|p50" "$OUT/ab.log"
fi
echo "===== GPU tests ($(date -u +%T))"
timeout -k 10 150 bash scripts/pytest_watched.sh "$OUT/gpu_tests.xml" python3 -m pytest tests/gpu -q -rfEs -p no:cacheprovider --timeout 120 --junitxml "$OUT/gpu_tests.xml"
echo "gpu_tests exit: $?"
echo "===== trio's task steps ($(date -u +%T))"
timeout -k 5 30 python3 scripts/probe_trio_steps.py --n 3000; echo "probe_trio exit: $?"
timeout -k 5 30 python3 scripts/probe_trio_steps.py --n 12800 --tasks 64; echo "probe_trio_64 exit: $?"
echo "with ARIG_TRIO_SPIN=0:"; ARIG_TRIO_SPIN=0 timeout -k 5 30 python3 scripts/probe_trio_steps.py --n 3000; echo "probe_trio_nospin exit: $?"
echo "===== trio bench ($(date -u +%T))"
# Written to /tmp, its results.json and table.md copied: the bench's plots would take the device tool's 8 files.
timeout -k 10 100 python3 -m bench --only trio --max-seconds 80 --out /tmp/bench_short; echo "bench exit: $?"
mkdir -p "$OUT/bench" && cp /tmp/bench_short/results.json /tmp/bench_short/table.md "$OUT/bench/"
if [ "${INTEROP:-0}" = 1 ]; then
  echo "===== bench interop ($(date -u +%T))"
  timeout -k 10 60 python3 -m bench --only interop --max-seconds 45 --out /tmp/bench_interop; echo "interop exit: $?"
  mkdir -p "$OUT/interop" && cp /tmp/bench_interop/results.json /tmp/bench_interop/table.md "$OUT/interop/"
fi
echo "===== done ($(date -u +%T))"
