#!/usr/bin/env bash
# Call 2: the push-gap gather (working tree, B) against 60ecbf2 (A), probe_regimes alternating, two rounds each.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
python3 setup.py build_ext --inplace -q >/dev/null 2>&1 || { echo build B failed; exit 1; }
(cd .ab/A && python3 setup.py build_ext --inplace -q >/dev/null 2>&1) || { echo build A failed; exit 1; }
for r in 1 2; do
  for tree in A B; do
    d=$PWD; [ $tree = A ] && d=$PWD/.ab/A
    echo "== tree $tree, round $r"
    (cd $d && PYTHONPATH=/tmp/site:$d timeout 90 python3 scripts/probe_regimes.py --repeat 1 2>&1)
  done
done | tee $OUT/regimes.log
