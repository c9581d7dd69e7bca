"""``dev.copy`` between devices on real GPUs: every byte of a large buffer arrives, checked by hash.

Pairs: two CUDA devices on GPU 0, CUDA to NV and NV to CUDA on GPU 0 (skipped where the NVIDIA
kernel driver is not loaded, or where the NV device cannot run: the pure engine), and CUDA on
GPU 0 to GPU 1 with 1 GiB (skipped with fewer than two GPUs).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import numpy as np
import pytest

import arig
import arig._engine
import arig._env
import arig.cuda
import arig.nvrm as nvrm

pytestmark = [pytest.mark.arig_gpu, pytest.mark.asyncio]

MIB = 1 << 20
_NV_WHY = (None if arig._engine.choose().native else "the NV device runs on the native core only") if os.path.exists("/dev/nvidiactl") or arig._env.GPU_REQUIRED else "the NVIDIA kernel driver is not loaded"
needs_nv = pytest.mark.skipif(_NV_WHY is not None, reason=str(_NV_WHY))


async def _copied(src_opener: Any, dst_opener: Any, nbytes: int) -> None:
    data = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    async with await arig.open(src_opener) as a, await arig.open(dst_opener) as b:
        src, dst = await a.alloc(nbytes), await b.alloc(nbytes)
        await a.upload(src, data)
        await b.upload(dst, np.zeros(nbytes, np.uint8))
        v = await b.copy(dst, src)
        assert b.reached >= v
        out = np.empty(nbytes, np.uint8)
        await b.download(dst, out)
        assert hashlib.sha256(out).hexdigest() == hashlib.sha256(data).hexdigest()
        assert a.lost is None and b.lost is None


async def test_two_cuda_devices_on_one_gpu() -> None:
    await _copied(arig.cuda.gpu(0), arig.cuda.gpu(0), 256 * MIB + 3)


@needs_nv
async def test_cuda_to_nv_on_one_gpu() -> None:
    await _copied(arig.cuda.gpu(0), nvrm.gpu(0), 256 * MIB + 3)


@needs_nv
async def test_nv_to_cuda_on_one_gpu() -> None:
    await _copied(nvrm.gpu(0), arig.cuda.gpu(0), 256 * MIB + 3)


async def test_gpu_0_to_gpu_1_a_gib() -> None:
    if arig.cuda.count() < 2:
        pytest.skip("needs two GPUs")
    await _copied(arig.cuda.gpu(0), arig.cuda.gpu(1), 1 << 30)
