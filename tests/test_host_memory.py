"""Host memory: alloc, numpy views, upload/download round trips and misuse."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

import arig
import arig.host


@pytest.mark.asyncio
async def test_alloc_gives_a_host_buffer_with_a_numpy_view() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        buf = await dev.alloc(256)
        assert isinstance(buf, arig.Buffer)
        assert buf.nbytes == 256
        assert buf.kind == "host"
        assert buf.device == "HOST"
        assert not buf.closed
        view = buf.numpy()
        assert view.dtype == np.uint8 and view.shape == (256,)
        assert isinstance(buf.address, int) and buf.address != 0
        assert view.ctypes.data == buf.address
        assert not view.any(), "new host memory is zeroed"
        floats = buf.numpy(np.float32, (8, 8))
        assert floats.shape == (8, 8)
        floats[2, 3] = 1.5
        # Views share the buffer's memory.
        assert buf.numpy(np.float32)[2 * 8 + 3] == 1.5
        assert "host" in repr(buf) and "256" in repr(buf)
        explicit = await dev.alloc(8, kind="host")
        assert explicit.kind == "host"


@pytest.mark.asyncio
async def test_host_memory_has_no_cuda_array_interface() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        buf = await dev.alloc(16)
        assert not hasattr(buf, "__cuda_array_interface__")
        with pytest.raises(AttributeError):
            buf.__cuda_array_interface__  # noqa: B018


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", [(1,), (7,), (64, 3), (2, 3, 4), (1000,)])
async def test_upload_download_round_trip(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(sum(shape))
    data = rng.standard_normal(shape).astype(np.float32)
    async with await arig.open(arig.host.cpu()) as dev:
        buf = await dev.alloc(data.nbytes)
        v = await dev.upload(buf, data)
        assert isinstance(v, int) and dev.reached >= v
        np.testing.assert_array_equal(buf.numpy(np.float32, shape), data)
        out = np.empty_like(data)
        v2 = await dev.download(buf, out)
        assert v2 > v
        np.testing.assert_array_equal(out, data)


@pytest.mark.asyncio
async def test_round_trips_on_several_queues_at_once() -> None:
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal(512).astype(np.float32) for _ in range(6)]
    async with await arig.open(arig.host.cpu(queues=3)) as dev:
        bufs = [await dev.alloc(a.nbytes) for a in arrays]
        await asyncio.gather(*(dev.upload(b, a, queue=i % 3) for i, (b, a) in enumerate(zip(bufs, arrays, strict=True))))
        outs = [np.zeros_like(a) for a in arrays]
        await asyncio.gather(*(dev.download(b, o, queue=dev.queues[(i + 1) % 3]) for i, (b, o) in enumerate(zip(bufs, outs, strict=True))))
        for a, o in zip(arrays, outs, strict=True):
            np.testing.assert_array_equal(o, a)


@pytest.mark.asyncio
async def test_partial_upload_and_download() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        buf = await dev.alloc(64)
        buf.numpy()[:] = 0xAB
        await dev.upload(buf, np.arange(4, dtype=np.uint8))
        assert list(buf.numpy()[:6]) == [0, 1, 2, 3, 0xAB, 0xAB]
        out = np.zeros(2, dtype=np.uint8)
        await dev.download(buf, out)
        assert list(out) == [0, 1]


@pytest.mark.asyncio
async def test_upload_runs_after_earlier_work_on_its_queue() -> None:
    order: list[str] = []
    async with await arig.open(arig.host.cpu()) as dev:
        buf = await dev.alloc(4)

        def before(q: Any, a: Any, v: int) -> None:
            q.enqueue(lambda: order.append(f"before:{buf.numpy()[0]}"))

        await dev.submit(before)
        await dev.upload(buf, np.array([9, 9, 9, 9], dtype=np.uint8))
        assert order == ["before:0"]
        assert list(buf.numpy()) == [9, 9, 9, 9]


@pytest.mark.asyncio
async def test_alloc_misuse() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        for kind in ("device", "pinned", "HOST", ""):
            with pytest.raises(ValueError) as info:
                await dev.alloc(16, kind=kind)
            assert isinstance(info.value, arig.ArigError)
        with pytest.raises(TypeError):
            await dev.alloc(16, kind=5)  # type: ignore[arg-type]
        for bad in (0, -1):
            with pytest.raises(ValueError):
                await dev.alloc(bad)
        for bad_type in (1.5, "16", None, True):
            with pytest.raises(TypeError):
                await dev.alloc(bad_type)  # type: ignore[arg-type]
        # Misuse lost nothing.
        assert dev.lost is None
        assert (await dev.alloc(1)).nbytes == 1


@pytest.mark.asyncio
async def test_copy_misuse() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        buf = await dev.alloc(16)
        with pytest.raises(ValueError) as info:
            await dev.upload(buf, np.zeros(5, np.float32))
        assert isinstance(info.value, arig.ArigError)
        with pytest.raises(ValueError):
            await dev.download(buf, np.zeros(17, np.uint8))
        strided = np.zeros(8, np.float32)[::2]
        assert not strided.flags.c_contiguous
        with pytest.raises(ValueError):
            await dev.upload(buf, strided)
        with pytest.raises(ValueError):
            await dev.download(buf, np.zeros((4, 4), np.uint8).T[:2])
        readonly = np.zeros(4, np.float32)
        readonly.flags.writeable = False
        await dev.upload(buf, readonly)  # reading from it is fine
        with pytest.raises(ValueError):
            await dev.download(buf, readonly)
        with pytest.raises(TypeError):
            await dev.upload(buf, [1.0, 2.0])  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await dev.upload(np.zeros(4), np.zeros(4))  # type: ignore[arg-type]
        assert dev.lost is None


@pytest.mark.asyncio
async def test_closed_buffer() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        buf = await dev.alloc(16)
        buf.close()
        assert buf.closed
        buf.close()  # idempotent
        assert "closed" in repr(buf)
        with pytest.raises(ValueError):
            buf.numpy()
        with pytest.raises(ValueError):
            await dev.upload(buf, np.zeros(4, np.float32))
        with pytest.raises(ValueError):
            await dev.download(buf, np.zeros(4, np.float32))


@pytest.mark.asyncio
async def test_host_device_loads_no_images() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        with pytest.raises(arig.ArigError) as info:
            await dev.load(b"\x7fELF not really a cubin")
        assert not isinstance(info.value, arig.DeviceLost)
        with pytest.raises(ValueError):
            await dev.load(b"")
        with pytest.raises(TypeError):
            await dev.load("text")  # type: ignore[arg-type]
        # Failing to load loses nothing.
        assert dev.lost is None
        await dev.run(lambda q, a, v: None)
