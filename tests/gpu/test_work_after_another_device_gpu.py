"""``after=`` on real GPUs: work on one device waits for another device's value.

Order is read from the kernels' own stamps: each step is ``spin_stamped`` (the shipped cubin),
which writes its start and end (the GPU's global timer, ns) into its device's own slot buffer;
a step waiting for the step before it must start no earlier than that one ended.  On one GPU
both devices read one timer.  Pairings: two CUDA devices on GPU 0 (both engines), CUDA and NV
on GPU 0, and CUDA on GPU 0 and GPU 1 (skipped with fewer than two GPUs; two timers there, so
only completion and values are checked).  A peer lost through its fill (no GPU fault: the other
device shares the context) loses the waiting device, naming the peer.
"""

from __future__ import annotations

import asyncio
import os
import threading
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
CUBIN = (REPO / "arig" / "kernels" / "kernels.cubin").read_bytes()
STEP_NS = 2_000  # each step spins 2 us of GPU time
_NV_WHY = (None if arig._engine.choose().native else "the NV device runs on the native core only") if os.path.exists("/dev/nvidiactl") or arig._env.GPU_REQUIRED else "the NVIDIA kernel driver is not loaded"
needs_nv = pytest.mark.skipif(_NV_WHY is not None, reason=str(_NV_WHY))


class _Side:
    """One device of the ping-pong: its image, its slot buffer and its Launch type."""

    def __init__(self, dev: arig.Device, image: arig.Image, slots: arig.Buffer, launch: Any) -> None:
        self.dev, self.image, self.slots, self.launch = dev, image, slots, launch

    def step(self, i: int) -> Any:
        return self.launch(self.image.function("spin_stamped"), 1, 1, pack(np.uint64(STEP_NS), np.uint64(self.slots.address), np.uint32(i)))

    async def stamps(self, n: int) -> np.ndarray[Any, Any]:
        out = np.zeros(2 * n, np.uint64)
        await self.dev.download(self.slots, out)
        return out


async def _side(dev: arig.Device, n: int, nv: bool) -> _Side:
    image = await dev.load(CUBIN if nv else shipped_image())
    slots = await dev.alloc(16 * n)
    await dev.upload(slots, np.zeros(2 * n, np.uint64))
    return _Side(dev, image, slots, nvrm.Launch if nv else Launch)


async def _ping_pong(a: _Side, b: _Side, n: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """``n`` steps, step i on a (even i) or b (odd i), each after the step before; every step's
    (start, end) from its own device's slots."""
    last: tuple[arig.Device, int] | None = None
    for i in range(n):
        side = a if i % 2 == 0 else b
        v = await side.dev.submit(side.step(i), after=[] if last is None else [last])
        last = (side.dev, v)
    assert last is not None
    await asyncio.wait_for(last[0].wait(last[1]), 60)
    sa, sb = await a.stamps(n), await b.stamps(n)
    start = np.where(np.arange(n) % 2 == 0, sa[0::2], sb[0::2]).astype(np.int64)
    end = np.where(np.arange(n) % 2 == 0, sa[1::2], sb[1::2]).astype(np.int64)
    return start, end


def _in_order(start: np.ndarray[Any, Any], end: np.ndarray[Any, Any]) -> None:
    assert (start > 0).all() and (end >= start).all(), "every step ran and stamped"
    early = np.nonzero(start[1:] < end[:-1])[0]
    assert early.size == 0, f"steps {early[:5] + 1} started before the step they wait for ended"


async def test_a_1000_step_ping_pong_between_two_cuda_devices_on_one_gpu(engine: str) -> None:
    async with await arig.open(arig.cuda.gpu(0)) as da, await arig.open(arig.cuda.gpu(0)) as db:
        a, b = await _side(da, 1000, False), await _side(db, 1000, False)
        _in_order(*await _ping_pong(a, b, 1000))
        assert da.lost is None and db.lost is None


@needs_nv
async def test_cuda_and_nv_on_one_gpu_hand_off_in_order() -> None:
    async with await arig.open(arig.cuda.gpu(0)) as dc, await arig.open(nvrm.gpu(0)) as dn:
        c, n = await _side(dc, 400, False), await _side(dn, 400, True)
        _in_order(*await _ping_pong(c, n, 400))  # CUDA first
        for s in (c, n):
            await s.dev.upload(s.slots, np.zeros(800, np.uint64))
        _in_order(*await _ping_pong(n, c, 400))  # NV first
        assert dc.lost is None and dn.lost is None


async def test_two_gpus_hand_off_each_step_after_the_other() -> None:
    if arig.cuda.count() < 2:
        pytest.skip("needs two GPUs")
    async with await arig.open(arig.cuda.gpu(0)) as da, await arig.open(arig.cuda.gpu(1)) as db:
        a, b = await _side(da, 1000, False), await _side(db, 1000, False)
        start, end = await _ping_pong(a, b, 1000)
        assert (start > 0).all() and (end >= start).all()  # two timers: order is not comparable across them
        assert da.reached == da.submitted and db.reached == db.submitted


async def test_a_peer_lost_on_a_gpu_loses_the_waiting_device_naming_it() -> None:
    """Also: the waiting device's gate opens at the loss, so its stream drains and both devices
    close within their stop timeout, leaving no submit thread inside a synchronizing driver call
    (a stream left at its gate keeps the shared context busy, and every ``cuMemFree`` of it waits)."""
    before = set(threading.enumerate())
    async with await arig.open(arig.cuda.gpu(0), stop_timeout=10) as peer, await arig.open(arig.cuda.gpu(0), stop_timeout=10) as dev:
        side = await _side(dev, 4, False)

        def fails(stream: int, arg: Any, v: int) -> int:
            raise RuntimeError("the peer's fill broke")

        await peer.run(None)
        pv = await peer.submit(fails)
        v = await dev.submit(side.step(0), after=[(peer, pv)])
        with pytest.raises(arig.DeviceLost, match="the peer's fill broke"):
            await asyncio.wait_for(dev.wait(v), 30)
        assert isinstance(dev.lost, arig.DeviceLost) and dev.lost.device == peer.name
        assert peer.lost is not None
    for t in set(threading.enumerate()) - before:
        if t.name.startswith("arig-submit"):
            t.join(5)
            assert not t.is_alive(), f"{t.name} still runs after its device closed: a stream still waits at its gate"
