"""Probe: what one round trip of an empty kernel costs under trio, in trio's own units.

For each GPU device (CUDA ``arig.cuda.gpu(0)``, NV ``arig.nvrm.gpu(0)``), one task runs
``await dev.wait(await dev.submit(empty))`` under ``trio.run`` with an instrument that counts,
per round trip: the task steps of each task (the waiter, the port's reader of each fd), trio's
waits for I/O (each a pass of its scheduler), and the native core's counters (eventfd writes,
spin hits and misses, the NV driver's interrupts among the backstops).  The same under asyncio
gives the round trip beside it.  ``--fake`` runs over FakeCuda and FakeNvrm (any machine; the
fake's GPU is slow and its event fd stays readable for a millisecond, so its counts differ).

Usage: python3 scripts/probe_trio_steps.py [--fake] [--n 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import time
from pathlib import Path
from typing import Any

import trio
import trio.abc

import arig
import arig.cuda
import arig.nvrm
from probe_launch_build import fakes

CUBIN = Path(arig.__file__).resolve().parent / "kernels" / "kernels.cubin"
COUNTERS = ("eventfd_writes", "spin_hits", "spin_misses", "host_functions", "futex_wakes", "prewakes")


class _Steps(trio.abc.Instrument):
    def __init__(self) -> None:
        self.steps: collections.Counter[str] = collections.Counter()
        self.io_waits = 0
        self.on = False

    def before_task_step(self, task: Any) -> None:
        if self.on:
            self.steps[task.name] += 1

    def before_io_wait(self, timeout: float) -> None:
        if self.on:
            self.io_waits += 1


async def _open(kind: str, fake: Any) -> tuple[arig.Device, Any]:
    if kind == "cuda":
        dev = await arig.open(arig.cuda.gpu(0))
        img = await dev.load(fake.image(empty=(lambda a: None, ())) if fake is not None else arig.cuda.shipped_image())
        return dev, arig.cuda.Launch(img.function("empty"), 1, 1)
    dev = await arig.open(arig.nvrm.gpu(0))
    img = await dev.load(CUBIN.read_bytes())
    return dev, arig.nvrm.Launch(img.function("empty"), 1, 1)


async def _round_trips(kind: str, fake: Any, n: int, ins: _Steps | None) -> str:
    dev, work = await _open(kind, fake)
    try:
        for _ in range(200):
            await dev.wait(await dev.submit(work))
        stats = dev._backend.completion.stats  # type: ignore[attr-defined]
        c0 = stats()
        if ins is not None:
            ins.on = True
        t0 = time.perf_counter()
        for _ in range(n):
            await dev.wait(await dev.submit(work))
        dt = time.perf_counter() - t0
        if ins is not None:
            ins.on = False
        c1 = stats()
        out = f"{dt / n * 1e6:.1f} us per round trip; core per round trip: " + ", ".join(f"{k} {(c1[k] - c0[k]) / n:.2f}" for k in COUNTERS if k in c0)
        if ins is not None:
            fds = {getattr(dev._backend.completion, "_efd", -1): "core eventfd", getattr(getattr(dev._backend, "events", None), "loop_fd", -2): "driver events"}  # type: ignore[attr-defined]
            named = {name: (f"{name} ({fds.get(int(name.rsplit('-', 1)[1]), '?')})" if name.startswith("arig-reader-") else name) for name in ins.steps}
            out += "\n    trio task steps per round trip: " + ", ".join(f"{named[k]} {v / n:.2f}" for k, v in ins.steps.most_common(6))
            out += f"; I/O waits per round trip {ins.io_waits / n:.2f}"
        return out
    finally:
        await dev.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fake", action="store_true")
    p.add_argument("--n", type=int, default=2000)
    a = p.parse_args()
    with fakes(a.fake) as fake:
        for kind in ("cuda", "nv"):
            try:
                print(f"{kind} asyncio: {asyncio.run(_round_trips(kind, fake, a.n, None))}")
                ins = _Steps()
                print(f"{kind} trio:    {trio.run(_round_trips, kind, fake, a.n, ins, instruments=[ins])}")
            except arig.ArigError as exc:
                print(f"{kind}: not measured ({type(exc).__name__}: {str(exc)[:80]})")


if __name__ == "__main__":
    main()
