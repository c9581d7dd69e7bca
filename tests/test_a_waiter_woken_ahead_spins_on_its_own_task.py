"""A waiter woken ahead of its value spins for it on its own task.

``Timeline.spin_hint(spin)`` wakes the first live waiter (of the lowest value) with ``spin``; that
waiter calls it on its own task, returns if its value was reached meanwhile, and otherwise waits
again as before.  A cancelled waiter is passed over; a loss during the spin, or a spin that raises,
reaches the woken waiter and every other one as ``DeviceLost``.  The native completion hands its
spin in the predicted window to the first waiter this way, and spins on the loop's callback only
where no one waits.  Under asyncio and under trio (the run's port).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import trio

from arig._errors import DeviceLost
from arig._running import running_loop
from arig._timeline import Timeline

Main = Callable[[], Coroutine[Any, Any, None]]


def _run(lib: str, main: Main) -> None:
    if lib == "asyncio":
        asyncio.run(main())
    else:
        trio.run(main)


def _current(lib: str) -> Any:
    return asyncio.current_task() if lib == "asyncio" else trio.lowlevel.current_task()


async def _tick(lib: str, n: int = 5) -> None:
    for _ in range(n):
        await (asyncio.sleep(0) if lib == "asyncio" else trio.lowlevel.checkpoint())


class _Tasks:
    """Start coroutines as tasks, under either library, and wait for them all."""

    def __init__(self, lib: str) -> None:
        self.lib = lib
        self.done: dict[str, Any] = {}

    def start(self, nursery: Any, name: str, coro: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        async def run() -> None:
            try:
                self.done[name] = await coro()
            except BaseException as exc:  # noqa: BLE001 - recorded for the test to assert on
                self.done[name] = exc
                if isinstance(exc, (asyncio.CancelledError, trio.Cancelled)):
                    raise

        if self.lib == "asyncio":
            return asyncio.ensure_future(run())
        nursery.start_soon(run)
        return None


@pytest.mark.parametrize("lib", ["asyncio", "trio"])
def test_the_first_waiter_spins_on_its_own_task_and_returns_once_reached(lib: str) -> None:
    async def main() -> None:
        tl = Timeline(running_loop(), "DEV", 1)
        tl.assigned = 2
        ran_on: list[Any] = []
        waiters: dict[int, Any] = {}

        def spin() -> None:
            ran_on.append(_current(lib))
            tl.report_local(0, 1)  # the spin saw value 1

        async def waiter(v: int) -> str:
            waiters[v] = _current(lib)
            await tl.wait(v)
            return f"reached {v}"

        async def body(nursery: Any) -> None:
            tasks = _Tasks(lib)
            tasks.start(nursery, "two", lambda: waiter(2))
            tasks.start(nursery, "one", lambda: waiter(1))
            await _tick(lib)
            assert tl.spin_hint(spin) is True
            await _tick(lib)
            assert ran_on == [waiters[1]], "the waiter of the lowest value ran the spin, on its own task"
            assert tasks.done == {"one": "reached 1"} and tl.waiting, "the other one still waits"
            tl.report_local(0, 2)
            await _tick(lib)
            assert tasks.done == {"one": "reached 1", "two": "reached 2"}

        await _in_nursery(lib, body)

    _run(lib, main)


@pytest.mark.parametrize("lib", ["asyncio", "trio"])
def test_a_spin_that_sees_nothing_leaves_the_waiter_waiting_as_before(lib: str) -> None:
    async def main() -> None:
        tl = Timeline(running_loop(), "DEV", 1)
        tl.assigned = 1
        spins: list[int] = []

        async def body(nursery: Any) -> None:
            tasks = _Tasks(lib)
            tasks.start(nursery, "one", lambda: tl.wait(1))
            await _tick(lib)
            assert tl.spin_hint(lambda: spins.append(1))
            await _tick(lib)
            assert spins == [1] and tasks.done == {} and tl.waiting, "it waits again"
            assert tl.spin_hint(lambda: spins.append(2)), "and may be woken ahead again"
            await _tick(lib)
            assert spins == [1, 2] and tasks.done == {}
            tl.report_local(0, 1)
            await _tick(lib)
            assert tasks.done == {"one": None} and not tl.waiting

        await _in_nursery(lib, body)

    _run(lib, main)


def test_a_cancelled_waiter_is_passed_over_and_no_one_waiting_is_false() -> None:
    async def main() -> None:
        tl = Timeline(running_loop(), "DEV", 1)
        tl.assigned = 2
        assert tl.spin_hint(lambda: None) is False, "no one waits"
        first = asyncio.ensure_future(tl.wait(1))
        second = asyncio.ensure_future(tl.wait(2))
        await asyncio.sleep(0)
        first.cancel()
        await asyncio.sleep(0)
        ran_on: list[Any] = []
        assert tl.spin_hint(lambda: ran_on.append(asyncio.current_task()))
        await asyncio.sleep(0)
        assert ran_on == [second], "the cancelled waiter of value 1 was passed over"
        tl.report_local(0, 2)
        await second
        assert first.cancelled()

    asyncio.run(main())


def test_a_waiter_cancelled_after_its_hint_spins_not_and_loses_nothing() -> None:
    async def main() -> None:
        tl = Timeline(running_loop(), "DEV", 1)
        tl.assigned = 2
        first = asyncio.ensure_future(tl.wait(1))
        second = asyncio.ensure_future(tl.wait(2))
        await asyncio.sleep(0)
        spins: list[int] = []
        assert tl.spin_hint(lambda: spins.append(1))
        first.cancel()  # before its task ran the spin
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert first.cancelled() and spins == [] and tl.lost is None
        tl.report_local(0, 2)
        await asyncio.wait_for(second, 5)

    asyncio.run(main())


@pytest.mark.parametrize("lib", ["asyncio", "trio"])
@pytest.mark.parametrize("how", ["lost during the spin", "the spin raised"])
def test_a_loss_in_the_spin_reaches_the_spinning_waiter_and_every_other(lib: str, how: str) -> None:
    async def main() -> None:
        tl = Timeline(running_loop(), "DEV", 1)
        tl.assigned = 2

        def spin() -> None:
            if how == "the spin raised":
                raise RuntimeError("the watch broke")
            tl.fail(RuntimeError("the watch broke"))

        async def body(nursery: Any) -> None:
            tasks = _Tasks(lib)
            tasks.start(nursery, "one", lambda: tl.wait(1))
            tasks.start(nursery, "two", lambda: tl.wait(2))
            await _tick(lib)
            assert tl.spin_hint(spin)
            await _tick(lib)
            assert set(tasks.done) == {"one", "two"}
            for name in ("one", "two"):
                exc = tasks.done[name]
                assert isinstance(exc, DeviceLost) and "the watch broke" in str(exc), (name, exc)
            assert tl.told == 2, "both waiters heard of the loss"

        await _in_nursery(lib, body)

    _run(lib, main)


async def _in_nursery(lib: str, body: Callable[[Any], Coroutine[Any, Any, None]]) -> None:
    if lib == "asyncio":
        await body(None)
        for t in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
            t.cancel()
        return
    async with trio.open_nursery() as nursery:
        await body(nursery)
        nursery.cancel_scope.cancel()
