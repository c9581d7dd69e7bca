#!/usr/bin/env bash
# The cubin the parser's tests read: nvcc 13.0, sm_90 (Hopper, what the NV device runs).
# ptxas's resource report is kept beside it (probe.sm_90.ptxas.txt): the tests compare with it.
set -euo pipefail
cd "$(dirname "$0")"
nvcc -cubin -arch=sm_90 -O3 -Xptxas -v -o probe.sm_90.cubin probe.cu 2> probe.sm_90.ptxas.txt
cat probe.sm_90.ptxas.txt
