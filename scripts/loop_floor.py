"""Each library's own cost of waking a parked task, with no arig in it: the floor under a device's
64-task rate under asyncio and under trio.

64 tasks each park on the cheapest wait their library has (asyncio: a future of the loop, whose
Future and Task are C; trio: ``wait_task_rescheduled``, woken by ``reschedule``) and count a
completion when woken; one driver task wakes every parked task at once, then yields, as a
device's delivery of one eventfd read wakes a round of waiters.  Printed: completions per second
and the loop thread's CPU per completion (``time.thread_time``), medians of ``--repeat`` runs.

Usage: python3 scripts/loop_floor.py [--tasks 64] [--seconds 1] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import trio


async def _asyncio_run(tasks: int, seconds: float) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    parked: list[asyncio.Future[None]] = []
    done = [0]
    stop = [False]

    async def task() -> None:
        while not stop[0]:
            fut = loop.create_future()
            parked.append(fut)
            await fut
            done[0] += 1

    async def driver() -> None:
        while not stop[0]:
            woken, parked[:] = list(parked), []
            for fut in woken:
                fut.set_result(None)
            await asyncio.sleep(0)
        for fut in parked:
            fut.set_result(None)

    ts = [asyncio.ensure_future(task()) for _ in range(tasks)]
    await asyncio.sleep(0)
    t0, c0, d0 = time.perf_counter(), time.thread_time(), done[0]
    drv = asyncio.ensure_future(driver())
    await asyncio.sleep(seconds)
    n = done[0] - d0
    wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    stop[0] = True
    await drv
    await asyncio.gather(*ts)
    return n / wall, cpu / max(n, 1) * 1e6


async def _trio_run(tasks: int, seconds: float) -> tuple[float, float]:
    parked: list[Any] = []
    done = [0]
    stop = [False]

    def abort(_: Any) -> trio.lowlevel.Abort:
        return trio.lowlevel.Abort.SUCCEEDED

    async def task() -> None:
        while not stop[0]:
            parked.append(trio.lowlevel.current_task())
            await trio.lowlevel.wait_task_rescheduled(abort)
            done[0] += 1

    async def driver() -> None:
        while not stop[0]:
            woken, parked[:] = list(parked), []
            for t in woken:
                trio.lowlevel.reschedule(t)
            await trio.lowlevel.checkpoint()
        for t in parked:
            trio.lowlevel.reschedule(t)

    result: list[tuple[float, float]] = []
    async with trio.open_nursery() as n:
        for _ in range(tasks):
            n.start_soon(task)
        await trio.sleep(0)
        t0, c0, d0 = time.perf_counter(), time.thread_time(), done[0]
        n.start_soon(driver)
        await trio.sleep(seconds)
        k = done[0] - d0
        wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
        result.append((k / wall, cpu / max(k, 1) * 1e6))
        stop[0] = True
    return result[0]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tasks", type=int, default=64)
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args()
    rows: dict[str, list[tuple[float, float]]] = {"asyncio": [], "trio": []}
    for _ in range(a.repeat):
        rows["asyncio"].append(asyncio.run(_asyncio_run(a.tasks, a.seconds)))
        rows["trio"].append(trio.run(_trio_run, a.tasks, a.seconds))
    med = {k: (statistics.median(r for r, _ in v), statistics.median(c for _, c in v)) for k, v in rows.items()}
    print(f"medians of {a.repeat} runs, {a.tasks} tasks:      asyncio       trio  trio/asyncio")
    print(f"wake-ups (completions) per s          {med['asyncio'][0]:10.0f} {med['trio'][0]:10.0f}  {med['trio'][0] / med['asyncio'][0]:12.2f}")
    print(f"loop CPU per wake-up (µs)             {med['asyncio'][1]:10.2f} {med['trio'][1]:10.2f}  {med['trio'][1] / med['asyncio'][1]:12.2f}")


if __name__ == "__main__":
    main()
