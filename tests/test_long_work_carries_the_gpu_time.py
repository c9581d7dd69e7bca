"""On the native engine, a CUDA device signals work known to be long with its stamp kernel (the GPU's
own time beside the word, so the core learns the work's length exactly); unknown work keeps the stream
memory operation, and the stamp kernel's module lives exactly as long as the device.
Over FakeCuda, whose stamp kernel writes CLOCK_MONOTONIC."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

import arig
import arig._engine
import arig._env
from arig.cuda import Launch
from arig.cuda._stamp import NAME
from arig.testing import FakeCuda

T = 10.0
LONG_S = 0.003  # far past the core's long-work threshold (50 us), and past its 40 us spin


@pytest.fixture
def fake() -> Iterator[FakeCuda]:
    why = arig._engine.unavailable("native")
    if why is not None:
        pytest.skip(f"the native engine is not here: {why}")
    f = FakeCuda()
    with f.installed(), arig._engine.using("native", stream_memops=True):
        yield f
    assert f.violations == []


def _stamp_launches(fake: FakeCuda) -> int:
    fns = {h for h, f in fake._funcs.items() if f.name == NAME.decode()}
    return sum(1 for c in fake.calls("cuLaunchKernel") if int(getattr(c.args[0], "value", c.args[0]) or 0) in fns)


async def _image(dev: arig.Device, fake: FakeCuda) -> Any:
    return await dev.load(fake.image(sleep=(lambda args: time.sleep(LONG_S), ()), empty=(lambda args: None, ())))


@pytest.mark.asyncio
async def test_long_work_is_signalled_with_the_gpu_time_after_its_first_run(fake: FakeCuda) -> None:
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        assert "the GPU's time" in dev.facts["completion"]
        img = await _image(dev, fake)
        deadline = time.monotonic() + T
        while _stamp_launches(fake) == 0 and time.monotonic() < deadline:  # the native thread's first act
            await asyncio.sleep(0.001)
        at_open = _stamp_launches(fake)  # the clocks' calibration, once
        assert at_open == 1
        long = Launch(img.function("sleep"), 1, 1)
        vs = []
        for _ in range(4):
            v = await dev.submit(long)
            await asyncio.wait_for(dev.wait(v), T)
            vs.append(v)
        # The first run is unknown work (a memory operation); the host function's time tells the
        # core it is long, and every later run carries the GPU's time.
        assert _stamp_launches(fake) == at_open + 3
        t = dev.reached_at(vs[-1])
        assert t is not None and t <= time.perf_counter()


@pytest.mark.asyncio
async def test_stop_unloads_the_stamp_kernel(fake: FakeCuda) -> None:
    dev = await arig.open(arig.cuda.gpu(0))
    img = await _image(dev, fake)
    await asyncio.wait_for(dev.wait(await dev.submit(Launch(img.function("empty"), 1, 1))), T)
    assert not [d for d in fake.destroyed if d[0] == "stamp module"]
    await asyncio.wait_for(dev.stop(), T)
    assert len([d for d in fake.destroyed if d[0] == "stamp module"]) == 1


@pytest.mark.asyncio
async def test_without_gpu_stamps_every_signal_is_a_memory_operation(fake: FakeCuda, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arig._env, "NO_GPU_STAMPS", True)
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        assert "the GPU's time" not in dev.facts["completion"]
        img = await _image(dev, fake)
        long = Launch(img.function("sleep"), 1, 1)
        for _ in range(3):
            await asyncio.wait_for(dev.wait(await dev.submit(long)), T)
        assert _stamp_launches(fake) == 0
    assert not [d for d in fake.destroyed if d[0] == "stamp module"]


@pytest.mark.asyncio
async def test_the_pure_engine_loads_no_stamp_kernel(fake: FakeCuda) -> None:
    with arig._engine.using("pure"):
        async with await arig.open(arig.cuda.gpu(0)) as dev:
            img = await _image(dev, fake)
            await asyncio.wait_for(dev.wait(await dev.submit(Launch(img.function("sleep"), 1, 1))), T)
    assert _stamp_launches(fake) == 0
