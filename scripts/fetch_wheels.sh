#!/usr/bin/env bash
# Fetch, on a machine with network, the wheels the GPU machine lacks (it has no network):
# the test plugins, uvloop, trio and the example server's packages, for its Python 3.12 on x86-64, into .whl/ (git-ignored).
# scripts/gpu_suite.sh installs them there with --no-index.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
dl() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "$@"
}
dl uvloop==0.23.0 pytest==8.4.2 pytest-asyncio==1.5.0 pluggy==1.7.0 iniconfig==2.3.1 packaging==26.4 \
   hypothesis==6.170.17 sortedcontainers==2.4.0 attrs==26.1.0 pytest-timeout==2.4.0
# trio (the trio GPU tests and bench rows) and what it needs beside attrs, sortedcontainers and idna.
dl trio outcome sniffio
# The example server and its load test (the `examples` extra): starlette, uvicorn, httpx and theirs.
dl starlette uvicorn httpx httpcore h11 click certifi idna httptools
ls .whl
