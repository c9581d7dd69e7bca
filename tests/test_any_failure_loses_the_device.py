"""Whatever a fill, its work or the driver raises (any type, printable or not), every
waiter ends with ``DeviceLost`` naming it, ``stop()`` returns and the device's threads end;
an open whose opener raises is an ``OpenError``."""

from __future__ import annotations

import asyncio
import threading
import warnings
from typing import Any

import pytest
from _lifetimes import Unprintable, arig_threads, ended, noop, run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arig
import arig.host
from arig.device import Backend
from arig.host import HostBackend


BASES: list[type[BaseException]] = [
    Exception, BaseException, ValueError, OSError, MemoryError, RecursionError, KeyboardInterrupt, SystemExit,
    GeneratorExit, StopIteration, StopAsyncIteration, asyncio.CancelledError, arig.ArigError, arig.DeviceLost,
]  # fmt: skip


def _broken_str(self: BaseException) -> str:
    raise RuntimeError("str() of this failure raises")


def _not_a_str(self: BaseException) -> Any:
    return 42


def _make_failure(base: type[BaseException], printing: str) -> BaseException:
    namespace: dict[str, Any] = {}
    if printing == "str raises":
        namespace["__str__"] = _broken_str
    elif printing == "repr raises":
        namespace["__repr__"] = _broken_str
    elif printing == "str is not a str":
        namespace["__str__"] = _not_a_str
    cls: Any = type(f"Odd{base.__name__}", (base,), namespace)
    exc: BaseException = cls.__new__(cls)  # no __init__: DeviceLost's takes other arguments
    exc.args = ("the failure",)
    return exc


class _RaisingBackend(HostBackend):
    """The host device whose driver calls raise ``failure`` at ``where``."""

    def __init__(self, failure: BaseException, where: str) -> None:
        super().__init__(2, 64, None)
        self._failure, self._where = failure, where

    def call_fill(self, qi: int, fill: Any, arg: Any, v: int) -> None:
        if self._where == "driver call_fill" and v == 2:
            raise self._failure
        super().call_fill(qi, fill, arg, v)

    def lanes(self) -> Any:
        queues = super().lanes()
        if self._where != "driver signal":
            return queues
        return [_RaisingLane(q, self._failure) for q in queues]


class _RaisingLane:
    """A host queue as the pure engine's lane, whose signal raises ``failure`` from value 2 on."""

    def __init__(self, queue: Any, failure: BaseException) -> None:
        self._queue, self._failure = queue, failure
        self.notes = queue.notes

    def note(self, v: int) -> None:
        self._queue.note(v)

    def signal(self, v: int) -> None:
        if v >= 2:
            raise self._failure
        self._queue.signal(v)


class _RaisingOpener:
    name = "HOST"

    def __init__(self, failure: BaseException, where: str) -> None:
        self.failure, self.where = failure, where

    def make(self) -> Backend:
        return _RaisingBackend(self.failure, self.where)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from(BASES),
    printing=st.sampled_from(["plain", "str raises", "repr raises", "str is not a str"]),
    where=st.sampled_from(["fill", "work", "driver call_fill", "driver signal"]),
)
def test_whatever_is_raised_every_waiter_ends_with_device_lost_and_stop_returns(base: type[BaseException], printing: str, where: str) -> None:
    failure = _make_failure(base, printing)
    before = arig_threads()

    def failing(queue: Any, arg: Any, v: int) -> None:
        if where == "fill":
            raise failure
        if where == "work":
            def work() -> None:
                raise failure

            queue.enqueue(work)

    async def main() -> None:
        gate = threading.Event()
        dev = await arig.open(_RaisingOpener(failure, where))
        try:
            v1 = await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0), queue=1)
            waiters = [asyncio.create_task(dev.wait(v1)) for _ in range(2)]
            await asyncio.sleep(0.01)
            v2 = await dev.submit(failing)
            waiters.append(asyncio.create_task(dev.wait(v2)))
            for w in waiters:
                with pytest.raises(arig.DeviceLost) as info:
                    await asyncio.wait_for(w, 5.0)
                assert info.value.cause is failure
                assert type(failure).__name__ in str(info.value)
        finally:
            gate.set()
            await asyncio.wait_for(dev.stop(), 10.0)
        assert dev.lost is failure

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(main)
    assert ended(arig_threads() - before)


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
    before = arig_threads()
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
            await dev.submit(noop)
    finally:
        gate.set()
    await asyncio.wait_for(dev.stop(), 10.0)
    assert ended(arig_threads() - before)


@pytest.mark.asyncio
async def test_an_open_whose_make_raises_an_unprintable_failure_is_an_open_error() -> None:
    class Opener:
        name = "BROKEN"

        def make(self) -> Any:
            raise Unprintable

    before = arig_threads()
    with pytest.raises(arig.OpenError, match="BROKEN.*Unprintable") as info:
        await arig.open(Opener())
    assert isinstance(info.value.__cause__, Unprintable)
    assert ended(arig_threads() - before)
