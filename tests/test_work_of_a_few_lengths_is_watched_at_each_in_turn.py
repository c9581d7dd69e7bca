"""One kernel and grid that takes a few lengths (by its arguments: a model step by its batch) is
watched at each of them in turn.

The native core keeps the lengths such work was seen to take (its modes).  It aims at the shortest
first; when its spin there misses, it turns to the next length the work takes (its sleep, the loop's
pre-wake and its spin then come by that one), where one prediction, the last length seen, missed
every wait whose length differed from the one before.  A length the work stopped taking fades out.
Over FakeNvrm (its releases carry the GPU's time, so each length is learned exactly), with a
spin of 1 ms: the fake GPU takes up work up to a millisecond late (it polls with a back-off), which
the default spin of 40 µs would miss, where a real GPU's start jitters by microseconds.
"""

from __future__ import annotations

import asyncio
import random
import struct
import time
from pathlib import Path

import pytest

import arig
import arig._env
import arig._native
import arig.nvrm as nvrm
from arig.testing import FakeNvrm

CUBIN = (Path(__file__).resolve().parent / "data" / "nv" / "probe.sm_90.cubin").read_bytes()
SHORT_S, LONG_S = 0.004, 0.040

pytestmark = pytest.mark.skipif(arig._env.PURE or arig._native.library() is None, reason="the NV device runs on the native core only")


def _launch(image: arig.Image, seconds: float) -> nvrm.Launch:
    """The probe's axpy, which this fake runs as a sleep of ``a`` seconds: one key, any length."""
    return nvrm.Launch(image.function("axpy"), 1, 1, struct.pack("<f4xQQi", seconds, 0, 0, 0))


@pytest.fixture(autouse=True)
def _long_spin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arig.nvrm._device, "SPIN_US", 1000)


def _fake() -> FakeNvrm:
    fake = FakeNvrm()

    def sleep_exactly(params: bytes, grid: object, block: object) -> None:
        """Sleep, then spin the last millisecond: each length the same to a few microseconds."""
        end = time.monotonic() + struct.unpack("<f", params[:4])[0]
        if end - time.monotonic() > 0.001:
            time.sleep(end - time.monotonic() - 0.001)
        while time.monotonic() < end:
            pass

    fake.kernel("axpy", sleep_exactly)
    return fake


async def _calibrated(dev: arig.Device, launch: nvrm.Launch) -> None:
    """Run ``launch`` until a spin has seen one end: the core then knows the offset of the GPU's
    clock to its own, and learns each length exactly from the releases' times."""
    comp = dev._backend.completion
    for _ in range(200):  # a few on a quiet machine; a loaded one preempts the spins (60 were once too few)
        await dev.wait(await dev.submit(launch))
        if comp.stats()["spin_hits"]:
            return
    pytest.fail("no spin saw the work end in 200 waits: the core never learned the GPU's clock")


async def _dues(dev: arig.Device, launch: nvrm.Launch) -> tuple[float, list[float]]:
    """Submit ``launch`` and wait for it, reading the core's predicted end meanwhile: the submit's
    time (s) and each distinct prediction, as seconds after it.  Until the core's thread takes the
    new work it still publishes the last work's prediction, which may lie after this submit where
    that work ended sooner than predicted: that value is left out."""
    core = dev._backend.completion.core
    stale = core.due()
    t = time.monotonic_ns()
    v = await dev.submit(launch)
    dues: list[float] = []
    while dev.reached < v:
        due = core.due()
        if due > t and due != stale and (not dues or abs((due - t) / 1e9 - dues[-1]) > 1e-4):
            dues.append((due - t) / 1e9)
        await asyncio.sleep(0.0005)
    await dev.wait(v)
    return t / 1e9, dues


def test_a_missed_short_length_turns_the_watch_to_the_long_one() -> None:
    rng = random.Random(20261206)
    pattern = [LONG_S if rng.random() < 0.4 else SHORT_S for _ in range(60)]

    async def main() -> tuple[list[list[float]], dict[str, int], bool]:
        async with await arig.open(nvrm.gpu(0)) as dev:
            image = await dev.load(CUBIN)
            launches = {s: _launch(image, s) for s in (SHORT_S, LONG_S)}
            comp = dev._backend.completion
            await _calibrated(dev, launches[SHORT_S])
            for s in pattern[:30]:  # learn both lengths
                await dev.wait(await dev.submit(launches[s]))
            before = comp.stats()
            seen = [(await _dues(dev, launches[s]))[1] for s in pattern[30:]]
            after = comp.stats()
            return seen, {k: after[k] - before[k] for k in ("mode_turns", "spin_misses")}, dev.reached == dev.submitted

    fake = _fake()
    with fake.installed():
        seen, counted, all_reached = asyncio.run(main())
    assert fake.violations == []
    assert all_reached
    longs = [d for s, d in zip(pattern[30:], seen, strict=True) if s == LONG_S]
    assert len(longs) >= 6
    # A long wait is predicted short first (the shortest length this work takes), then, once the
    # spin there missed, long: the core turned to the next length.  One prediction would have
    # stayed near the short one (a missed spin only pushes it past where the spin gave up).
    turned = [d for d in longs if d and d[0] < 0.5 * LONG_S and max(d) > 0.5 * LONG_S]
    assert len(turned) >= len(longs) - 2, f"predictions during the long waits: {longs}"
    assert counted["mode_turns"] >= len(turned), counted


def test_a_length_the_work_stopped_taking_fades_out() -> None:
    async def main() -> list[float]:
        async with await arig.open(nvrm.gpu(0)) as dev:
            image = await dev.load(CUBIN)
            short, long = _launch(image, SHORT_S), _launch(image, LONG_S)
            await _calibrated(dev, short)
            for s in [short, long] * 6:  # both lengths live
                await dev.wait(await dev.submit(s))
            firsts = []
            for _ in range(40):  # only the long length now
                _, dues = await _dues(dev, long)
                firsts.append(dues[0] if dues else 0.0)
            return firsts

    fake = _fake()
    with fake.installed():
        firsts = asyncio.run(main())
    assert fake.violations == []
    # At first the short length is still aimed at first; once it faded, the long one is.
    assert min(firsts[:3]) < 0.5 * LONG_S, firsts
    assert all(f > 0.5 * LONG_S for f in firsts[-5:]), [round(f, 4) for f in firsts]


@pytest.mark.skipif(arig._engine.unavailable("native") is not None, reason="the native core did not load")
def test_a_cuda_turn_asks_for_no_host_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA's default watch (naps that look at the words), a turn to a longer length asks for no
    backstop: a host function holds the stream until libcuda's callback thread ran it, so the next
    work would start late.  Only a miss with no longer length to turn to asks for one."""

    from arig.cuda import Launch
    from arig.testing import FakeCuda

    monkeypatch.setattr(arig._env, "CUDA_BACKSTOP", "poll")
    rng = random.Random(7)
    pattern = [LONG_S if rng.random() < 0.4 else SHORT_S for _ in range(50)]

    def sleep_exactly(args: bytes) -> None:
        end = time.monotonic() + struct.unpack("<f", args[:4])[0]
        if end - time.monotonic() > 0.001:
            time.sleep(end - time.monotonic() - 0.001)
        while time.monotonic() < end:
            pass

    async def main() -> tuple[dict[str, int], int, bool]:
        async with await arig.open(arig.cuda.gpu(0, spin_us=1000)) as dev:
            image = await dev.load(fake.image(nap=(sleep_exactly, [4])))
            launches = {s: Launch(image.function("nap"), 1, 1, struct.pack("<f", s)) for s in (SHORT_S, LONG_S)}
            comp = dev._backend.completion
            for s in pattern[:25]:  # learn both lengths
                await dev.wait(await dev.submit(launches[s]))
            before = comp.stats()
            for s in pattern[25:]:
                await dev.wait(await dev.submit(launches[s]))
            after = comp.stats()
            counted = {k: after[k] - before[k] for k in ("mode_turns", "spin_misses", "host_functions")}
            return counted, sum(1 for s in pattern[25:] if s == LONG_S), dev.reached == dev.submitted

    fake = FakeCuda()
    with fake.installed(), arig._engine.using("native"):
        counted, longs, all_reached = asyncio.run(main())
    assert fake.violations == []
    assert all_reached
    assert longs >= 6
    assert counted["mode_turns"] >= longs - 2, counted
    assert counted["host_functions"] <= counted["spin_misses"] - counted["mode_turns"], counted
