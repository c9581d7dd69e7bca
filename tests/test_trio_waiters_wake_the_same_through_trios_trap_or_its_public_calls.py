"""A trio waiter parks in trio's own trap and is woken with its future, by the run's own
``reschedule`` while the hub runs completions; where trio lacks those private names the public
``wait_task_rescheduled``/``reschedule`` serve instead.  Either way: a result reaches every waiter,
an error is raised to every waiter, a cancelled waiter leaves (cancelling a future it waited on
alone), a waiter woken outside the hub's service (a timer, another task) wakes too, and a device's
round trips and 64 concurrent tasks complete gapless."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import arig
import arig._trio_future as trio_future
import arig._trio_hub as trio_hub
import arig.host
from arig._running import running_loop


@pytest.fixture(params=["trap", "public"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "trap":
        if not trio_future.FAST:
            pytest.skip("this trio has no WaitTaskRescheduled trap")
    else:
        monkeypatch.setattr(trio_future, "_Trap", None)
        monkeypatch.setattr(trio_hub, "_RUN", None)
    return str(request.param)


def _noop(queue: Any, arg: Any, v: int) -> None:
    queue.enqueue(lambda: None)


def test_a_result_and_an_error_reach_every_waiter_and_a_cancelled_one_leaves(path: str) -> None:
    async def main() -> None:
        port: Any = running_loop()
        got: list[Any] = []

        async def waits(fut: Any) -> None:
            try:
                got.append(await fut)
            except Exception as exc:  # noqa: BLE001 - the error is what is compared
                got.append(exc)

        ok, bad = port.create_future(), port.create_future()
        async with trio.open_nursery() as n:
            for fut in (ok, ok, ok, bad, bad):
                n.start_soon(waits, fut)
            await trio.sleep(0.01)
            ok.set_result(7)  # from a task: outside the hub's service
            err = ValueError("broken")
            port.call_later(0.001, bad.set_exception, err)  # from the timers' task
        assert got[:3] == [7, 7, 7]
        assert got[3] is err and got[4] is err

        async with trio.open_nursery() as n:
            lead = port.create_future()
            n.start_soon(waits, lead)  # leads the hub: the waits below park in trio's trap
            await trio.sleep(0.01)
            alone = port.create_future()
            with trio.move_on_after(0.01):
                await alone
                got.append("not cancelled")
            assert got[-1] is err, "the cancelled wait raised trio's Cancelled"
            assert alone.cancelled(), "a waiter cancelled alone cancels its future"
            shared = port.create_future()
            n.start_soon(waits, shared)
            await trio.sleep(0.01)
            with trio.move_on_after(0.01):
                await shared
                got.append("not cancelled")
            assert got[-1] is err
            assert not shared.done(), "the other waiter still waits"
            port.post(shared.set_result, 9)  # from the hub's service
            await trio.sleep(0.01)
            assert got[-1] == 9
            lead.set_result(1)
        assert got[-1] == 1

    trio.run(main)


def test_a_devices_round_trips_and_64_tasks_complete_gapless(path: str) -> None:
    async def main() -> None:
        dev = await arig.open(arig.host.cpu())
        try:
            for _ in range(200):
                v = await dev.submit(_noop)
                await dev.wait(v)
                assert dev.reached >= v
            seen: list[int] = []

            async def task() -> None:
                for _ in range(50):
                    v = await dev.submit(_noop)
                    await dev.wait(v)
                    seen.append(v)

            async with trio.open_nursery() as n:
                for _ in range(64):
                    n.start_soon(task)
            assert sorted(seen) == list(range(201, 201 + 64 * 50))
            with trio.move_on_after(0.0005):  # cancelled waits leave the values gapless
                while True:
                    await dev.wait(await dev.submit(_noop))
            last = await dev.submit(_noop)
            await dev.wait(last)
            assert dev.reached == last
        finally:
            await dev.stop()

    trio.run(main)
