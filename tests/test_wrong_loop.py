"""A device belongs to the event loop that opened it: used from another loop, a thread with
no loop or after its loop closed it raises ``WrongLoopError`` before changing any state (but
for ``stop`` once its loop is closed, which releases it); a loop that moves to another thread
keeps its device."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

import numpy as np
import pytest
from _lifetimes import Token, arig_threads, ended, noop, run

import arig
import arig.host


def _calls(dev: arig.Device) -> dict[str, Callable[[], Coroutine[Any, Any, Any]]]:
    return {
        "submit": lambda: dev.submit(noop),
        "run": lambda: dev.run(noop),
        "wait": lambda: dev.wait(1),
        "stop": dev.stop,
        "alloc": lambda: dev.alloc(16),
        "upload": lambda: dev.upload(None, np.zeros(4, np.uint8)),  # type: ignore[arg-type]
        "download": lambda: dev.download(None, np.zeros(4, np.uint8)),  # type: ignore[arg-type]
        "load": lambda: dev.load(b"\0"),
    }


CALLS = ["submit", "run", "wait", "stop", "alloc", "upload", "download", "load"]


def _state(dev: arig.Device) -> tuple[Any, ...]:
    return (dev.submitted, dev.reached, dev.stopped, dev.lost, dev._stop_task)


@pytest.mark.asyncio
@pytest.mark.parametrize("call", CALLS)
async def test_a_device_used_from_another_loop_in_another_thread_is_refused_before_any_change(call: str) -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        await dev.run(noop)
        before = _state(dev)
        seen: list[BaseException] = []

        def elsewhere() -> None:
            try:
                asyncio.run(_calls(dev)[call]())
            except BaseException as exc:  # noqa: BLE001 - examined below
                seen.append(exc)

        thread = threading.Thread(target=elsewhere)
        thread.start()
        await asyncio.to_thread(thread.join, 10)
        (err,) = seen
        assert isinstance(err, arig.WrongLoopError) and isinstance(err, RuntimeError), repr(err)
        assert "HOST" in str(err) and "another event loop" in str(err)
        assert _state(dev) == before
        await dev.run(noop)  # still fine on its own loop


@pytest.mark.asyncio
async def test_a_device_used_from_a_thread_without_a_loop_is_refused() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        seen: list[BaseException] = []

        def elsewhere() -> None:
            coro = dev.submit(noop)
            try:
                coro.send(None)
            except BaseException as exc:  # noqa: BLE001 - examined below
                seen.append(exc)
            finally:
                coro.close()

        thread = threading.Thread(target=elsewhere)
        thread.start()
        await asyncio.to_thread(thread.join, 10)
        (err,) = seen
        assert isinstance(err, arig.WrongLoopError)
        assert "no running event loop" in str(err)
        assert dev.submitted == 0


def test_a_device_used_after_its_loop_closed_is_refused_and_released_when_collected() -> None:
    before = arig_threads()
    kept = [Token()]
    ref = weakref.ref(kept[0])

    async def first() -> arig.Device:
        dev = await arig.open(arig.host.cpu())
        await dev.run(noop, keep=kept.pop())
        return dev

    dev = run(first)
    for call in CALLS:
        if call == "stop":
            continue  # a stop on another loop releases such a device (test_shutdown_reporting)
        with pytest.raises(arig.WrongLoopError, match="closed"):
            asyncio.run(_calls(dev)[call]())
    assert dev.submitted == 1 and not dev.stopped
    with pytest.warns(ResourceWarning, match="never stopped"):
        del dev
        gc.collect()
    assert ended(arig_threads() - before)
    gc.collect()
    assert ref() is None


def test_a_loop_that_moves_to_another_thread_keeps_its_device() -> None:
    """The device belongs to the loop, not to a thread: a loop run from another thread later still uses it."""
    loop = asyncio.new_event_loop()
    try:
        dev = loop.run_until_complete(arig.open(arig.host.cpu()))
        result: list[int] = []
        thread = threading.Thread(target=lambda: result.append(loop.run_until_complete(dev.run(noop))))
        thread.start()
        thread.join(10)
        assert result == [1]
        loop.run_until_complete(dev.stop())
    finally:
        loop.close()
