"""``stop()`` closes every buffer and image of the device: the backend freed their memory, so none may be used.

A buffer of a stopped device must not reach a new device on the same GPU (same
name): there its stale address may be the new device's own fresh buffer, which
the upload would overwrite.  A view of freed pinned memory would read memory
given back to the driver.  So after stop every buffer and image reads as
closed, and each use (``numpy()``, an upload or download on another device, a
launch's argument, a dma-buf) raises ``ArigValueError`` naming the stop; new
work on the stopped device itself raises ``DeviceStopped``, as any does.
Also here: ``dma`` refuses a region that starts before the buffer.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import arig
import arig.cuda
import arig.nvrm as nvrm
from arig._errors import ArigValueError
from arig.testing import FakeCuda, FakeNvrm

pytest_plugins = ["_fake_drivers"]  # the fixtures fake_cuda and fake_nv

CUBIN = (Path(__file__).resolve().parent / "data" / "nv" / "probe.sm_90.cubin").read_bytes()
STOPPED = "stopped"


def _noop(queue: Any, arg: Any, v: int) -> None:
    return None


async def _refused_on_a_new_device(opener: Any, bufs: list[arig.Buffer]) -> None:
    """A new device of the same name refuses every stopped buffer, and stays healthy."""
    async with await arig.open(opener) as dev:
        fresh = await dev.alloc(4096)
        await dev.upload(fresh, np.full(4096, 1, np.uint8))
        for buf in bufs:
            assert buf.device == dev.name
            with pytest.raises(ArigValueError, match=STOPPED):
                await dev.upload(buf, np.full(16, 9, np.uint8))
            with pytest.raises(ArigValueError, match=STOPPED):
                await dev.download(buf, np.zeros(16, np.uint8))
            with pytest.raises(ArigValueError, match=STOPPED):
                await dev.submit(_noop, buf)
        out = np.zeros(4096, np.uint8)
        await dev.download(fresh, out)
        assert (out == 1).all() and dev.lost is None
        fresh.close()


def _unusable(buf: arig.Buffer) -> None:
    assert buf.closed and "closed" in repr(buf)
    with pytest.raises(ArigValueError, match=STOPPED):
        buf.address  # noqa: B018
    if buf.kind != "device":
        with pytest.raises(ArigValueError, match=STOPPED):
            buf.numpy()
    buf.close()  # still idempotent


@pytest.mark.asyncio
async def test_host_buffers_are_closed_at_stop(engine: str) -> None:
    dev = await arig.open(arig.host.cpu())
    buf = await dev.alloc(64)
    view = buf.numpy()
    await dev.stop()
    _unusable(buf)
    assert view.nbytes == 64  # a view taken before stays valid: host memory is numpy's, kept by the view
    for late in (dev.upload(buf, np.zeros(8, np.uint8)), dev.download(buf, np.zeros(8, np.uint8)), dev.submit(_noop, buf)):
        with pytest.raises(arig.DeviceStopped):
            await late  # on the stopped device itself: refused for the stop
    await _refused_on_a_new_device(arig.host.cpu(), [buf])


@pytest.mark.asyncio
async def test_cuda_buffers_and_images_are_closed_at_stop(fake_cuda: FakeCuda, engine: str) -> None:
    image_bytes = fake_cuda.image(k=(lambda args: None, (8,)))
    dev = await arig.open(arig.cuda.gpu(0))
    bufs = [await dev.alloc(4096, kind) for kind in ("device", "pinned", "mapped")]
    image = await dev.load(image_bytes)
    await dev.stop()
    for buf in bufs:
        _unusable(buf)
        with pytest.raises(ArigValueError, match=STOPPED):
            arig.cuda.pack(buf)  # a launch's argument
    with pytest.raises(ArigValueError, match="closed"):
        bufs[0].__cuda_array_interface__  # noqa: B018
    assert not image.loaded
    with pytest.raises(ArigValueError, match=STOPPED):
        image.function("k")
    await _refused_on_a_new_device(arig.cuda.gpu(0), bufs)


@pytest.mark.asyncio
async def test_nv_buffers_and_images_are_closed_at_stop(fake_nv: FakeNvrm) -> None:
    dev = await arig.open(nvrm.gpu(0))
    bufs = [await dev.alloc(4096, kind) for kind in ("device", "mapped", "pinned")]
    image = await dev.load(CUBIN)
    await dev.stop()
    for buf in bufs:
        _unusable(buf)  # numpy() of stopped pinned memory raises: its pages were given back
        with pytest.raises(ArigValueError, match=STOPPED):
            struct.pack("<Q", buf.address)  # a launch's argument
    with pytest.raises(ArigValueError, match=STOPPED):
        image.function("axpy")
    with pytest.raises(arig.DeviceStopped):
        await dev.dma(bufs[0])  # on the stopped device itself: refused for the stop
    async with await arig.open(nvrm.gpu(0)) as dev2:
        with pytest.raises(ArigValueError, match=STOPPED):
            await dev2.dma(bufs[0])
    await _refused_on_a_new_device(nvrm.gpu(0), bufs)


@pytest.mark.asyncio
async def test_nv_dma_refuses_a_region_before_the_buffer(fake_nv: FakeNvrm) -> None:
    async with await arig.open(nvrm.gpu(0)) as dev:
        buf = await dev.alloc(8192, "device")
        for offset, n in ((-4096, 4096), (-1, None), (-8192, 8192)):
            with pytest.raises(ArigValueError, match="not inside the buffer"):
                await dev.dma(buf, offset, n)
        d = await dev.dma(buf, 4096, 4096)  # a region inside is still exported
        with d:
            assert (d.offset, d.size) == (4096, 4096)
        buf.close()
        assert dev.lost is None
