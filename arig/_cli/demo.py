"""``python -m arig demo``: the main job.

Many concurrent tasks each own two vectors on the device and run saxpy
(``y = a*x + y``) on them again and again, awaiting every completion and
checking every result against numpy.  It prints completions per second,
latency percentiles and the event loop's longest stall.  On the host device
the work is numpy on the host queue's worker; on a CUDA device it is a
saxpy kernel launched by the fill.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

import arig

from .._stall import StallMeter

__all__ = ["main", "run_demo", "pick_opener"]


def pick_opener(spec: str | None) -> Any:
    """The opener for ``--device`` (``host``, ``cuda:N``, ``nv:N``); the best available if None."""
    if spec is None:
        try:
            if arig.cuda.count() > 0:
                return arig.cuda.gpu(0)
        except arig.ArigError:
            pass
        return arig.host.cpu()
    kind, _, index = spec.lower().partition(":")
    i = int(index) if index else 0
    if kind == "host":
        return arig.host.cpu()
    if kind == "cuda":
        return arig.cuda.gpu(i)
    if kind == "nv":
        return arig.nvrm.gpu(i)
    raise SystemExit(f"unknown device {spec!r}: use host, cuda:N or nv:N")


def _host_saxpy(dev: arig.Device) -> Callable[[float, arig.Buffer, arig.Buffer, int], Awaitable[int]]:
    def kernel(a: np.float32, x: np.ndarray, y: np.ndarray) -> None:
        y += a * x  # float32 throughout, as the GPU kernel computes it

    def fill(queue: Any, arg: tuple[Any, ...], v: int) -> None:
        queue.enqueue(kernel, *arg)

    async def saxpy(a: float, bx: arig.Buffer, by: arig.Buffer, n: int) -> int:
        x = bx.numpy(np.float32)[:n]
        y = by.numpy(np.float32)[:n]
        return await dev.submit(fill, (np.float32(a), x, y))

    return saxpy


async def _saxpy_for(dev: arig.Device) -> Callable[[float, arig.Buffer, arig.Buffer, int], Awaitable[int]]:
    if dev.arch == "host":
        return _host_saxpy(dev)
    from ..cuda._demo import cuda_saxpy

    return await cuda_saxpy(dev)


async def run_demo(opener: Any, tasks: int = 64, iters: int = 200, n: int = 4096, progress: bool = True, seed: int = 0) -> dict[str, Any]:
    """Run the job; return its figures (raises if any result is wrong)."""
    rng = np.random.default_rng(seed)
    latencies: list[float] = []
    done = 0
    async with await arig.open(opener) as dev:
        saxpy = await _saxpy_for(dev)

        async def worker(k: int) -> None:
            nonlocal done
            x = rng.standard_normal(n).astype(np.float32)
            y = rng.standard_normal(n).astype(np.float32)
            bx, by = await dev.alloc(4 * n), await dev.alloc(4 * n)
            try:
                await dev.upload(bx, x)
                await dev.upload(by, y)
                out = np.empty_like(y)
                for _ in range(iters):
                    a = np.float32(rng.uniform(-2, 2))
                    t = time.perf_counter()
                    v = await saxpy(float(a), bx, by, n)
                    await dev.wait(v)
                    latencies.append(time.perf_counter() - t)
                    y = y + a * x
                    await dev.download(by, out)
                    if not np.allclose(out, y, rtol=1e-5, atol=1e-5):
                        bad = int(np.argmax(np.abs(out - y)))
                        raise AssertionError(f"task {k}: saxpy result differs from numpy at [{bad}]: {out[bad]} != {y[bad]}")
                    y = out.copy()  # carry the device's rounding forward, as the device does
                    done += 1
            finally:
                bx.close()
                by.close()

        async def report() -> None:
            while True:
                await asyncio.sleep(1.0)
                print(f"  {done}/{tasks * iters} saxpys verified", file=sys.stderr, flush=True)

        t0 = time.perf_counter()
        async with StallMeter() as stall:
            reporter = asyncio.get_running_loop().create_task(report()) if progress else None
            try:
                await asyncio.gather(*(worker(k) for k in range(tasks)))
            finally:
                if reporter is not None:
                    reporter.cancel()
        elapsed = time.perf_counter() - t0
        lat = np.array(latencies) * 1e6
        return {
            "device": dev.name,
            "arch": dev.arch,
            "tasks": tasks,
            "saxpys": done,
            "n": n,
            "seconds": elapsed,
            "saxpys_per_s": done / elapsed,
            "latency_us": {p: float(np.percentile(lat, q)) for p, q in (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))},
            "longest_loop_stall_ms": stall.longest * 1e3,
        }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m arig demo", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--device", help="host, cuda:N or nv:N (default: the first GPU, else the host)")
    p.add_argument("--tasks", type=int, default=64)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--n", type=int, default=4096, help="vector length")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    opener = pick_opener(args.device)
    print(f"arig demo: {args.tasks} tasks x {args.iters} saxpys of {args.n} floats on {opener.name}", flush=True)
    try:
        r = asyncio.run(run_demo(opener, args.tasks, args.iters, args.n, progress=not args.quiet))
    except arig.OpenError as exc:
        print(f"arig demo: {exc}", file=sys.stderr)
        return 2
    lat = r["latency_us"]
    print(f"device {r['device']} ({r['arch']}): {r['saxpys']} saxpys verified against numpy in {r['seconds']:.2f} s")
    print(f"  {r['saxpys_per_s']:.0f} completions/s; latency p50 {lat['p50']:.0f} us, p90 {lat['p90']:.0f} us, p99 {lat['p99']:.0f} us, max {lat['max']:.0f} us")
    print(f"  longest event-loop stall {r['longest_loop_stall_ms']:.2f} ms")
    return 0
