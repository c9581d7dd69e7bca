"""Interop on a real GPU: torch and CuPy streams adopted by arig, their events awaited, DLPack.

Each result is checked against numpy on the CPU.  Skipped where torch or
CuPy does not import (both are on the H200 machine).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import arig
import arig.cuda

from _util import cuda_torch, torch_event_after_work, torch_rounds_checked

pytestmark = pytest.mark.arig_gpu



@pytest.mark.asyncio
async def test_torch_matmul_on_an_adopted_stream() -> None:
    torch = cuda_torch()
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((256, 512), np.float32), rng.standard_normal((512, 128), np.float32)
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        s = torch.cuda.Stream()
        q = dev.adopt(s)
        with torch.cuda.stream(s):
            ta, tb = torch.from_numpy(a).cuda(non_blocking=False), torch.from_numpy(b).cuda()
            c = ta @ tb
            for _ in range(20):  # long enough that the await really waits
                c = c * 1.0 + 0.0
        v = await dev.submit(None, queue=q)
        await dev.wait(v)
        assert s.query()  # every op torch enqueued before the submit has completed
        np.testing.assert_allclose(c.cpu().numpy(), a @ b, rtol=1e-3, atol=1e-3)


@pytest.mark.asyncio
async def test_64_tasks_each_await_their_own_torch_stream() -> None:
    torch = cuda_torch()
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        await asyncio.wait_for(asyncio.gather(*(torch_rounds_checked(dev, torch, k) for k in range(64))), 120)
        assert dev.reached == dev.submitted == 64 * 20


@pytest.mark.asyncio
async def test_a_python_fill_on_an_adopted_stream_runs_torch_work() -> None:
    torch = cuda_torch()
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        s = torch.cuda.Stream()
        q = dev.adopt(s)
        x = torch.zeros(4096, device="cuda")
        seen: list[int] = []

        def fill(stream: int, arg: Any, v: int) -> None:
            seen.append(stream)
            with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
                x.add_(float(v))

        v = await dev.run(fill, queue=q)
        assert seen == [s.cuda_stream] and float(x[0].item()) == v


@pytest.mark.asyncio
async def test_wait_event_of_torch_and_cupy() -> None:
    torch = cuda_torch()
    _, ev = torch_event_after_work(torch)
    await arig.cuda.wait_event(ev)  # opens a device for this loop (none is open)
    assert ev.query()
    cupy = pytest.importorskip("cupy")
    cs = cupy.cuda.Stream(non_blocking=True)
    with cs:
        arr = cupy.arange(1 << 20, dtype=cupy.float32)
        total = arr.sum()
        cev = cs.record()
    await arig.cuda.wait_event(cev)
    assert cev.done and float(total.get()) == float(np.arange(1 << 20, dtype=np.float64).sum())
    for dev in arig.device.open_devices(asyncio.get_running_loop()):
        await dev.stop()


@pytest.mark.asyncio
async def test_cupy_stream_adopted_and_arig_queue_in_cupy() -> None:
    cupy = pytest.importorskip("cupy")
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        cs = cupy.cuda.Stream(non_blocking=True)
        q = dev.adopt(cs)
        with cs:
            a = cupy.arange(100000, dtype=cupy.float64) ** 2
        await dev.wait(await dev.submit(None, queue=q))
        assert cs.done
        np.testing.assert_array_equal(a.get(), np.arange(100000, dtype=np.float64) ** 2)
        # The other way: CuPy launches on arig's own queue, and arig orders after it.
        q0 = dev.queues[0]
        from_external = getattr(cupy.cuda.Stream, "from_external", None)  # CuPy 14 reads __cuda_stream__ itself
        ext = from_external(q0) if from_external is not None else cupy.cuda.ExternalStream(q0.__cuda_stream__()[1])
        with ext:
            b = cupy.arange(1000, dtype=cupy.float32) * 3
        await dev.wait(await dev.submit(None))
        assert ext.done
        np.testing.assert_array_equal(b.get(), np.arange(1000, dtype=np.float32) * 3)


def test_the_device_wait_event_opened_stops_with_its_loop() -> None:
    """asyncio.run's shutdown closes async generators: that stops wait_event's own device."""
    code = textwrap.dedent(
        """
        import asyncio, arig, arig.cuda, torch
        async def main():
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                torch.ones(1000, device="cuda").sum()
            ev = torch.cuda.Event(); ev.record(s)
            await arig.cuda.wait_event(ev)
            (dev,) = arig.device.open_devices(asyncio.get_running_loop())
            return dev
        dev = asyncio.run(main())
        print("stopped", dev.stopped, dev.lost)
        """
    )
    pytest.importorskip("torch")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "stopped True None" in out.stdout


@pytest.mark.asyncio
async def test_dlpack_round_trips_with_torch_and_cupy() -> None:
    torch = cuda_torch()
    cupy = pytest.importorskip("cupy")
    data = np.random.default_rng(2).standard_normal(4096).astype(np.float32)
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        buf = await dev.alloc(data.nbytes)
        await dev.upload(buf, data)
        t = torch.from_dlpack(buf).view(torch.float32)  # no copy: the same device memory
        assert t.device.type == "cuda" and t.data_ptr() == buf.address
        np.testing.assert_array_equal(t.cpu().numpy(), data)
        c = cupy.from_dlpack(buf).view(cupy.float32)
        assert c.data.ptr == buf.address
        c *= 2  # CuPy writes through its view; arig reads it back
        cupy.cuda.get_current_stream().synchronize()
        out = np.empty_like(data)
        await dev.download(buf, out)
        np.testing.assert_array_equal(out, data * 2)


@pytest.mark.asyncio
async def test_wrap_torch_and_cupy_arrays() -> None:
    torch = cuda_torch()
    cupy = pytest.importorskip("cupy")
    data = np.arange(1 << 16, dtype=np.float32)
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        t = torch.zeros(1 << 16, device="cuda")
        torch.cuda.synchronize()
        tb = dev.wrap(t)
        assert (tb.address, tb.nbytes) == (t.data_ptr(), t.numel() * 4)
        await dev.upload(tb, data)
        np.testing.assert_array_equal(t.cpu().numpy(), data)
        c = cupy.asarray(data) + 1
        cupy.cuda.get_current_stream().synchronize()
        cb = dev.wrap(c)
        out = np.empty_like(data)
        await dev.download(cb, out)
        np.testing.assert_array_equal(out, data + 1)
