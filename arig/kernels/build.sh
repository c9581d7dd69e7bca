#!/bin/sh
# The kernels are built by scripts/build_kernels.sh (a fatbin for sm_75 ... sm_121 plus PTX).
exec "$(dirname "$0")/../../scripts/build_kernels.sh" "$@"
