"""The CUDA and NV devices on a real GPU under trio (``trio.run``): open, a launch, wait, an
upload/download round trip, 64 tasks' gapless values, cancelled waits, a loss reaching every
waiter, stop with waiters pending, graphs and usage.  The same scenarios as ``test_cuda_gpu.py``
and ``test_nv_gpu.py``, run by trio's own scheduler: completions come through the trio port's
reader of the device's fd, with no extra thread and no polling.

Run: python3 -m pytest -q tests/gpu/test_trio_gpu.py
"""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import arig._env

trio = pytest.importorskip("trio")

import arig  # noqa: E402
import arig.cuda  # noqa: E402
import arig.cuda_abi as abi  # noqa: E402
import arig.nvrm as nvrm  # noqa: E402
from arig.cuda import Launch, pack, shipped_image  # noqa: E402
from arig.testing import faults  # noqa: E402

pytestmark = pytest.mark.arig_gpu

REPO = Path(__file__).resolve().parents[2]
CUBIN = (REPO / "tests" / "data" / "nv" / "probe.sm_90.cubin").read_bytes()
MS = 1_000_000  # nanoseconds, for spin
T = 30.0
nv_only = pytest.mark.skipif(not os.path.exists("/dev/nvidiactl") and not arig._env.GPU_REQUIRED, reason="the NVIDIA kernel driver is not loaded")


def _fill(stream: int, launch: Launch, v: int) -> int:
    return launch(stream)


def axpy_args(a: float, x: arig.Buffer, y: arig.Buffer, n: int) -> bytes:
    """axpy(float a, const float *x, float *y, int n) as the kernel lays it out (tests/data/nv/probe.cu)."""
    return struct.pack("<f4xQQi", a, x.address, y.address, n)


def _bad(queue: Any, arg: Any, v: int) -> None:
    raise RuntimeError("boom")


# -- CUDA ----------------------------------------------------------------------------------------


def test_cuda_saxpy_round_trip_under_trio() -> None:
    rng = np.random.default_rng(1)
    n = 1 << 20
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)

    async def main() -> None:
        with trio.fail_after(T):
            async with await arig.open(arig.cuda.gpu(0)) as dev:
                assert dev.name == "CUDA" and dev.arch.startswith("sm_")
                img = await dev.load(shipped_image())
                bx, by = await dev.alloc(4 * n), await dev.alloc(4 * n)
                await dev.upload(bx, x)
                await dev.upload(by, y)
                a = np.float32(1.75)
                launch = Launch(img.function("saxpy"), (n + 255) // 256, 256, pack(a, bx, by, np.int32(n)))
                v = await dev.submit(_fill, launch, keep=(img, bx, by))
                await dev.wait(v)
                out = np.empty_like(y)
                await dev.download(by, out)
                np.testing.assert_allclose(out, a * x + y, rtol=1e-6, atol=1e-6)
                assert dev.reached_at(v) is not None
                bx.close()
                by.close()

    trio.run(main)


def test_cuda_2000_submits_from_64_tasks_gapless_under_trio() -> None:
    total, tasks = 2000, 64

    async def main() -> None:
        with trio.fail_after(T):
            async with await arig.open(arig.cuda.gpu(0)) as dev:
                img = await dev.load(shipped_image())
                out = await dev.alloc(8 * (total + 1))
                store = img.function("store")
                seen: list[int] = []

                async def task(k: int) -> None:
                    for _ in range(total // tasks + (1 if k < total % tasks else 0)):
                        # The fill learns its own value v and stores v*7+1 at out[v].
                        v = await dev.submit(lambda s, a, v: Launch(store, 1, 1, pack(out, np.uint32(v), np.uint64(v * 7 + 1)))(s))
                        seen.append(v)
                        if v % 97 == 0:
                            await dev.wait(v)

                async with trio.open_nursery() as nursery:
                    for k in range(tasks):
                        nursery.start_soon(task, k)
                await dev.wait(max(seen))
                assert sorted(seen) == list(range(1, total + 1))
                host = np.empty(total + 1, np.uint64)
                await dev.download(out, host)
                np.testing.assert_array_equal(host[1:], np.arange(1, total + 1, dtype=np.uint64) * 7 + 1)
                out.close()

    trio.run(main)


def test_cuda_cancelled_waits_and_stop_with_waiters_pending_under_trio() -> None:
    async def main() -> None:
        with trio.fail_after(T):
            dev = await arig.open(arig.cuda.gpu(0))
            img = await dev.load(shipped_image())
            spin = Launch(img.function("spin"), 1, 1, pack(np.uint64(200 * MS)))
            v = await dev.submit(_fill, spin, keep=img)
            with trio.move_on_after(0.01) as scope:
                await dev.wait(v)
            assert scope.cancelled_caught and dev.reached < v
            done: list[int] = []

            async def waiter() -> None:
                await dev.wait(v)
                done.append(v)

            async with trio.open_nursery() as nursery:
                for _ in range(4):
                    nursery.start_soon(waiter)
                await trio.sleep(0.01)
                nursery.start_soon(dev.stop)  # the stop lets the pending work finish
            assert done == [v] * 4 and dev.stopped and dev.lost is None and dev.reached == v

    trio.run(main)


def test_cuda_loss_reaches_every_waiter_and_the_gpu_opens_again_under_trio() -> None:
    async def main() -> None:
        with trio.fail_after(T):
            dev = await arig.open(arig.cuda.gpu(0))
            img = await dev.load(shipped_image())
            await dev.submit(_fill, Launch(img.function("spin"), 1, 1, pack(np.uint64(50 * MS))), keep=img)
            v = await dev.submit(_bad)
            heard: list[BaseException] = []

            async def waiter() -> None:
                try:
                    await dev.wait(v)
                except arig.DeviceLost as exc:
                    heard.append(exc)

            async with trio.open_nursery() as nursery:
                for _ in range(5):
                    nursery.start_soon(waiter)
            assert len(heard) == 5 and all("boom" in str(e) for e in heard) and dev.loss_delivered
            await dev.stop()
            async with await arig.open(arig.cuda.gpu(0)) as again:
                await again.run(lambda s, a, v: None)

    trio.run(main)


def test_cuda_graph_built_off_the_loop_under_trio() -> None:
    async def main() -> None:
        with trio.fail_after(T):
            async with await arig.open(arig.cuda.gpu(0)) as dev:
                img = await dev.load(shipped_image())
                out = await dev.alloc(8 * 4)
                await dev.upload(out, np.zeros(4, np.uint64))
                rec = dev.capability(abi.KEY)
                g = await rec.graph_async([abi.Kernel(img.function("store"), 1, 1, pack(out, np.uint32(i), np.uint64(i + 10))) for i in range(4)])
                await dev.run(lambda s, g, v: g.launch(s), g)
                host = np.zeros(4, np.uint64)
                await dev.download(out, host)
                assert host.tolist() == [10, 11, 12, 13]
                out.close()

    trio.run(main)


def test_cuda_a_device_belongs_to_its_trio_run() -> None:
    async def opened() -> arig.Device:
        dev = await arig.open(arig.cuda.gpu(0))
        await dev.run(lambda s, a, v: None)
        return dev

    async def used(dev: arig.Device) -> None:
        with pytest.raises(arig.WrongLoopError):
            await dev.submit(lambda s, a, v: None)
        await dev.stop()  # its run is over: released from here

    dev = trio.run(opened)
    trio.run(used, dev)
    assert dev.stopped


# -- NV --------------------------------------------------------------------------------------------


@nv_only
def test_nv_axpy_round_trip_under_trio() -> None:
    n = 100_000
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)

    async def main() -> None:
        with trio.fail_after(T):
            async with await arig.open(nvrm.gpu(0)) as dev:
                assert dev.name == "NV"
                v = await dev.run(None)  # a value with no work: the queue's release and interrupt alone
                assert dev.reached >= v
                image = await dev.load(CUBIN)
                bx, by = await dev.alloc(4 * n, "pinned"), await dev.alloc(4 * n, "pinned")
                await dev.upload(bx, x)
                await dev.upload(by, y)
                launch = nvrm.Launch(image.function("axpy"), (n + 255) // 256, 256, axpy_args(2.5, bx, by, n))
                await dev.run(launch, keep=(bx, by, image))
                out = np.empty_like(y)
                await dev.download(by, out)
                np.testing.assert_allclose(out, np.float32(2.5) * x + y, rtol=1e-5, atol=1e-6)
                bx.close()
                by.close()

    trio.run(main)


@nv_only
def test_nv_2000_submits_from_64_tasks_gapless_under_trio() -> None:
    total, tasks = 2000, 64

    async def main() -> None:
        values: list[int] = []
        with trio.fail_after(T):
            async with await arig.open(nvrm.gpu(0)) as dev:

                async def task(count: int) -> None:
                    for _ in range(count):
                        v = await dev.submit(None)
                        values.append(v)
                        await dev.wait(v)

                async with trio.open_nursery() as nursery:
                    for k in range(tasks):
                        nursery.start_soon(task, total // tasks + (1 if k < total % tasks else 0))
                first = min(values)
                assert sorted(values) == list(range(first, first + total))
                assert dev.reached >= max(values)

    trio.run(main)


@nv_only
def test_nv_loss_reaches_every_waiter_and_stop_under_trio() -> None:
    async def main() -> None:
        with trio.fail_after(T):
            dev = await arig.open(nvrm.gpu(0))
            try:
                v = await dev.submit(_bad)
                heard: list[BaseException] = []

                async def waiter() -> None:
                    try:
                        await dev.wait(v)
                    except arig.DeviceLost as exc:
                        heard.append(exc)

                async with trio.open_nursery() as nursery:
                    for _ in range(5):
                        nursery.start_soon(waiter)
                assert len(heard) == 5 and all("boom" in str(e) for e in heard)
            finally:
                await dev.stop()
            async with await arig.open(nvrm.gpu(0)) as again:
                lost = await faults.lose(again, RuntimeError("injected"))
                assert isinstance(lost, arig.DeviceLost) and isinstance(again.lost, RuntimeError)

    trio.run(main)


@nv_only
def test_nv_usage_async_under_trio() -> None:
    async def main() -> nvrm.Usage:
        return await nvrm.usage_async(0, window=0.1)

    u = trio.run(main)
    assert u.memory_total > 0 and 0 <= u.memory_free <= u.memory_total


def test_the_loop_thread_never_runs_a_fill_under_trio() -> None:
    threads: list[int] = []

    async def main() -> None:
        with trio.fail_after(T):
            async with await arig.open(arig.cuda.gpu(0)) as dev:
                await dev.run(lambda s, a, v: threads.append(threading.get_ident()))

    trio.run(main)
    assert threads and threading.get_ident() not in threads
