"""The loop port tells a loop's close (``LoopPort.on_close``): once, when the loop closes, on
asyncio's own loop and arig's; never once cancelled; a dropped hook leaves no timer behind."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable

import pytest

import arig
from arig._port import port_of

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {"asyncio": asyncio.new_event_loop, "arig": arig.new_event_loop}


def _live_timers(loop: asyncio.AbstractEventLoop) -> int:
    return sum(1 for h in getattr(loop, "_scheduled", []) if not h.cancelled())


@pytest.mark.parametrize("make", sorted(LOOPS))
def test_the_hook_is_called_once_when_the_loop_closes(make: str) -> None:
    loop = LOOPS[make]()
    calls: list[int] = []
    hook = port_of(loop).on_close(lambda: calls.append(1))
    loop.run_until_complete(asyncio.sleep(0.01))
    assert calls == []
    loop.close()
    assert calls == [1]
    loop.close()
    hook.cancel()  # harmless once called
    assert calls == [1]


def test_a_cancelled_hook_is_never_called() -> None:
    loop = asyncio.new_event_loop()
    calls: list[int] = []
    hook = port_of(loop).on_close(lambda: calls.append(1))
    hook.cancel()
    loop.run_until_complete(asyncio.sleep(0))
    assert _live_timers(loop) == 0
    loop.close()
    assert calls == []


def test_a_dropped_hook_leaves_no_timer_and_is_never_called() -> None:
    loop = asyncio.new_event_loop()
    calls: list[int] = []
    hook = port_of(loop).on_close(lambda: calls.append(1))
    assert _live_timers(loop) == 1
    del hook
    gc.collect()
    loop.run_until_complete(asyncio.sleep(0))  # the timer's cancel was posted to the loop
    assert _live_timers(loop) == 0
    loop.close()
    assert calls == []
