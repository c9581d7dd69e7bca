#!/usr/bin/env bash
# An A/B of the benchmarks: this checkout against a base tree, on one GPU machine in one call, so that
# both sides see the same VM (VMs differ by up to 1.5x in CPU speed).  Builds both native cores, runs
# `python -m bench` alternately base, new, base, new (ROUNDS rounds), then bench/compare.py.
# Usage: bash scripts/ab_bench.sh [BASE_DIR]   (default .ab/base: e.g. `git archive 2faa5f4 | tar -x -C .ab/base`)
# Environment: ROUNDS (2), PER_RUN (seconds per bench run, 120), ONLY (bench --only list, default all).
# Writes under $OUT/ab: base-N.json, new-N.json, ab.md (the comparison table), ab.json, log.
set -u
BASE=$(cd "${1:-.ab/base}" && pwd)
NEW=$PWD
ROUNDS=${ROUNDS:-2}; PER=${PER_RUN:-120}; ONLY=${ONLY:-}
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT/ab"
exec > >(tee -a "$OUT/ab/log") 2>&1
if ls .whl/*.whl >/dev/null 2>&1; then
  timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  SITE=/tmp/site:
else
  SITE=
fi
export PYTHONUNBUFFERED=1
for d in "$BASE" "$NEW"; do
  (cd "$d" && timeout 180 python3 setup.py build_ext --inplace -q >/dev/null) || { echo "build failed in $d"; exit 1; }
  (cd "$d" && PYTHONPATH="$SITE$d" python3 -m arig info | sed -n '1,6p')
done
args=(--max-seconds "$PER"); [ -n "$ONLY" ] && args+=(--only "$ONLY")
for r in $(seq "$ROUNDS"); do
  for side in base new; do
    d=$BASE; [ "$side" = new ] && d=$NEW
    echo "===== round $r: $side ($d) $(date -u +%H:%M:%S)"
    (cd "$d" && PYTHONPATH="$SITE$d" timeout -k 10 $((PER + 30)) python3 -m bench --out "/tmp/ab-$side-$r" "${args[@]}" >/tmp/ab-$side-$r.txt 2>&1)
    echo "bench exit: $?"
    cp "/tmp/ab-$side-$r/results.json" "$OUT/ab/$side-$r.json" 2>/dev/null || echo "no results from $side round $r"
  done
done
(cd "$NEW" && python3 -m bench.compare --base "$OUT"/ab/base-*.json --new "$OUT"/ab/new-*.json --json "$OUT/ab/ab.json" > "$OUT/ab/ab.md")
tail -n 1 "$OUT/ab/ab.md"
head -n 30 "$OUT/ab/ab.md"
