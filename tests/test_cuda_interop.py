"""Adopted streams, awaited events, ``__cuda_stream__``: the CUDA device's interop over ``FakeCuda``.

The "user's library" here is the fake libcuda called from a worker thread
(as torch or CuPy would call libcuda); the fake's streams run in order and
``hold``/``release`` stop one, so a test can see that arig's value waits
for exactly the user's earlier work and for nothing else.  The same tests
run on the H200 against torch and CuPy in ``tests/gpu/test_interop_gpu.py``.
"""

from __future__ import annotations

import asyncio
import ctypes
from ctypes import byref, c_void_p
from typing import Any

import numpy as np
import pytest

import arig
import arig.cuda
import arig.queue
from arig.cuda import interop
from arig.testing import FakeCuda

from test_cuda_fake import STORE, T, _open, _until, _use
from test_cuda_fake import completion as completion  # the fixture: both completion paths

pytestmark = pytest.mark.asyncio


@pytest.fixture
def fake() -> Any:
    with _use(FakeCuda(gpus=2)) as f:
        yield f


async def _in_user_thread(fake: FakeCuda, fn: Any, *args: Any) -> Any:
    """Run ``fn(*args)`` as another library would: on its own thread, the primary context current."""

    def call() -> Any:
        fake.cuCtxSetCurrent(fake.primary(0).handle)
        return fn(*args)

    return await asyncio.to_thread(call)


def _new_stream(fake: FakeCuda) -> int:
    p = c_void_p()
    assert fake.cuStreamCreate(byref(p), 1) == 0
    return p.value or 0


def _launch_store(fake: FakeCuda, func: int, stream: int, out: int, i: int, value: int) -> None:
    args = (ctypes.c_uint64(out), ctypes.c_uint32(i), ctypes.c_uint64(value))
    params = (c_void_p * 3)(*(ctypes.addressof(a) for a in args))
    assert fake.cuLaunchKernel(func, 1, 1, 1, 1, 1, 1, 0, stream, params, None) == 0


class TorchLikeStream:
    """What arig reads of a ``torch.cuda.Stream``."""

    def __init__(self, handle: int, index: int) -> None:
        self.cuda_stream = handle
        self.device = type("device", (), {"index": index})()


class ProtocolStream:
    def __init__(self, handle: int, version: int = 0) -> None:
        self._h, self._v = handle, version

    def __cuda_stream__(self) -> tuple[int, int]:
        return (self._v, self._h)


async def test_submit_none_on_an_adopted_stream_waits_for_its_earlier_work(fake: FakeCuda, completion: str) -> None:
    async with await _open() as dev:
        img = await dev.load(fake.image(store=STORE))
        out = await dev.alloc(8 * 4, kind="pinned")
        user = await _in_user_thread(fake, _new_stream, fake)
        q = dev.adopt(user)
        assert q.handle == user and dev.adopt(user) is q and q not in dev.queues
        fake.hold(user)
        await _in_user_thread(fake, _launch_store, fake, img.function("store"), user, out.address, 1, 77)
        v = await dev.submit(None, queue=q)
        await asyncio.sleep(0.05)
        assert dev.reached < v and out.numpy(np.uint64)[1] == 0
        fake.release(user)
        await asyncio.wait_for(dev.wait(v), T)
        assert out.numpy(np.uint64)[1] == 77


async def test_a_held_adopted_stream_does_not_hold_arig_queues(fake: FakeCuda, completion: str) -> None:
    async with await _open() as dev:
        img = await dev.load(fake.image(store=STORE))
        out = await dev.alloc(8 * 4, kind="pinned")
        user = await _in_user_thread(fake, _new_stream, fake)
        fake.hold(user)
        joined = await dev.submit(None, queue=dev.adopt(user))
        # Work on queue 0 runs on its own stream: the GPU runs it while the join lane waits.
        v = await dev.submit(arig.cuda.Launch(img.function("store"), 1, 1, arig.cuda.pack(out, np.uint32(3), np.uint64(99))))
        await _until(lambda: out.numpy(np.uint64)[3] == 99)
        assert dev.reached < joined < v
        fake.release(user)
        await asyncio.wait_for(dev.wait(v), T)


async def test_python_fill_on_an_adopted_queue_gets_the_users_stream(fake: FakeCuda, completion: str) -> None:
    async with await _open() as dev:
        img = await dev.load(fake.image(store=STORE))
        out = await dev.alloc(8 * 4, kind="pinned")
        user = await _in_user_thread(fake, _new_stream, fake)
        q = dev.adopt(ProtocolStream(user))
        seen: list[int] = []

        def fill(stream: int, arg: Any, v: int) -> None:
            seen.append(stream)
            _launch_store(fake, img.function("store"), stream, out.address, 2, v)

        fake.hold(user)
        v = await dev.submit(fill, queue=q)
        await _until(lambda: seen)
        await asyncio.sleep(0.05)
        assert seen == [user] and dev.reached < v
        fake.release(user)
        await asyncio.wait_for(dev.wait(v), T)
        assert out.numpy(np.uint64)[2] == v


async def test_a_failing_fill_on_an_adopted_queue_loses_the_device(fake: FakeCuda, completion: str) -> None:
    dev = await _open()
    user = await _in_user_thread(fake, _new_stream, fake)
    q = dev.adopt(user)

    def bad(stream: int, arg: Any, v: int) -> None:
        raise RuntimeError("the user's fill failed")

    v = await dev.submit(bad, queue=q)
    with pytest.raises(arig.DeviceLost, match="the user's fill failed"):
        await asyncio.wait_for(dev.wait(v), T)
    await dev.stop()


async def test_wait_event(fake: FakeCuda, completion: str) -> None:
    async with await _open() as dev:
        user = await _in_user_thread(fake, _new_stream, fake)

        def record() -> int:
            ev = c_void_p()
            assert fake.cuEventCreate(byref(ev), 2) == 0
            assert fake.cuEventRecord(ev.value, user) == 0
            return ev.value or 0

        fake.hold(user)
        ev = await _in_user_thread(fake, record)
        waiter = asyncio.ensure_future(arig.cuda.wait_event(ev))  # finds the open device of this loop
        await asyncio.sleep(0.05)
        assert not waiter.done()
        fake.release(user)
        await asyncio.wait_for(waiter, T)
        await asyncio.wait_for(arig.cuda.wait_event(ev, device=dev), T)  # recorded and reached: at once
        await arig.cuda.wait_event(0)  # never recorded (torch's cuda_event before its first record)
        await _in_user_thread(fake, fake.cuEventDestroy_v2, ev)


async def test_a_wait_event_whose_hand_off_fails_loses_the_device(fake: FakeCuda, completion: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The wait's value exists once the hand-off is tried: if the hand-off raises, that value can
    never be reached, so the device is lost and every waiter hears it, none waits forever."""
    dev = await _open()
    ev = await _in_user_thread(fake, lambda: (fake.cuEventCreate(byref(p := c_void_p()), 2), p.value)[1])
    queue0 = dev.queues[0].handle
    fake.hold(queue0)  # earlier work, still pending
    earlier = asyncio.ensure_future(dev.wait(await dev.submit(None)))
    hand_off = dev._put

    def refuse_the_join_lane(qi: int, item: Any, v: int) -> None:
        if qi == len(dev.queues):  # the join lane follows the queues
            raise RuntimeError("the join lane refused the hand-off")
        hand_off(qi, item, v)

    monkeypatch.setattr(dev, "_put", refuse_the_join_lane)
    with pytest.raises(RuntimeError, match="refused the hand-off"):
        await arig.cuda.wait_event(ev, device=dev)
    assert isinstance(dev.lost, RuntimeError)
    with pytest.raises(arig.DeviceLost, match="refused the hand-off"):
        await asyncio.wait_for(earlier, T)
    with pytest.raises(arig.DeviceLost, match="refused the hand-off"):
        await asyncio.wait_for(dev.wait(dev.submitted), T)  # the wait's own value
    fake.release(queue0)
    await dev.stop()
    await _in_user_thread(fake, fake.cuEventDestroy_v2, ev)


async def test_a_cuda_device_adopts_waits_for_events_and_wraps(fake: FakeCuda) -> None:
    async with await _open() as dev:
        assert dev.features == {"adopt", "wait_event", "wrap", "wait_peers"}
        for no_event in (0, -1, 1 << 64):
            with pytest.raises(ValueError, match="an event's handle"):
                await dev.join_event(no_event)
        with pytest.raises(TypeError, match="handle must be an int"):
            await dev.join_event("0x1234")  # type: ignore[arg-type]
        assert dev.submitted == 0 and dev.lost is None


async def test_wait_event_without_a_device_opens_one_for_the_loop(fake: FakeCuda) -> None:
    def retain() -> None:  # the user's library holds the primary context, as torch does
        assert fake.cuInit(0) == 0 and fake.cuDevicePrimaryCtxRetain(byref(c_void_p()), 0) == 0

    await asyncio.to_thread(retain)
    ev = await _in_user_thread(fake, lambda: (fake.cuEventCreate(byref(p := c_void_p()), 2), p.value)[1])
    await asyncio.wait_for(arig.cuda.wait_event(ev), T)
    (dev,) = [d for d in arig.device.open_devices(asyncio.get_running_loop())]
    assert dev.name == "CUDA" and dev.reached >= 1
    await dev.stop()  # the test's loop would stop it at shutdown; the fake must outlive it
    await _in_user_thread(fake, fake.cuEventDestroy_v2, ev)
    await asyncio.to_thread(fake.cuDevicePrimaryCtxRelease_v2, 0)


async def test_cuda_stream_protocol_of_arig_queues(fake: FakeCuda) -> None:
    async with await _open(queues=2) as dev:
        assert [q.__cuda_stream__() for q in dev.queues] == [(0, q.handle) for q in dev.queues]
        assert interop.stream_handle(dev.queues[1]) == (dev.queues[1].handle, None)
        assert all(isinstance(q, arig.Queue) for q in dev.queues)
        adopted = dev.adopt(ProtocolStream(0x7A))
        assert isinstance(adopted, arig.queue.AdoptedQueue) and adopted.__cuda_stream__() == (0, 0x7A)
        assert interop.stream_handle(adopted) == (0x7A, None)
    async with await arig.open(arig.host.cpu()) as host:
        assert not hasattr(host.queues[0], "__cuda_stream__")
    # The core queue names no driver: the protocol is the CUDA device's queues' own.
    assert not hasattr(arig.Queue, "__cuda_stream__") and not hasattr(arig.queue.AdoptedQueue, "__cuda_stream__")


async def test_adopt_refuses_what_it_cannot_use(fake: FakeCuda) -> None:
    async with await _open() as dev:
        with pytest.raises(TypeError, match="cannot adopt 'a string'"):
            dev.adopt("a string")
        with pytest.raises(ValueError, match="per-thread default stream"):
            dev.adopt(2)
        with pytest.raises(ValueError, match="0..2"):
            dev.adopt(-1)
        with pytest.raises(ValueError, match="version 1"):
            dev.adopt(ProtocolStream(5, version=1))
        with pytest.raises(ValueError, match="GPU 1"):
            dev.adopt(TorchLikeStream(1234, 1))
        q = dev.adopt(TorchLikeStream(0, 0))  # the legacy default stream is a stream like another
        with pytest.raises(TypeError, match="adopted queue takes Python fills and None"):
            await dev.submit(arig.cuda.Launch(1, 1, 1, b""), queue=q)
        with pytest.raises(TypeError, match="coroutine"):

            async def later(s: Any, a: Any, v: int) -> None: ...

            await dev.submit(later, queue=q)
        assert dev.submitted == 0
        async with await _open() as other:
            with pytest.raises(ValueError, match="not a queue of this device"):
                await other.submit(None, queue=q)
    async with await arig.open(arig.host.cpu()) as host:
        with pytest.raises(TypeError, match="adopt\\(\\) is for CUDA devices"):
            host.adopt(0)
        with pytest.raises(TypeError, match="cannot wait for CUDA events"):
            await arig.cuda.wait_event(1234, device=host)
    with pytest.raises(TypeError, match="cannot wait for 1.5"):
        await arig.cuda.wait_event(1.5)


async def test_submit_none_marks_earlier_work(fake: FakeCuda, completion: str) -> None:
    async with await _open() as dev:
        q = dev.queues[0].handle
        fake.hold(q)
        v = await dev.submit(None)
        await asyncio.sleep(0.05)
        assert dev.reached < v
        fake.release(q)
        await asyncio.wait_for(dev.wait(v), T)
    async with await arig.open(arig.host.cpu()) as host:
        assert await host.run(None) == 1


async def test_adopting_after_values_are_outstanding_keeps_their_order(fake: FakeCuda, completion: str) -> None:
    """The join lane joins a one-queue timeline mid-flight: values already out stay in order."""
    async with await _open() as dev:
        q0 = dev.queues[0].handle
        fake.hold(q0)
        early = [await dev.submit(None) for _ in range(3)]
        user = await _in_user_thread(fake, _new_stream, fake)
        joined = await dev.submit(None, queue=dev.adopt(user))
        await asyncio.sleep(0.05)
        assert dev.reached == 0  # the join completed, but the values before it did not
        fake.release(q0)
        await asyncio.wait_for(dev.wait(joined), T)
        assert early == [1, 2, 3] and joined == 4 and dev.reached == 4


class CudaArray:
    """What arig reads of a CuPy or torch array: ``__cuda_array_interface__`` (version 3)."""

    def __init__(self, address: int, nbytes: int, readonly: bool = False) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes // 4,), "typestr": "<f4", "data": (address, readonly), "version": 3, "strides": None, "stream": None}


async def test_wrap_a_foreign_array_and_copy_through_it(fake: FakeCuda, completion: str) -> None:
    async with await _open() as dev:
        mem = await dev.alloc(4096)  # stands for memory another library allocated
        owner = CudaArray(mem.address, 4096)
        buf = dev.wrap(owner)
        assert (buf.address, buf.nbytes, buf.kind, buf._keep is not None) == (mem.address, 4096, "foreign", True)
        data = np.arange(1024, dtype=np.float32)
        await dev.upload(buf, data)
        out = np.empty_like(data)
        await dev.download(mem, out)  # the same memory: what went in through the wrap is there
        np.testing.assert_array_equal(out, data)
        buf.close()  # frees nothing: the owner's memory is still usable
        await dev.download(mem, out)
        np.testing.assert_array_equal(out, data)
        ro = dev.wrap(CudaArray(mem.address, 64, readonly=True))
        with pytest.raises(ValueError, match="read-only"):
            await dev.upload(ro, np.zeros(16, np.float32))
        with pytest.raises(ValueError, match="not in CUDA's device memory"):
            dev.wrap(np.zeros(4))
    async with await arig.open(arig.host.cpu()) as host:
        with pytest.raises(TypeError, match="wrap\\(\\) is for CUDA devices"):
            host.wrap(owner)


async def test_dlpack_device_of_cuda_buffers(fake: FakeCuda) -> None:
    async with await _open() as dev:
        d = await dev.alloc(64)
        p = await dev.alloc(64, kind="pinned")
        assert d.__dlpack_device__() == (2, 0) and p.__dlpack_device__() == (1, 0)
        cap = d.__dlpack__(max_version=(1, 0))
        assert type(cap).__name__ == "PyCapsule"
        del cap
        view = np.from_dlpack(p)  # host-visible memory goes to numpy without a copy
        view[:] = 7
        assert (p.numpy() == 7).all() and view.__array_interface__["data"][0] == p.address


async def test_the_record_gives_the_devices_context_until_stop(fake: FakeCuda) -> None:
    """Code handed a device's record (``arig.cuda.capture`` among it) makes the device's context
    current through ``record.context``, never through the device's internals."""
    dev = await _open()
    record = dev.capability(arig.cuda_abi.KEY)
    assert record.context == fake.primary(0).handle
    await dev.stop()
    with pytest.raises(arig.DeviceStopped, match="context is released"):
        record.context  # noqa: B018
    begin = arig.cuda.capture.begin_capture  # a blocking call: off the loop's thread
    with pytest.raises(arig.DeviceStopped, match="context is released"):
        await asyncio.to_thread(begin, 0, context=dev)
    with pytest.raises(TypeError, match="a CUDA device's record or a CUDA device"):
        await asyncio.to_thread(begin, 0, context=object())
