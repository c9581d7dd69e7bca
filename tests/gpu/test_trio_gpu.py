"""The CUDA and NV devices on a real GPU under trio (``trio.run``): open, a launch, wait, an
upload/download round trip, 64 tasks' gapless values, cancelled waits, a loss reaching every
waiter, stop with waiters pending, graphs and usage; torch streams adopted by 64 tasks and a
torch event awaited (``arig.cuda.wait_event``).  The same scenarios as ``test_cuda_gpu.py``
and ``test_nv_gpu.py`` (and ``test_interop_gpu.py``), run by trio's own scheduler: completions come through the trio port's
reader of the device's fd, with no extra thread and no polling.

Run: python3 -m pytest -q tests/gpu/test_trio_gpu.py
"""

from __future__ import annotations

import os
import threading
import time
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

from _util import axpy_checked, gapless_stores, saxpy_checked, cuda_torch, torch_event_after_work, torch_rounds_checked  # noqa: E402

pytestmark = pytest.mark.arig_gpu

REPO = Path(__file__).resolve().parents[2]
CUBIN = (REPO / "tests" / "data" / "nv" / "probe.sm_90.cubin").read_bytes()
MS = 1_000_000  # nanoseconds, for spin
T = 30.0
nv_only = pytest.mark.skipif(not os.path.exists("/dev/nvidiactl") and not arig._env.GPU_REQUIRED, reason="the NVIDIA kernel driver is not loaded")


def _fill(stream: int, launch: Launch, v: int) -> int:
    return launch(stream)


def _bad(queue: Any, arg: Any, v: int) -> None:
    raise RuntimeError("boom")


async def _every_waiter_hears_the_loss(dev: arig.Device, waiters: int = 5) -> None:
    """A fill that raises loses ``dev``: each of ``waiters`` tasks waiting for its value raises DeviceLost."""
    v = await dev.submit(_bad)
    heard: list[BaseException] = []

    async def waiter() -> None:
        try:
            await dev.wait(v)
        except arig.DeviceLost as exc:
            heard.append(exc)

    async with trio.open_nursery() as nursery:
        for _ in range(waiters):
            nursery.start_soon(waiter)
    assert len(heard) == waiters and all("boom" in str(e) for e in heard)


# -- CUDA ----------------------------------------------------------------------------------------


def test_cuda_saxpy_round_trip_under_trio() -> None:
    async def main() -> None:
        with trio.fail_after(T):
            async with await arig.open(arig.cuda.gpu(0)) as dev:
                assert dev.name == "CUDA" and dev.arch.startswith("sm_")
                await saxpy_checked(dev)

    trio.run(main)


def test_cuda_2000_submits_from_64_tasks_gapless_under_trio() -> None:
    async def nursery(fns: list[Any]) -> None:
        async with trio.open_nursery() as n:
            for fn in fns:
                n.start_soon(fn)

    async def main() -> None:
        with trio.fail_after(T):
            async with await arig.open(arig.cuda.gpu(0)) as dev:
                await gapless_stores(dev, 2000, 64, nursery)

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
            await _every_waiter_hears_the_loss(dev)
            assert dev.loss_delivered
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
    async def main() -> None:
        with trio.fail_after(T):
            async with await arig.open(nvrm.gpu(0)) as dev:
                assert dev.name == "NV"
                v = await dev.run(None)  # a value with no work: the queue's release and interrupt alone
                assert dev.reached >= v
                await axpy_checked(dev, CUBIN, "pinned")

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
                await _every_waiter_hears_the_loss(dev)
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


# -- the streams and events users already have ---------------------------------------------------



def test_64_trio_tasks_each_await_their_own_torch_stream_some_cancelled() -> None:
    """``adopt`` + ``submit(None, queue=q)`` from 64 trio tasks, each on its own torch stream; every
    fourth wait is cut short by ``move_on_after`` and waited for again: values stay gapless and each
    awaited result is finished."""
    torch = cuda_torch()

    async def main() -> None:
        with trio.fail_after(120):
            async with await arig.open(arig.cuda.gpu(0)) as dev:

                async def cut_some(v: int, i: int) -> None:
                    if i % 4 == 3:
                        with trio.move_on_after(0):  # cancelled at once: the work goes on
                            await dev.wait(v)

                async with trio.open_nursery() as n:
                    for k in range(64):
                        n.start_soon(torch_rounds_checked, dev, torch, k, 20, cut_some)
                assert dev.reached == dev.submitted == 64 * 20

    trio.run(main)


def test_wait_event_of_a_torch_event_under_trio_and_its_device_stops_with_the_run() -> None:
    torch = cuda_torch()

    async def main() -> None:
        with trio.fail_after(T):
            s, ev = torch_event_after_work(torch)
            await arig.cuda.wait_event(ev)  # opens a device for this run (none is open)
            assert ev.query()
            ev.record(s)
            await arig.cuda.wait_event(ev)  # the same device again

    def arig_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("arig-")}

    before = arig_threads()
    trio.run(main)
    left = arig_threads() - before
    deadline = time.monotonic() + 2.0  # a stopped device's threads end a moment after its stop
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = {t for t in left if t.is_alive()}
    assert not left, f"the device wait_event opened was not stopped at the run's end: {sorted(t.name for t in left)}"
