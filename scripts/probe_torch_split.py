"""Probe: why torch work followed by an arig marker takes longer than the two apart (GPU machine).

``probe_interop.py`` finds ``x.add_(1)`` on a torch stream followed by a marker on arig's *own*
queue (no join with the torch stream) about twice as long as either alone (42 against 20 and
16 µs on an H100).  Each case here is one task, 300 rounds, asyncio's default loop; per case the
p50 round trip and the p50 of its phases on the loop thread (the torch or raw launch, ``submit``,
``wait``), so that a host-side cost shows in the phase that pays it and a GPU-side one in the wait:

* ``torch add_ + sync``, ``marker``: each alone;
* ``torch add_ + marker``: the puzzle;
* ``torch add_, sync, marker``: the two one after the other (additive?);
* ``stream ctx + marker``: torch's stream context without a kernel (its Python alone);
* ``raw launch on s + marker``: arig's empty kernel launched on the torch stream with a raw
  ``cuLaunchKernel`` from the loop thread (a launch without torch);
* ``add_, sync, add_ + marker``: the add_ awaited by torch first, then add_ again with the
  marker (whether an idle torch stream's first launch is the slow one);
* ``marker + torch add_``: the marker first, the add_ after it, the marker awaited.

Usage: python3 scripts/probe_torch_split.py [--n 300]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import time
from typing import Any

import numpy as np
import torch

import arig
import arig.cuda
from arig.cuda import shipped_image


async def probe(n: int) -> None:
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        img = await dev.load(shipped_image())
        empty_fn = img.function("empty")
        s = torch.cuda.Stream()
        x = torch.zeros(1024, device="cuda")
        cu = ctypes.CDLL("libcuda.so.1")
        cu.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        no_args = (ctypes.c_void_p * 1)()
        submit, wait = dev.submit, dev.wait
        pc = time.perf_counter

        def add() -> None:
            with torch.cuda.stream(s):
                x.add_(1.0)

        def raw() -> None:
            rc = cu.cuLaunchKernel(empty_fn, 1, 1, 1, 1, 1, 1, 0, s.cuda_stream, no_args, None)
            assert rc == 0, f"cuLaunchKernel returned {rc}"

        def ctx_only() -> None:
            with torch.cuda.stream(s):
                pass

        async def marked(before: Any) -> tuple[float, float, float]:
            t0 = pc()
            before()
            t1 = pc()
            v = await submit(None)
            t2 = pc()
            await wait(v)
            return t1 - t0, t2 - t1, pc() - t2

        async def torch_sync() -> tuple[float, float, float]:
            t0 = pc()
            add()
            t1 = pc()
            s.synchronize()
            return t1 - t0, 0.0, pc() - t1

        async def marker() -> tuple[float, float, float]:
            return await marked(lambda: None)

        async def add_marker() -> tuple[float, float, float]:
            return await marked(add)

        async def add_sync_marker() -> tuple[float, float, float]:
            add()
            s.synchronize()
            return await marked(lambda: None)

        async def ctx_marker() -> tuple[float, float, float]:
            return await marked(ctx_only)

        async def raw_marker() -> tuple[float, float, float]:
            return await marked(raw)

        async def idle_then_add_marker() -> tuple[float, float, float]:
            add()
            s.synchronize()
            return await marked(add)

        async def marker_then_add() -> tuple[float, float, float]:
            t0 = pc()
            v = await submit(None)
            t1 = pc()
            add()
            t2 = pc()
            await wait(v)
            return t2 - t1, t1 - t0, pc() - t2

        b: Any = dev._backend
        cases = (("torch add_ + sync", torch_sync), ("marker", marker), ("torch add_ + marker", add_marker),
                 ("torch add_, sync, marker", add_sync_marker), ("stream ctx + marker", ctx_marker),
                 ("raw launch on s + marker", raw_marker), ("add_, sync, add_ + marker", idle_then_add_marker),
                 ("marker + torch add_", marker_then_add))
        print(f"{'case':28s} {'p50':>7s} {'p90':>7s}   launch  submit    wait  (µs, p50 of each phase)  eventfd/spins")
        for name, op in cases:
            for _ in range(50):
                await op()
            s0 = b.completion.stats()
            rows = []
            for _ in range(n):
                rows.append(await op())
            s1 = b.completion.stats()
            a = np.array(rows) * 1e6
            tot = a.sum(axis=1)
            print(f"{name:28s} {np.median(tot):7.1f} {np.percentile(tot, 90):7.1f}   {np.median(a[:, 0]):6.1f}  {np.median(a[:, 1]):6.1f}  {np.median(a[:, 2]):6.1f}"
                  f"{'':26s}{s1['eventfd_writes'] - s0['eventfd_writes']}/{s1['idle_spin_hits'] - s0['idle_spin_hits']}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=300)
    asyncio.run(probe(p.parse_args().n))


if __name__ == "__main__":
    main()
