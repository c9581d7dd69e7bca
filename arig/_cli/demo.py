"""``python -m arig demo``: the main job.

Many concurrent tasks each own two vectors on the device and run saxpy
(``y = a*x + y``) on them again and again, awaiting every completion and
checking every result against numpy.  It prints completions per second,
latency percentiles and the event loop's longest stall.  On the host device
the work is numpy on the host queue's worker; on a CUDA device it is a
saxpy kernel launched by the fill.  ``--pipeline`` runs ``arig._cli.pipeline``
instead: one saxpy stage per device.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

import numpy as np

import arig

from .._stall import StallMeter
from .saxpy import DEVICES, WrongResult, device_arg, parse_device, pick_opener, positive, saxpy_for

__all__ = ["main", "run_demo", "pick_opener", "parse_device", "WrongResult"]


async def run_demo(opener: Any, tasks: int = 64, iters: int = 200, n: int = 4096, progress: bool = True, seed: int = 0) -> dict[str, Any]:
    """Run the job; return its figures (raises WrongResult if any result is wrong)."""
    rng = np.random.default_rng(seed)
    latencies: list[float] = []
    done = 0
    async with await arig.open(opener) as dev:
        saxpy = await saxpy_for(dev)

        # Each task's vectors are made before the job starts: 64 tasks making theirs on their first
        # step would be one pass of the loop over all of them (~10 ms), the demo's own start-up.
        inputs = [(rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)) for _ in range(tasks)]

        async def worker(k: int) -> None:
            nonlocal done
            x, y = inputs[k]
            bx, by = await dev.alloc(4 * n), await dev.alloc(4 * n)  # the device's default kind: VRAM on a GPU, as CUDA's and NV's
            try:
                await dev.upload(bx, x)
                await dev.upload(by, y)
                out, check = np.empty_like(y), _Check(n)
                for _ in range(iters):
                    a = np.float32(rng.uniform(-2, 2))
                    t = time.perf_counter()
                    v = await saxpy(float(a), bx, by, n)
                    await dev.wait(v)
                    latencies.append(time.perf_counter() - t)
                    await dev.download(by, out)
                    bad = check(a, x, y, out)
                    if bad is not None:
                        raise WrongResult(f"task {k}: saxpy result differs from numpy at [{bad}]: {out[bad]} != {check.want[bad]}")
                    y, out = out, y  # carry the device's rounding forward, as the device does
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


class _Check:
    """``np.allclose(out, a * x + y, rtol=1e-5, atol=1e-5)`` element by element, into arrays made
    once: the task's check runs on the loop between its awaits, and allclose's temporaries cost
    several times the arithmetic (a pass of the loop over 64 woken tasks is the demo's stall)."""

    __slots__ = ("want", "diff", "tol")
    TOL = np.float32(1e-5)

    def __init__(self, n: int) -> None:
        self.want, self.diff, self.tol = (np.empty(n, np.float32) for _ in range(3))

    def __call__(self, a: np.float32, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any], out: np.ndarray[Any, Any]) -> int | None:
        """The first index where ``out`` is not ``a * x + y`` within the tolerance (NaN never is), or None."""
        want, diff, tol = self.want, self.diff, self.tol
        np.multiply(x, a, out=want)
        np.add(want, y, out=want)
        np.subtract(out, want, out=diff)
        np.abs(diff, out=diff)
        np.abs(want, out=tol)
        np.multiply(tol, self.TOL, out=tol)
        np.add(tol, self.TOL, out=tol)
        ok = np.less_equal(diff, tol)
        return None if ok.all() else int(np.argmin(ok))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m arig demo", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--device", type=device_arg, help=f"{DEVICES} (default: the first GPU, else the host)")
    p.add_argument("--tasks", type=positive, help="concurrent tasks (default 64; --pipeline: 16)")
    p.add_argument("--iters", type=positive, help="saxpys per task (default 200; --pipeline: items per task, 50)")
    p.add_argument("--n", type=positive, default=4096, help="vector length (default 4096)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--pipeline", action="store_true", help="a pipeline of saxpy stages, one device each, beside every stage on one device")
    p.add_argument("--devices", help="--pipeline's devices, comma-separated (default: every GPU; on one GPU its CUDA and NV devices; else two host devices)")
    args = p.parse_args(argv)
    if args.pipeline or args.devices:
        return _pipeline(args)
    args.tasks, args.iters = args.tasks or 64, args.iters or 200
    try:
        opener = pick_opener(args.device)
        print(f"arig demo: {args.tasks} tasks x {args.iters} saxpys of {args.n} floats on {opener.name}", flush=True)
        r = asyncio.run(run_demo(opener, args.tasks, args.iters, args.n, progress=not args.quiet))
    except arig.ArigError as exc:  # WrongResult among them
        print(f"arig demo: {exc}", file=sys.stderr)
        return 1
    lat = r["latency_us"]
    print(f"device {r['device']} ({r['arch']}): {r['saxpys']} saxpys verified against numpy in {r['seconds']:.2f} s")
    print(f"  {r['saxpys_per_s']:.0f} completions/s; latency p50 {lat['p50']:.0f} us, p90 {lat['p90']:.0f} us, p99 {lat['p99']:.0f} us, max {lat['max']:.0f} us")
    print(f"  longest event-loop stall {r['longest_loop_stall_ms']:.2f} ms")
    return 0


def _pipeline(args: argparse.Namespace) -> int:
    from . import pipeline

    try:
        specs = pipeline.check_devices(args.devices.split(",")) if args.devices else pipeline.machine_devices()
        if args.device is not None:
            raise arig.ArigValueError("--pipeline takes --devices (comma-separated), not --device")
        tasks, items = args.tasks or 16, args.iters or 50
        print(f"arig demo --pipeline: {tasks} tasks x {items} items of {args.n} floats over {', '.join(specs)}", flush=True)
        r = asyncio.run(pipeline.run_pipeline(specs, tasks, items, args.n))
    except arig.ArigError as exc:
        print(f"arig demo: {exc}", file=sys.stderr)
        return 1
    for line in pipeline.report(r):
        print(line)
    return 0
