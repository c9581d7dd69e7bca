"""Stopping a device: idempotence, draining, the stop timeout, ``async with``,
released threads and objects, and a device that outlives its event loop."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import warnings
import weakref
from typing import Any

import numpy as np
import pytest

import arig
import arig.host


class Token:
    pass


def _noop(queue: Any, arg: Any, v: int) -> None:
    return None


def _new_arig_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before and t.name.startswith("arig-")]


def _join_all(threads: list[threading.Thread], timeout: float = 3.0) -> list[threading.Thread]:
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return [t for t in threads if t.is_alive()]


@pytest.mark.asyncio
async def test_stop_is_idempotent() -> None:
    dev = await arig.open(arig.host.cpu())
    v = await dev.submit(_noop)
    await dev.stop()
    await dev.stop()
    assert dev.stopped
    assert dev.lost is None
    await dev.wait(v)
    assert "stopped" in repr(dev)


@pytest.mark.asyncio
async def test_concurrent_stops_all_wait_for_the_one_stop() -> None:
    done: list[int] = []
    dev = await arig.open(arig.host.cpu())
    v = await dev.submit(lambda q, a, v: q.enqueue(lambda: (time.sleep(0.2), done.append(v))))
    stops = [asyncio.create_task(dev.stop()) for _ in range(3)]
    results = await asyncio.wait_for(asyncio.gather(*stops, return_exceptions=True), 10.0)
    assert results == [None, None, None]
    # Each of them returned only after the work completed.
    assert done == [v]
    await dev.wait(v)


@pytest.mark.asyncio
async def test_cancelling_one_stop_does_not_stop_the_stop() -> None:
    done: list[int] = []
    dev = await arig.open(arig.host.cpu())
    v = await dev.submit(lambda q, a, v: q.enqueue(lambda: (time.sleep(0.2), done.append(v))))
    first = asyncio.create_task(dev.stop())
    await asyncio.sleep(0.02)
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    assert first.cancelled()
    await asyncio.wait_for(dev.stop(), 10.0)
    assert done == [v]
    assert dev.lost is None


@pytest.mark.asyncio
async def test_stop_refuses_new_work() -> None:
    dev = await arig.open(arig.host.cpu())
    await dev.stop()
    with pytest.raises(arig.DeviceStopped) as info:
        await dev.submit(_noop)
    assert isinstance(info.value, arig.ArigError)
    with pytest.raises(arig.DeviceStopped):
        await dev.alloc(8)
    with pytest.raises(arig.DeviceStopped):
        await dev.run(_noop)
    assert dev.submitted == 0
    with pytest.raises(ValueError):
        await dev.wait(1)


@pytest.mark.parametrize("kind", ["cuda", "nv"])
def test_a_launch_submitted_after_stop_is_refused_for_the_stop_not_its_unloaded_image(kind: str) -> None:
    """A stop unloads the device's images and closes its buffers; a launch of one, or an upload or
    download of one, on that device after the stop (a server's task that had not heard of the
    shutdown) gets DeviceStopped, as any other work does, not the ArigValueError of an image or
    buffer its user closed; and a lost device's, DeviceLost."""
    import struct
    from pathlib import Path

    import arig._engine
    import arig._native
    import arig.cuda
    import arig.nvrm as nvrm
    from arig.testing import FakeCuda, FakeNvrm, faults

    if kind == "nv" and (arig._native.library() is None or arig._engine.unavailable("native") is not None):
        pytest.skip("the NV device runs on the native core only")
    cubin = (Path(__file__).resolve().parent / "data" / "nv" / "probe.sm_90.cubin").read_bytes()

    async def launch_of(dev: arig.Device, fake: Any) -> Any:
        if kind == "cuda":
            img = await dev.load(fake.image(empty=(lambda _: None, ())))
            return arig.cuda.Launch(img.function("empty"), 1, 1, b"")
        img = await dev.load(cubin)
        return nvrm.Launch(img.function("axpy"), 1, 1, struct.pack("<f4xQQi", 0.0, 0, 0, 0))

    async def main(fake: Any) -> None:
        opener = arig.cuda.gpu(0) if kind == "cuda" else nvrm.gpu(0)
        dev = await arig.open(opener)
        launch = await launch_of(dev, fake)
        buf = await dev.alloc(8)
        await dev.wait(await dev.submit(launch))
        await dev.stop()
        with pytest.raises(arig.DeviceStopped):
            await dev.submit(launch)
        with pytest.raises(arig.DeviceStopped):
            await dev.upload(buf, np.zeros(8, np.uint8))
        with pytest.raises(arig.DeviceStopped):
            await dev.download(buf, np.zeros(8, np.uint8))
        assert dev.submitted == 1

        dev = await arig.open(opener)
        launch = await launch_of(dev, fake)
        await faults.lose(dev, RuntimeError("lost for the test"))
        await dev.stop()
        with pytest.raises(arig.DeviceLost):
            await dev.submit(launch)

    fake: Any = FakeCuda() if kind == "cuda" else FakeNvrm()
    if kind == "nv":
        fake.kernel("axpy", lambda params, grid, block: None)
    with fake.installed():
        asyncio.run(main(fake))


@pytest.mark.asyncio
async def test_submit_after_stop_began_is_refused() -> None:
    dev = await arig.open(arig.host.cpu())
    await dev.submit(lambda q, a, v: q.enqueue(time.sleep, 0.1))
    stopping = asyncio.create_task(dev.stop())
    await asyncio.sleep(0)
    with pytest.raises(arig.DeviceStopped):
        await dev.submit(_noop)
    await stopping
    assert dev.submitted == 1


@pytest.mark.asyncio
async def test_stop_lets_submitted_work_complete() -> None:
    done: list[int] = []
    dev = await arig.open(arig.host.cpu(queues=2))
    v1 = await dev.submit(lambda q, a, v: q.enqueue(lambda: (time.sleep(0.2), done.append(v))), queue=1)
    v2 = await dev.submit(lambda q, a, v: q.enqueue(done.append, v), queue=0)
    waiter = asyncio.create_task(dev.wait(v1))
    await dev.stop()
    assert sorted(done) == [v1, v2]
    assert dev.lost is None
    assert dev.reached == v2
    await dev.wait(v1)
    await dev.wait(v2)
    assert waiter.done() and waiter.result() is None


@pytest.mark.asyncio
async def test_stop_wakes_a_submit_waiting_for_room() -> None:
    gate = threading.Event()
    dev = await arig.open(arig.host.cpu(), max_pending=1)
    try:
        await dev.submit(lambda q, a, v: gate.wait(5.0) and None)
        blocked = asyncio.create_task(dev.submit(_noop))
        await asyncio.sleep(0.05)
        assert not blocked.done()
        stopping = asyncio.create_task(dev.stop())
        with pytest.raises(arig.DeviceStopped):
            await asyncio.wait_for(blocked, 5.0)
    finally:
        gate.set()
    await asyncio.wait_for(stopping, 10.0)
    assert dev.submitted == 1
    assert dev.lost is None
    await dev.wait(1)


@pytest.mark.asyncio
async def test_stop_timeout_loses_the_device_and_returns() -> None:
    finished = threading.Event()
    dev = await arig.open(arig.host.cpu(), stop_timeout=0.3)
    v = await dev.submit(lambda q, a, v: q.enqueue(lambda: (time.sleep(2.0), finished.set())))
    waiter = asyncio.create_task(dev.wait(v))
    t0 = time.monotonic()
    await dev.stop()
    elapsed = time.monotonic() - t0
    assert not finished.is_set(), "stop waited for the work it should have given up on"
    assert elapsed < 1.5
    assert isinstance(dev.lost, arig.DeviceHang)
    assert "0.3" in str(dev.lost)
    with pytest.raises(arig.DeviceLost) as info:
        await waiter
    assert info.value.__cause__ is dev.lost
    with pytest.raises(arig.DeviceLost):
        await dev.wait(v)
    with pytest.raises(arig.DeviceLost):
        await dev.submit(_noop)
    await dev.stop()  # still idempotent


@pytest.mark.asyncio
async def test_stop_of_a_lost_device_returns() -> None:
    dev = await arig.open(arig.host.cpu())
    with pytest.raises(arig.DeviceLost):
        await dev.run(lambda q, a, v: 1)
    await asyncio.wait_for(dev.stop(), 10.0)
    assert isinstance(dev.lost, arig.FillError)


@pytest.mark.asyncio
async def test_async_with_stops_on_exit() -> None:
    done: list[int] = []
    async with await arig.open(arig.host.cpu()) as dev:
        v = await dev.submit(lambda q, a, v: q.enqueue(lambda: (time.sleep(0.1), done.append(v))))
    assert dev.stopped
    assert done == [v]
    with pytest.raises(arig.DeviceStopped):
        await dev.submit(_noop)


@pytest.mark.asyncio
async def test_async_with_stops_when_the_body_raises() -> None:
    class Oops(Exception):
        pass

    done: list[int] = []
    with pytest.raises(Oops):
        async with await arig.open(arig.host.cpu()) as dev:
            v = await dev.submit(lambda q, a, v: q.enqueue(lambda: (time.sleep(0.1), done.append(v))))
            raise Oops
    assert dev.stopped
    assert done == [v]
    with pytest.raises(arig.DeviceStopped):
        await dev.submit(_noop)


@pytest.mark.asyncio
async def test_stop_ends_the_device_threads() -> None:
    before = set(threading.enumerate())
    dev = await arig.open(arig.host.cpu(queues=3))
    for k in range(3):
        await dev.submit(lambda q, a, v: q.enqueue(time.sleep, 0.01), queue=k)
    mine = _new_arig_threads(before)
    names = sorted(t.name for t in mine)
    assert names == ["arig-host-queue-0", "arig-host-queue-1", "arig-host-queue-2", "arig-submit-HOST"]
    await dev.stop()
    assert _join_all(mine) == []


@pytest.mark.asyncio
async def test_stop_drops_kept_objects_of_a_lost_device() -> None:
    dev = await arig.open(arig.host.cpu())
    kept, arg = Token(), Token()
    refs = [weakref.ref(kept), weakref.ref(arg)]
    v = await dev.submit(lambda q, a, v: q.enqueue(time.sleep, 0.05), arg, keep=(kept,))
    await dev.submit(lambda q, a, v: 5)
    del kept, arg
    with pytest.raises(arig.DeviceLost):
        await dev.wait(v)
    await dev.stop()
    await asyncio.sleep(0.05)
    gc.collect()
    assert [r() for r in refs] == [None, None]


# -- a device left open when its loop closes ---------------------------------------------


def _run_strict(coro_fn: Any, reported: tuple[str, ...] = ()) -> Any:
    """Run a coroutine in a fresh loop; fail on anything unhandled in it other than ``reported``
    (the messages the loop's exception handler is to get, in order)."""
    errors: list[dict[str, Any]] = []
    with asyncio.Runner() as runner:
        runner.get_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx))
        result = runner.run(coro_fn())
    assert [e["message"] for e in errors] == list(reported), errors
    return result


def _watch_thread_exceptions() -> tuple[list[Any], Any]:
    seen: list[Any] = []
    old_thread_hook = threading.excepthook
    threading.excepthook = seen.append
    return seen, old_thread_hook


def test_device_outliving_its_loop_raises_nothing_in_its_threads() -> None:
    ran = threading.Event()
    before = set(threading.enumerate())

    async def main() -> arig.Device:
        dev = await arig.open(arig.host.cpu(queues=2))
        await dev.submit(lambda q, a, v: q.enqueue(lambda: (time.sleep(0.2), ran.set())))
        await dev.submit(_noop, queue=1)
        return dev  # never stopped; its work ends after the loop closed

    seen, old_hook = _watch_thread_exceptions()
    try:
        dev = _run_strict(main)
        assert not ran.is_set()
        time.sleep(0.5)
        assert ran.is_set()
        mine = _new_arig_threads(before)
        assert mine, "the device's threads should still be up until it is collected"
        holder = [dev]
        del dev
        with pytest.warns(ResourceWarning, match="never stopped"):
            holder.clear()  # the last reference: the finalizer runs here
        assert _join_all(mine) == []
    finally:
        threading.excepthook = old_hook
    assert seen == []


def test_device_collected_inside_its_loop_warns_and_releases() -> None:
    ran = threading.Event()
    before = set(threading.enumerate())

    async def main() -> None:
        dev = await arig.open(arig.host.cpu())
        await dev.submit(lambda q, a, v: q.enqueue(lambda: (time.sleep(0.2), ran.set())))
        del dev
        gc.collect()

    seen, old_hook = _watch_thread_exceptions()
    try:
        with pytest.warns(ResourceWarning, match="never stopped"):
            _run_strict(main, ("arig: device HOST was never stopped; use `async with` or `await dev.stop()`",))
        time.sleep(0.5)
        assert _join_all(_new_arig_threads(before)) == []
    finally:
        threading.excepthook = old_hook
    assert seen == []


def test_unstopped_device_in_asyncio_run() -> None:
    """The plain case: ``asyncio.run`` returns with a device never stopped."""
    ran = threading.Event()
    before = set(threading.enumerate())

    async def main() -> None:
        dev = await arig.open(arig.host.cpu())
        await dev.submit(lambda q, a, v: q.enqueue(lambda: (time.sleep(0.2), ran.set())))

    seen, old_hook = _watch_thread_exceptions()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            asyncio.run(main())
            time.sleep(0.5)
            gc.collect()
        assert any(issubclass(w.category, ResourceWarning) and "never stopped" in str(w.message) for w in caught)
        assert not [w for w in caught if not issubclass(w.category, ResourceWarning)]
        assert _join_all(_new_arig_threads(before)) == []
    finally:
        threading.excepthook = old_hook
    assert seen == []
