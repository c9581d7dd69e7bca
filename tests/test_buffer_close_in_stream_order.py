"""``buf.close()`` while work that uses the buffer is still queued frees the memory in stream order.

The rule, on every device and engine: the buffer reads as closed at once and
new work naming it is refused before a value is assigned; its memory is freed
once every value submitted before the close is reached, so the queued work
still finds it, and no device is lost.  The scenario is a server's: 16
concurrent requests, one times out while its work is queued, and its
``finally`` closes the buffers (as examples/test_with_arig.py's roundtrip does).
Each device is checked through what it can show: the host device through the
buffers' views, the fakes through their drivers' allocation tables.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import arig
import arig.cuda
import arig.nvrm as nvrm
from arig._errors import ArigValueError
from arig._memory import Buffer, Ledger
from arig.testing import FakeCuda, FakeNvrm

pytest_plugins = ["_fake_drivers"]  # the fixtures fake_cuda and fake_nv

CUBIN = (Path(__file__).resolve().parent / "data" / "nv" / "probe.sm_90.cubin").read_bytes()
T = 10.0
N = 1 << 12  # floats per buffer
REQUESTS = 16
LATE = 8  # the request that times out


def saxpy(queue: Any, arg: Any, v: int) -> None:
    """The README's host fill, verbatim: the enqueued work reads the buffers when it runs."""
    a, x, y = arg
    queue.enqueue(lambda: np.add(a * x.numpy(np.float32), y.numpy(np.float32), out=y.numpy(np.float32)))


def host_gate(queue: Any, gate: threading.Event, v: int) -> None:
    """Hold the host queue's worker: everything enqueued after waits."""
    queue.enqueue(gate.wait, T)


def gpu_gate(queue: Any, gate: threading.Event, v: int) -> None:
    """Hold the submit thread inside a Python fill: on the native core, copies queue behind it."""
    gate.wait(T)


async def _requests(dev: arig.Device, gate_fill: Callable[..., None], host: bool) -> tuple[list[Any], list[Buffer]]:
    """16 requests, each over its own buffers, queued behind a held gate; request LATE times out while
    its work is queued and closes its buffers in ``finally``; then the gate opens."""
    xs = [await dev.alloc(4 * N) for _ in range(REQUESTS)]
    ys = [await dev.alloc(4 * N) for _ in range(REQUESTS)] if host else []
    for i, x in enumerate(xs):
        await dev.upload(x, np.full(N, i, np.float32))
    gate = threading.Event()
    await dev.submit(gate_fill, gate)

    async def request(i: int) -> np.ndarray[Any, Any]:
        x = xs[i]
        y = ys[i] if host else x
        out = np.empty(N, np.float32)
        try:
            async with asyncio.timeout(0.05 if i == LATE else T):
                if host:
                    await dev.run(saxpy, (2.0, x, y))  # y = 2 * x (y starts zeroed)
                await dev.download(y, out)
            return out
        finally:
            x.close()
            y.close()

    tasks = [asyncio.ensure_future(request(i)) for i in range(REQUESTS)]
    await asyncio.wait([tasks[LATE]], timeout=T)  # it timed out, and closed its buffers, while its work is queued
    assert tasks[LATE].done() and xs[LATE].closed
    gate.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    return results, xs + ys


def _nothing() -> None:
    """A control that does nothing: it returns once the submit thread ran what was posted before it."""


def _check(dev: arig.Device, results: list[Any], host: bool) -> None:
    assert dev.lost is None
    assert isinstance(results[LATE], TimeoutError)
    for i, r in enumerate(results):
        if i != LATE:
            assert not isinstance(r, BaseException), f"request {i}: {r!r}"
            np.testing.assert_array_equal(r, np.full(N, 2 * i if host else i, np.float32))


async def _all_freed(dev: arig.Device, bufs: list[Buffer]) -> None:
    """Once every value is reached, every closed buffer's memory is freed (and the frees posted to the
    submit thread ran: a control after them returns after them)."""
    await asyncio.wait_for(dev.wait(dev.submitted), T)
    await dev._control(_nothing)
    for b in bufs:
        assert b.closed
        with pytest.raises(ArigValueError, match="freed"):
            b.address  # noqa: B018


@pytest.mark.asyncio
async def test_host_request_timing_out_closes_its_buffers_and_nothing_is_lost(engine: str) -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        results, bufs = await _requests(dev, host_gate, host=True)
        _check(dev, results, host=True)
        await _all_freed(dev, bufs)
        assert dev._backend.ledger._live == {}
        with pytest.raises(ArigValueError, match="freed"):
            bufs[LATE].numpy()


@pytest.mark.asyncio
async def test_cuda_request_timing_out_closes_its_buffer_and_nothing_is_lost(fake_cuda: FakeCuda, engine: str) -> None:
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        before = len(fake_cuda.calls("cuMemFree_v2"))
        results, bufs = await _requests(dev, gpu_gate, host=False)
        addresses = {b._address for b in bufs}
        _check(dev, results, host=False)
        await _all_freed(dev, bufs)
        freed = {c.args[0] for c in fake_cuda.calls("cuMemFree_v2")[before:]}
        assert addresses <= freed
        assert not addresses & set(fake_cuda._memory)  # the fake's allocation table holds none of them


@pytest.mark.asyncio
async def test_nv_request_timing_out_closes_its_buffer_and_nothing_is_lost(fake_nv: FakeNvrm) -> None:
    async with await arig.open(nvrm.gpu(0)) as dev:
        live = set(fake_nv.live())
        results, bufs = await _requests(dev, gpu_gate, host=False)
        _check(dev, results, host=False)
        await _all_freed(dev, bufs)
        assert set(fake_nv.live()) == live  # every RM object the 16 buffers had was freed


# -- the rule itself ---------------------------------------------------------------------------


class _Timeline:
    """What the ledger reads of a timeline, and its queue of calls waiting for a value."""

    def __init__(self) -> None:
        self.assigned = self.reached = 0
        self.lost: BaseException | None = None
        self.due: list[tuple[int, Any, Any]] = []

    def when_reached(self, v: int, fn: Any, arg: Any) -> None:
        self.due.append((v, fn, arg))

    def reach(self, v: int) -> None:
        self.reached = v
        for item in [d for d in self.due if d[0] <= v]:
            self.due.remove(item)
            item[1](item[2])


def test_the_free_waits_for_every_value_submitted_before_the_close() -> None:
    tl = _Timeline()
    ledger = Ledger(tl, "DEV")
    freed: list[str] = []
    mem = np.zeros(8, np.uint8)
    a = Buffer("DEV", "host", 0x1000, 8, lambda: freed.append("a"), host=mem, ledger=ledger)
    b = Buffer("DEV", "host", 0x2000, 8, lambda: freed.append("b"), ledger=ledger)
    a.close()  # nothing pending: freed at once
    assert a.closed and freed == ["a"]
    with pytest.raises(ArigValueError, match="freed"):
        a.numpy()
    tl.assigned = 3
    b.close()
    assert b.closed and freed == ["a"] and b.address == 0x2000  # closed; its memory lives for values 1..3
    tl.assigned = 5  # submitted after the close: not waited for
    tl.reach(2)
    assert freed == ["a"]
    tl.reach(3)
    assert freed == ["a", "b"]


def test_a_lost_device_frees_nothing_before_stop_and_stop_closes_everything() -> None:
    tl = _Timeline()
    ledger = Ledger(tl, "DEV")
    freed: list[str] = []
    a = Buffer("DEV", "host", 0x1000, 8, lambda: freed.append("a"), host=np.zeros(8, np.uint8), ledger=ledger)
    b = Buffer("DEV", "host", 0x2000, 8, lambda: freed.append("b"), ledger=ledger)
    tl.lost = RuntimeError("lost")
    a.close()
    assert a.closed and freed == [] and a.numpy().nbytes == 8  # the GPU may still use it: stop decides
    ledger.end()
    assert a.closed and b.closed and freed == []  # the backend's close freed (or kept) the memory itself
    for buf in (a, b):
        with pytest.raises(ArigValueError, match="DEV stopped"):
            buf.address  # noqa: B018
    with pytest.raises(ArigValueError, match="DEV stopped"):
        a.numpy()


def _boom(queue: Any, arg: Any, v: int) -> None:
    raise RuntimeError("boom")


@pytest.mark.asyncio
async def test_a_buffer_closed_on_a_device_lost_meanwhile_is_freed_at_stop_not_before(fake_cuda: FakeCuda, engine: str) -> None:
    dev = await arig.open(arig.cuda.gpu(0))
    buf = await dev.alloc(64)
    address = buf.address
    gate = threading.Event()
    await dev.submit(gpu_gate, gate)
    v = await dev.submit(_boom)
    buf.close()  # waits for v, which is never reached
    gate.set()
    with pytest.raises(arig.DeviceLost):
        await asyncio.wait_for(dev.wait(v), T)
    await asyncio.sleep(0.05)
    assert address not in [c.args[0] for c in fake_cuda.calls("cuMemFree_v2")]  # lost: the GPU may still use it
    assert buf.address == address
    await dev.stop()
    assert address in [c.args[0] for c in fake_cuda.calls("cuMemFree_v2")]  # the backend's close freed it
    with pytest.raises(ArigValueError, match="CUDA stopped"):
        buf.address  # noqa: B018


@pytest.mark.asyncio
async def test_work_naming_a_closed_buffer_is_refused_before_a_value(engine: str) -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        buf = await dev.alloc(64)
        gate = threading.Event()
        await dev.submit(host_gate, gate)
        v = await dev.submit(None)
        buf.close()
        assert buf.closed
        for call in (
            lambda: dev.upload(buf, np.zeros(4, np.uint8)),
            lambda: dev.download(buf, np.zeros(4, np.uint8)),
            lambda: dev.submit(saxpy, (2.0, buf, buf)),
            lambda: dev.submit(None, keep=[buf]),
            lambda: dev.submit(lambda q, a, v: None, buf),
        ):
            with pytest.raises(ArigValueError, match="closed"):
                await call()
        assert dev.submitted == v and buf.address  # nothing was assigned; the memory waits for v
        gate.set()
        await dev.wait(v)
        assert dev.lost is None


@pytest.mark.asyncio
async def test_a_close_while_submit_waits_for_room_is_refused(engine: str) -> None:
    async with await arig.open(arig.host.cpu(), max_pending=1) as dev:
        buf = await dev.alloc(64)
        gate = threading.Event()
        blocked = threading.Event()

        def hold(queue: Any, arg: Any, v: int) -> None:  # holds the submit thread: the next submits wait for room
            blocked.set()
            gate.wait(T)

        await dev.submit(hold)  # the one pending place, until it returns
        assert await asyncio.to_thread(blocked.wait, T)
        waiting = asyncio.ensure_future(dev.upload(buf, np.ones(64, np.uint8)))
        await asyncio.sleep(0.05)
        assert not waiting.done()  # checked and waiting for room
        buf.close()
        gate.set()
        with pytest.raises(ArigValueError, match="closed"):
            await waiting
        await dev.wait(dev.submitted)
        assert dev.lost is None


@pytest.mark.asyncio
async def test_an_image_unloaded_while_its_launch_is_queued_is_unloaded_after_it(fake_cuda: FakeCuda, engine: str) -> None:
    ran: list[bytes] = []
    image_bytes = fake_cuda.image(k=(ran.append, (8,)))
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        image = await dev.load(image_bytes)
        launch = arig.cuda.Launch(image.function("k"), 1, 1, arig.cuda.pack(np.uint64(7)))
        gate = threading.Event()
        await dev.submit(gpu_gate, gate)
        v = await dev.submit(launch)
        image.unload()
        assert not image.loaded
        with pytest.raises(ArigValueError, match="unloaded"):
            image.function("k")
        await asyncio.sleep(0.05)
        assert ("module", image.handle) not in fake_cuda.destroyed  # its launch is still queued
        gate.set()
        await asyncio.wait_for(dev.wait(v), T)
        assert dev.lost is None and len(ran) == 1
        await dev._control(_nothing)  # a control after the posted unload
        assert ("module", image.handle) in fake_cuda.destroyed


# -- launches: what arig can see of them (the image, the buffers pack() was given) --------------


def _axpy(fake: FakeNvrm) -> None:
    def axpy(params: bytes, grid: tuple[int, int, int], block: tuple[int, int, int]) -> None:
        a, x, y, n = struct.unpack("<f4xQQi", params)
        ys = fake.array(y, np.float32, n)
        ys[:] = np.float32(a) * fake.array(x, np.float32, n) + ys

    fake.kernel("axpy", axpy)


@pytest.mark.asyncio
async def test_a_cuda_launch_of_a_closed_buffer_or_an_unloaded_image_is_refused_at_submit(fake_cuda: FakeCuda, engine: str) -> None:
    image_bytes = fake_cuda.image(store=(lambda args: None, (8, 8)))
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        image = await dev.load(image_bytes)
        buf, other = await dev.alloc(64), await dev.alloc(64)
        launch = arig.cuda.Launch(image.function("store"), 1, 1, arig.cuda.pack(buf, np.uint64(7)))
        raw = arig.cuda.Launch(image.function("store"), 1, 1, arig.cuda.pack(np.uint64(other.address), np.uint64(7)))
        await dev.run(launch)
        buf.close()
        v = dev.submitted
        with pytest.raises(ArigValueError, match="a closed buffer"):
            await dev.submit(launch)
        launch.set_args(arig.cuda.pack(other, np.uint64(7)))  # new arguments: a launch again
        await dev.run(launch)
        image.unload()
        for gone in (launch, raw):  # raw: its buffer is an address arig cannot see, its image it can
            with pytest.raises(ArigValueError, match="an unloaded image"):
                await dev.submit(gone)
        assert dev.submitted == v + 1 and dev.lost is None
        other.close()


@pytest.mark.asyncio
async def test_an_nv_launch_of_a_closed_buffer_or_an_unloaded_image_is_refused_at_submit(fake_nv: FakeNvrm) -> None:
    _axpy(fake_nv)
    n = 64
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        x, y = await dev.alloc(4 * n), await dev.alloc(4 * n)
        await dev.upload(x, np.ones(n, np.float32))
        args = arig.cuda.pack(np.float32(2.0), x, y, np.int32(n))
        launch = nvrm.Launch(image.function("axpy"), 1, n, args)
        raw = nvrm.Launch(image.function("axpy"), 1, n, struct.pack("<f4xQQi", 2.0, x.address, x.address, n))  # addresses only
        await dev.run(launch)
        y.close()
        v = dev.submitted
        with pytest.raises(ArigValueError, match="a closed buffer"):
            await dev.submit(launch)
        await dev.run(raw)
        image.unload()
        with pytest.raises(ArigValueError, match="an unloaded image"):
            await dev.submit(raw)
        with pytest.raises(ArigValueError, match="unloaded"):
            image.function("axpy")
        assert dev.submitted == v + 1 and dev.lost is None
        x.close()
