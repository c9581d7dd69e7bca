"""Fault injection (``arig.testing.faults``) on the host device, over FakeCuda, and on a real GPU
(the ``gpu`` tests, skipped without one)."""

from __future__ import annotations

import asyncio
import os
import struct
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import numpy as np
import pytest
import pytest_asyncio

import arig
import arig._env
import arig.cuda
from arig.testing import ArmedFault, FakeCuda, FakeNvrm, fail_next_fill, faults, instruments, lose, stall

T = 10.0


def _noop(queue: Any, arg: Any, v: int) -> None:
    return None


def _host_record(queue: Any, out: list[float], v: int) -> None:
    queue.enqueue(lambda: out.append(time.perf_counter()))


@pytest.fixture
def fake() -> Iterator[FakeCuda]:
    with FakeCuda().installed() as f:
        yield f


@pytest_asyncio.fixture(params=["host", "fake"])
async def dev(request: pytest.FixtureRequest) -> AsyncIterator[arig.Device]:
    """The host device (two queues), and GPU 0 of a FakeCuda through the real CUDA backend."""
    if request.param == "host":
        async with await arig.open(arig.host.cpu(queues=2)) as d:
            yield d
    else:
        with FakeCuda().installed():
            async with await arig.open(arig.cuda.gpu(0, queues=2)) as d:
                yield d


# -- lose ------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_lose_with_the_given_error(dev: arig.Device) -> None:
    before = await dev.run(_noop)
    err = RuntimeError("uncorrectable ECC error")
    lost = await asyncio.wait_for(lose(dev, err), T)
    assert isinstance(lost, arig.DeviceLost) and lost.cause is err
    assert dev.lost is err and dev.reached >= before
    with pytest.raises(arig.DeviceLost) as later:
        await dev.submit(_noop)
    assert later.value.cause is err


@pytest.mark.asyncio
async def test_lose_refuses_what_is_not_an_exception(dev: arig.Device) -> None:
    with pytest.raises(TypeError, match="error must be an exception instance"):
        await lose(dev, "ECC")  # type: ignore[arg-type]
    assert dev.lost is None


# -- stall -----------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_stall_holds_its_queue_only(dev: arig.Device) -> None:
    t0 = time.perf_counter()
    v = await stall(dev, 0.3)
    after = await dev.submit(_noop)  # queue 0: behind the stall
    if dev.arch == "host":
        ran: list[float] = []
        other = await dev.submit(_host_record, ran, queue=1)
    else:
        other = await dev.submit(_noop, queue=1)
    await asyncio.wait_for(dev.wait(after), T)
    reached_v, reached_after = dev.reached_at(v), dev.reached_at(after)
    assert reached_v is not None and reached_after is not None
    assert reached_v - t0 >= 0.29 and reached_after >= reached_v
    await dev.wait(other)
    if dev.arch == "host":
        assert ran[0] - t0 < 0.25  # queue 1 ran its work while queue 0 stalled


@pytest.mark.asyncio
async def test_stall_refuses_a_bad_time(dev: arig.Device) -> None:
    for bad in (-1, float("nan"), True, "1"):
        with pytest.raises(ValueError, match="seconds must be a number"):
            await stall(dev, bad)  # type: ignore[arg-type]
    assert dev.submitted == 0


@pytest.mark.asyncio
async def test_stall_over_fake_cuda_is_a_host_function(fake: FakeCuda) -> None:
    async with await arig.open(arig.cuda.gpu(0)) as d:
        n = len(fake.calls("cuLaunchHostFunc"))
        t0 = time.perf_counter()
        await d.wait(await stall(d, 0.2))
        assert time.perf_counter() - t0 >= 0.19
        assert len(fake.calls("cuLaunchHostFunc")) > n
        assert faults._stalls == {}  # the host function took its duration


@pytest.mark.asyncio
async def test_stall_with_an_image_spins_the_spin_kernel(fake: FakeCuda) -> None:
    asked: list[int] = []

    def spin(args: bytes) -> None:  # the fake GPU's spin(uint64_t ns)
        (ns,) = struct.unpack("<Q", args)
        asked.append(ns)
        time.sleep(ns / 1e9)

    async with await arig.open(arig.cuda.gpu(0)) as d:
        image = await d.load(fake.image(spin=(spin, (8,))))
        t0 = time.perf_counter()
        await d.wait(await stall(d, 0.15, image=image))
        assert asked == [150_000_000] and time.perf_counter() - t0 >= 0.14
        image.unload()


@pytest.mark.asyncio
@pytest.mark.skipif(arig._engine.unavailable("native") is not None, reason="the NV device runs on the native core only")
async def test_stall_on_an_nv_device_spins_the_shipped_spin_kernel() -> None:
    nv = FakeNvrm()
    asked: list[int] = []

    def spin(params: bytes, grid: tuple[int, int, int], block: tuple[int, int, int]) -> None:
        (ns,) = struct.unpack("<Q", params[:8])
        asked.append(ns)
        time.sleep(ns / 1e9)

    nv.kernel("spin", spin)
    with nv.installed(), arig._engine.using("native"):
        async with await arig.open(arig.nvrm.gpu(0)) as d:
            t0 = time.perf_counter()
            v = await stall(d, 0.05)
            after = await d.submit(None)  # behind the stall on queue 0
            await asyncio.wait_for(d.wait(after), T)
            assert d.reached >= v and asked == [50_000_000] and time.perf_counter() - t0 >= 0.045
    assert nv.violations == []


# -- fail the next fill ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_fail_next_fill(dev: arig.Device) -> None:
    called = threading.Event()

    def fill(queue: Any, arg: Any, v: int) -> None:
        called.set()

    err = OSError("launch failed")
    armed = fail_next_fill(dev, err)
    assert isinstance(armed, ArmedFault) and not armed.fired
    v = await dev.submit(fill)
    assert armed.fired and armed.value == v and armed not in instruments(dev)  # unhooked once fired
    assert "submit" not in vars(dev)  # the device itself is never rewritten
    with pytest.raises(arig.DeviceLost) as lost:
        await asyncio.wait_for(dev.wait(v), T)
    assert lost.value.cause is err and dev.lost is err and not called.is_set()


@pytest.mark.asyncio
async def test_fail_next_fill_reaches_uploads(dev: arig.Device) -> None:
    buf = await dev.alloc(64)
    try:
        fail_next_fill(dev, MemoryError("copy engine"))
        with pytest.raises(arig.DeviceLost, match="copy engine"):
            await asyncio.wait_for(dev.upload(buf, np.zeros(16, np.float32)), T)
    finally:
        buf.close()


@pytest.mark.asyncio
async def test_fail_next_fill_on_one_queue(dev: arig.Device) -> None:
    armed = fail_next_fill(dev, ValueError("queue 1 only"), queue=1)
    await asyncio.wait_for(dev.run(_noop, queue=0), T)
    assert not armed.fired and dev.lost is None
    with pytest.raises(arig.DeviceLost, match="queue 1 only"):
        await asyncio.wait_for(dev.run(_noop, queue=dev.queues[1]), T)
    assert armed.fired


@pytest.mark.asyncio
async def test_disarm(dev: arig.Device) -> None:
    first = fail_next_fill(dev, ValueError("first"))
    second = fail_next_fill(dev, ValueError("second"))
    first.disarm()
    assert instruments(dev) == (second,)
    with pytest.raises(arig.DeviceLost, match="second"):
        await asyncio.wait_for(dev.run(_noop), T)
    assert second.fired and first.value is None and instruments(dev) == ()
    assert "disarmed" in repr(first) and "fired at value 1" in repr(second)


@pytest.mark.asyncio
async def test_a_disarmed_fault_never_fires(dev: arig.Device) -> None:
    with fail_next_fill(dev, ValueError("never")) as armed:
        pass
    assert instruments(dev) == ()
    await asyncio.wait_for(dev.run(_noop), T)
    assert dev.lost is None and armed.value is None


# -- on a real GPU (skipped without one) ------------------------------------------------------------


@pytest.mark.arig_gpu
@pytest.mark.asyncio
async def test_faults_on_a_gpu() -> None:
    async with await arig.open(arig.cuda.gpu(0, queues=2)) as d:
        image = await d.load(arig.cuda.shipped_image())
        for how in ({"image": image}, {}):  # the spin kernel, then a host function
            t0 = time.perf_counter()
            v = await stall(d, 0.2, **how)  # type: ignore[arg-type]
            other = await d.submit(_noop, queue=1)
            await asyncio.wait_for(d.wait(v), T)
            at = d.reached_at(v)
            assert at is not None and at - t0 >= 0.19, how
            await d.wait(other)
        image.unload()
        armed = fail_next_fill(d, OSError("injected"))
        v = await d.submit(_noop)
        assert armed.value == v
        with pytest.raises(arig.DeviceLost, match="injected"):
            await asyncio.wait_for(d.wait(v), T)
    async with await arig.open(arig.cuda.gpu(0)) as d:  # a failing fill is no sticky fault: the GPU opens again
        err = RuntimeError("lost on purpose")
        assert (await lose(d, err)).cause is err


@pytest.mark.arig_gpu
@pytest.mark.asyncio
@pytest.mark.skipif(not os.path.exists("/dev/nvidiactl") and not arig._env.GPU_REQUIRED, reason="the NVIDIA kernel driver is not loaded")
@pytest.mark.skipif(arig._engine.unavailable("native") is not None, reason="the NV device runs on the native core only")
async def test_a_stall_on_an_nv_gpu() -> None:
    async with await arig.open(arig.nvrm.gpu(0)) as d:
        t0 = time.perf_counter()
        v = await stall(d, 0.2)
        after = await d.submit(None)
        await asyncio.wait_for(d.wait(after), T)
        at = d.reached_at(v)
        assert at is not None and at - t0 >= 0.19
