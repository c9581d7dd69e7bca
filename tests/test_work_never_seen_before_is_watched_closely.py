"""Work never seen before (a kernel and grid with no length learned yet) is watched closely.

It has no predicted end to pre-wake the loop for, so when its first spin misses, the native core
looks at the words every few tens of microseconds and nudges the loop every 150 µs, so that the
loop's thread has not sat idle for long when the end comes (a loop asleep since the submit wakes
slowly).  On CUDA that watch asks for no host function (one holds the stream until libcuda's
callback thread runs it, so the next work would start late).  It lasts the work's first 20 ms at
most; then the usual watch and its backstop take over.  The first run teaches the work's length.
Over FakeCuda and FakeNvrm: the counters and the loop's own wake-ups, not times.
"""

from __future__ import annotations

import asyncio
import struct
import time
from pathlib import Path
from typing import Any

import pytest

import arig
import arig._engine
import arig._env
import arig._native
import arig.nvrm as nvrm
from arig.testing import FakeCuda, FakeNvrm

CUBIN = (Path(__file__).resolve().parent / "data" / "nv" / "probe.sm_90.cubin").read_bytes()
#: The close watch's span and the period of its nudges (core.c's CLOSE_MAX_NS, CLOSE_WAKE_NS).
CLOSE_MAX_S, CLOSE_WAKE_S = 0.020, 0.000150
COUNTED = ("close_watches", "nudges", "host_functions", "spin_misses")

pytestmark = pytest.mark.skipif(
    arig._env.PURE or arig._native.library() is None or arig._engine.unavailable("native") is not None,
    reason="the native core's watch",
)


def _sleep_exactly(seconds: float) -> None:
    end = time.monotonic() + seconds
    if seconds > 0.001:
        time.sleep(seconds - 0.001)
    while time.monotonic() < end:
        pass


async def _first_waits(dev: arig.Device, launches: list[Any]) -> tuple[dict[str, int], int]:
    """Wait for each launch (each a grid never launched before) in turn: the core's counters over
    them (and ``most_nudges``: at most one per 150 µs of each wait's own time, two more at its
    ends), and how often the loop woke meanwhile with nothing to deliver (a nudge's wake-up)."""
    comp = dev._backend.completion
    before, far = comp.stats(), comp._woke_far
    most = 0.0
    for launch in launches:
        t = time.monotonic()
        await dev.wait(await dev.submit(launch))
        most += (time.monotonic() - t) / CLOSE_WAKE_S + 2
    after = comp.stats()
    return {**{k: after[k] - before[k] for k in COUNTED}, "most_nudges": int(most)}, comp._woke_far - far


def _cuda(seconds: float, waits: int) -> tuple[dict[str, int], int, float]:
    from arig.cuda import Launch

    async def main() -> tuple[dict[str, int], int, float]:
        async with await arig.open(arig.cuda.gpu(0)) as dev:
            image = await dev.load(fake.image(nap=(lambda args: _sleep_exactly(struct.unpack("<f", args[:4])[0]), [4])))
            nap = image.function("nap")
            arg = struct.pack("<f", seconds)
            await dev.wait(await dev.submit(Launch(nap, 1, 1, struct.pack("<f", 0.0))))  # the device's own first steps
            counted, woke = await _first_waits(dev, [Launch(nap, 2 + i, 1, arg) for i in range(waits)])
            # The first run taught the length: the next wait of the last grid is predicted about there.
            # (Until the core's thread takes the new work it still publishes the last one's end.)
            core = dev._backend.completion.core
            stale = core.due()
            t, due = time.monotonic_ns(), 0
            v = await dev.submit(Launch(nap, 1 + waits, 1, arg))
            while dev.reached < v and not (due > t and due != stale):
                due = core.due()
                await asyncio.sleep(0)
            await dev.wait(v)
            return counted, woke, (due - t) / 1e9 if due else 0.0

    fake = FakeCuda()
    with fake.installed(), arig._engine.using("native"):
        out = asyncio.run(main())
    assert fake.violations == []
    return out


def test_cuda_work_never_seen_is_watched_closely_without_a_host_function(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arig._env, "CUDA_BACKSTOP", "poll")
    counted, woke, predicted = _cuda(0.008, 4)
    assert counted["close_watches"] == counted["spin_misses"] == 4, counted
    assert counted["host_functions"] == 0, counted
    # The loop was nudged while each 8 ms ran, and woke for it (about 53 times a wait; fewer where
    # this machine is slow, never more often than every 150 µs of the waits).
    assert 4 * 8 <= counted["nudges"] <= counted["most_nudges"], counted
    assert woke >= counted["nudges"] // 4, (woke, counted)
    # Learned at once from the look that found it (not averaged up from the missed spin's bound, a
    # fifth of the way).  No upper bound but a sane one: a loaded machine runs the fake's 8 ms nap
    # late, and the fake's GPU stamps with it (seen: 269 ms in CI, and 41 ms against a 26 ms wait).
    assert 0.004 < predicted < 10, predicted


def test_cuda_work_longer_than_the_close_watch_gets_its_backstop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arig._env, "CUDA_BACKSTOP", "poll")
    counted, _, _ = _cuda(0.060, 1)
    assert counted["close_watches"] == 1, counted
    assert counted["nudges"] <= CLOSE_MAX_S / CLOSE_WAKE_S + 2, counted  # none past the close watch's span
    assert counted["host_functions"] == 1, counted  # the usual watch's backstop, once the close watch ended


def test_nv_work_never_seen_is_watched_closely(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arig.nvrm._device, "SPIN_US", 40)

    async def main() -> tuple[dict[str, int], int]:
        async with await arig.open(nvrm.gpu(0)) as dev:
            image = await dev.load(CUBIN)
            axpy = image.function("axpy")
            args = struct.pack("<f4xQQi", 0.008, 0, 0, 0)  # this fake runs the probe's axpy as a sleep of `a` seconds
            await dev.wait(await dev.submit(nvrm.Launch(axpy, 1, 1, struct.pack("<f4xQQi", 0.0, 0, 0, 0))))
            return await _first_waits(dev, [nvrm.Launch(axpy, 2 + i, 1, args) for i in range(4)])

    fake = FakeNvrm()
    fake.kernel("axpy", lambda params, grid, block: _sleep_exactly(struct.unpack("<f", params[:4])[0]))
    with fake.installed():
        counted, woke = asyncio.run(main())
    assert fake.violations == []
    assert counted["close_watches"] == 4, counted
    assert 4 * 8 <= counted["nudges"] <= counted["most_nudges"], counted
    assert woke >= counted["nudges"] // 4, (woke, counted)
