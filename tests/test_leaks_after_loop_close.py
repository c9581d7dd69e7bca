"""A device outlives nothing it should: a task left waiting when its loop is closed does not keep
the device or its threads; a device never stopped and collected after its loop closed closes its
file descriptors; the failure kept in ``dev.lost`` keeps neither the failed fill's arg nor the
backend.  Each on every kind of device (host, CUDA over FakeCuda, NV over FakeNvrm) and engine."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import traceback
import weakref
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest
from _kinds import KINDS, installed
from _lifetimes import Token, arig_threads, ended, fds

import arig

pytestmark = pytest.mark.usefixtures("engine")


def _run_then_close(main: Callable[[], Coroutine[Any, Any, Any]], reported: list[str] | None = None) -> None:
    """Run ``main`` on a loop of its own, then close the loop as some frameworks do (tasks still
    pending, never cancelled); what the loop's exception handler gets goes to ``reported``."""
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(lambda _loop, ctx: reported.append(ctx["message"]) if reported is not None else None)
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def _blocked(gate: threading.Event) -> Callable[[Any, Any, int], None]:
    def fill(queue: Any, arg: Any, v: int) -> None:
        gate.wait(10.0)  # on the submit thread: the value stays pending until the gate opens

    return fill


async def _wait(dev: arig.Device, v: int) -> None:
    await dev.wait(v)


def _noop(queue: Any, arg: Any, v: int) -> None:
    return None


async def _flood(dev: arig.Device, v: int) -> None:
    for _ in range(4):
        await dev.submit(_noop)  # with max_pending=1 behind a blocked fill: waits for room


def _left_when_the_loop_closes(kind: str, task: Callable[[arig.Device, int], Coroutine[Any, Any, None]], max_pending: int) -> list[str]:
    """Open a device of ``kind``, hold its queue with a blocked fill, leave ``task(dev, v)`` pending,
    close the loop: the device must be collected (reported, never stopped), its threads and fds gone.
    Returns what the loop's exception handler was told."""
    before, open_fds = arig_threads(), fds()
    refs: list[weakref.ref[arig.Device]] = []
    gate = threading.Event()
    reported: list[str] = []
    try:
        with installed(kind) as opener:

            async def main() -> None:
                dev = await arig.open(opener, max_pending=max_pending)
                refs.append(weakref.ref(dev))
                v = await dev.submit(_blocked(gate))
                asyncio.get_running_loop().create_task(task(dev, v))  # referenced by what it waits on only
                await asyncio.sleep(0.05)

            _run_then_close(main, reported)
            with pytest.warns(ResourceWarning, match="never stopped"):
                gc.collect()
            assert refs[0]() is None, f"the task left in {task.__name__} kept the device"
            gate.set()
            assert ended(arig_threads() - before)
    finally:
        gate.set()
    assert fds() == open_fds
    return reported


@pytest.mark.parametrize("kind", KINDS)
def test_a_task_left_waiting_when_its_loop_closes_does_not_keep_the_device(kind: str) -> None:
    reported = _left_when_the_loop_closes(kind, _wait, max_pending=1024)
    assert "Task was destroyed but it is pending!" in reported and any("never stopped" in m for m in reported), reported


@pytest.mark.parametrize("kind", KINDS)
def test_a_task_left_waiting_for_room_when_its_loop_closes_does_not_keep_the_device(kind: str) -> None:
    _left_when_the_loop_closes(kind, _flood, max_pending=1)


@pytest.mark.parametrize("kind", KINDS)
def test_a_device_collected_after_its_loop_closed_closes_its_fds(kind: str) -> None:
    before, open_fds = arig_threads(), fds()
    with installed(kind) as opener:
        devs: list[arig.Device] = []

        async def main() -> None:
            devs.append(await arig.open(opener))
            await devs[0].run(None)

        _run_then_close(main)
        with pytest.warns(ResourceWarning, match="never stopped"):
            devs.clear()
            gc.collect()
        assert ended(arig_threads() - before)
    assert fds() == open_fds


class Boom(Exception):
    pass


def _raises(queue: Any, arg: Any, v: int) -> None:
    raise Boom(f"fill {v} failed with {type(arg).__name__}")


@pytest.fixture
def unrecorded_log() -> Iterator[None]:
    """arig's records reach no handler that keeps them (pytest's capture keeps each record's
    traceback, and with it every frame the failure passed through)."""
    logging.disable(logging.CRITICAL)  # no record is made at all: no handler anywhere can keep one
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


@pytest.mark.usefixtures("unrecorded_log")
@pytest.mark.parametrize("kind", KINDS)
def test_a_loss_kept_after_stop_keeps_neither_the_fills_arg_nor_the_backend(kind: str) -> None:
    before = arig_threads()
    refs: list[weakref.ref[Any]] = []
    kept: list[BaseException] = []
    told: list[str] = []
    with installed(kind) as opener:

        async def main() -> None:
            dev = await arig.open(opener)
            arg = Token()
            refs.extend([weakref.ref(arg), weakref.ref(dev._backend)])
            with pytest.raises(arig.DeviceLost) as waiter:
                await dev.run(_raises, arg)
            # What the waiter was told is its own (its frames hold what it passed): read, then dropped.
            told.append("".join(traceback.format_exception(waiter.value)))
            del arg, waiter
            await dev.stop()
            assert dev.lost is not None
            kept.append(dev.lost)

        _run_then_close(main)
        assert ended(arig_threads() - before)  # a stop may return just before its threads end
        gc.collect()
        assert [r() for r in refs] == [None, None], "dev.lost keeps the fill's arg or the closed backend"
    (cause,) = kept
    assert isinstance(cause, Boom) and str(cause) == "fill 1 failed with Token"
    # Still readable tracebacks: the fill that raised is named, at its line.
    for text in (told[0], "".join(traceback.format_exception(cause))):
        assert "in _raises" in text and 'raise Boom(f"fill {v} failed' in text and "Boom: fill 1 failed with Token" in text
