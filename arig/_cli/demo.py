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
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

import arig

from .._stall import StallMeter

__all__ = ["main", "run_demo", "pick_opener", "parse_device", "WrongResult"]


class WrongResult(arig.ArigError):
    """The device computed a saxpy that differs from numpy's: the demo failed."""


_DEVICES = "host, cuda, cuda:N or nv:N (N a GPU index: 0, 1, ...)"


def parse_device(spec: str) -> tuple[str, int]:
    """``--device`` as (kind, index): ``host``, ``cuda[:N]``, ``nv[:N]``; ArigValueError naming what is wrong."""
    kind, colon, index = spec.strip().lower().partition(":")
    if kind not in ("host", "cuda", "nv"):
        raise arig.ArigValueError(f"unknown device {spec!r}: use {_DEVICES}")
    if not colon:
        return kind, 0
    if kind == "host" or not index.isdigit() or not index.isascii():
        raise arig.ArigValueError(f"bad device {spec!r}: use {_DEVICES}")
    return kind, int(index)


def pick_opener(spec: str | None) -> Any:
    """The opener for ``--device`` (``host``, ``cuda:N``, ``nv:N``); the best available if None."""
    if spec is None:
        try:
            if arig.cuda.count() > 0:
                return arig.cuda.gpu(0)
        except arig.ArigError:
            pass
        return arig.host.cpu()
    kind, i = parse_device(spec)
    if kind == "host":
        return arig.host.cpu()
    if kind == "cuda":
        return arig.cuda.gpu(i)
    return arig.nvrm.gpu(i)


def _device_arg(spec: str) -> str:
    try:
        parse_device(spec)
    except arig.ArigValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return spec


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


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


async def _nv_saxpy(dev: arig.Device) -> Callable[[float, arig.Buffer, arig.Buffer, int], Awaitable[int]]:
    """The shipped cubin's saxpy as a prepared arig.nvrm.Launch (the kernel-driver path)."""
    image = await dev.load((Path(__file__).resolve().parent.parent / "kernels" / "kernels.cubin").read_bytes())
    func = image.function("saxpy")

    async def saxpy(a: float, bx: arig.Buffer, by: arig.Buffer, n: int) -> int:
        launch = arig.nvrm.Launch(func, (n + 255) // 256, 256, struct.pack("<f4xQQi", a, bx.address, by.address, n))
        return await dev.submit(launch, keep=(image, bx, by))

    return saxpy


async def _saxpy_for(dev: arig.Device) -> Callable[[float, arig.Buffer, arig.Buffer, int], Awaitable[int]]:
    if dev.arch == "host":
        return _host_saxpy(dev)
    if dev.name.split(":")[0] == "NV":
        return await _nv_saxpy(dev)
    from ..cuda._demo import cuda_saxpy

    return await cuda_saxpy(dev)


async def run_demo(opener: Any, tasks: int = 64, iters: int = 200, n: int = 4096, progress: bool = True, seed: int = 0) -> dict[str, Any]:
    """Run the job; return its figures (raises WrongResult if any result is wrong)."""
    rng = np.random.default_rng(seed)
    latencies: list[float] = []
    done = 0
    async with await arig.open(opener) as dev:
        saxpy = await _saxpy_for(dev)

        async def worker(k: int) -> None:
            nonlocal done
            x = rng.standard_normal(n).astype(np.float32)
            y = rng.standard_normal(n).astype(np.float32)
            bx, by = await dev.alloc(4 * n), await dev.alloc(4 * n)  # the device's default kind: VRAM on a GPU, as CUDA's and NV's
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
                        raise WrongResult(f"task {k}: saxpy result differs from numpy at [{bad}]: {out[bad]} != {y[bad]}")
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
    p.add_argument("--device", type=_device_arg, help=f"{_DEVICES} (default: the first GPU, else the host)")
    p.add_argument("--tasks", type=_positive, help="concurrent tasks (default 64; --pipeline: 16)")
    p.add_argument("--iters", type=_positive, help="saxpys per task (default 200; --pipeline: items per task, 50)")
    p.add_argument("--n", type=_positive, default=4096, help="vector length (default 4096)")
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
