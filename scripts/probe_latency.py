"""Probe: one task's submit→wait round trip on CUDA for a few kernel lengths,
the native core's counters (spin hits and misses, host functions, eventfd
writes), and which threads spent the CPU.  Usage (GPU machine): python3 scripts/probe_latency.py [--sched blocking] [--spin-us 40]"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections import Counter

import numpy as np

import arig
from arig.cuda import Launch, pack
from arig.cuda._demo import shipped_image


def thread_cpu() -> Counter[str]:
    """ns on CPU per thread name (schedstat), summed over threads of one name."""
    out: Counter[str] = Counter()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                out[name] += int(f.read().split()[0])
        except OSError:
            pass
    return out


async def probe(spin_us: int, sched: str | None) -> None:
    async with await arig.open(arig.cuda.gpu(0, spin_us=spin_us, sched=sched)) as dev:
        img = await dev.load(shipped_image())
        b = dev._backend
        for us in (0, 50, 200, 1000):
            launch = Launch(img.function("empty"), 1, 1) if us == 0 else Launch(img.function("spin"), 1, 1, pack(np.uint64(us * 1000)))
            for _ in range(50):
                await dev.wait(await dev.submit(launch))
            s0 = b.completion.stats()
            lat, wake, n = [], [], 300
            c0, t0 = time.process_time(), thread_cpu()
            for _ in range(n):
                t = time.perf_counter()
                v = await dev.submit(launch)
                await dev.wait(v)
                t1 = time.perf_counter()
                lat.append(t1 - t)
                r = dev.reached_at(v)
                if r is not None:
                    wake.append(t1 - r)
            cpu = (time.process_time() - c0) / n
            per = thread_cpu() - t0
            top = ", ".join(f"{k} {v / n / 1e3:.0f}" for k, v in per.most_common(5))
            print(f"sched={dev.facts['sched']} spin_us={spin_us:3d} kernel {us:5d} us: p50 {np.median(lat) * 1e6:7.1f} us  p90 {np.percentile(lat, 90) * 1e6:7.1f}"
                  f"  seen->resumed {np.median(wake) * 1e6:5.1f}  cpu/wait {cpu * 1e6:6.1f} us"
                  f"\n    core: {', '.join(f'{k} {v - s0.get(k, 0)}' for k, v in b.completion.stats().items())}"
                  f"\n    cpu µs/op by thread: {top}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sched", default=None)
    p.add_argument("--spin-us", type=int, default=40)
    a = p.parse_args()
    asyncio.run(probe(a.spin_us, a.sched))


if __name__ == "__main__":
    main()
