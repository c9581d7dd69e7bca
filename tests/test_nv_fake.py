"""The NV device's real code (arig.nvrm.gpu) on CPU, over ``arig.testing.FakeNvrm``.

The fake stands in for the NVIDIA kernel driver only (the escapes, UVM, the
mmaps of the driver's files, the PCI tree and /dev): the process, GPU and
channel objects, the submit thread, the pushbuffers, QMDs, the timeline words
and the event fd are all arig's own.  The NV device runs on the native core:
its tests run where the core is in use, and check on the way out that the
fake saw no misuse, every RM object, fd and UVM registration was given back,
and no driver call came from the event loop's thread.  Where the core is not
in use (``ARIG_PURE=1``, or not built), the open is refused by name, which
the last tests pin on either engine.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import arig
import arig._env
import arig._native
import arig.nvrm as nvrm
from arig._errors import DeviceLost, OpenError
from arig.nvrm import _fd, _rm
from arig.nvrm import _exec_params as E
from arig.nvrm import _params as P
from arig.nvrm._memory import KIND_TABLE
from arig.testing import FakeNvrm

pytestmark = pytest.mark.asyncio

CUBIN = (Path(__file__).resolve().parent / "data" / "nv" / "probe.sm_90.cubin").read_bytes()
T = 10.0


def axpy_args(a: float, x: arig.Buffer, y: arig.Buffer, n: int) -> bytes:
    """axpy(float a, const float *x, float *y, int n) as the kernel lays it out (tests/data/nv/probe.cu)."""
    return struct.pack("<f4xQQi", a, x.address, y.address, n)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def fake() -> Iterator[FakeNvrm]:
    if arig._native.library() is None:
        pytest.skip(f"the NV device needs the native core, not in use here: {arig._native.status()}")
    f = FakeNvrm()

    def axpy(params: bytes, grid: tuple[int, int, int], block: tuple[int, int, int]) -> None:
        a, x, y, n = struct.unpack("<f4xQQi", params)
        n = min(n, grid[0] * block[0])  # the threads that exist: i < n of them write
        xs, ys = f.array(x, np.float32, n), f.array(y, np.float32, n)
        ys[:] = np.float32(a) * xs + ys

    f.kernel("axpy", axpy)
    loop_thread = threading.get_ident()  # the test's event loop runs on this thread
    with f.installed():
        yield f
        # before the fake's exit, which frees the process-level objects from this thread
        assert [c for c in f.log if c.thread == loop_thread] == [], "the event loop called the driver"
        assert f.log, "the driver was called"
    assert f.violations == []


async def test_open_describe_stop(fake: FakeNvrm) -> None:
    dev = await arig.open(nvrm.gpu(0))
    try:
        assert dev.name == "NV" and dev.arch == "sm_90"
        assert dev.facts["bus"] == nvrm.buses()[0] == fake.buses[0]
        assert dev.facts["classes"] == {"usermode": "0xc661", "gpfifo": "0xc86f", "compute": "0xcbc0", "copy": "0xc8b5"}
        assert dev.facts["uuid"].startswith("GPU-") and dev.facts["memory_total"] == fake.memory_kib * 1024
        assert dev.facts["error_notifier"] == "read" and dev.facts["queues"] == 2
        v = await asyncio.wait_for(dev.run(None), T)
        assert dev.reached >= v
        v = await asyncio.wait_for(dev.run(None, queue=1), T)
        assert dev.reached >= v
        facts = await asyncio.to_thread(nvrm.describe, 0)  # the read path's own client, alongside
        assert facts["name"] == "NVIDIA H200" and facts["chip"] == "GH100"
    finally:
        await dev.stop()
    assert {c.name for c in fake.calls()} >= {"open", "close", "mmap", "munmap"}
    # the native core's spin sees the releases; it asks for an interrupt only where its watch ends
    assert dev.facts["completion"].startswith("native core") and "NON_STALL_INTERRUPT backstop" in dev.facts["completion"]


async def test_the_fake_reports_misuse_and_leaks() -> None:
    """The checks the other tests rely on: a bad free and a leaked object are violations."""
    f = FakeNvrm()
    with f.installed():
        p = _rm.process()
        with pytest.raises(nvrm.RmError, match="INVALID_OBJECT_HANDLE"):
            p.free(p.root, 0xDEAD, "free of a made-up handle")
        p.alloc(p.root, E.NV01_DEVICE_0, P.Nv0080Alloc(deviceId=0, hClientShare=p.root), "a device never freed")
        _fd.close(12345)
    assert any("0xdead" in v for v in f.violations)
    assert any("never opened" in v for v in f.violations)
    assert any("never freed" in v and "class 0x80" in v for v in f.violations)
    assert _rm._process is None or _rm._process is not p  # the process state is not left behind


async def test_second_open_is_refused(fake: FakeNvrm) -> None:
    async with await arig.open(nvrm.gpu(0)):
        with pytest.raises(OpenError, match="already open as device NV"):
            await arig.open(nvrm.gpu(0))
    async with await arig.open(nvrm.gpu(0)) as again:
        await asyncio.wait_for(again.run(None), T)


async def test_each_nv_kind_is_the_memory_its_table_row_says(fake: FakeNvrm) -> None:
    async with await arig.open(nvrm.gpu(0)) as dev:
        assert dev.facts["kinds"] == ("device", "mapped", "pinned")
        for row in (k for k in KIND_TABLE if k.made_by == "alloc"):
            buf = await dev.alloc(4096, row.name)
            assert buf.kind == row.name and row.gpu  # every NV kind is at a GPU address
            if row.cpu:  # "mapped" is VRAM the CPU sees through BAR1; "pinned" host RAM
                buf.numpy()[:] = 3
                assert ctypes.string_at(buf.address, 4) == b"\x03" * 4  # one address for CPU and GPU
            else:
                with pytest.raises(TypeError, match="not visible to the host"):
                    buf.numpy()
            buf.close()
        with pytest.raises(ValueError, match="'mapped': VRAM also mapped for the CPU through BAR1"):
            await dev.alloc(64, "bar1")


@pytest.mark.parametrize("kind", ["pinned", "mapped", "device"])
async def test_axpy_launch(fake: FakeNvrm, kind: str) -> None:
    n = 10_000
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        bx, by = await dev.alloc(4 * n, kind), await dev.alloc(4 * n, kind)
        await dev.upload(bx, x)
        await dev.upload(by, y)
        launch = nvrm.Launch(image.function("axpy"), (n + 255) // 256, 256, axpy_args(2.5, bx, by, n))
        await asyncio.wait_for(dev.run(launch, keep=(bx, by, image)), T)
        out = np.empty_like(y)
        await dev.download(by, out)
        np.testing.assert_allclose(out, np.float32(2.5) * x + y, rtol=1e-6)
        if kind != "device":
            assert np.array_equal(by.numpy(np.float32)[:n], out)
        bx.close()
        by.close()
    assert fake.launches == [("axpy", ((n + 255) // 256, 1, 1), (256, 1, 1))]


async def test_2000_submits_from_16_tasks(fake: FakeNvrm) -> None:
    total, tasks, n = 2000, 16, 64
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
                await asyncio.wait_for(dev.wait(v), T)
                assert np.all(view[:n] == np.float32(i + 1)), f"task {k}, submit {i}: {view[:4]}"
            y.close()

        await asyncio.gather(*(task(k, total // tasks) for k in range(tasks)))
        first = min(values)
        assert sorted(values) == list(range(first, first + total))  # gapless
        assert dev.reached >= max(values)
    assert len(fake.launches) == total


@pytest.mark.parametrize("kind", ["pinned", "mapped", "device"])
async def test_upload_download_every_kind(fake: FakeNvrm, kind: str) -> None:
    rng = np.random.default_rng(3)
    async with await arig.open(nvrm.gpu(0)) as dev:
        for nbytes in (1, 4095, 4096 + 3, (16 << 20) + 12345):  # the last crosses staging slots (16 MiB each)
            data = rng.integers(0, 256, nbytes, dtype=np.uint8)
            buf = await dev.alloc(nbytes, kind)
            await asyncio.wait_for(dev.upload(buf, data), T)
            out = np.zeros(nbytes, np.uint8)
            await asyncio.wait_for(dev.download(buf, out), T)
            assert np.array_equal(out, data), f"{kind}, {nbytes} bytes"
            if kind != "device":
                assert np.array_equal(buf.numpy(np.uint8)[:nbytes], data)
            buf.close()


async def test_a_fill_error_loses_the_device(fake: FakeNvrm) -> None:
    dev = await arig.open(nvrm.gpu(0))
    try:
        def bad(queue: Any, arg: Any, v: int) -> None:
            raise RuntimeError("boom")

        v = await dev.submit(bad)
        with pytest.raises(DeviceLost, match="boom"):
            await asyncio.wait_for(dev.wait(v), T)
    finally:
        await dev.stop()
    async with await arig.open(nvrm.gpu(0)) as dev2:
        await asyncio.wait_for(dev2.run(None), T)


async def test_xid_31_loses_the_device_and_it_opens_again(fake: FakeNvrm) -> None:
    n = 256
    dev = await arig.open(nvrm.gpu(0))
    try:
        image = await dev.load(CUBIN)
        x, y = await dev.alloc(4 * n, "pinned"), await dev.alloc(4 * n, "pinned")
        fake.fault(xid=31)
        v = await dev.submit(nvrm.Launch(image.function("axpy"), 1, n, axpy_args(1.0, x, y, n)), keep=(x, y))
        with pytest.raises(DeviceLost, match="Xid 31"):
            await asyncio.wait_for(dev.wait(v), T)
    finally:
        await dev.stop()
    assert fake.launches == []  # it faulted instead of running
    async with await arig.open(nvrm.gpu(0)) as dev2:
        image = await dev2.load(CUBIN)
        x, y = await dev2.alloc(4 * n, "pinned"), await dev2.alloc(4 * n, "pinned")
        x.numpy(np.float32)[:] = 2.0
        y.numpy(np.float32)[:] = 1.0
        await asyncio.wait_for(dev2.run(nvrm.Launch(image.function("axpy"), 1, n, axpy_args(3.0, x, y, n)), keep=(x, y)), T)
        assert np.all(y.numpy(np.float32)[:n] == 7.0)


async def test_a_kernel_touching_unmapped_memory_is_xid_31(fake: FakeNvrm) -> None:
    n = 64
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        y = await dev.alloc(4 * n, "pinned")
        bogus = struct.pack("<f4xQQi", 1.0, 0x1000, y.address, n)  # x at an address nothing maps
        v = await dev.submit(nvrm.Launch(image.function("axpy"), 1, n, bogus), keep=(y,))
        with pytest.raises(DeviceLost, match="Xid 31"):
            await asyncio.wait_for(dev.wait(v), T)


async def _cycle() -> None:
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        buf = await dev.alloc(4096, "pinned")
        vram = await dev.alloc(1 << 20)
        await dev.upload(vram, np.ones(1024, np.float32))
        await dev.run(nvrm.Launch(image.function("axpy"), 1, 32, axpy_args(1.0, buf, buf, 32)), keep=(buf,))
    await asyncio.sleep(0)  # the loop's detach closes the event fd


async def test_open_stop_20_times_frees_everything(fake: FakeNvrm) -> None:
    await _cycle()  # the process's and the GPU's objects: made by the first open, kept for the process
    kept = fake.live()
    assert kept, "the process keeps its client, device, subdevice, usermode, VA space"
    fds = open_fds()
    for _ in range(20):
        await _cycle()
        assert fake.live() == kept
        assert open_fds() == fds
    # at the fake's exit the process-level objects are freed too, and anything left is a violation


def _prot_none_page() -> tuple[int, Any]:
    """A page mapped with no access, and a writable-looking numpy view of it (what a pin must refuse)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    at = libc.mmap(None, 4096, 0, 0x22, -1, 0)  # PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS
    assert at not in (None, ctypes.c_void_p(-1).value)
    return at, np.ctypeslib.as_array((ctypes.c_uint8 * 4096).from_address(at))


async def test_map_host_kernels_and_copies_reach_the_programs_own_memory(fake: FakeNvrm) -> None:
    """``map_host`` of a numpy array (starting inside a page): the buffer's GPU address is its own, a
    kernel writes the array through it, the copy engine copies into and out of it, and the array's
    pages are unmapped from the GPU only once the buffer is closed."""
    n = 3000
    rng = np.random.default_rng(3)
    x = rng.standard_normal(n, dtype=np.float32)
    backing = np.zeros(n + 7, np.float32)
    y = backing[7:]  # 28 bytes into its allocation: not page-aligned
    y[:] = rng.standard_normal(n, dtype=np.float32)
    y0 = y.copy()
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        bx = await dev.alloc(4 * n, "device")
        await dev.upload(bx, x)
        by = await dev.map_host(y)
        assert by.kind == "host" and by.nbytes == 4 * n and by.address != y.ctypes.data
        assert np.shares_memory(by.numpy(np.float32), y)
        await asyncio.wait_for(dev.run(nvrm.Launch(image.function("axpy"), (n + 255) // 256, 256, axpy_args(2.0, bx, by, n)), keep=(bx, by, image)), T)
        np.testing.assert_allclose(y, np.float32(2.0) * x + y0, rtol=1e-6)
        out = np.empty(n, np.float32)
        await dev.download(by, out)  # the copy engine reads the program's pages through the GPU address
        assert np.array_equal(out, y)
        await dev.upload(by, x)  # and writes them
        assert np.array_equal(y, x)
        handles = set(fake.live())
        by.close()
        await asyncio.wait_for(dev.run(None), T)
        for _ in range(200):  # the free runs on the submit thread once the loop saw the work done
            if set(fake.live()) != handles:
                break
            await asyncio.sleep(0.01)
        assert len(handles - set(fake.live())) == 1  # the OS descriptor is gone: the pages are unpinned
        bx.close()


async def test_map_host_refusals(fake: FakeNvrm) -> None:
    """Read-only, non-contiguous, empty and non-buffer objects are refused by name; pages the kernel
    will not pin for writing are ``PinRefused`` (a ValueError), and the device stays usable."""
    async with await arig.open(nvrm.gpu(0)) as dev:
        ro = np.zeros(16, np.float32)
        ro.flags.writeable = False
        with pytest.raises(ValueError, match="writable"):
            await dev.map_host(ro)
        with pytest.raises(ValueError, match="contiguous"):
            await dev.map_host(np.zeros((8, 8), np.float32)[:, 1])
        with pytest.raises(ValueError, match="one byte"):
            await dev.map_host(bytearray())
        with pytest.raises(TypeError, match="buffer protocol"):
            await dev.map_host(12)
        _at, page = _prot_none_page()
        with pytest.raises(nvrm.PinRefused, match="will not pin"):
            await dev.map_host(page)
        await asyncio.wait_for(dev.run(None), T)
        assert dev.lost is None


# -- without the native core the device does not open ------------------------------------------------


async def _refused(match: str) -> None:
    """The open is an OpenError naming the native core and ``match`` (why it is not in use); the GPU is
    not touched: nothing is left open, and a later open (with the core) is not refused as "already open"."""
    f = FakeNvrm()
    with f.installed():
        with pytest.raises(OpenError, match=r"cannot open NV: the NV device runs on arig's native core.*not in use") as info:
            await arig.open(nvrm.gpu(0))
        assert match in str(info.value)
        assert not [c for c in f.log if c.name.startswith("ioctl")], "the GPU was touched"
    assert f.violations == []


async def test_the_pure_engine_refuses_to_open_an_nv_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arig._env, "PURE", True)
    await _refused("ARIG_PURE=1")


async def test_a_missing_native_core_refuses_to_open_an_nv_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arig._env, "PURE", False)
    why = "the native core was not built (no C compiler at install?): reinstall arig with a C compiler"
    monkeypatch.setattr(arig._native, "_libs", None)
    monkeypatch.setattr(arig._native, "_tried", True)
    monkeypatch.setattr(arig._native, "_why", why)
    await _refused(why)
