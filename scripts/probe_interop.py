"""Probe: where the time of awaiting a PyTorch stream through arig goes (GPU machine).

One task, 300 rounds per case: torch's ``x.add_(1)`` on a torch stream, then
awaited by an adopted queue's marker, by ``wait_event``, or by busy polling;
and arig's own empty kernel for reference.  Prints p50, CPU per wait, the
native core's counters and the CPU per op of each thread, and what the loop had ready when a
parked waiter's spin looked (``park_ready``: the spin did not run, as the loop would not block).
Usage: python3 scripts/probe_interop.py
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

import numpy as np
import torch

import arig
import arig.cuda
from arig.cuda import Launch
from arig.cuda import shipped_image

import arig._port
from probe_latency import thread_cpu

#: What the loop had ready each time a park spin asked (the callbacks' names, the first three).
READY: collections.Counter[str] = collections.Counter()
_others_ready = arig._port.AsyncioPort.others_ready


def _tallied(self: Any) -> bool | None:
    ready = self._ready
    if ready:
        READY[" + ".join(getattr(getattr(h, "_callback", None), "__qualname__", repr(h))[:60] for h in list(ready)[:3])] += 1
    return _others_ready(self)


arig._port.AsyncioPort.others_ready = _tallied  # type: ignore[method-assign]


async def probe() -> None:
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        img = await dev.load(shipped_image())
        empty = Launch(img.function("empty"), 1, 1)
        s = torch.cuda.Stream()
        q = dev.adopt(s)
        x = torch.zeros(1024, device="cuda")
        ev = torch.cuda.Event()
        b: Any = dev._backend

        async def adopt() -> None:
            with torch.cuda.stream(s):
                x.add_(1.0)
            await dev.wait(await dev.submit(None, queue=q))

        async def event() -> None:
            with torch.cuda.stream(s):
                x.add_(1.0)
            ev.record(s)
            await arig.cuda.wait_event(ev, device=dev)

        async def launch_only() -> None:
            with torch.cuda.stream(s):
                x.add_(1.0)
            s.synchronize()

        async def poll() -> None:
            with torch.cuda.stream(s):
                x.add_(1.0)
            ev.record(s)
            while not ev.query():
                await asyncio.sleep(0)

        async def arig_empty() -> None:
            await dev.wait(await dev.submit(empty))

        async def arig_mark() -> None:
            await dev.wait(await dev.submit(None))

        async def torch_then_own_queue() -> None:  # the same loop work as the adopted marker, no join
            with torch.cuda.stream(s):
                x.add_(1.0)
            await dev.wait(await dev.submit(None))

        for name, op in (("arig empty kernel", arig_empty), ("arig submit(None)", arig_mark), ("torch add_ + synchronize", launch_only),
                         ("torch add_ + own queue", torch_then_own_queue), ("adopted marker", adopt), ("wait_event", event), ("torch busy poll", poll)):
            for _ in range(50):
                await op()
            s0 = b.completion.stats()
            READY.clear()
            lat, n = [], 300
            c0, t0 = time.process_time(), thread_cpu()
            for _ in range(n):
                t = time.perf_counter()
                await op()
                lat.append(time.perf_counter() - t)
            cpu = (time.process_time() - c0) / n
            per = thread_cpu() - t0
            top = ", ".join(f"{k} {v / n / 1e3:.1f}" for k, v in per.most_common(5))
            print(f"{name:26s} p50 {np.median(lat) * 1e6:6.1f} us  p90 {np.percentile(lat, 90) * 1e6:6.1f}  cpu/wait {cpu * 1e6:6.1f} us"
                  f"\n    core: {', '.join(f'{k} {v - s0.get(k, 0)}' for k, v in b.completion.stats().items())}"
                  f"\n    cpu us/op by thread: {top}"
                  f"\n    ready when a park spin looked: {', '.join(f'{k} x{v}' for k, v in READY.most_common(4)) or 'nothing'}", flush=True)


asyncio.run(probe())
