#!/bin/sh
# Rebuild the kernels arig ships: arig/kernels/kernels.cu -> arig/kernels/kernels.fatbin.
#
# One fatbin, loaded as is by cuModuleLoadData (arig.cuda.shipped_image()):
#   * SASS for every real architecture CUDA 13.0's nvcc supports (nvcc --list-gpu-code),
#     so Turing, Ampere (A100, A10, RTX 30xx), Orin, Ada (L4, L40, RTX 4090), Hopper and
#     Blackwell (B200/GB200, B300, Thor, RTX 50xx, GB10) load it without a JIT;
#   * PTX of the newest virtual architecture, which the driver JIT-compiles on newer GPUs.
# Entries are stored uncompressed (--no-compress: nvcc would zstd the PTX) so that
# tests/test_kernels_image.py reads them with the standard library; the file is ~190 KB.
#
# tests/test_kernels_image.py reads CUDA_RELEASE, SASS_ARCHS, PTX_ARCH and NVCC_FLAGS
# below (keep each on one line, as NAME="...") and checks that the committed fatbin holds
# exactly these entries, each with every kernel of kernels.cu and its parameter layout.
# Rebuild and commit the fatbin whenever kernels.cu or these lines change. The build is
# deterministic: the same nvcc gives the same bytes, wherever the checkout is.
set -eu
cd "$(dirname "$0")/.."

CUDA_RELEASE="13.0"
SASS_ARCHS="75 80 86 87 88 89 90 100 103 110 120 121"
PTX_ARCH="121"
NVCC_FLAGS="-O3 --no-compress"

NVCC="${NVCC:-nvcc}"
version="$("$NVCC" --version)"
printf '%s\n' "$version" | tail -n 2
printf '%s\n' "$version" | grep -q "release $CUDA_RELEASE," || {
    echo "$NVCC is not CUDA $CUDA_RELEASE: check the lists against its --list-gpu-code, then update CUDA_RELEASE" >&2
    exit 1
}
codes="$("$NVCC" --list-gpu-code)"
for a in $SASS_ARCHS; do
    printf '%s\n' "$codes" | grep -qx "sm_$a" || { echo "$NVCC cannot build sm_$a" >&2; exit 1; }
done

gencode=""
for a in $SASS_ARCHS; do
    gencode="$gencode -gencode arch=compute_$a,code=sm_$a"
done
gencode="$gencode -gencode arch=compute_$PTX_ARCH,code=compute_$PTX_ARCH"

set -x
# shellcheck disable=SC2086  # $NVCC_FLAGS and $gencode are lists of words
"$NVCC" -fatbin $NVCC_FLAGS $gencode -o arig/kernels/kernels.fatbin arig/kernels/kernels.cu
{ set +x; } 2>/dev/null

# The sm_90 cubin arig shipped before the fatbin; bench/_cuda.py's cubin_path() (CuPy's
# RawModule) still reads it. Rebuilt while it exists: it is byte for byte the fatbin's
# sm_90 entry (the test checks). Once nothing reads it, delete it and this step.
if [ -e arig/kernels/kernels.cubin ]; then
    set -x
    "$NVCC" -cubin -arch=sm_90 -O3 -o arig/kernels/kernels.cubin arig/kernels/kernels.cu
    { set +x; } 2>/dev/null
fi

ls -l arig/kernels/kernels.fatbin
