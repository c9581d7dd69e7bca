"""The native core wakes the loop ahead of long work's predicted end by as long as the loop
takes to wake, and learns that time from each pre-wake: the loop's first re-arm after it.
A loop that slept milliseconds wakes several times slower than one that slept a hundred
microseconds (its vCPU sat idle), so the core keeps one figure per length of sleep; here the
long one is learned from waits on 4 ms kernels of the fake GPU.

A loop woken further ahead of the end than its spin window opens (``LOOP_SPIN_AHEAD_NS``)
sleeps again; the core then wakes it once more, by its wake-up after that shorter sleep, and
learns that sleep's figure from it.  Where the window covers every pre-wake, no second one comes
and the short figure is left alone.

How fast a loop wakes is the machine's: on a loaded two-core VM every wake-up can take longer
than the core's cap on the figure (500 us), which then stays at the cap.  So the tests compare
with the figures at open, and the second one starts the long figure far ahead of the end before
each wait (``Core.wake_seed``), so that the loop wakes too early on any machine.
"""

from __future__ import annotations

import pytest

import arig
from arig._native import completion as native_completion

from _napping import napping_cuda

pytestmark = [pytest.mark.asyncio, pytest.mark.skipif(arig._engine.unavailable("native") is not None, reason="the native core did not load")]

SHORT, MID, LONG = 0, 1, 2  # the core's buckets of sleep: under 0.5 ms, under 3 ms, longer


async def test_a_long_sleep_teaches_the_long_wake_figure_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_completion, "LOOP_SPIN_AHEAD_NS", 10**9)  # every pre-wake is inside the window
    async with napping_cuda(0.004) as (dev, nap, comp):
        at_open = comp.stats()
        for _ in range(5):  # the first waits learn the work's length (one may be predicted short)
            await dev.wait(await dev.submit(nap))
        before = comp.stats()
        for _ in range(20):
            await dev.wait(await dev.submit(nap))
        after = comp.stats()
        assert after["prewakes"] > before["prewakes"], "4 ms work is predicted long: the loop is woken ahead of it"
        assert after["wake_long_ns"] != at_open["wake_long_ns"], "the wake-ups after 4 ms of sleep are learned"
        assert after["prewakes_again"] == before["prewakes_again"], "the loop never woke too early to spin"
        assert after["wake_short_ns"] == before["wake_short_ns"], "and the figure after a short sleep is not taken for them"


async def test_a_loop_woken_too_early_to_spin_is_woken_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_completion, "LOOP_SPIN_AHEAD_NS", 1_000)  # every pre-wake is too early
    async with napping_cuda(0.008) as (dev, nap, comp):
        for _ in range(3):  # the work's length is learned
            await dev.wait(await dev.submit(nap))
        before = comp.stats()
        shorter = ("wake_short_ns", "wake_mid_ns")  # that sleep: from the re-arm to just before the end
        for _ in range(100):  # on a loaded VM the work is often found done before the second pre-wake
            comp.core.wake_seed(LONG, 3_000_000)  # the first pre-wake ~3 ms ahead of the 8 ms end
            assert await dev.wait(await dev.submit(nap)) is None
            now = comp.stats()
            if now["prewakes_again"] > before["prewakes_again"] and any(now[k] != before[k] for k in shorter):
                break
        after = comp.stats()
        assert dev.reached == dev.submitted  # every wait returned its work's end, none lost
        assert after["loop_woke_far"] > before["loop_woke_far"], "the loop woke too early to spin, and slept again"
        assert after["prewakes_again"] > before["prewakes_again"], "so the core woke it once more, nearer the end"
        assert any(after[k] != before[k] for k in shorter), "and learned its wake-up after that shorter sleep"
