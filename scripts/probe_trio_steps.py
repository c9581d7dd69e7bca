"""Probe: what one round trip of an empty kernel costs under trio, in trio's own units.

For each GPU device (CUDA ``arig.cuda.gpu(0)``, NV ``arig.nvrm.gpu(0)``), one task runs
``await dev.wait(await dev.submit(empty))`` under ``trio.run`` with an instrument that counts,
per round trip: the task steps of each task (the waiter, the port's reader of each fd), trio's
waits for I/O (each a pass of its scheduler), the native core's counters (eventfd writes,
spin hits and misses, the NV driver's interrupts among the backstops), and each thread's CPU per
completion with the share of the wall time it was busy (which thread bounds the rate).  The same under asyncio
gives the round trip beside it.  ``--fake`` runs over FakeCuda and FakeNvrm (any machine; the
fake's GPU is slow and its event fd stays readable for a millisecond, so its counts differ).

``--us 10000`` waits for a kernel that spins that long instead of the empty one (the length sweep's
case; the fake's kernels do not spin).

``--tasks 64`` runs that many tasks at once (n round trips in all): completions/s and CPU per completion.

``--bare`` runs trio without the counting instrument (as the bench does): whether the instrument
itself changes what the port does.

Usage: python3 scripts/probe_trio_steps.py [--fake] [--n 2000] [--us 0] [--tasks 1] [--bare]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import trio
import trio.abc

import arig
import arig.cuda
import arig.nvrm
from probe_latency import thread_cpu
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


async def _open(kind: str, fake: Any, us: int) -> tuple[arig.Device, Any]:
    if kind == "cuda":
        dev = await arig.open(arig.cuda.gpu(0))
        img = await dev.load(fake.image(empty=(lambda a: None, ()), spin=(lambda a: None, (8,))) if fake is not None else arig.cuda.shipped_image())
        L: Any = arig.cuda.Launch
        pack: Any = arig.cuda.pack
    else:
        dev = await arig.open(arig.nvrm.gpu(0))
        img = await dev.load(CUBIN.read_bytes())
        L, pack = arig.nvrm.Launch, arig.nvrm.pack
    if us == 0:
        return dev, L(img.function("empty"), 1, 1)
    return dev, L(img.function("spin"), 1, 1, pack(np.uint64(us * 1000)))


async def _round_trips(kind: str, fake: Any, n: int, us: int, tasks: int, ins: _Steps | None) -> str:
    dev, work = await _open(kind, fake, us)
    submit, wait = dev.submit, dev.wait
    try:
        for _ in range(min(200, n)):
            await wait(await submit(work))
        stats = dev._backend.completion.stats  # type: ignore[attr-defined]
        c0 = stats()
        if ins is not None:
            ins.on = True
        lat: list[float] = []
        pc = time.perf_counter

        async def one(k: int) -> None:
            for _ in range(k):
                t = pc()
                await wait(await submit(work))
                lat.append(pc() - t)

        t0, cpu0, th0 = pc(), time.process_time(), thread_cpu()
        if tasks == 1:
            await one(n)
        else:
            async with anyio.create_task_group() as tg:
                for _ in range(tasks):
                    tg.start_soon(one, n // tasks)
        dt, cpu, th1 = pc() - t0, time.process_time() - cpu0, thread_cpu()
        if ins is not None:
            ins.on = False
        c1 = stats()
        done = len(lat)
        if tasks == 1:
            out = f"p50 {np.median(lat) * 1e6:.1f} us, mean {dt / done * 1e6:.1f} us per round trip"
        else:
            out = f"{tasks} tasks: {done / dt:,.0f} completions/s"
        out += f", CPU {cpu / done * 1e6:.1f} us per completion; core per completion: " + ", ".join(f"{k} {(c1[k] - c0[k]) / done:.2f}" for k in COUNTERS if k in c0)
        th = th1 - th0
        out += "\n    CPU per completion by thread (share of the wall time busy): " + ", ".join(
            f"{k} {v / done / 1e3:.1f} us ({v / 1e9 / dt:.0%})" for k, v in th.most_common(3))
        if ins is not None:
            fds = {getattr(dev._backend.completion, "_efd", -1): "core eventfd", getattr(getattr(dev._backend, "events", None), "loop_fd", -2): "driver events"}  # type: ignore[attr-defined]

            def named(name: str) -> str:
                tail = name.rsplit("-", 1)[-1]
                return f"{name} ({fds.get(int(tail), '?')})" if name.startswith("arig-reader-") and tail.isdigit() else name

            out += "\n    trio task steps per completion: " + ", ".join(f"{named(k)} {v / done:.2f}" for k, v in ins.steps.most_common(6))
            out += f"; I/O waits per completion {ins.io_waits / done:.2f}"
        return out
    finally:
        await dev.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fake", action="store_true")
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--us", type=int, default=0, help="the kernel's length (0: the empty kernel)")
    p.add_argument("--tasks", type=int, default=1, help="tasks doing round trips at once (n in all)")
    p.add_argument("--bare", action="store_true", help="trio without the counting instrument")
    a = p.parse_args()
    with fakes(a.fake) as fake:
        for kind in ("cuda", "nv"):
            try:
                print(f"{kind} asyncio: {asyncio.run(_round_trips(kind, fake, a.n, a.us, a.tasks, None))}")
                if a.bare:
                    print(f"{kind} trio, bare: {trio.run(_round_trips, kind, fake, a.n, a.us, a.tasks, None)}")
                    continue
                ins = _Steps()
                print(f"{kind} trio:    {trio.run(_round_trips, kind, fake, a.n, a.us, a.tasks, ins, instruments=[ins])}")
            except arig.ArigError as exc:
                print(f"{kind}: not measured ({type(exc).__name__}: {str(exc)[:80]})")


if __name__ == "__main__":
    main()
