"""Every kind of device behaves the same under trio as under asyncio.

Each test runs under anyio's two backends (asyncio, trio), on each engine
(conftest's ``engine``) and, where the behaviour is the device's own, on each
kind of device (``_kinds``: host, CUDA over FakeCuda, NV over FakeNvrm).  The
tests speak anyio (task groups, ``move_on_after``), which is trio's cancel
scopes under trio: values stay gapless under cancellation, no cancelled
waiter stays pending, a loss reaches every waiter, back-pressure holds,
stop lets waiters finish, the hang watchdog fires.  The tests at the end run
``trio.run`` themselves: a device is bound to the run it was opened in, and
the run's end is its loop's close.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import numpy as np
import pytest
import trio

import arig
import arig.host
from arig._worker import run_sync
from arig.testing import faults

from _kinds import KINDS, installed
from test_device_open import _SlowHostOpener, _threads_named
from test_wrong_loop import CALLS, _calls, _state

pytestmark = pytest.mark.anyio

#: Seconds any single wait of these tests may take.
T = 10.0


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest, engine: str) -> Any:
    """The opener of each kind of device (its fake driver installed), on conftest's engine."""
    with installed(request.param) as opener:
        yield opener


def _noop(queue: Any, arg: Any, v: int) -> None:
    return None


class _Gate:
    """A fill that blocks the submit thread until ``open()``: work stays pending while it is shut."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.entered = threading.Event()

    def __call__(self, queue: Any, arg: Any, v: int) -> None:
        self.entered.set()
        self.event.wait(T)

    def open(self) -> None:
        self.event.set()


async def _until(pred: Any, timeout: float = T) -> None:
    with anyio.fail_after(timeout):
        while not pred():
            await anyio.sleep(0.001)


async def _hears_the_loss(dev: arig.Device, value: int, heard: list[BaseException]) -> None:
    """Wait for ``value``; the DeviceLost it raises goes to ``heard``."""
    try:
        await dev.wait(value)
    except arig.DeviceLost as exc:
        heard.append(exc)


def _no_waiter_left(dev: arig.Device) -> bool:
    """No task waits in the timeline: every waiter was resolved, or was cancelled and is skipped."""
    return all(fut.done() for _, _, fut in dev._tl._heap)


# -- open ------------------------------------------------------------------------------------------


async def test_an_open_cancelled_while_the_driver_opens_releases_the_device(anyio_backend: str, engine: str) -> None:
    opener = _SlowHostOpener("SLOWOPEN", delay=0.2)
    with anyio.move_on_after(0.05) as scope:
        await arig.open(opener)
    assert scope.cancelled_caught and _threads_named("arig-submit-SLOWOPEN"), "make() still runs on its thread"
    await _until(lambda: not _threads_named("arig-submit-SLOWOPEN"))
    assert opener.made.is_set() and opener.closed.is_set(), "the thread closed what make() made"


# -- submit and wait ----------------------------------------------------------------------------


async def test_values_are_gapless_and_waits_return_once_reached(anyio_backend: str, kind: Any) -> None:
    async with await arig.open(kind) as dev:
        seen: list[int] = []

        async def worker() -> None:
            for _ in range(20):
                v = await dev.submit(_noop)
                seen.append(v)
                await dev.wait(v)
                assert dev.reached >= v

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(worker)
        assert sorted(seen) == list(range(1, 81))
        assert await dev.run(_noop) == 81
        assert dev.reached == 81 and _no_waiter_left(dev)


async def test_memory_round_trip(anyio_backend: str, kind: Any) -> None:
    async with await arig.open(kind) as dev:
        buf = await dev.alloc(256)
        data = np.arange(64, dtype=np.uint32)
        await dev.upload(buf, data)
        out = np.zeros_like(data)
        await dev.download(buf, out)
        assert (out == data).all()
        buf.close()


# -- cancellation ------------------------------------------------------------------------------------


async def test_a_cancelled_wait_leaves_no_waiter_and_values_stay_gapless(anyio_backend: str, kind: Any) -> None:
    gate = _Gate()
    async with await arig.open(kind) as dev:
        v = await dev.submit(gate)
        with anyio.move_on_after(0.02) as scope:
            await dev.wait(v)
        assert scope.cancelled_caught and dev.reached < v
        with anyio.move_on_after(0.02):
            await dev.run(_noop)  # submitted, then its wait cancelled: the value exists
        assert dev.submitted == v + 1
        gate.open()
        await dev.wait(dev.submitted)
        assert await dev.run(_noop) == v + 2, "no value was skipped or handed out twice"
        assert _no_waiter_left(dev) and not dev._tl.waiting


async def test_a_submit_cancelled_while_waiting_for_room_assigns_no_value(anyio_backend: str, engine: str) -> None:
    gate = _Gate()
    async with await arig.open(arig.host.cpu(), max_pending=2) as dev:
        await dev.submit(gate)
        while not gate.entered.is_set():
            await anyio.sleep(0.001)
        for _ in range(4):  # until there is no room: that submit waits, then is cancelled
            before = dev.submitted
            with anyio.move_on_after(0.05) as scope:
                await dev.submit(_noop)
            if scope.cancelled_caught:
                break
        assert scope.cancelled_caught and dev.submitted == before, "a cancelled submit has no value"
        gate.open()
        assert await dev.run(_noop) == before + 1
        assert dev.reached == before + 1


async def test_back_pressure_lets_every_waiting_submit_through_in_order(anyio_backend: str, engine: str) -> None:
    gate = _Gate()
    async with await arig.open(arig.host.cpu(), max_pending=2) as dev:
        await dev.submit(gate)
        values: list[int] = []

        async def submitter() -> None:
            values.append(await dev.submit(_noop))

        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(submitter)
            await anyio.sleep(0.05)
            assert len(values) < 8, "submits past max_pending wait for room"
            gate.open()
        assert sorted(values) == list(range(2, 10))
        await dev.wait(dev.submitted)


# -- loss -------------------------------------------------------------------------------------------


async def test_a_loss_reaches_every_waiter(anyio_backend: str, kind: Any) -> None:
    gate = _Gate()
    dev = await arig.open(kind)
    v = await dev.submit(gate)
    failed = await dev.submit(_raises)
    later = await dev.submit(_noop)
    heard: list[BaseException] = []

    with anyio.fail_after(T):
        async with anyio.create_task_group() as tg:
            for value in (failed, later, later, failed):
                tg.start_soon(_hears_the_loss, dev, value, heard)
            await anyio.sleep(0.02)
            gate.open()
    assert len(heard) == 4 and all("the fill failed" in str(e) for e in heard)
    assert dev.reached <= v and dev.loss_delivered and _no_waiter_left(dev)  # a lost value is never reached
    with pytest.raises(arig.DeviceLost):
        await dev.submit(_noop)
    await dev.stop()


def _raises(queue: Any, arg: Any, v: int) -> None:
    raise RuntimeError("the fill failed")


async def test_faults_lose_stall_and_fail_the_next_fill(anyio_backend: str, engine: str) -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        t0 = time.monotonic()
        v = await faults.stall(dev, 0.05)
        await dev.wait(v)
        assert time.monotonic() - t0 >= 0.04
    dev = await arig.open(arig.host.cpu())
    faults.fail_next_fill(dev, OSError("bad launch"))
    with pytest.raises(arig.DeviceLost, match="bad launch"):
        await dev.run(_noop)
    await dev.stop()
    dev = await arig.open(arig.host.cpu())
    lost = await faults.lose(dev, RuntimeError("ECC error"))
    assert isinstance(dev.lost, RuntimeError) and isinstance(lost, arig.DeviceLost)
    await dev.stop()


async def test_the_hang_watchdog_loses_a_device_that_makes_no_progress(anyio_backend: str, engine: str) -> None:
    gate = _Gate()
    dev = await arig.open(arig.host.cpu(hang_ms=100))
    v = await dev.submit(gate)
    t0 = time.monotonic()
    with anyio.fail_after(T), pytest.raises(arig.DeviceLost, match="no progress"):
        await dev.wait(v)
    assert isinstance(dev.lost, arig.DeviceHang) and time.monotonic() - t0 >= 0.09
    gate.open()
    await dev.stop()


# -- stop ---------------------------------------------------------------------------------------------


async def test_stop_lets_pending_waiters_finish(anyio_backend: str, kind: Any) -> None:
    gate = _Gate()
    dev = await arig.open(kind)
    v = await dev.submit(gate)
    done: list[int] = []

    async def waiter() -> None:
        await dev.wait(v)
        done.append(v)

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        tg.start_soon(waiter)
        await anyio.sleep(0.02)

        async def stop() -> None:
            await dev.stop()

        tg.start_soon(stop)
        tg.start_soon(stop)  # concurrent stops wait for the one stop
        await anyio.sleep(0.02)
        gate.open()
    assert done == [v, v] and dev.stopped and dev.lost is None
    with pytest.raises(arig.DeviceStopped):
        await dev.submit(_noop)


async def test_a_stop_past_its_timeout_loses_the_device_and_tells_the_waiters(anyio_backend: str, engine: str) -> None:
    gate = _Gate()
    dev = await arig.open(arig.host.cpu(), stop_timeout=0.1)
    v = await dev.submit(gate)
    heard: list[BaseException] = []

    with anyio.fail_after(T):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_hears_the_loss, dev, v, heard)
            await anyio.sleep(0.01)
            await dev.stop()
    gate.open()
    assert len(heard) == 1 and dev.stopped and isinstance(dev.lost, arig.DeviceHang)


async def test_a_cancelled_stop_still_stops(anyio_backend: str, engine: str) -> None:
    gate = _Gate()
    dev = await arig.open(arig.host.cpu())
    await dev.submit(gate)
    with anyio.move_on_after(0.02) as scope:
        await dev.stop()
    assert scope.cancelled_caught and dev.stopped
    gate.open()
    with anyio.fail_after(T):
        await dev.stop()  # the same stop, which went on without its cancelled caller
    assert dev.lost is None and dev.reached == dev.submitted


# -- one loop, one device ------------------------------------------------------------------------------


def test_a_device_belongs_to_the_trio_run_it_was_opened_in(engine: str) -> None:
    async def opened() -> arig.Device:
        dev = await arig.open(arig.host.cpu())
        await dev.run(_noop)
        return dev

    async def used(dev: arig.Device) -> None:
        with pytest.raises(arig.WrongLoopError, match="another event loop"):
            await dev.submit(_noop)
        with pytest.raises(arig.WrongLoopError):
            await dev.wait(1)
        await dev.stop()  # its run is over: released from here

    dev = trio.run(opened)
    assert dev._port.closed, "the run's end closed the device's port"
    trio.run(used, dev)
    anyio.run(opened_then_used_elsewhere, engine)


@pytest.mark.parametrize("call", CALLS)
async def test_a_device_used_from_the_other_library_in_another_thread_is_refused_before_any_change(anyio_backend: str, call: str) -> None:
    """Opened under one library (the test's backend), used from a run of the other in another thread."""
    other: Callable[[Any], Any] = (lambda fn: trio.run(fn)) if anyio_backend == "asyncio" else (lambda fn: asyncio.run(fn()))
    async with await arig.open(arig.host.cpu()) as dev:
        await dev.run(_noop)
        before = _state(dev)
        seen: list[BaseException] = []

        def elsewhere() -> None:
            try:
                other(_calls(dev)[call])
            except BaseException as exc:  # noqa: BLE001 - examined below
                seen.append(exc)

        await run_sync(elsewhere)  # anyio's to_thread, or trio's own (the same in every trio release)
        (err,) = seen
        assert isinstance(err, arig.WrongLoopError) and "HOST" in str(err) and "another event loop" in str(err), repr(err)
        assert _state(dev) == before
        await dev.run(_noop)  # still fine where it was opened


async def opened_then_used_elsewhere(engine: str) -> None:
    """A device opened under asyncio refuses a trio run, and one opened under trio refuses asyncio."""
    dev = await arig.open(arig.host.cpu())
    result: list[BaseException] = []

    async def use() -> None:
        try:
            await dev.submit(_noop)
        except arig.WrongLoopError as exc:
            result.append(exc)

    await anyio.to_thread.run_sync(trio.run, use)
    assert len(result) == 1
    await dev.stop()


def test_the_end_of_a_trio_run_closes_the_port_and_calls_its_close_hooks(engine: str) -> None:
    fired: list[str] = []
    hooks: list[Any] = []

    async def main() -> arig.Device:
        dev = await arig.open(arig.host.cpu())
        port = dev._port
        port.on_close(lambda: fired.append("cancelled")).cancel()  # never called
        port.on_close(lambda: fired.append("dropped"))  # its handle is not kept: never called
        hooks.append(port.on_close(lambda: fired.append("kept")))
        await dev.run(_noop)
        assert not port.closed
        return dev

    dev = trio.run(main)
    assert fired == ["kept"] and dev._port.closed and not dev.stopped

    async def stop() -> None:
        await dev.stop()  # from another run: the device's threads and driver are released

    trio.run(stop)
    assert dev.stopped


def test_trio_cancel_scopes_around_submit_and_wait_keep_values_gapless(engine: str) -> None:
    """trio's own ``move_on_after`` and a cancelled nursery, many waiters of one value:
    the cancelled ones leave nothing pending, the others are resolved, no value is lost."""

    async def main() -> None:
        gate = _Gate()
        async with await arig.open(arig.host.cpu(), max_pending=4) as dev:
            v = await dev.submit(gate)
            resolved: list[int] = []

            async def waiter(value: int) -> None:
                await dev.wait(value)
                resolved.append(value)

            async with trio.open_nursery() as cancelled:
                for _ in range(5):
                    cancelled.start_soon(waiter, v)
                await trio.sleep(0.01)
                cancelled.cancel_scope.cancel()
            submitted: list[int] = []
            for _ in range(10):
                with trio.move_on_after(0.01):
                    submitted.append(await dev.submit(_noop))
            async with trio.open_nursery() as kept:
                for value in (v, *submitted):
                    kept.start_soon(waiter, value)
                await trio.sleep(0.01)
                assert resolved == []
                gate.open()
            assert sorted(resolved) == [v, *submitted] and submitted == list(range(v + 1, v + 1 + len(submitted)))
            assert _no_waiter_left(dev) and not dev._tl.waiting
            assert await dev.run(_noop) == dev.submitted == v + len(submitted) + 1

    trio.run(main)
