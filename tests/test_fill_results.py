"""Defects found by trying to break the host device, each pinned by the test that found it.

Each test here failed before its fix: an unprintable failure hung every
waiter, an ``async def`` handed to a host queue was "done" without running,
a blocked fill made ``stop`` take twice its timeout and keep objects alive,
a numpy integer returned by a fill lost the device, a huge ``nvrm`` window
overflowed.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
import weakref
from typing import Any

import numpy as np
import pytest

import arig
import arig.host
from arig import nvrm


class Token:
    pass


class Unprintable(Exception):
    """A failure whose ``str()`` itself raises."""

    def __str__(self) -> str:
        raise RuntimeError("this exception cannot be printed")


def _arig_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before and t.name.startswith("arig-")]


def _ended(threads: list[threading.Thread], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return not any(t.is_alive() for t in threads)


def _noop(queue: Any, arg: Any, v: int) -> None:
    return None


# -- a failure whose str() raises ----------------------------------------------------------


def _unprintable_fill(queue: Any, arg: Any, v: int) -> None:
    raise Unprintable


def _unprintable_work(queue: Any, arg: Any, v: int) -> None:
    def work() -> None:
        raise Unprintable

    queue.enqueue(work)


@pytest.mark.asyncio
@pytest.mark.parametrize("failing", [_unprintable_fill, _unprintable_work], ids=["fill", "work"])
async def test_an_unprintable_failure_reaches_every_waiter_and_stop_ends_the_threads(failing: Any) -> None:
    before = set(threading.enumerate())
    gate = threading.Event()
    dev = await arig.open(arig.host.cpu(queues=2))
    try:
        v1 = await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0), queue=1)
        waiter = asyncio.create_task(dev.wait(v1))
        await asyncio.sleep(0.02)
        v2 = await dev.submit(failing)
        for pending in (waiter, asyncio.ensure_future(dev.wait(v2))):
            with pytest.raises(arig.DeviceLost) as info:
                await asyncio.wait_for(pending, 5.0)
            assert isinstance(info.value.cause, Unprintable)
            assert "Unprintable" in str(info.value) and "HOST" in str(info.value)
        with pytest.raises(arig.DeviceLost):
            await dev.submit(_noop)
    finally:
        gate.set()
    await asyncio.wait_for(dev.stop(), 10.0)
    assert _ended(_arig_threads(before))


@pytest.mark.asyncio
async def test_an_open_whose_make_raises_an_unprintable_failure_is_an_open_error() -> None:
    class Opener:
        name = "BROKEN"

        def make(self) -> Any:
            raise Unprintable

    before = set(threading.enumerate())
    with pytest.raises(arig.OpenError, match="BROKEN.*Unprintable") as info:
        await arig.open(Opener())
    assert isinstance(info.value.__cause__, Unprintable)
    assert _ended(_arig_threads(before))


# -- async def where a plain function is needed -----------------------------------------------


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
        await dev.run(_noop)  # the device is healthy
        assert dev.reached == 1


# -- stop with a blocked fill --------------------------------------------------------------------


@pytest.mark.asyncio
async def test_stop_with_a_blocked_fill_takes_one_timeout_and_releases_kept_objects(caplog: pytest.LogCaptureFixture) -> None:
    before = set(threading.enumerate())
    gate = threading.Event()
    kept = Token()
    ref = weakref.ref(kept)
    dev = await arig.open(arig.host.cpu(), stop_timeout=0.3)
    try:
        await dev.submit(lambda q, a, v: gate.wait(10.0) and None, keep=(kept,))
        del kept
        t0 = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="arig"):
            await dev.stop()  # warnings are errors here: stop must not warn
        elapsed = time.monotonic() - t0
        assert 0.25 < elapsed < 0.55, elapsed  # one stop_timeout (and a 50 ms grace), not two
        assert isinstance(dev.lost, arig.DeviceHang)
        gc.collect()
        assert ref() is None, "stop kept the submission's keep alive"
        records = [r for r in caplog.records if r.name == "arig"]
        assert [r.levelno for r in records] == [logging.WARNING, logging.WARNING]
        assert "did not finish within 0.3 s" in records[0].getMessage()
        assert "submit thread did not end" in records[1].getMessage()
    finally:
        gate.set()
    assert _ended(_arig_threads(before))


# -- numpy integers returned by a fill --------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("zero", [np.int32(0), np.int64(0), np.uint8(0), np.intc(0)], ids=lambda z: type(z).__name__)
async def test_a_numpy_zero_returned_by_a_fill_is_success(zero: Any) -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        v = await dev.run(lambda q, a, v: zero)
        assert dev.lost is None and dev.reached == v


@pytest.mark.asyncio
async def test_a_numpy_nonzero_code_is_a_fill_error_with_that_code() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        with pytest.raises(arig.DeviceLost):
            await dev.run(lambda q, a, v: np.int32(700))
        assert isinstance(dev.lost, arig.FillError) and dev.lost.code == 700
        assert type(dev.lost.code) is int


@pytest.mark.asyncio
@pytest.mark.parametrize("result", [np.float32(0.0), np.bool_(False), True, 0.0, "0"], ids=repr)
async def test_a_result_that_is_not_an_int_names_its_type(result: Any) -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        with pytest.raises(arig.DeviceLost):
            await dev.run(lambda q, a, v: result)
        assert isinstance(dev.lost, arig.ArigTypeError)
        assert type(result).__name__ in str(dev.lost)


# -- nvrm windows -----------------------------------------------------------------------------------


@pytest.mark.parametrize("window", [1e300, 1.7976931348623157e308, 10**400], ids=["1e300", "max", "int"])
def test_a_huge_finite_window_is_refused_by_name_before_the_driver(window: float, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvrm, "_active_bus", lambda i: pytest.fail("the GPU was asked"))
    with pytest.raises(arig.ArigValueError, match="window .* too long"):
        nvrm.usage(0, window)


@pytest.mark.asyncio
async def test_a_huge_window_is_refused_by_usage_async_too() -> None:
    with pytest.raises(arig.ArigValueError, match="window"):
        await nvrm.usage_async(0, window=1e300)


def test_an_infinite_window_still_means_every_sample() -> None:
    assert nvrm._check_window(float("inf")) == float("inf")
    assert nvrm._check_window(1e299) == 1e299
