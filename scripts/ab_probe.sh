#!/usr/bin/env bash
# An A/B of probe commands: this checkout against a base tree, alternately (base, new, base, new, ...),
# in one call on one GPU machine, so that both sides see the same VM.  Builds both native cores first.
# Usage: bash scripts/ab_probe.sh BASE_DIR ROUNDS 'CMD' ['CMD' ...]
#   (BASE_DIR e.g. .ab/base: `mkdir -p .ab/base && git archive BASE arig setup.py pyproject.toml scripts | tar -x -C .ab/base`)
# Each CMD runs in each tree with PYTHONPATH set to it (and /tmp/site, where .whl/ was installed);
# $NEW is this checkout, for scripts the base tree lacks.
set -u
BASE=$(cd "$1" && pwd); ROUNDS=$2; shift 2
NEW=$PWD; export NEW  # a CMD may name the new tree's scripts as $NEW/scripts/...
SITE=; [ -d /tmp/site ] && SITE=/tmp/site:
export PYTHONUNBUFFERED=1
for d in "$BASE" "$NEW"; do
  (cd "$d" && timeout 180 python3 setup.py build_ext --inplace -q >/dev/null 2>&1) || { echo "build failed in $d"; exit 1; }
done
for cmd in "$@"; do
  for r in $(seq "$ROUNDS"); do
    for side in base new; do
      d=$BASE; [ "$side" = new ] && d=$NEW
      echo "===== $side, round $r: $cmd"
      (cd "$d" && PYTHONPATH="$SITE$d" timeout -k 5 120 bash -c "$cmd" 2>&1)
    done
  done
done
