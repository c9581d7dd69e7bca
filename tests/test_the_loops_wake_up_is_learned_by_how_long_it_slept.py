"""The native core wakes the loop ahead of long work's predicted end by as long as the loop
takes to wake, and learns that time from each pre-wake: the loop's first re-arm after it.
A loop that slept milliseconds wakes several times slower than one that slept a hundred
microseconds (its vCPU sat idle), so the core keeps one figure per length of sleep; here the
long one is learned from waits on 4 ms kernels of the fake GPU, and the short one is left alone.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import arig
from arig.cuda import Launch
from arig.testing.fake_cuda import FakeCuda

pytestmark = [pytest.mark.asyncio, pytest.mark.skipif(arig._engine.unavailable("native") is not None, reason="the native core did not load")]


async def test_a_long_sleep_teaches_the_long_wake_figure_only() -> None:
    fake = FakeCuda()
    with fake.installed(), arig._engine.using("native"):
        async with await arig.open(arig.cuda.gpu(0)) as dev:
            image = await dev.load(fake.image(nap=(lambda _: time.sleep(0.004), [])))
            nap = Launch(image.function("nap"), 1, 1)
            comp: Any = dev._backend.completion
            before = comp.stats()
            for _ in range(20):
                await dev.wait(await dev.submit(nap))
            after = comp.stats()
            assert after["prewakes"] > before["prewakes"], "4 ms work is predicted long: the loop is woken ahead of it"
            assert after["wake_long_ns"] != before["wake_long_ns"], "the wake-ups after 4 ms of sleep are learned"
            assert after["wake_short_ns"] == before["wake_short_ns"], "and not taken for those after a short sleep"
