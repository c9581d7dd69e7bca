"""The loop's CPU per completion of the host device under trio beside asyncio, on any machine.

What ``bench.under_trio`` measures in wall time (a round trip's latency, 64 tasks' completions
per second) depends on the machine's load; the loop thread's own CPU per completion
(``time.thread_time``) depends much less on it, and it is what the trio port adds or saves.
Each library runs in a fresh run with a fresh host device, alternately, ``--repeat`` times;
the medians are printed:

* ``one``: one task, ``await dev.wait(await dev.submit(fill))``: round trip latency and the
  loop thread's CPU per round trip;
* ``tasks``: 64 tasks doing the same for ``--seconds``: completions/s and the loop thread's
  CPU per completion;
* ``ready``: ``dev.wait`` of a value already reached (no park): the loop's CPU per call.

``--device fake-cuda`` runs the CUDA device over FakeCuda (``arig.testing``) with an empty ``Launch``:
the CUDA device's own submit and completion path on the loop, with the fake's thread as the GPU.

Usage: python3 scripts/trio_cost.py [--repeat N] [--seconds S] [--profile asyncio|trio] [--device host|fake-cuda]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from typing import Any

import anyio

import arig
import arig.cuda
import arig.host

TASKS = 64


def _nothing() -> None:
    pass


def _fill(queue: Any, arg: Any, v: int) -> None:
    queue.enqueue(_nothing)


async def _one(dev: arig.Device, n: int, work: Any) -> tuple[float, float]:
    submit, wait = dev.submit, dev.wait
    for _ in range(min(n, 200)):
        await wait(await submit(work))
    t0, c0 = time.perf_counter(), time.thread_time()
    for _ in range(n):
        await wait(await submit(work))
    return (time.perf_counter() - t0) / n * 1e6, (time.thread_time() - c0) / n * 1e6


async def _tasks(dev: arig.Device, seconds: float, work: Any) -> tuple[float, float]:
    submit, wait = dev.submit, dev.wait
    done = [0]
    stop_at = [0.0]

    async def task() -> None:
        while time.perf_counter() < stop_at[0]:
            await wait(await submit(work))
            done[0] += 1

    async def burst(s: float) -> None:
        stop_at[0] = time.perf_counter() + s
        async with anyio.create_task_group() as tg:
            for _ in range(TASKS):
                tg.start_soon(task)

    await burst(min(0.1, seconds))
    done[0] = 0
    t0, c0 = time.perf_counter(), time.thread_time()
    await burst(seconds)
    n = max(done[0], 1)
    return n / (time.perf_counter() - t0), (time.thread_time() - c0) / n * 1e6


async def _ready(dev: arig.Device, n: int, work: Any) -> float:
    v = await dev.submit(work)
    await dev.wait(v)
    wait = dev.wait
    c0 = time.thread_time()
    for _ in range(n):
        await wait(v)
    return (time.thread_time() - c0) / n * 1e6


async def _open(device: str) -> tuple[arig.Device, Any]:
    """An open device and its empty work."""
    if device == "host":
        return await arig.open(arig.host.cpu(), stop_timeout=10), _fill
    dev = await arig.open(arig.cuda.gpu(0), stop_timeout=10)
    img = await dev.load(_FAKE.image(empty=(lambda _: None, ())))
    return dev, arig.cuda.Launch(img.function("empty"), 1, 1, b"")


_FAKE: Any = None


async def _row(seconds: float, profile: bool, device: str = "host") -> dict[str, float]:
    dev, work = await _open(device)
    prof = cProfile.Profile() if profile else None
    try:
        if prof is not None:
            prof.enable()
        lat, cpu1 = await _one(dev, int(seconds * 20_000), work)
        rate, cpu64 = await _tasks(dev, seconds, work)
        ready = await _ready(dev, 20_000, work)
    finally:
        if prof is not None:
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        await dev.stop()
    return {"one_us": lat, "one_cpu_us": cpu1, "tasks_per_s": rate, "tasks_cpu_us": cpu64, "ready_cpu_us": ready}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--seconds", type=float, default=0.5)
    p.add_argument("--profile", choices=("asyncio", "trio"), help="one cProfile'd run of this library instead")
    p.add_argument("--device", choices=("host", "fake-cuda"), default="host")
    a = p.parse_args()
    if a.device == "fake-cuda":
        global _FAKE
        from arig.testing import FakeCuda

        _FAKE = FakeCuda()
        with _FAKE.installed():
            _main(a)
    else:
        _main(a)


def _main(a: argparse.Namespace) -> None:
    if a.profile:
        anyio.run(_row, a.seconds, True, a.device, backend=a.profile)
        return
    rows: dict[str, list[dict[str, float]]] = {"asyncio": [], "trio": []}
    for _ in range(a.repeat):
        for lib in rows:
            rows[lib].append(anyio.run(_row, a.seconds, False, a.device, backend=lib))
    med = {lib: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for lib, rs in rows.items()}
    print(f"medians of {a.repeat} runs each: {'':14} {'asyncio':>10} {'trio':>10} {'trio/asyncio':>13}")
    for k, what in (
        ("one_us", "1 task: round trip (µs)"),
        ("one_cpu_us", "1 task: loop CPU per round trip (µs)"),
        ("tasks_per_s", "64 tasks: completions/s"),
        ("tasks_cpu_us", "64 tasks: loop CPU per completion (µs)"),
        ("ready_cpu_us", "wait of a reached value: loop CPU (µs)"),
    ):
        x, y = med["asyncio"][k], med["trio"][k]
        print(f"{what:42} {x:10.2f} {y:10.2f} {y / x:13.2f}")


if __name__ == "__main__":
    main()
