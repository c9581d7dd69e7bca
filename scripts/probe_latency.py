"""Probe: one task's submit→wait round trip on CUDA for a few kernel lengths,
with the waiter's spin on and off, and how often the spin saw the completion.
Usage (GPU machine): python3 scripts/probe_latency.py"""

from __future__ import annotations

import asyncio
import time

import numpy as np

import arig
from arig.cuda import Launch, pack
from arig.cuda._demo import shipped_image


def fill(stream: int, launch: Launch, v: int) -> int:
    return launch(stream)


async def probe(spin_us: int) -> None:
    async with await arig.open(arig.cuda.gpu(0, spin_us=spin_us)) as dev:
        img = await dev.load(shipped_image())
        b = dev._backend
        for us in (0, 50, 200, 1000):
            launch = Launch(img.function("empty"), 1, 1) if us == 0 else Launch(img.function("spin"), 1, 1, pack(np.uint64(us * 1000)))
            for _ in range(50):
                await dev.wait(await dev.submit(fill, launch))
            b.spin_stats[:] = [0, 0, 0]
            lat, wake = [], []
            c0 = time.process_time()
            for _ in range(300):
                t = time.perf_counter()
                v = await dev.submit(fill, launch)
                await dev.wait(v)
                t1 = time.perf_counter()
                lat.append(t1 - t)
                r = dev.reached_at(v)
                if r is not None:
                    wake.append(t1 - r)
            cpu = (time.process_time() - c0) / 300
            print(f"spin_us={spin_us:3d} kernel {us:5d} us: p50 {np.median(lat) * 1e6:7.1f} us  p90 {np.percentile(lat, 90) * 1e6:7.1f}"
                  f"  seen->resumed p50 {np.median(wake) * 1e6:6.1f} us  cpu/wait {cpu * 1e6:6.1f} us  spin hit/miss/late {b.spin_stats}  est {b._est[0] * 1e6:.0f} us"
                  f"  [{b.facts['completion']}]", flush=True)


async def main() -> None:
    for spin_us in (40, 0):
        await probe(spin_us)


asyncio.run(main())
