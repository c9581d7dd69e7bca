"""With ``ARIG_CUDA_BACKSTOP=event`` the native core's backstop for CUDA work is a blocking-sync
event recorded behind the lane's work, on which a waiter thread of the lane ("arig-cuda-wait") sits
in ``cuEventSynchronize``: no host function holds the stream, and work that ends far sooner than
predicted is told by the waiter while the native thread sleeps.  Over the fake GPU: what the core
asked for (its counters), that the waiter tells such work long before the prediction's end, that
the waiter ends with the device, and that a stop with work hung returns and leaves the waiter in
the driver until the work ends, touching nothing the stop freed.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any

import pytest

import arig
from arig.cuda import Launch
from arig.testing import FakeCuda

from _napping import napping_cuda

pytestmark = [
    pytest.mark.skipif(arig._engine.unavailable("native") is not None, reason="the native core did not load"),
    pytest.mark.asyncio,
]

T = 10.0


@pytest.fixture(autouse=True)
def _event(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arig._env, "CUDA_BACKSTOP", "event")


def _waiters() -> int:
    """This process's threads named arig-cuda-wait."""
    n = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                n += f.read().strip() == "arig-cuda-wait"
        except OSError:
            pass
    return n


async def _no_waiters(within: float = T) -> bool:
    end = time.monotonic() + within
    while _waiters() and time.monotonic() < end:
        await asyncio.sleep(0.01)
    return _waiters() == 0


async def test_long_work_is_backstopped_by_an_event_and_no_host_function() -> None:
    assert _waiters() == 0
    async with napping_cuda(0.003) as (dev, nap, comp):
        assert comp.waiter and "blocking-event backstop" in comp.description
        for _ in range(5):  # learn its length: long work
            await dev.wait(await dev.submit(nap))
        before = comp.stats()
        for _ in range(10):
            await dev.wait(await dev.submit(nap))
        after = comp.stats()
        assert after["event_waits"] - before["event_waits"] >= 10, "an event behind each long work before the sleep"
        assert after["host_functions"] == before["host_functions"] == 0
        assert _waiters() == 1, "one waiter for the one lane that had long work"
        assert dev.reached == dev.submitted and dev.lost is None
    assert await _no_waiters(), "the waiter ends with the device"


async def test_work_far_shorter_than_predicted_is_told_by_the_waiter() -> None:
    """Learned at 300 ms, the same kernel then takes 1 ms: the native thread sleeps towards the
    prediction, and only the waiter can tell the end within a fraction of it."""
    fake = FakeCuda()
    length = [0.3]
    with fake.installed(), arig._engine.using("native"):
        async with await arig.open(arig.cuda.gpu(0)) as dev:
            img = await dev.load(fake.image(nap=(lambda _: time.sleep(length[0]), [])))
            nap = Launch(img.function("nap"), 1, 1)
            comp: Any = dev._backend.completion
            for _ in range(3):
                await dev.wait(await dev.submit(nap))
            length[0] = 0.001
            before = comp.stats()
            v = await dev.submit(nap)
            await asyncio.wait_for(dev.wait(v), 0.15)  # half the prediction: not the sleep's end
            after = comp.stats()
            assert after["event_waits"] > before["event_waits"] and after["host_functions"] == 0
            assert comp.core.hwords[0].value >= v, "the waiter wrote the value it saw reached"
    assert fake.violations == []


async def test_a_stop_with_work_hung_returns_and_the_waiter_ends_when_the_work_does() -> None:
    fake = FakeCuda()
    with fake.installed(), arig._engine.using("native"):
        dev = await asyncio.wait_for(arig.open(arig.cuda.gpu(0, hang_ms=200)), T)
        img = await dev.load(fake.image(nap=(lambda _: time.sleep(0.002), [])))
        comp: Any = dev._backend.completion
        q = dev.queues[0].handle
        fake.hold(q)  # the GPU hangs
        v = await dev.submit(Launch(img.function("nap"), 1, 1))  # never seen: the spin gives up to the backstop
        with pytest.raises(arig.DeviceLost) as e:
            await asyncio.wait_for(dev.wait(v), T)
        assert isinstance(e.value.__cause__, arig.DeviceHang)
        assert comp.stats()["event_waits"] >= 1 and _waiters() == 1
        await asyncio.wait_for(dev.stop(), T)  # returns although the waiter sits in the driver
        assert _waiters() == 1, "left in the driver, detached"
        fake.release(q)
        assert await asyncio.to_thread(fake.drain, q)
        assert await _no_waiters(), "the waiter ends once the driver lets it go"
        del img
    assert fake.violations == []
    assert not [t for t in threading.enumerate() if t.name == "arig-cuda-wait"]
