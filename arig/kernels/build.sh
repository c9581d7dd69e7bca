#!/bin/sh
# Rebuild the cubin shipped in the package (needs nvcc 12+; sm_90 is the H100/H200).
set -e
cd "$(dirname "$0")"
nvcc -cubin -arch=sm_90 -O3 -o kernels.cubin kernels.cu
