"""The CUDA device's own features under trio, over ``FakeCuda``, on both engines: a launch, graphs
built off the loop (``graph_async``), adopted streams (``submit(None, queue=q)``), awaited events
(``arig.cuda.wait_event``, and the device it opens for a run, stopped at the run's end) and
``usage_async``'s checks.  The same as the asyncio tests of ``test_cuda_fake`` and
``test_cuda_interop``; the fake's check that the loop thread never called libcuda holds here too."""

from __future__ import annotations

import threading
from ctypes import byref, c_void_p
from typing import Any

import anyio
import numpy as np
import pytest
import trio

import arig
import arig.cuda
import arig.cuda_abi as abi
import arig.device
import arig.nvrm as nvrm
from arig._running import running_loop
from arig.cuda import Launch, pack
from arig.testing import FakeCuda

from test_cuda_fake import STORE, T, _launch, _tagger, _use
from test_cuda_interop import _launch_store, _new_stream

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "trio"


@pytest.fixture
def fake(engine: str) -> Any:
    with _use(FakeCuda(gpus=2)) as f:
        yield f


def _as_the_user(fake: FakeCuda, fn: Any, *args: Any) -> Any:
    """``fn(*args)`` as another library calls libcuda: the primary context current on its thread."""
    fake.cuCtxSetCurrent(fake.primary(0).handle)
    return fn(*args)


async def _in_user_thread(fake: FakeCuda, fn: Any, *args: Any) -> Any:
    return await trio.to_thread.run_sync(_as_the_user, fake, fn, *args)


async def _open() -> arig.Device:
    with trio.fail_after(T):
        return await arig.open(arig.cuda.gpu(0))


async def test_a_launch_and_a_graph_run_in_order(fake: FakeCuda) -> None:
    seen: list[int] = []
    async with await _open() as dev:
        img = await dev.load(fake.image(tag=_tagger(seen), store=STORE))
        out = await dev.alloc(8 * 4, kind="pinned")
        with trio.fail_after(T):
            await dev.run(_launch, Launch(img.function("store"), 1, 1, pack(out, np.uint32(1), np.uint64(42))))
            assert out.numpy(np.uint64)[1] == 42
            g = await dev.capability(abi.KEY).graph_async([abi.Kernel(img.function("tag"), 1, 1, pack(np.uint32(i))) for i in (1, 2)])
            await dev.run(lambda s, g, v: g.launch(s), g)
        assert seen == [1, 2]
        out.close()


async def test_submit_none_on_an_adopted_stream_waits_for_its_earlier_work(fake: FakeCuda) -> None:
    async with await _open() as dev:
        img = await dev.load(fake.image(store=STORE))
        out = await dev.alloc(8 * 4, kind="pinned")
        user = await _in_user_thread(fake, _new_stream, fake)
        q = dev.adopt(user)
        fake.hold(user)
        await _in_user_thread(fake, _launch_store, fake, img.function("store"), user, out.address, 1, 77)
        v = await dev.submit(None, queue=q)
        await trio.sleep(0.05)
        assert dev.reached < v and out.numpy(np.uint64)[1] == 0
        with trio.move_on_after(0.01):
            await dev.wait(v)  # a cancelled wait changes nothing
        fake.release(user)
        with trio.fail_after(T):
            await dev.wait(v)
        assert out.numpy(np.uint64)[1] == 77
        out.close()


def _record(fake: FakeCuda, stream: int) -> int:
    ev = c_void_p()
    assert fake.cuEventCreate(byref(ev), 2) == 0
    assert fake.cuEventRecord(ev.value, stream) == 0
    return ev.value or 0


async def test_wait_event_on_the_runs_open_device(fake: FakeCuda) -> None:
    async with await _open() as dev:
        user = await _in_user_thread(fake, _new_stream, fake)
        fake.hold(user)
        ev = await _in_user_thread(fake, _record, fake, user)
        done: list[bool] = []

        async def waiter() -> None:
            await arig.cuda.wait_event(ev)  # finds the open device of this run
            done.append(True)

        with trio.fail_after(T):
            async with trio.open_nursery() as n:
                n.start_soon(waiter)
                await trio.sleep(0.05)
                assert done == []
                fake.release(user)
        assert done == [True] and dev.submitted == dev.reached == 1, "the wait was the open device's value"
        await _in_user_thread(fake, fake.cuEventDestroy_v2, ev)


def test_wait_event_without_a_device_opens_one_for_the_run_and_stops_it_at_its_end(fake: FakeCuda) -> None:
    opened: list[arig.Device] = []

    async def main() -> None:
        def retain() -> None:  # the user's library holds the primary context, as torch does
            assert fake.cuInit(0) == 0 and fake.cuDevicePrimaryCtxRetain(byref(c_void_p()), 0) == 0

        await trio.to_thread.run_sync(retain)
        ev = await _in_user_thread(fake, lambda: (fake.cuEventCreate(byref(p := c_void_p()), 2), p.value)[1])
        with trio.fail_after(T):
            await arig.cuda.wait_event(ev)
        opened.extend(arig.device.open_devices(running_loop()))
        assert [d.name for d in opened] == ["CUDA"] and not opened[0].stopped
        await _in_user_thread(fake, fake.cuEventDestroy_v2, ev)

    trio.run(main)
    assert opened[0].stopped and opened[0].lost is None, "the run's end stopped the device wait_event opened"
    released = threading.Thread(target=fake.cuDevicePrimaryCtxRelease_v2, args=(0,))  # as the user's library would: off the loop's thread
    released.start()
    released.join()


async def test_usage_async_checks_its_window_under_trio() -> None:
    with pytest.raises(arig.ArigValueError, match="window"):
        await nvrm.usage_async(0, window=1e300)


async def test_upload_download_round_trip(fake: FakeCuda) -> None:
    async with await _open() as dev:
        x = np.arange(32, dtype=np.float32)
        buf = await dev.alloc(x.nbytes)
        with anyio.fail_after(T):
            await dev.upload(buf, x)
            out = np.empty_like(x)
            await dev.download(buf, out)
        np.testing.assert_array_equal(out, x)
        buf.close()

