"""The NV device (arig.nvrm.gpu) on a real GPU: work through NVIDIA's kernel driver alone, no libcuda.

Skipped where the NVIDIA kernel driver is not loaded.  Written for the H200 (driver 580).
Run: python3 -m pytest -q -m gpu tests/gpu/test_nv_gpu.py
"""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import os
import struct
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import arig._env

if not os.path.exists("/dev/nvidiactl") and not arig._env.GPU_REQUIRED:
    pytest.skip("the NVIDIA kernel driver is not loaded", allow_module_level=True)

import arig
import arig.cuda
import arig.cuda_abi
import arig._native
import arig.nvrm as nvrm
import arig.nvrm._queue  # noqa: F401 - the queue type
from arig._errors import DeviceLost, OpenError

from _util import axpy_args, axpy_checked

pytestmark = [pytest.mark.arig_gpu, pytest.mark.asyncio]

REPO = Path(__file__).resolve().parents[2]
CUBIN = (REPO / "tests" / "data" / "nv" / "probe.sm_90.cubin").read_bytes()


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_open_describe_stop() -> None:
    dev = await arig.open(nvrm.gpu(0))
    try:
        assert dev.name == "NV" and dev.arch == "sm_90"
        assert dev.facts["bus"] == nvrm.buses()[0]
        assert dev.facts["classes"]["compute"] == "0xcbc0"
        assert dev.facts["memory_total"] > 0 and dev.facts["uuid"].startswith("GPU-")
        assert dev.capability(arig.cuda_abi.KEY) is None
        assert dev.facts["classes"]["copy"] == "0xc8b5" and dev.facts["queues"] == 2
        assert len(dev.queues) == 2 and isinstance(dev.queues[1].handle, nvrm._queue.NvQueue)
        v = await dev.run(None)  # a value with no work: the queue's release and interrupt alone
        assert dev.reached >= v
        v = await asyncio.wait_for(dev.run(None, queue=1), 10)  # the copy channel's release and interrupt
        assert dev.reached >= v
    finally:
        await dev.stop()


async def test_second_open_is_refused_naming_the_first() -> None:
    async with await arig.open(nvrm.gpu(0)):
        with pytest.raises(OpenError, match="already open as device NV"):
            await arig.open(nvrm.gpu(0))
    async with await arig.open(nvrm.gpu(0)) as again:  # stopped: the GPU opens again
        await again.run(None)


@pytest.mark.parametrize("kind", ["pinned", "mapped"])
async def test_axpy_matches_numpy(kind: str) -> None:
    async with await arig.open(nvrm.gpu(0)) as dev:
        await axpy_checked(dev, CUBIN, kind)


async def test_same_results_as_cuda() -> None:
    try:
        if arig.cuda.count() == 0:
            pytest.skip("libcuda sees no GPU")
    except arig.ArigError as e:
        pytest.skip(f"no libcuda: {e}")
    n = 4096
    rng = np.random.default_rng(2)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    results = []
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        bx, by = await dev.alloc(4 * n), await dev.alloc(4 * n)
        await dev.upload(bx, x)
        await dev.upload(by, y)
        await dev.run(arig.cuda.Launch(image.function("axpy"), ((n + 255) // 256, 1, 1), (256, 1, 1), axpy_args(-1.5, bx, by, n)), keep=(bx, by))
        out = np.empty_like(y)
        await dev.download(by, out)
        results.append(out)
        bx.close()
        by.close()
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        bx, by = await dev.alloc(4 * n, "pinned"), await dev.alloc(4 * n, "pinned")
        await dev.upload(bx, x)
        await dev.upload(by, y)
        await dev.run(nvrm.Launch(image.function("axpy"), (n + 255) // 256, 256, axpy_args(-1.5, bx, by, n)), keep=(bx, by))
        out = np.empty_like(y)
        await dev.download(by, out)
        results.append(out)
    assert np.array_equal(results[0], results[1])


async def test_10000_submits_from_64_tasks() -> None:
    total, tasks, n = 10_000, 64, 256
    values: list[int] = []
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        func = image.function("axpy")
        ones = await dev.alloc(4 * n, "pinned")
        ones.numpy(np.float32)[:] = 1.0

        async def task(k: int, count: int) -> None:
            y = await dev.alloc(4 * n, "pinned")
            launch = nvrm.Launch(func, 1, n, axpy_args(1.0, ones, y, n))  # y += 1
            view = y.numpy(np.float32)
            for i in range(count):
                v = await dev.submit(launch, keep=(y, ones))
                values.append(v)
                await dev.wait(v)
                assert np.all(view == np.float32(i + 1)), f"task {k}, submit {i}: {view[:4]}"
            y.close()

        counts = [total // tasks + (1 if k < total % tasks else 0) for k in range(tasks)]
        await asyncio.gather(*(task(k, c) for k, c in enumerate(counts)))
        first = min(values)
        assert sorted(values) == list(range(first, first + total))  # gapless: every submit got its own value
        assert dev.reached >= max(values)


async def gpu_memory_used() -> int:
    """Bytes of the GPU's memory in use, as the RM counts them (every process, this one included)."""
    u = await nvrm.usage_async(0, window=0.01)
    return int(u.memory_total - u.memory_free)


async def _cycle() -> None:
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        buf = await dev.alloc(4096, "pinned")
        vram = await dev.alloc(1 << 20)
        await dev.upload(vram, np.ones(1024, np.float32))
        await dev.run(nvrm.Launch(image.function("axpy"), 1, 32, axpy_args(1.0, buf, buf, 32)), keep=(buf,))
    await asyncio.sleep(0)  # the loop's detach closes the event fd


async def test_open_stop_100_times_leaks_no_fds_and_no_gpu_memory() -> None:
    await _cycle()  # the process's and the GPU's objects: made by the first open, kept for the process
    used = await gpu_memory_used()  # first: the read path's own client (2 fds) is made here, and kept
    before = open_fds()
    for _ in range(100):
        await _cycle()
    assert open_fds() == before
    grown = await gpu_memory_used() - used
    assert abs(grown) < 16 << 20, f"GPU memory in use grew by {grown} bytes over 100 open/stop cycles"


async def test_a_fill_raising_loses_the_device_and_the_gpu_opens_again() -> None:
    dev = await arig.open(nvrm.gpu(0))
    try:
        def bad(queue: Any, arg: Any, v: int) -> None:
            raise RuntimeError("boom")

        v = await dev.submit(bad)
        with pytest.raises(DeviceLost, match="boom"):
            await dev.wait(v)
    finally:
        await dev.stop()
    async with await arig.open(nvrm.gpu(0)) as dev2:
        image = await dev2.load(CUBIN)
        n = 1000
        x, y = await dev2.alloc(4 * n, "pinned"), await dev2.alloc(4 * n, "pinned")
        x.numpy(np.float32)[:] = 2.0
        y.numpy(np.float32)[:] = 1.0
        await dev2.run(nvrm.Launch(image.function("axpy"), 4, 256, axpy_args(3.0, x, y, n)), keep=(x, y))
        assert np.all(y.numpy(np.float32)[:n] == 7.0)


async def test_python_fills_get_their_queue_and_copy_on_queue_1() -> None:
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        n = 512
        x, y = await dev.alloc(4 * n, "mapped"), await dev.alloc(4 * n, "mapped")
        x.numpy(np.float32)[:] = 1.0
        y.numpy(np.float32)[:] = 0.0
        launch = nvrm.Launch(image.function("axpy"), 2, 256, axpy_args(1.0, x, y, n))
        flag = await dev.alloc(4096, "pinned")

        def fill(queue: Any, arg: Any, v: int) -> None:
            assert isinstance(queue, nvrm._queue.NvQueue) and queue.index == 0
            queue.launch(launch)
            queue.launch(launch)
            queue.release(flag.address, 99)

        await dev.run(fill)
        assert np.all(y.numpy(np.float32)[:n] == 2.0)
        assert int(flag.numpy(np.uint64)[0]) == 99
        d = await dev.alloc(4 * n)
        assert d.kind == "device"
        out = await dev.alloc(4 * n, "pinned")

        def copies(queue: Any, arg: Any, v: int) -> None:  # y (mapped) -> d (device) -> out (pinned), then a release
            assert queue.index == 1 and queue.engine == "copy"
            queue.copy(d.address, y.address, 4 * n)
            queue.copy(out.address, d.address, 4 * n)
            queue.release(flag.address + 16, 7)

        await asyncio.wait_for(dev.run(copies, queue=1, keep=(d, out, y)), 30)
        assert np.all(out.numpy(np.float32)[:n] == 2.0)
        assert int(flag.numpy(np.uint64)[2]) == 7
        # a launch submitted on queue 1 runs on the compute channel, its value in order
        await asyncio.wait_for(dev.run(launch, queue=1), 30)
        assert np.all(y.numpy(np.float32)[:n] == 3.0)


async def test_device_memory_upload_axpy_download_matches_numpy() -> None:
    n = 3_000_017  # 12 MB: not a multiple of anything
    rng = np.random.default_rng(3)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        bx, by = await dev.alloc(4 * n), await dev.alloc(4 * n)
        assert bx.kind == "device"
        with pytest.raises(TypeError, match="not visible to the host"):
            bx.numpy()
        await dev.upload(bx, x)
        await dev.upload(by, y)
        v = await dev.submit(nvrm.Launch(image.function("axpy"), (n + 255) // 256, 256, axpy_args(2.5, bx, by, n)), keep=(bx, by, image))
        out = np.empty_like(y)
        await asyncio.wait_for(dev.download(by, out), 30)  # ordered after the launch without waiting for it
        assert dev.reached >= v
        np.testing.assert_allclose(out, np.float32(2.5) * x + y, rtol=1e-5, atol=1e-6)
        back = np.empty_like(x)
        await dev.download(bx, back)
        assert np.array_equal(back, x)
        bx.close()
        by.close()


@pytest.mark.parametrize("kind", ["device", "pinned", "mapped"])
async def test_round_trips_of_odd_sizes(kind: str) -> None:
    """Sizes around the chunk (16 MiB) and the staging area (64 MiB)."""
    chunk = nvrm._staging.STAGING_BYTES // nvrm._staging.STAGING_SLOTS
    async with await arig.open(nvrm.gpu(0)) as dev:
        buf = await dev.alloc(nvrm._staging.STAGING_BYTES + 4096, kind)
        for size in (1, 3, 4097, chunk - 1, chunk, chunk + 5, nvrm._staging.STAGING_BYTES + 17):
            data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
            await dev.upload(buf, data)
            out = np.zeros(size, np.uint8)
            await asyncio.wait_for(dev.download(buf, out), 30)
            assert np.array_equal(out, data), f"{kind}, {size} bytes"
        buf.close()


async def test_one_gib_host_device_host_by_hash() -> None:
    nbytes = 1 << 30
    data = np.frombuffer(np.random.default_rng(4).bytes(nbytes), np.uint8)
    want = hashlib.sha256(data).hexdigest()
    async with await arig.open(nvrm.gpu(0)) as dev:
        buf = await dev.alloc(nbytes)
        t0 = time.monotonic()
        await asyncio.wait_for(dev.upload(buf, data), 60)
        t_up = time.monotonic() - t0
        out = np.zeros(nbytes, np.uint8)
        t0 = time.monotonic()
        await asyncio.wait_for(dev.download(buf, out), 60)
        t_down = time.monotonic() - t0
        assert hashlib.sha256(out).hexdigest() == want
        print(f"1 GiB: upload {t_up:.2f} s ({nbytes / t_up / 1e9:.1f} GB/s), download {t_down:.2f} s ({nbytes / t_down / 1e9:.1f} GB/s)")
        buf.close()


async def test_copies_interleaved_with_launches_from_16_tasks() -> None:
    tasks, rounds, n = 16, 20, 50_000
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        func = image.function("axpy")

        async def task(k: int) -> None:
            rng = np.random.default_rng(100 + k)
            kind = ("device", "pinned", "mapped")[k % 3]
            bx, by = await dev.alloc(4 * n, kind), await dev.alloc(4 * n, kind)
            launch = nvrm.Launch(func, (n + 255) // 256, 256, axpy_args(float(k + 1), bx, by, n))
            for r in range(rounds):
                x = rng.standard_normal(n, dtype=np.float32)
                y = rng.standard_normal(n, dtype=np.float32)
                q = (k + r) % 2  # uploads on either queue: the rule orders them with the launch
                await dev.upload(bx, x, queue=q)
                await dev.upload(by, y, queue=1 - q)
                await dev.submit(launch, keep=(bx, by, image))
                if r % 2:
                    await dev.submit(launch, keep=(bx, by, image))
                    y = np.float32(k + 1) * x + y
                out = np.empty_like(y)
                await dev.download(by, out, queue=q)
                np.testing.assert_allclose(out, np.float32(k + 1) * x + y, rtol=1e-5, atol=1e-5, err_msg=f"task {k} round {r}")
            bx.close()
            by.close()

        await asyncio.wait_for(asyncio.gather(*(task(k) for k in range(tasks))), 120)


async def test_two_launches_in_one_fill_run_in_order() -> None:
    """The second grid reads what the first wrote (WAIT_FOR_IDLE between a queue's launches)."""
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        n = 1 << 20
        x, y = await dev.alloc(4 * n, "mapped"), await dev.alloc(4 * n, "mapped")
        x.numpy(np.float32)[:] = 1.0
        y.numpy(np.float32)[:] = 0.0
        launch = nvrm.Launch(image.function("axpy"), n // 256, 256, axpy_args(1.0, x, y, n))

        def fill(queue: Any, arg: Any, v: int) -> None:
            for _ in range(8):
                queue.launch(launch)

        await dev.run(fill)
        assert np.all(y.numpy(np.float32)[:n] == 8.0)


async def test_an_illegal_address_loses_the_device_naming_the_fault_then_it_opens_again() -> None:
    shipped = (REPO / "arig" / "kernels" / "kernels.cubin").read_bytes()
    dev = await arig.open(nvrm.gpu(0), stop_timeout=10)
    try:
        image = await dev.load(shipped)
        bad = nvrm.Launch(image.function("illegal"), 1, 1, struct.pack("<Q", 0x10))  # *(uint64_t *)0x10 = 1
        v = await dev.submit(bad)
        with pytest.raises(DeviceLost) as lost:
            await asyncio.wait_for(dev.wait(v), 30)
        assert "Xid 31" in str(lost.value) and "illegal address" in str(lost.value), lost.value
        assert dev.lost is not None
    finally:
        await dev.stop()
    async with await arig.open(nvrm.gpu(0)) as again:  # the same process opens the GPU again, and it works
        image = await again.load(CUBIN)
        x, y = await again.alloc(4096, "pinned"), await again.alloc(4096, "pinned")
        x.numpy(np.float32)[:] = 2.0
        y.numpy(np.float32)[:] = 1.0
        await again.run(nvrm.Launch(image.function("axpy"), 4, 256, axpy_args(3.0, x, y, 1024)))
        assert np.all(y.numpy(np.float32) == 7.0)


async def test_dma_buf_export_of_device_memory() -> None:
    """The region's RM object as a dma-buf: an fd the kernel calls a dma-buf, of the object's size,
    that keeps the memory after the buffer is freed; host memory is refused by name."""
    async with await arig.open(nvrm.gpu(0)) as dev:
        buf = await dev.alloc(4 << 20)
        await dev.upload(buf, np.arange(1 << 20, dtype=np.uint32))
        with await dev.dma(buf, 4096, 8192) as d:
            assert isinstance(d, nvrm.Dmabuf) and (d.offset, d.size) == (4096, 8192)
            assert "dmabuf" in os.readlink(f"/proc/self/fd/{d.fd}")
            assert os.lseek(d.fd, 0, os.SEEK_END) >= 4 << 20  # the whole RM object the region lies in
            buf.close()  # the dma-buf still holds the memory; closing it lets the RM free it
        assert d.closed
        pinned = await dev.alloc(1 << 20, "pinned")
        with pytest.raises(ValueError, match="exports only the GPU's own memory"):
            await dev.dma(pinned)
        with pytest.raises(ValueError, match="not inside the buffer"):
            await dev.dma(pinned, 1 << 20)


class _FillArg(ctypes.Structure):
    _fields_ = [("launch", ctypes.c_uint64), ("x_src", ctypes.c_uint64), ("x", ctypes.c_uint64), ("y", ctypes.c_uint64),
                ("y_out", ctypes.c_uint64), ("nbytes", ctypes.c_uint64), ("sem", ctypes.c_uint64), ("sem_value", ctypes.c_uint64)]  # fmt: skip


_NV_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_NV_COPY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64)
_NV_SEM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64)


@pytest.mark.skipif(arig._native.library() is None, reason="compiled fills run on the native core")
async def test_compiled_fill_through_the_record_copies_launches_and_releases() -> None:
    """A compiled fill (a ctypes FILL, run by the core's native thread) that, through ``arig.nvrm.abi``'s
    record, copies x to device memory, launches axpy on it, copies y out and releases a semaphore, on
    the H200, on either queue: the result is numpy's, and the release holds the payload and a GPU time."""
    n = 1 << 16
    rng = np.random.default_rng(11)
    x, y0 = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    async with await arig.open(nvrm.gpu(0)) as dev:
        rec = dev.capability(arig.nvrm.abi.KEY)
        assert isinstance(rec, arig.nvrm.abi.NvAbi) and dev.capability(arig.cuda_abi.KEY) is None
        image = await dev.load(CUBIN)
        x_src, y, y_out, sem = [await dev.alloc(4 * n, "pinned") for _ in range(4)]
        x_dev = await dev.alloc(4 * n, "device")
        x_src.numpy(np.float32)[:n] = x
        do_launch, do_copy, do_release = _NV_LAUNCH(rec.launch), _NV_COPY(rec.copy), _NV_SEM(rec.release)

        def body(q: int, a: int, v: int) -> int:
            p = _FillArg.from_address(a)
            for rc in (do_copy(q, p.x, p.x_src, p.nbytes), do_launch(q, p.launch), do_copy(q, p.y_out, p.y, p.nbytes), do_release(q, p.sem, p.sem_value)):
                if rc:
                    return int(rc)
            return 0

        fill = arig.cuda_abi.FILL(body)
        for queue in (0, 1):
            y.numpy(np.float32)[:n] = y0
            launch = nvrm.Launch(image.function("axpy"), n // 256, 256, axpy_args(3.0, x_dev, y, n))
            arg = _FillArg(launch.record, x_src.address, x_dev.address, y.address, y_out.address, 4 * n, sem.address, 0xC0FFEE + queue)
            v = await dev.submit(fill, arg, queue=queue, keep=(arg, launch, fill))
            await asyncio.wait_for(dev.wait(v), 10)
            np.testing.assert_allclose(y_out.numpy(np.float32)[:n], np.float32(3.0) * x + y0, rtol=1e-5, atol=1e-6)  # the GPU fuses a*x+y
            value, gpu_time = struct.unpack("<QQ", bytes(sem.numpy(np.uint8)[:16]))
            assert value == 0xC0FFEE + queue and gpu_time > 0
        bad = arig.cuda_abi.FILL(lambda q, a, v: do_release(q, sem.address + 8, 1))  # misaligned: refused by the core
        v = await dev.submit(bad, keep=bad)
        with pytest.raises(DeviceLost, match="-103"):
            await asyncio.wait_for(dev.wait(v), 10)


async def test_reached_at_is_the_gpu_release_time() -> None:
    """On the native core, ``reached_at(v)`` is the GPU's time of v's release on CLOCK_MONOTONIC: after the
    submit, before the task resumed, and for a 2 ms kernel at least 2 ms after the submit."""
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load((REPO / "arig" / "kernels" / "kernels.cubin").read_bytes())
        spin = nvrm.Launch(image.function("spin"), 1, 1, arig.cuda.pack(np.uint64(2_000_000)))
        for _ in range(20):
            t0 = time.monotonic()
            v = await dev.submit(spin)
            await dev.wait(v)
            t1 = time.monotonic()
            r = dev.reached_at(v)
            assert r is not None and t0 + 0.002 <= r <= t1, (t0, r, t1)


async def test_map_host_on_the_h200() -> None:
    """``map_host`` of a numpy array not aligned to a page: an axpy writes it through its GPU address, the
    copy engine reads and writes it, and a page with no access is refused as the kernel refuses its pin."""
    n = 1 << 16
    rng = np.random.default_rng(5)
    x = rng.standard_normal(n, dtype=np.float32)
    backing = np.zeros(n + 3, np.float32)
    y = backing[3:]
    y[:] = rng.standard_normal(n, dtype=np.float32)
    y0 = y.copy()
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        bx = await dev.alloc(4 * n, "device")
        await dev.upload(bx, x)
        by = await dev.map_host(y)
        assert by.kind == "host" and by.address != y.ctypes.data
        await asyncio.wait_for(dev.run(nvrm.Launch(image.function("axpy"), n // 256, 256, axpy_args(2.0, bx, by, n)), keep=(bx, by, image)), 10)
        np.testing.assert_allclose(y, np.float32(2.0) * x + y0, rtol=1e-5, atol=1e-6)
        out = np.empty(n, np.float32)
        await dev.download(by, out)
        assert np.array_equal(out, y)
        await dev.upload(by, x)
        assert np.array_equal(y, x)
        by.close()
        libc = ctypes.CDLL(None)
        libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        at = libc.mmap(None, 4096, 0, 0x22, -1, 0)  # PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS
        with pytest.raises(nvrm.PinRefused, match="will not pin"):
            await dev.map_host(np.ctypeslib.as_array((ctypes.c_uint8 * 4096).from_address(at)))
        await asyncio.wait_for(dev.run(None), 10)
        assert dev.lost is None
        bx.close()
