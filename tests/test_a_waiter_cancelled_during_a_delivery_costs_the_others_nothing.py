"""A waiter whose future is cancelled in the middle of a delivery (between the look that finds it
pending and the set: a Python signal handler runs between any two bytecodes, and asyncio's for
Ctrl-C cancels the main task and the future it awaits) is skipped: the delivery goes on to the other
waiters, and a loss still reaches them.  Before, the set raised InvalidStateError out of the
delivery (seen once as "Exception in callback Timeline._deliver()" when a demo was interrupted)."""

from __future__ import annotations

import asyncio
from typing import Any

from arig import DeviceLost
from arig._timeline import Timeline


class _CancelledOnTheWay:
    """A waiter's future as a delivery sees it when a signal handler cancels it right after the look."""

    def __init__(self, real: asyncio.Future[Any]) -> None:
        self.real = real

    def done(self) -> bool:
        self.real.cancel()  # what the signal handler does, between the look and the set
        return False

    def set_result(self, value: Any) -> None:
        self.real.set_result(value)

    def set_exception(self, exc: BaseException) -> None:
        self.real.set_exception(exc)

    def exception(self) -> BaseException | None:
        return self.real.exception()


async def _two_waiters(tl: Timeline) -> tuple[asyncio.Task[None], asyncio.Task[None]]:
    v1, v2 = tl.assign(0, None), tl.assign(0, None)
    first, second = asyncio.ensure_future(tl.wait(v1)), asyncio.ensure_future(tl.wait(v2))
    await asyncio.sleep(0)  # both parked, v1's future first in the heap
    v, order, real = tl._heap[0]
    tl._heap[0] = (v, order, _CancelledOnTheWay(real))
    return first, second


def test_a_delivery_skips_a_future_cancelled_on_its_way_and_wakes_the_others() -> None:
    async def main() -> None:
        tl = Timeline(asyncio.get_running_loop(), "T", 1)
        first, second = await _two_waiters(tl)
        tl.report_local(0, 2)  # raised InvalidStateError here before
        await asyncio.wait_for(second, 5)
        assert tl.reached == 2
        await asyncio.sleep(0)
        assert first.cancelled()

    asyncio.run(main())


def test_a_loss_skips_a_future_cancelled_on_its_way_and_reaches_the_others() -> None:
    async def main() -> None:
        tl = Timeline(asyncio.get_running_loop(), "T", 1)
        first, second = await _two_waiters(tl)
        tl.fail(RuntimeError("broken"))
        try:
            await asyncio.wait_for(second, 5)
        except DeviceLost as exc:
            assert "broken" in str(exc)
        else:
            raise AssertionError("the loss did not reach the second waiter")
        await asyncio.sleep(0)
        assert first.cancelled()
        assert tl.told == 1, "the cancelled waiter is not counted as told"

    asyncio.run(main())
