"""``python -m arig demo --pipeline``: a pipeline of saxpy stages, one device per stage.

Each of many concurrent tasks pushes items through the stages: stage ``k`` computes
``y = a_k * x + y`` on device ``k``, and the item's ``y`` moves on to the next device with
``dev.copy`` (staged through host memory).  Every result is checked against numpy.  The same
items are then run with every stage on the first device, in the same run, so the pipeline's gain
is measured beside what one device does alone.

Which devices: ``--devices`` (``host``, ``cuda:N``, ``nv:N``, comma-separated, two or more), or
the machine's: every CUDA GPU where there are two or more; on one GPU its CUDA and NV devices
(two CUDA devices where the NV device cannot open); without a GPU two host devices.

Threads: everything runs on the event loop of ``asyncio.run`` (the main thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np

import arig

from .._stall import StallMeter
from .saxpy import WrongResult, parse_device, pick_opener, saxpy_for

__all__ = ["machine_devices", "run_pipeline"]

Saxpy = Callable[[float, arig.Buffer, arig.Buffer, int], Awaitable[int]]


def machine_devices() -> list[str]:
    """The default stages' devices (see the module docstring)."""
    try:
        gpus = arig.cuda.count()
    except arig.ArigError:
        gpus = 0
    if gpus >= 2:
        return [f"cuda:{i}" for i in range(gpus)]
    if gpus == 1:
        try:
            nv = arig.nvrm.count() > 0
        except (arig.ArigError, OSError):
            nv = False
        return ["cuda:0", "nv:0"] if nv else ["cuda:0", "cuda:0"]
    return ["host", "host"]


def check_devices(specs: Sequence[str]) -> list[str]:
    """``--devices`` checked: two or more, each as ``--device`` takes it (ArigValueError otherwise)."""
    specs = [s.strip() for s in specs if s.strip()]
    if len(specs) < 2:
        raise arig.ArigValueError(f"a pipeline needs two or more devices, got {specs}")
    for s in specs:
        parse_device(s)
    return specs


class _Stages:
    """The open devices of the stages, each with its saxpy and the item's ``x`` on it."""

    def __init__(self, devs: list[arig.Device], saxpys: list[Saxpy]) -> None:
        self.devs, self.saxpys = devs, saxpys


async def _item(stages: _Stages, coeffs: Sequence[float], xs: list[arig.Buffer], ys: list[arig.Buffer], y0: np.ndarray, n: int) -> np.ndarray:
    """One item through every stage; its result, downloaded from the last device."""
    devs = stages.devs
    await devs[0].upload(ys[0], y0)
    for k, dev in enumerate(devs):
        if k:
            await dev.copy(ys[k], ys[k - 1], nbytes=4 * n)
        await dev.wait(await stages.saxpys[k](coeffs[k], xs[k], ys[k], n))
    out = np.empty(n, np.float32)
    await devs[-1].download(ys[-1], out)
    return out


async def _drive(stages: _Stages, tasks: int, items: int, n: int, seed: int) -> dict[str, Any]:
    """``tasks`` concurrent tasks, ``items`` items each; every result checked."""
    rng = np.random.default_rng(seed)
    coeffs = [float(np.float32(c)) for c in rng.uniform(-2, 2, len(stages.devs))]
    latencies: list[float] = []
    done = 0

    async def worker(k: int) -> None:
        nonlocal done
        x = rng.standard_normal(n).astype(np.float32)
        bufs: list[arig.Buffer] = []
        try:
            xs, ys = [], []
            for dev in stages.devs:
                bx, by = await dev.alloc(4 * n), await dev.alloc(4 * n)
                bufs += [bx, by]
                await dev.upload(bx, x)
                xs.append(bx)
                ys.append(by)
            for i in range(items):
                y = rng.standard_normal(n).astype(np.float32)
                t = time.perf_counter()
                out = await _item(stages, coeffs, xs, ys, y, n)
                latencies.append(time.perf_counter() - t)
                want = y
                for c in coeffs:
                    want = (np.float32(c) * x + want).astype(np.float32)
                if not np.allclose(out, want, rtol=1e-4, atol=1e-4):
                    bad = int(np.argmax(np.abs(out - want)))
                    raise WrongResult(f"task {k}, item {i}: the pipeline's result differs from numpy at [{bad}]: {out[bad]} != {want[bad]}")
                done += 1
        finally:
            for b in bufs:
                b.close()

    t0 = time.perf_counter()
    async with StallMeter() as stall:
        await asyncio.gather(*(worker(k) for k in range(tasks)))
    elapsed = time.perf_counter() - t0
    lat = np.array(latencies) * 1e6
    return {
        "items": done,
        "seconds": elapsed,
        "items_per_s": done / elapsed,
        "latency_us": {p: float(np.percentile(lat, q)) for p, q in (("p50", 50), ("p99", 99))},
        "longest_loop_stall_ms": stall.longest * 1e3,
    }


async def run_pipeline(specs: Sequence[str], tasks: int = 16, items: int = 50, n: int = 4096, seed: int = 0) -> dict[str, Any]:
    """Run the pipeline over the devices of ``specs``, then every stage on the first device alone;
    their figures (raises WrongResult if any result is wrong).  A device named twice is opened
    once per stage where its kind allows it (CUDA, host), else shared by its stages (NV)."""
    async with contextlib.AsyncExitStack() as stack:
        devs: list[arig.Device] = []
        opened: dict[str, arig.Device] = {}
        for s in specs:
            if s in opened and s.startswith("nv"):
                devs.append(opened[s])  # one NV device per GPU at a time
                continue
            dev = await stack.enter_async_context(await arig.open(pick_opener(s)))
            opened.setdefault(s, dev)
            devs.append(dev)
        saxpys = [await saxpy_for(d) for d in devs]
        pipeline = await _drive(_Stages(devs, saxpys), tasks, items, n, seed)
        alone = await _drive(_Stages([devs[0]] * len(devs), [saxpys[0]] * len(devs)), tasks, items, n, seed)
        return {
            "devices": [d.name for d in devs],
            "stages": len(devs),
            "tasks": tasks,
            "n": n,
            "pipeline": pipeline,
            "one_device": alone,
            "speedup": pipeline["items_per_s"] / alone["items_per_s"],
        }


def report(r: dict[str, Any]) -> list[str]:
    """The lines ``--pipeline`` prints."""
    p, a = r["pipeline"], r["one_device"]
    stages = " -> ".join(r["devices"])
    return [
        f"pipeline {stages}: {p['items']} items of {r['n']} floats through {r['stages']} saxpy stages verified against numpy in {p['seconds']:.2f} s",
        f"  {p['items_per_s']:.0f} items/s; latency p50 {p['latency_us']['p50']:.0f} us, p99 {p['latency_us']['p99']:.0f} us; longest event-loop stall {p['longest_loop_stall_ms']:.2f} ms",
        f"every stage on {r['devices'][0]} alone: {a['items_per_s']:.0f} items/s (verified); the pipeline is {r['speedup']:.2f}x that",
    ]
