"""The NV device's copies over the fake kernel driver (arig.testing.FakeNvrm), on the CPU: a table.

What it measures is the host side of a copy (its hand-offs between threads, the Python work,
how long the GIL is held at a time, the event loop's stalls), not a GPU: the fake's copy engine
is a Python thread.  Run it before and after a change to the copy path and compare::

    PYTHONPATH=$PWD python3 scripts/nv_copy_bench.py

Rows: the demo (``python -m arig demo``'s job, smaller) over the fake, with the event loop thread's
CPU time per completion (open and close included: what bounds the rate where the GPU is fast);
serial 16 KiB downloads (the demo's per-completion copy) and the Python calls each makes on the
device's submit thread; one 64 MiB upload and download, with the longest time a watcher thread
waited for the GIL while they ran, and the loop's longest stall.  On 2 shared cores the stalls
and rates are noisy (the fake GPU is Python threads too); the call and CPU counts are not.
"""

from __future__ import annotations

import asyncio
import struct
import sys
import threading
import time
from typing import Any

import numpy as np

import arig
from arig._cli.demo import run_demo
from arig._stall import StallMeter
from arig.testing import FakeNvrm


class GilWatch:
    """A thread that sleeps ``period`` at a time: how late it wakes is about how long another thread held the GIL."""

    def __init__(self, period: float = 200e-6) -> None:
        self.period, self.longest = period, 0.0
        self._stop = threading.Event()
        self._th = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            t = time.perf_counter()
            time.sleep(self.period)
            self.longest = max(self.longest, time.perf_counter() - t - self.period)

    def __enter__(self) -> GilWatch:
        self._th.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._th.join()


def fake_with_saxpy() -> FakeNvrm:
    f = FakeNvrm()

    def saxpy(params: bytes, grid: tuple[int, int, int], block: tuple[int, int, int]) -> None:
        a, x, y, n = struct.unpack("<f4xQQi", params)
        n = min(n, grid[0] * block[0])
        ys = f.array(y, np.float32, n)
        ys[:] = np.float32(a) * f.array(x, np.float32, n) + ys

    f.kernel("saxpy", saxpy)
    return f


class SubmitThreadCalls:
    """Python calls on the device's submit thread while ``on`` (a profile function on threads started after ``__init__``)."""

    def __init__(self) -> None:
        self.on, self.count = False, 0
        threading.setprofile(self._profile)

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if self.on and event == "call" and threading.current_thread().name.startswith("arig-submit"):
            self.count += 1


async def serial_downloads(count: int, nbytes: int) -> tuple[float, float]:
    """(downloads per second, one after another, of ``nbytes`` from pinned memory; Python calls on the submit thread per download)."""
    calls = SubmitThreadCalls()
    try:
        async with await arig.open(arig.nvrm.gpu(0)) as dev:
            buf = await dev.alloc(nbytes, "pinned")
            out = np.empty(nbytes, np.uint8)
            await dev.download(buf, out)
            calls.on = True
            t = time.perf_counter()
            for _ in range(count):
                await dev.download(buf, out)
            rate = count / (time.perf_counter() - t)
            calls.on = False
            buf.close()
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    return rate, calls.count / count


async def big_copies(nbytes: int) -> tuple[float, float, float, float]:
    """(upload s, download s, longest GIL wait ms, longest loop stall ms) of one copy each way of ``nbytes``."""
    async with await arig.open(arig.nvrm.gpu(0)) as dev:
        buf = await dev.alloc(nbytes, "device")
        data = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
        out = np.empty_like(data)
        with GilWatch() as gil:
            async with StallMeter() as stall:
                t0 = time.perf_counter()
                await dev.upload(buf, data)
                t1 = time.perf_counter()
                await dev.download(buf, out)
                t2 = time.perf_counter()
        assert np.array_equal(out, data)
        buf.close()
    return t1 - t0, t2 - t1, gil.longest * 1e3, stall.longest * 1e3


def main() -> int:
    rows: list[tuple[str, str]] = []
    fake = fake_with_saxpy()
    with fake.installed():
        cpu0 = time.thread_time()
        runs = [asyncio.run(run_demo(arig.nvrm.gpu(0), tasks=16, iters=20, n=4096, progress=False)) for _ in range(5)]
        loop_cpu = (time.thread_time() - cpu0) / sum(r["saxpys"] for r in runs)
        rows.append(("demo 16 tasks x 20, median of 5 (completions/s)", f"{np.median([r['saxpys_per_s'] for r in runs]):.0f}"))
        rows.append(("demo longest loop stall, median of 5 (ms)", f"{np.median([r['longest_loop_stall_ms'] for r in runs]):.2f}"))
        rows.append(("demo: the loop thread's CPU per completion (us)", f"{loop_cpu * 1e6:.0f}"))
        rate, calls = asyncio.run(serial_downloads(300, 16 << 10))
        rows.append(("serial 16 KiB downloads (/s)", f"{rate:.0f}"))
        rows.append(("Python calls on the submit thread per download", f"{calls:.1f}"))
        up, down, gil, stall = asyncio.run(big_copies(64 << 20))
        rows.append(("64 MiB upload (ms)", f"{up * 1e3:.1f}"))
        rows.append(("64 MiB download (ms)", f"{down * 1e3:.1f}"))
        rows.append(("longest GIL wait of a watcher thread (ms)", f"{gil:.2f}"))
        rows.append(("longest loop stall during them (ms)", f"{stall:.2f}"))
    assert fake.violations == [], fake.violations
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
