"""An ``async def`` where a plain function is needed: enqueued as work, or returned by work, it
loses the device saying "coroutine" without running or warning; as a fill it is refused at
submit before a value is assigned."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
from _lifetimes import noop

import arig
import arig.host


@pytest.mark.asyncio
async def test_enqueueing_an_async_function_loses_the_device_saying_why() -> None:
    ran: list[int] = []

    async def work() -> None:
        ran.append(1)

    async with await arig.open(arig.host.cpu()) as dev:
        v = await dev.submit(lambda q, a, v: q.enqueue(work))
        with pytest.raises(arig.DeviceLost):
            await asyncio.wait_for(dev.wait(v), 5.0)
        assert isinstance(dev.lost, arig.ArigTypeError)
        assert "coroutine" in str(dev.lost) and "work" in str(dev.lost)
        assert dev.reached < v
    assert ran == []


@pytest.mark.asyncio
async def test_work_that_returns_a_coroutine_loses_the_device_and_warns_of_nothing() -> None:
    async def work() -> None:
        pass

    async with await arig.open(arig.host.cpu()) as dev:
        v = await dev.submit(lambda q, a, v: q.enqueue(lambda: work()))
        with pytest.raises(arig.DeviceLost):
            await asyncio.wait_for(dev.wait(v), 5.0)
        assert isinstance(dev.lost, arig.ArigTypeError)
        assert "coroutine" in str(dev.lost)
    gc.collect()  # the coroutine was closed: no "never awaited" RuntimeWarning (an error here)


@pytest.mark.asyncio
async def test_an_async_fill_is_refused_at_submit_before_a_value() -> None:
    async def fill(queue: Any, arg: Any, v: int) -> None:
        pass

    async with await arig.open(arig.host.cpu()) as dev:
        with pytest.raises(arig.ArigTypeError, match="coroutine"):
            await dev.submit(fill)
        assert dev.submitted == 0
        assert dev.lost is None
        await dev.run(noop)  # the device is healthy
        assert dev.reached == 1
