"""A native core's prediction of a work's length that a look proves too long is cut to what the look
saw, at once.

The case: work of one kernel and grid gets shorter (its arguments changed), on a lane whose completions
carry no GPU time and no host function's.  The core sleeps toward the old, long prediction; each
completion reaches the loop by its backstop (the NV device's interrupt), the next submission wakes the
core, and the core then finds the work done long before the predicted end.  That find is a bound on
the work's length: without it the prediction stays long for ever (every wait then costs a backstop,
and the core never spins at the work's end).  Over FakeNvrm with releases that write no GPU time.
"""

from __future__ import annotations

import asyncio
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
LONG_S, SHORT_S = 0.030, 0.003

pytestmark = pytest.mark.skipif(arig._env.PURE or arig._native.library() is None, reason="the NV device runs on the native core only")


def _launch(image: arig.Image, seconds: float) -> nvrm.Launch:
    """The probe's axpy, which this fake runs as a sleep of ``a`` seconds: one key, any length."""
    return nvrm.Launch(image.function("axpy"), 1, 1, struct.pack("<f4xQQi", seconds, 0, 0, 0))


async def _predicted(dev: arig.Device, launch: nvrm.Launch) -> float:
    """Submit ``launch``; the core's predicted length of it (s), then wait for it."""
    core = dev._backend.completion.core
    t = time.monotonic_ns()
    v = await dev.submit(launch)
    for _ in range(200):  # the core publishes its prediction once its thread signalled the burst
        await asyncio.sleep(0.0002)
        due = core.due()
        if due or dev.reached >= v:
            break
    await dev.wait(v)
    return (due - t) / 1e9 if due else 0.0


def test_a_prediction_found_too_long_is_cut_at_the_next_look() -> None:
    fake = FakeNvrm()
    fake.stamps = False
    fake.kernel("axpy", lambda params, grid, block: time.sleep(struct.unpack("<f", params[:4])[0]))

    async def main() -> tuple[list[float], list[float]]:
        async with await arig.open(nvrm.gpu(0)) as dev:
            image = await dev.load(CUBIN)
            long, short = _launch(image, LONG_S), _launch(image, SHORT_S)
            learned: list[float] = []
            while len(learned) < 40 and (not learned or learned[-1] < 0.5 * LONG_S):
                learned.append(await _predicted(dev, long))
            after = [await _predicted(dev, short) for _ in range(6)]
            return learned, after

    with fake.installed():
        learned, after = asyncio.run(main())
    assert fake.violations == []
    assert learned[-1] > 0.5 * LONG_S, f"the long work was not learned: predicted {learned}"
    # The first short run is predicted long (nothing told otherwise yet); by the third the
    # prediction must have come down, well below the long length it stood at.  The bound is half
    # the long length, not a few short ones: the fake's sleeps and the core's looks run late on a
    # loaded machine, and a prediction left long stays at the long length whatever the load.
    assert max(after[2:]) < 0.5 * LONG_S, f"predictions after the work got shorter: {after} (long: {learned[-1]:.4f} s)"
