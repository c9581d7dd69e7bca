"""``buf.close()`` while a long kernel and a copy that uses the buffer are queued, on a real GPU.

The free waits for every value submitted before the close: the queued copy
reads intact memory, no device is lost, and the memory is freed (gone from
the device's own table of allocations) once the copy's value is reached.
The CUDA case holds the submit thread in a Python fill after the kernel's
launch, so that the copy waits in the native core's ring when the close comes.
Run: python3 -m pytest -q -m gpu tests/gpu/test_close_in_stream_order_gpu.py
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import arig
import arig._env
import arig.cuda
import arig.nvrm as nvrm
from arig.cuda import Launch, pack, shipped_image

pytestmark = [pytest.mark.arig_gpu, pytest.mark.asyncio]

REPO = Path(__file__).resolve().parents[2]
SPIN_NS = 300_000_000  # 300 ms of GPU time before the copy
needs_nv = pytest.mark.skipif(not os.path.exists("/dev/nvidiactl") and not arig._env.GPU_REQUIRED, reason="the NVIDIA kernel driver is not loaded")


def _launch_then_hold(stream: int, launch: Launch, v: int) -> int:
    """Launch the spin, then hold the submit thread: the copy submitted next waits behind this fill."""
    rc = launch(stream)
    time.sleep(0.2)
    return rc


def _nothing() -> None:
    """A control that does nothing: it returns once the submit thread ran what was posted before it."""


async def _queued_download(dev: arig.Device, buf: arig.Buffer, out: np.ndarray[Any, Any]) -> asyncio.Future[int]:
    """A download of ``buf`` whose value is assigned (queued) but not reached."""
    before = dev.submitted
    task = asyncio.ensure_future(dev.download(buf, out))
    while dev.submitted == before:
        await asyncio.sleep(0)
    assert not task.done()
    return task


async def test_cuda_close_while_a_spin_and_a_copy_using_the_buffer_are_queued(engine: str) -> None:
    n = 1 << 20
    data = np.arange(n, dtype=np.uint32)
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        image = await dev.load(shipped_image())
        buf = await dev.alloc(data.nbytes)
        await dev.upload(buf, data)
        address = buf.address
        spin = Launch(image.function("spin"), 1, 1, pack(np.uint64(SPIN_NS)))
        v_spin = await dev.submit(_launch_then_hold, spin)
        out = np.zeros_like(data)
        copy = await _queued_download(dev, buf, out)
        buf.close()
        assert buf.closed and dev.reached < v_spin
        with pytest.raises(arig.ArigValueError, match="closed"):
            await dev.upload(buf, data)  # submitted after the close: refused
        v_copy = await asyncio.wait_for(copy, 30)
        assert dev.lost is None and dev.reached >= v_copy
        np.testing.assert_array_equal(out, data)
        await dev._control(_nothing)  # the free was posted when v_copy was reached
        assert address not in dev._backend._live
        with pytest.raises(arig.ArigValueError, match="freed"):
            buf.address  # noqa: B018
        image.unload()


@needs_nv
async def test_nv_close_while_a_spin_and_a_copy_using_the_buffer_are_queued() -> None:
    n = 1 << 20
    data = np.arange(n, dtype=np.uint32)
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load((REPO / "arig" / "kernels" / "kernels.cubin").read_bytes())
        buf = await dev.alloc(data.nbytes, "device")
        await dev.upload(buf, data)
        address = buf.address
        spin = nvrm.Launch(image.function("spin"), 1, 1, pack(np.uint64(SPIN_NS)))
        v_spin = await dev.submit(spin)
        out = np.zeros_like(data)
        copy = await _queued_download(dev, buf, out)  # the copy queue is ordered after the spin
        buf.close()
        assert buf.closed and dev.reached < v_spin
        with pytest.raises(arig.ArigValueError, match="closed"):
            await dev.upload(buf, data)
        v_copy = await asyncio.wait_for(copy, 30)
        assert dev.lost is None and dev.reached >= v_copy
        np.testing.assert_array_equal(out, data)
        await dev._control(_nothing)
        assert all(not (m.va <= address < m.va + m.size) for m in dev._backend.memory._mem.values())
        with pytest.raises(arig.ArigValueError, match="freed"):
            buf.address  # noqa: B018
        image.unload()
