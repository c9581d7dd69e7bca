"""Probe: how much longer the same slice of Python takes on a loop thread that just slept, by
how long it slept.

A loop that waits milliseconds for the GPU wakes on caches (and, on a VM, a vCPU) gone cold:
its delivery and its task step then cost more CPU than the same code run back to back.  This
times a fixed slice of Python (futures made and resolved, small dicts and lists: about a
delivery and a task step) right after ``asyncio.sleep(ms)``, for several ``ms``, against the
same slice run warm.  No GPU needed; compare machines by running it on each.

Usage: python3 scripts/probe_cold_wake.py [--ms 0.05,0.5,2,10,50] [--n 40]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time


def work() -> int:
    """The fixed slice: 60 rounds of a future made, resolved and read, and a small dict of a list."""
    loop = asyncio.get_running_loop()
    s = 0
    for i in range(60):
        f = loop.create_future()
        f.set_result(i)
        s += f.result()
        d = {"a": i, "b": [i, i + 1]}
        s += len(d["b"])
    return s


async def main(lengths: list[float], n: int) -> None:
    for _ in range(100):
        work()
    t = time.perf_counter_ns()
    for _ in range(200):
        work()
    warm = (time.perf_counter_ns() - t) / 200 / 1e3
    print(f"warm, back to back: {warm:.1f} us per slice")
    for ms in lengths:
        wall, cpu = [], []
        for _ in range(n):
            await asyncio.sleep(ms / 1e3)
            c, w = time.thread_time_ns(), time.perf_counter_ns()
            work()
            cpu.append((time.thread_time_ns() - c) / 1e3)
            wall.append((time.perf_counter_ns() - w) / 1e3)
        q = statistics.quantiles(wall, n=10)
        print(f"after {ms:7.2f} ms asleep: {statistics.median(wall):6.1f} us wall (p90 {q[-1]:.1f}), {statistics.median(cpu):6.1f} us CPU: "
              f"{statistics.median(wall) / warm:.2f}x warm")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--ms", default="0.05,0.5,2,10,50")
    p.add_argument("--n", type=int, default=40)
    a = p.parse_args()
    asyncio.run(main([float(x) for x in a.ms.split(",")], a.n))
