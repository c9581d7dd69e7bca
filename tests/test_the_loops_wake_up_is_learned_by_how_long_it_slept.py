"""The native core wakes the loop ahead of long work's predicted end by as long as the loop
takes to wake, and learns that time from each pre-wake: the loop's first re-arm after it.
A loop that slept milliseconds wakes several times slower than one that slept a hundred
microseconds (its vCPU sat idle), so the core keeps one figure per length of sleep; here the
long one is learned from waits on 4 ms kernels of the fake GPU, and the short one is left alone.
"""

from __future__ import annotations

import pytest

import arig

from _napping import napping_cuda

pytestmark = [pytest.mark.asyncio, pytest.mark.skipif(arig._engine.unavailable("native") is not None, reason="the native core did not load")]


async def test_a_long_sleep_teaches_the_long_wake_figure_only() -> None:
    async with napping_cuda(0.004) as (dev, nap, comp):
        before = comp.stats()
        for _ in range(20):
            await dev.wait(await dev.submit(nap))
        after = comp.stats()
        assert after["prewakes"] > before["prewakes"], "4 ms work is predicted long: the loop is woken ahead of it"
        assert after["wake_long_ns"] != before["wake_long_ns"], "the wake-ups after 4 ms of sleep are learned"
        assert after["wake_short_ns"] == before["wake_short_ns"], "and not taken for those after a short sleep"
