"""The NV device's uploads and downloads on a real GPU: items the core's native thread runs (staged copies).

Skipped where the NVIDIA kernel driver is not loaded.  Written for the H200 (driver 580).
Run: python3 -m pytest -q -m gpu tests/gpu/test_nv_copies_gpu.py
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import struct
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import pytest

import arig._env

if not os.path.exists("/dev/nvidiactl") and not arig._env.GPU_REQUIRED:
    pytest.skip("the NVIDIA kernel driver is not loaded", allow_module_level=True)

import arig
import arig.nvrm as nvrm

pytestmark = [pytest.mark.arig_gpu, pytest.mark.asyncio]

REPO = Path(__file__).resolve().parents[2]
CUBIN = (REPO / "tests" / "data" / "nv" / "probe.sm_90.cubin").read_bytes()
#: One byte, a page, a MiB and an odd tail, the whole staging area (64 MiB: four 16 MiB chunks).
SIZES = (1, 4096, (1 << 20) + 7, 64 << 20)


def sha(a: np.ndarray) -> str:
    return hashlib.sha256(a).hexdigest()


async def test_round_trips_of_every_size_and_kind_from_concurrent_tasks_by_hash() -> None:
    async with await arig.open(nvrm.gpu(0)) as dev:

        async def task(k: int, kind: str, size: int) -> None:
            buf = await dev.alloc(size, kind)
            try:
                for r in range(3):
                    data = np.random.default_rng(1000 * k + r).integers(0, 256, size, dtype=np.uint8)
                    q = (k + r) % 2  # either queue: the two are ordered with each other
                    await dev.upload(buf, data, queue=q)
                    out = np.zeros(size, np.uint8)
                    await asyncio.wait_for(dev.download(buf, out, queue=1 - q), 60)
                    assert sha(out) == sha(data), f"task {k}: {kind}, {size} bytes, round {r}"
            finally:
                buf.close()

        jobs = [(kind, size) for kind in ("device", "pinned", "mapped") for size in SIZES]
        await asyncio.wait_for(asyncio.gather(*(task(k, kind, size) for k, (kind, size) in enumerate(jobs))), 300)


async def test_a_download_after_a_launch_reads_what_the_kernel_wrote_from_32_tasks() -> None:
    """The demo's pattern: each task's launch, then its download (no wait between), many tasks at once."""
    tasks, rounds, n = 32, 50, 4096
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        func = image.function("axpy")

        async def task(k: int) -> None:
            rng = np.random.default_rng(k)
            x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
            bx, by = await dev.alloc(4 * n, "pinned"), await dev.alloc(4 * n)
            await dev.upload(bx, x)
            await dev.upload(by, y)
            out = np.empty_like(y)
            for r in range(rounds):
                a = np.float32(rng.uniform(-2, 2))
                args = struct.pack("<f4xQQi", a, bx.address, by.address, n)  # axpy(float a, const float *x, float *y, int n)
                await dev.submit(nvrm.Launch(func, (n + 255) // 256, 256, args), keep=(bx, by, image))
                await dev.download(by, out)
                y = a * x + y
                np.testing.assert_allclose(out, y, rtol=1e-5, atol=1e-5, err_msg=f"task {k} round {r}")
                y = out.copy()
            bx.close()
            by.close()

        await asyncio.wait_for(asyncio.gather(*(task(k) for k in range(tasks))), 120)


async def test_copies_run_no_python_on_the_submit_thread() -> None:
    """Uploads and downloads are the native thread's items: the submit thread runs no Python for them."""
    calls: list[str] = []
    recording = False

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if recording and event == "call" and threading.current_thread().name.startswith("arig-submit"):
            calls.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    threading.setprofile(profile)  # for the submit thread the open starts
    try:
        async with await arig.open(nvrm.gpu(0)) as dev:
            bufs = [(await dev.alloc(size, kind), size) for kind in ("device", "pinned") for size in SIZES]
            recording = True
            for buf, size in bufs:
                data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
                await dev.upload(buf, data)
                out = np.zeros(size, np.uint8)
                await asyncio.wait_for(dev.download(buf, out), 60)
                assert sha(out) == sha(data), f"{buf!r}, {size} bytes"
            recording = False
            for buf, _ in bufs:
                buf.close()
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    assert calls == [], "copies ran Python on the submit thread: " + ", ".join(sorted(set(calls))[:8])
