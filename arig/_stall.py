"""Measure how long the event loop stalls: the figure that says whether
anything blocked the loop thread.  Under asyncio and trio alike (anyio's
task group and sleep)."""

from __future__ import annotations

import time
from typing import Any

import anyio
import anyio.abc

__all__ = ["StallMeter"]


class StallMeter:
    """``async with StallMeter() as m:`` ... ``m.longest`` is the longest stall in seconds.

    A ticker sleeps ``period`` seconds at a time; a stall is how late it
    wakes.  Timer slack on an idle loop is well under a millisecond.
    """

    def __init__(self, period: float = 0.001) -> None:
        self.period = period
        self.longest = 0.0
        self.ticks = 0
        self._group: anyio.abc.TaskGroup | None = None
        self._since = 0.0

    async def _tick(self) -> None:
        period = self.period
        while True:
            t = self._since = time.perf_counter()
            await anyio.sleep(period)
            late = time.perf_counter() - t - period
            self.ticks += 1
            if late > self.longest:
                self.longest = late

    async def __aenter__(self) -> StallMeter:
        group = self._group = anyio.create_task_group()
        await group.__aenter__()
        group.start_soon(self._tick)
        await anyio.sleep(0)
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._group is not None
        # A stall that ends just before exit has not woken the ticker yet: count it here.
        late = time.perf_counter() - self._since - self.period
        if self._since and late > self.longest:
            self.longest = late
        self._group.cancel_scope.cancel()
        if exc[1] is not None and not isinstance(exc[1], anyio.get_cancelled_exc_class()):
            # The body's own error propagates as it is (the group would wrap it in an
            # ExceptionGroup): the ticker is cancelled and awaited first.
            await self._group.__aexit__(None, None, None)
            return None
        return await self._group.__aexit__(*exc)
