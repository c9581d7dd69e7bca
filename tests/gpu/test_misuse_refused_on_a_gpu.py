"""Misuse refused at the call on a real GPU, the device kept: an int that is no compiled fill
(called, it would crash the process), arrays of Python objects in copies (their pointers would be
overwritten), a fill of the wrong arity, and a buffer of another open device on the same GPU.
CUDA (libcuda) and NV (the kernel driver) each where they are present.
Run: python3 -m pytest -q -m gpu tests/gpu/test_misuse_refused_on_a_gpu.py
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import arig
import arig._env
import arig.cuda
import arig.nvrm as nvrm

pytestmark = [pytest.mark.arig_gpu, pytest.mark.asyncio]


def _cuda_here() -> bool:
    try:
        return arig.cuda.count() > 0
    except Exception:  # noqa: BLE001 - no libcuda
        return False


def _nv_here() -> bool:
    return os.path.exists("/dev/nvidiactl") and arig._engine.choose().native


@pytest.fixture(params=["cuda", "nv"])
def opener(request: pytest.FixtureRequest) -> Any:
    kind: str = request.param
    if kind == "cuda" and not _cuda_here() and not arig._env.GPU_REQUIRED:
        pytest.skip("no CUDA GPU here")
    if kind == "nv" and not _nv_here() and not arig._env.GPU_REQUIRED:
        pytest.skip("no NVIDIA kernel driver (or no native core) here")
    return arig.cuda.gpu if kind == "cuda" else nvrm.gpu


def _noop(queue: Any, arg: Any, v: int) -> None:
    return None


async def _still_works(dev: arig.Device) -> None:
    submitted = dev.submitted
    assert dev.lost is None and await dev.run(_noop) == submitted + 1
    buf = await dev.alloc(64)
    data = np.arange(16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    await dev.upload(buf, data)
    await dev.download(buf, out)
    np.testing.assert_array_equal(out, data)
    buf.close()


async def test_an_int_that_points_at_no_code_is_refused_and_the_process_lives(opener: Any) -> None:
    async with await arig.open(opener(0)) as dev:
        for address in (1, 4096, 0x7FFF_0000):
            with pytest.raises(arig.ArigValueError, match="is in no executable mapping"):
                await dev.submit(address)
        assert dev.submitted == 0
        await _still_works(dev)


async def test_arrays_of_python_objects_are_not_copied(opener: Any) -> None:
    async with await arig.open(opener(0)) as dev:
        buf = await dev.alloc(64)
        await dev.upload(buf, np.arange(64, dtype=np.uint8))
        out = np.empty(4, object)
        with pytest.raises(arig.ArigTypeError, match="holds Python objects"):
            await dev.download(buf, out)
        with pytest.raises(arig.ArigTypeError, match="holds Python objects"):
            await dev.upload(buf, np.array([object()] * 4))
        assert repr(out) == "array([None, None, None, None], dtype=object)"
        buf.close()
        await _still_works(dev)


async def test_a_fill_of_the_wrong_arity_is_refused(opener: Any) -> None:
    async with await arig.open(opener(0)) as dev:
        with pytest.raises(arig.ArigTypeError, match=r"cannot be called as fill\(queue, arg, v\)"):
            await dev.run(lambda: None)
        await _still_works(dev)


async def test_a_buffer_of_another_cuda_device_on_the_same_gpu_is_refused() -> None:
    if not _cuda_here() and not arig._env.GPU_REQUIRED:
        pytest.skip("no CUDA GPU here")
    async with await arig.open(arig.cuda.gpu(0)) as a, await arig.open(arig.cuda.gpu(0)) as b:
        assert a.name == b.name
        buf = await b.alloc(16)
        with pytest.raises(arig.ArigTypeError, match="a buffer of another CUDA device"):
            await a.upload(buf, np.zeros(4, np.float32))
        assert await b.upload(buf, np.zeros(4, np.float32)) >= 1
        buf.close()
        await _still_works(a)


async def test_the_shipped_cubin_and_pack_run_saxpy_on_nv() -> None:
    if not _nv_here() and not arig._env.GPU_REQUIRED:
        pytest.skip("no NVIDIA kernel driver (or no native core) here")
    n = 1 << 16
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(nvrm.shipped_image())
        x, y = await dev.alloc(4 * n, "pinned"), await dev.alloc(4 * n, "pinned")
        x.numpy(np.float32)[:], y.numpy(np.float32)[:] = 1.0, 2.0
        await dev.run(nvrm.Launch(image.function("saxpy"), n // 256, 256, nvrm.pack(np.float32(3.0), x, y, np.int32(n))))
        assert np.all(y.numpy(np.float32) == 5.0)
        with pytest.raises(arig.ArigValueError, match="argument buffer"):
            nvrm.Launch(image.function("saxpy"), 1, 1, nvrm.pack(np.float32(3.0), x))
        x.close()
        y.close()
