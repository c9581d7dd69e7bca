"""A kernel launch (``arig.cuda.Launch``, ``arig.nvrm.Launch``) keeps the image its kernel came from
loaded while the launch lives: dropping the Image object alone does not unload the code under the
launches that name it (on CUDA a launch of unloaded code fails with an invalid handle and loses the
device).  ``unload()`` still unloads at once, and a launch of it is then refused at submit."""

from __future__ import annotations

import asyncio
import gc

import numpy as np
import pytest

import arig
from arig.cuda import Launch, pack
from arig.testing import FakeCuda

T = 10.0


def _store(args: bytes) -> None:
    out, i, v = np.frombuffer(args[:8], np.uint64)[0], np.frombuffer(args[8:12], np.uint32)[0], np.frombuffer(args[16:24], np.uint64)[0]
    (np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint64 * 64).from_address(int(out))))[i] = v


@pytest.fixture
def fake() -> FakeCuda:
    f = FakeCuda()
    with f.installed():
        yield f
    assert f.violations == []


@pytest.mark.asyncio
async def test_a_launch_keeps_its_image_loaded_after_the_image_is_dropped(fake: FakeCuda, engine: str) -> None:
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        img = await dev.load(fake.image(store=(_store, (8, 4, 8))))
        func, module = img.function("store"), img.handle
        out = await dev.alloc(8 * 64)
        first = Launch(func, 1, 1, pack(out, np.uint32(0), np.uint64(5)))
        del img
        gc.collect()
        assert ("module", module) not in fake.destroyed
        later = Launch(func, 1, 1, pack(out, np.uint32(1), np.uint64(7)))  # made of the handle alone
        await asyncio.wait_for(dev.wait(await dev.submit(first)), T)
        await asyncio.wait_for(dev.wait(await dev.submit(later)), T)
        host = np.zeros(64, np.uint64)
        await dev.download(out, host)
        assert list(host[:2]) == [5, 7] and dev.lost is None
        del first, later
        gc.collect()
        await dev.load(fake.image())  # the next load reclaims: the image, free of launches, is unloaded now
        assert ("module", module) in fake.destroyed


@pytest.mark.asyncio
async def test_an_unloaded_image_is_refused_at_submit_even_with_a_launch_alive(fake: FakeCuda, engine: str) -> None:
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        img = await dev.load(fake.image(store=(_store, (8, 4, 8))))
        out = await dev.alloc(8 * 64)
        launch = Launch(img.function("store"), 1, 1, pack(out, np.uint32(0), np.uint64(5)))
        img.unload()
        with pytest.raises(arig.ArigValueError, match="unloaded image"):
            await dev.submit(launch)
        assert dev.lost is None
