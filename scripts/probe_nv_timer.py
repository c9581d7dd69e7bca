"""Probe: how long the ``spin`` kernel (it spins on %globaltimer for ns) takes in host time on the NV
device and on the CUDA device, and how the GPU's release timestamps advance against CLOCK_MONOTONIC.

A kernel that spins for ns GPU-timer nanoseconds lasts ns host nanoseconds only if the GPU's timer
runs at the host's rate.  Usage (GPU machine): python3 scripts/probe_nv_timer.py"""

from __future__ import annotations

import asyncio
import ctypes
import os
import time
from pathlib import Path

import numpy as np

import arig
from arig import nvrm
from arig.cuda import Launch, pack
from arig.cuda import shipped_image

CUBIN = os.path.join(os.path.dirname(arig.__file__), "kernels", "kernels.cubin")


async def one(kind: str) -> None:
    if kind == "nv":
        dev = await arig.open(nvrm.gpu(0))
        img = await dev.load(Path(CUBIN).read_bytes())
        L = nvrm.Launch
        stamp = ctypes.c_uint64.from_address(dev._backend.queue.timeline_address + 8)  # the release's GPU time
    else:
        dev = await arig.open(arig.cuda.gpu(0))
        img = await dev.load(shipped_image())
        L, stamp = Launch, None
    try:
        for ns in (0, 100_000, 1_000_000, 10_000_000):
            launch = L(img.function("spin"), 1, 1, pack(np.uint64(ns)))
            for _ in range(3):
                await dev.wait(await dev.submit(launch))
            host, gpu = [], []
            for _ in range(10):
                g0 = stamp.value if stamp is not None else 0
                t0 = time.monotonic_ns()
                await dev.wait(await dev.submit(launch))
                host.append(time.monotonic_ns() - t0)
                if stamp is not None:
                    gpu.append(stamp.value - g0)
            line = f"{dev.name:5s} spin {ns / 1e3:8.0f} us: host round trip p50 {np.median(host) / 1e3:9.1f} us"
            if gpu:
                line += f"; GPU time between releases p50 {np.median(gpu) / 1e3:9.1f} us"
            print(line, flush=True)
        if stamp is not None:
            # The GPU timer against CLOCK_MONOTONIC over about a second.
            empty = L(img.function("empty"), 1, 1)
            await dev.wait(await dev.submit(empty))
            g0, h0 = stamp.value, time.monotonic_ns()
            await asyncio.sleep(1.0)
            await dev.wait(await dev.submit(empty))
            g1, h1 = stamp.value, time.monotonic_ns()
            print(f"{dev.name:5s} GPU timer over {(h1 - h0) / 1e9:.3f} s of CLOCK_MONOTONIC: {(g1 - g0) / 1e9:.6f} s (rate {(g1 - g0) / (h1 - h0):.6f})")
    finally:
        await dev.stop()


def main() -> None:
    for kind in ("nv", "cuda"):
        asyncio.run(one(kind))


if __name__ == "__main__":
    main()
