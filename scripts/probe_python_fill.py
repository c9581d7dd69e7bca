"""Probe: the Python fill's cost beside the prepared ``Launch`` it calls, and beside torch's busy poll.

One CUDA device, the shipped ``empty`` kernel.  Printed, each the median of ``--repeat`` runs:

* one task: the round trip of ``await dev.wait(await dev.submit(launch_fill, launch))`` (a Python
  fill) and of ``dev.submit(launch)`` (the native path), in µs, and their ratio;
* one task submitting ``BULK`` in a row, then waiting for the last: the time per submission, of
  Python fills and of the ``Launch`` (what a pipeline that enqueues several steps at once pays);
* the same two with ``inline=True`` (the fill run inside ``submit``): one task, and 64 tasks;
* 64 tasks each doing the same as the first: completions/s of both, and of torch's busy poll of the same
  empty kernel (``torch.cuda.Event.query()`` after ``await asyncio.sleep(0)``), the ratios, and the
  core's counters per completion of the Python fills (``py_gates``: gates the native thread opened
  for the submit thread; fewer than one per fill where fills that land together share one).

Usage (GPU machine): python3 scripts/probe_python_fill.py [--seconds 1] [--repeat 3] [--loop asyncio|uvloop]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import arig
import arig.cuda
from arig.cuda import Launch

TASKS = 64
BULK = 32


def launch_fill(stream: int, launch: Any, v: int) -> int:
    return int(launch(stream))


async def _one(dev: arig.Device, op: Any, n: int) -> float:
    for _ in range(200):
        await op()
    t0 = time.perf_counter()
    for _ in range(n):
        await op()
    return (time.perf_counter() - t0) / n * 1e6


async def _bulk(dev: arig.Device, fill: Any, arg: Any, groups: int) -> float:
    """µs per submission of BULK submissions in a row and one wait for the last (median over groups)."""
    submit, wait = dev.submit, dev.wait
    per: list[float] = []
    for g in range(groups + 20):
        t0 = time.perf_counter()
        for _ in range(BULK):
            v = await (submit(fill, arg) if arg is not None else submit(fill))
        await wait(v)
        if g >= 20:
            per.append((time.perf_counter() - t0) / BULK * 1e6)
    return statistics.median(per)


async def _rate(make: Any, seconds: float) -> float:
    done = [0]
    stop = [0.0]

    async def task(op: Any) -> None:
        while time.perf_counter() < stop[0]:
            await op()
            done[0] += 1

    ops = [make() for _ in range(TASKS)]
    stop[0] = time.perf_counter() + min(0.2, seconds)
    await asyncio.gather(*(task(op) for op in ops))
    done[0] = 0
    t0 = time.perf_counter()
    stop[0] = t0 + seconds
    await asyncio.gather(*(task(op) for op in ops))
    return done[0] / (time.perf_counter() - t0)


def _torch_poll() -> Any:
    import torch

    x = torch.zeros(1, device="cuda")

    def make() -> Any:
        s = torch.cuda.Stream()

        async def op() -> None:
            with torch.cuda.stream(s):
                x.add_(0)  # the cheapest kernel torch launches
                ev = torch.cuda.Event()
                ev.record(s)
            while not ev.query():
                await asyncio.sleep(0)

        return op

    return make


async def _row(seconds: float) -> dict[str, float]:
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        image = await dev.load(arig.cuda.shipped_image())
        launch = Launch(image.function("empty"), 1, 1)
        submit, wait = dev.submit, dev.wait

        async def py() -> None:
            await wait(await submit(launch_fill, launch))

        async def native() -> None:
            await wait(await submit(launch))

        async def inline() -> None:
            await wait(await submit(launch_fill, launch, inline=True))

        core = dev._backend.completion.core
        out = {"py_rt_us": await _one(dev, py, 3000), "launch_rt_us": await _one(dev, native, 3000), "inline_rt_us": await _one(dev, inline, 3000)}
        out["py_bulk_us"] = await _bulk(dev, launch_fill, launch, 200)
        out["launch_bulk_us"] = await _bulk(dev, launch, None, 200)
        s0 = core.stats()
        out["py_per_s"] = await _rate(lambda: py, seconds)
        s1 = core.stats()
        n = max(1, s1["items"] - s0["items"])
        out["py_gates_per_fill"] = (s1["py_gates"] - s0["py_gates"]) / n if "py_gates" in s1 else float("nan")
        out["py_efd_per_fill"] = (s1["eventfd_writes"] - s0["eventfd_writes"]) / n
        out["launch_per_s"] = await _rate(lambda: native, seconds)
        out["inline_per_s"] = await _rate(lambda: inline, seconds)
    try:
        out["torch_poll_per_s"] = await _rate(_torch_poll(), seconds)
    except ImportError:
        out["torch_poll_per_s"] = float("nan")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    a = p.parse_args()
    rows = []
    for _ in range(a.repeat):
        if a.loop == "uvloop":
            import uvloop

            rows.append(uvloop.run(_row(a.seconds)))
        else:
            rows.append(asyncio.run(_row(a.seconds)))
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(f"medians of {a.repeat} runs ({a.loop}):")
    print(f"  1 task: Python fill {med['py_rt_us']:.1f} us, Launch {med['launch_rt_us']:.1f} us: {med['py_rt_us'] / med['launch_rt_us']:.2f}x")
    print(f"  {BULK} submissions in a row, one wait: Python fill {med['py_bulk_us']:.2f} us each, Launch {med['launch_bulk_us']:.2f} us each")
    print(
        f"  {TASKS} tasks: Python fill {med['py_per_s']:.0f}/s, Launch {med['launch_per_s']:.0f}/s, torch busy poll {med['torch_poll_per_s']:.0f}/s;"
        f" Python fill / poll {med['py_per_s'] / med['torch_poll_per_s']:.2f}x"
    )
    print(f"  per Python fill: {med['py_gates_per_fill']:.3f} gates, {med['py_efd_per_fill']:.3f} eventfd writes")
    print(
        f"  inline=True (the fill run inside submit): 1 task {med['inline_rt_us']:.1f} us ({med['inline_rt_us'] / med['launch_rt_us']:.2f}x the Launch);"
        f" {TASKS} tasks {med['inline_per_s']:.0f}/s ({med['inline_per_s'] / med['torch_poll_per_s']:.2f}x torch busy poll)"
    )
    for r in rows:
        print("  run:", {k: round(v, 3) for k, v in r.items()})


if __name__ == "__main__":
    main()
