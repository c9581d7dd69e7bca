"""Probe: 64 tasks of empty kernels on CUDA and NV, under asyncio and trio (through anyio),
repeated: completions/s against how the native thread met the submissions (its counters per
completion: ``spin_hits`` near 1 means each item was its own burst and its own completion), and
whose CPU it was (the loop thread's, the others'); then one task's empty round trip on asyncio and
on ``arig.new_event_loop()``, where holding a burst open for a push that never comes would show.

Usage (GPU machine): python3 scripts/probe_regimes.py [--repeat 2] [--seconds 1]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import arig  # noqa: E402
from bench.sweep import ArigTarget, _image, _opener  # noqa: E402


async def many(kind: str, seconds: float) -> None:
    import sniffio

    dev = await arig.open(_opener(kind), stop_timeout=10)
    t = ArigTarget(dev, await dev.load(_image(kind)), kind)
    work, submit, wait = t.empty, dev.submit, dev.wait
    done, stop = [0], [time.perf_counter() + 0.2]

    async def task() -> None:
        while time.perf_counter() < stop[0]:
            await wait(await submit(work))
            done[0] += 1

    async with anyio.create_task_group() as tg:  # warm-up
        for _ in range(64):
            tg.start_soon(task)
    done[0] = 0
    c0 = t.counters()
    stop[0] = time.perf_counter() + seconds
    t0, p0, l0 = time.perf_counter(), time.process_time(), time.thread_time()
    async with anyio.create_task_group() as tg:
        for _ in range(64):
            tg.start_soon(task)
    w, p, loop_cpu = time.perf_counter() - t0, time.process_time() - p0, time.thread_time() - l0
    c1 = t.counters()
    n = done[0]
    per = {k: (c1[k] - c0[k]) / n for k in ("spin_hits", "items", "eventfd_writes", "futex_wakes")}
    print(f"{kind}/{sniffio.current_async_library():7s} {n / w:9.0f}/s  loop CPU {loop_cpu * 1e6 / n:5.1f} us/c  other threads {(p - loop_cpu) * 1e6 / n:5.1f} us/c  "
          + "  ".join(f"{k} {v:.3f}" for k, v in per.items()), flush=True)
    await dev.stop()


async def single(kind: str, loop: str) -> None:
    dev = await arig.open(_opener(kind), stop_timeout=10)
    t = ArigTarget(dev, await dev.load(_image(kind)), kind)
    lat = []
    for i in range(2300):
        t0 = time.perf_counter()
        await dev.wait(await dev.submit(t.empty))
        if i >= 300:
            lat.append(time.perf_counter() - t0)
    lat.sort()
    print(f"{kind} one task, {loop}: empty round trip p50 {lat[len(lat) // 2] * 1e6:.1f} us, p90 {lat[int(len(lat) * 0.9)] * 1e6:.1f}", flush=True)
    await dev.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=1.0)
    a = ap.parse_args()
    for _ in range(a.repeat):
        for kind in ("cuda", "nv"):
            for lib in ("asyncio", "trio"):
                anyio.run(many, kind, a.seconds, backend=lib)
    for kind in ("cuda", "nv"):
        asyncio.run(single(kind, "asyncio"))
        with asyncio.Runner(loop_factory=arig.new_event_loop) as r:
            r.run(single(kind, "spin"))
