"""Losing a device: failing fills, failing work, the hang watchdog, and what
every pending and later call sees afterwards."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import arig
import arig.host


class Boom(Exception):
    pass


def _noop(queue: Any, arg: Any, v: int) -> None:
    return None


def _check_lost(err: BaseException, dev: arig.Device) -> None:
    """``err`` is the DeviceLost every call of a lost device raises."""
    assert isinstance(err, arig.DeviceLost)
    assert isinstance(err, arig.ArigError)
    cause = dev.lost
    assert cause is not None
    assert err.__cause__ is cause
    assert err.cause is cause
    assert type(cause).__name__ in str(err)
    assert str(cause) in str(err)
    assert "HOST" in str(err)


# Each kind of failure, and what dev.lost must then be.
def _fails_with_code(q: Any, a: Any, v: int) -> int:
    return 7


def _fails_with_exception(q: Any, a: Any, v: int) -> None:
    raise Boom(f"fill {v} failed")


def _returns_a_str(q: Any, a: Any, v: int) -> str:
    return "x"


def _returns_a_float(q: Any, a: Any, v: int) -> float:
    return 0.0


def _work_fails(q: Any, a: Any, v: int) -> None:
    def work() -> None:
        raise Boom(f"work {v} failed")

    q.enqueue(work)


def _is_fill_error_7(cause: BaseException) -> bool:
    return isinstance(cause, arig.FillError) and cause.code == 7 and "7" in str(cause)


FAILURES: list[tuple[str, Callable[..., Any], Callable[[BaseException], bool]]] = [
    ("code", _fails_with_code, _is_fill_error_7),
    ("exception", _fails_with_exception, lambda c: isinstance(c, Boom) and "fill 2 failed" in str(c)),
    ("str", _returns_a_str, lambda c: isinstance(c, TypeError)),
    ("float", _returns_a_float, lambda c: isinstance(c, TypeError)),
    ("work", _work_fails, lambda c: isinstance(c, Boom) and "work 2 failed" in str(c)),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("kind", "failing", "expected"), FAILURES, ids=[f[0] for f in FAILURES])
async def test_failure_loses_the_device(kind: str, failing: Callable[..., Any], expected: Callable[[BaseException], bool]) -> None:
    gate = threading.Event()
    dev = await arig.open(arig.host.cpu(queues=2))
    try:
        # Value 1 is pending on queue 1 when value 2 fails on queue 0.
        v1 = await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0), queue=1)
        pending = asyncio.create_task(dev.wait(v1))
        await asyncio.sleep(0.02)
        v2 = await dev.submit(failing, queue=0)
        assert v2 == 2
        with pytest.raises(arig.DeviceLost) as info:
            await asyncio.wait_for(pending, 5.0)
        _check_lost(info.value, dev)
        assert expected(dev.lost), repr(dev.lost)
        assert dev.reached < v1
        # Every later wait, and submit at once, raise DeviceLost.
        for v in (v1, v2):
            with pytest.raises(arig.DeviceLost) as info:
                await dev.wait(v)
            _check_lost(info.value, dev)
        with pytest.raises(arig.DeviceLost) as info:
            await dev.submit(_noop)
        _check_lost(info.value, dev)
        assert dev.submitted == 2
        with pytest.raises(arig.DeviceLost):
            await dev.alloc(16)
        assert "lost" in repr(dev)
    finally:
        gate.set()
        await asyncio.wait_for(dev.stop(), 10.0)
    # Stopping changes nothing: the device stays lost, the cause stays the same.
    assert expected(dev.lost)
    with pytest.raises(arig.DeviceLost):
        await dev.wait(v1)


@pytest.mark.asyncio
async def test_the_first_failure_is_the_cause_and_later_fills_are_not_called() -> None:
    called: list[int] = []

    def record(q: Any, a: Any, v: int) -> None:
        called.append(v)

    async with await arig.open(arig.host.cpu()) as dev:
        await dev.submit(record)
        v_fail = await dev.submit(_fails_with_exception)
        later = [await dev.submit(record) for _ in range(3)]
        await dev.submit(_fails_with_code)
        with pytest.raises(arig.DeviceLost) as info:
            await dev.wait(later[-1])
        assert isinstance(dev.lost, Boom)
        assert f"fill {v_fail} failed" in str(info.value)
        assert called == [1]


@pytest.mark.asyncio
async def test_work_after_failed_work_on_its_queue_does_not_run() -> None:
    ran: list[int] = []
    async with await arig.open(arig.host.cpu()) as dev:
        await dev.submit(lambda q, a, v: q.enqueue(ran.append, v))
        await dev.submit(_work_fails)
        v = await dev.submit(lambda q, a, v: q.enqueue(ran.append, v))
        with pytest.raises(arig.DeviceLost):
            await dev.wait(v)
        await asyncio.sleep(0.05)
        assert ran == [1]
        assert isinstance(dev.lost, Boom)


@pytest.mark.asyncio
async def test_loss_wakes_a_submit_waiting_for_room() -> None:
    gate = threading.Event()

    def blocks_then_fails(q: Any, a: Any, v: int) -> int:
        gate.wait(5.0)
        return 3

    async with await arig.open(arig.host.cpu(), max_pending=1) as dev:
        try:
            await dev.submit(blocks_then_fails)
            blocked = asyncio.create_task(dev.submit(_noop))
            await asyncio.sleep(0.05)
            assert not blocked.done()
        finally:
            gate.set()
        with pytest.raises(arig.DeviceLost) as info:
            await asyncio.wait_for(blocked, 5.0)
        _check_lost(info.value, dev)
        assert isinstance(dev.lost, arig.FillError) and dev.lost.code == 3
        assert dev.submitted == 1


@pytest.mark.asyncio
async def test_a_submit_whose_hand_off_fails_loses_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a value is assigned its work must be queued: a hand-off that raises leaves a value that
    can never be reached, so the device is lost, and the earlier waiter hears it instead of hanging."""
    gate = threading.Event()
    async with await arig.open(arig.host.cpu()) as dev:
        try:
            earlier = asyncio.ensure_future(dev.wait(await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0))))

            def refuse(qi: int, item: Any, v: int) -> None:
                raise Boom("the hand-off failed")

            monkeypatch.setattr(dev, "_put", refuse)
            with pytest.raises(Boom, match="the hand-off failed"):
                await dev.submit(_noop)
            assert isinstance(dev.lost, Boom) and dev.submitted == 2
            with pytest.raises(arig.DeviceLost) as info:
                await asyncio.wait_for(earlier, 5.0)
            _check_lost(info.value, dev)
        finally:
            gate.set()


@pytest.mark.asyncio
async def test_a_healthy_device_is_not_lost() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        v = await dev.submit(lambda q, a, v: q.enqueue(lambda: None))
        await dev.wait(v)
        assert dev.lost is None


@pytest.mark.asyncio
async def test_upload_after_loss_raises_device_lost() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        buf = await dev.alloc(64)
        with pytest.raises(arig.DeviceLost):
            await dev.run(_fails_with_code)
        with pytest.raises(arig.DeviceLost):
            await dev.upload(buf, np.zeros(4, np.float32))


# -- the hang watchdog --------------------------------------------------------------


@pytest.mark.asyncio
async def test_hang_loses_the_device_with_device_hang() -> None:
    finished = threading.Event()

    def stuck(q: Any, a: Any, v: int) -> None:
        q.enqueue(lambda: (time.sleep(1.0), finished.set()))

    async with await arig.open(arig.host.cpu(hang_ms=200)) as dev:
        v = await dev.submit(stuck)
        waiters = [asyncio.create_task(dev.wait(v)) for _ in range(2)]
        for w in waiters:
            with pytest.raises(arig.DeviceLost) as info:
                await asyncio.wait_for(w, 5.0)
            _check_lost(info.value, dev)
        assert isinstance(dev.lost, arig.DeviceHang)
        assert isinstance(dev.lost, arig.ArigError)
        assert "200" in str(dev.lost)
        assert not finished.is_set(), "the hang was only noticed after the work ended"
        with pytest.raises(arig.DeviceLost):
            await dev.submit(_noop)
        # The stuck work finishing later does not make the lost value reached.
        assert await asyncio.to_thread(finished.wait, 5.0)
        await asyncio.sleep(0.1)
        with pytest.raises(arig.DeviceLost):
            await dev.wait(v)
        assert dev.reached < v
    assert isinstance(dev.lost, arig.DeviceHang)


@pytest.mark.asyncio
async def test_steady_progress_is_no_hang() -> None:
    # 8 x 50 ms = 400 ms of work under hang_ms=200: progress every 50 ms.
    async with await arig.open(arig.host.cpu(hang_ms=200)) as dev:
        for _ in range(8):
            v = await dev.submit(lambda q, a, v: q.enqueue(time.sleep, 0.05))
            await dev.wait(v)
        assert dev.lost is None
        assert dev.reached == 8


@pytest.mark.asyncio
async def test_overlapping_work_with_progress_is_no_hang() -> None:
    # Work is submitted faster than it runs, so some is always pending, but
    # each piece is reported when done: no gap without progress reaches 200 ms.
    async with await arig.open(arig.host.cpu(hang_ms=200)) as dev:
        for _ in range(8):
            await dev.submit(lambda q, a, v: q.enqueue(time.sleep, 0.05))
            await asyncio.sleep(0.03)
        await dev.wait(8)
        assert dev.lost is None


@pytest.mark.asyncio
async def test_idle_device_is_no_hang() -> None:
    async with await arig.open(arig.host.cpu(hang_ms=100)) as dev:
        await dev.run(_noop)
        await asyncio.sleep(0.4)
        assert dev.lost is None
        await dev.run(lambda q, a, v: q.enqueue(time.sleep, 0.02))
        await asyncio.sleep(0.3)
        assert dev.lost is None
        assert dev.reached == 2


@pytest.mark.asyncio
async def test_calls_on_a_lost_device_keep_nothing_of_their_callers_alive() -> None:
    # Every submit and wait of a lost device raises DeviceLost; none of those
    # exceptions may keep the calling frames (and their locals) alive.
    class Token:
        pass

    async def caller(dev: arig.Device, refs: list[weakref.ref[Token]]) -> None:
        local = Token()
        refs.append(weakref.ref(local))
        try:
            await dev.submit(_noop, keep=(local,))
        except arig.DeviceLost:
            pass
        try:
            await dev.wait(2)
        except arig.DeviceLost:
            pass

    async with await arig.open(arig.host.cpu()) as dev:
        with pytest.raises(arig.DeviceLost):
            await dev.run(_fails_with_code)
        refs: list[weakref.ref[Token]] = []
        for _ in range(5):
            await caller(dev, refs)
        gc.collect()
        assert [r for r in refs if r() is not None] == []
        assert isinstance(dev.lost, arig.FillError)
