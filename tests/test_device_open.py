"""Opening a device: openers, OpenError, what an open host device reports,
and cancellation of an open in progress."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import types

import pytest

import arig
from arig import _engine
import arig.host
from arig import nvrm
from arig.testing import FakeNvrm


def _threads_named(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name and t.is_alive()]


async def _until_no_threads(name: str, timeout: float = 3.0) -> list[threading.Thread]:
    deadline = time.monotonic() + timeout
    while _threads_named(name) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return _threads_named(name)


class _FailingOpener:
    def __init__(self, exc: BaseException, name: str = "BROKEN", delay: float = 0.0) -> None:
        self.name = name
        self.exc = exc
        self.delay = delay
        self.thread: int | None = None

    def make(self) -> arig.host.HostBackend:
        self.thread = threading.get_ident()
        if self.delay:
            time.sleep(self.delay)
        raise self.exc


class _SlowHostOpener:
    """Makes a host backend after ``delay`` seconds; records whether it was closed."""

    def __init__(self, name: str, delay: float) -> None:
        self.name = name
        self.delay = delay
        self.made = threading.Event()
        self.closed = threading.Event()

    def make(self) -> arig.host.HostBackend:
        time.sleep(self.delay)
        backend = arig.host.cpu().make()
        closed = self.closed
        close = backend.close

        def recording_close() -> None:
            close()
            closed.set()

        backend.close = recording_close  # type: ignore[method-assign]
        self.made.set()
        return backend


# -- bad openers and arguments --------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("opener", [object(), None, "HOST", arig.host, types.SimpleNamespace(name="X"), types.SimpleNamespace(make=lambda: None)])
async def test_open_rejects_what_is_not_an_opener(opener: object) -> None:
    with pytest.raises(TypeError) as info:
        await arig.open(opener)  # type: ignore[arg-type]
    assert isinstance(info.value, arig.ArigError)


@pytest.mark.asyncio
async def test_open_checks_max_pending_and_stop_timeout() -> None:
    before = set(threading.enumerate())
    with pytest.raises(ValueError):
        await arig.open(arig.host.cpu(), max_pending=0)
    with pytest.raises(TypeError):
        await arig.open(arig.host.cpu(), max_pending=2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await arig.open(arig.host.cpu(), max_pending=True)
    with pytest.raises(ValueError):
        await arig.open(arig.host.cpu(), stop_timeout=0)
    with pytest.raises(ValueError):
        await arig.open(arig.host.cpu(), stop_timeout=-1.0)
    # None of these started a thread.
    assert [t for t in threading.enumerate() if t not in before and t.name.startswith("arig-")] == []


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"queues": 0}, ValueError),
        ({"queues": -1}, ValueError),
        ({"queues": 1.0}, TypeError),
        ({"queues": True}, TypeError),
        ({"depth": 0}, ValueError),
        ({"depth": "4"}, TypeError),
        ({"hang_ms": 0}, ValueError),
        ({"hang_ms": -5}, ValueError),
        ({"hang_ms": 1.5}, ValueError),
        ({"hang_ms": True}, ValueError),
    ],
)
def test_host_opener_checks_its_arguments(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error) as info:
        arig.host.cpu(**kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, arig.ArigError)


def test_host_opener_is_named_host() -> None:
    opener = arig.host.cpu(queues=2)
    assert opener.name == "HOST"
    assert "queues=2" in repr(opener)


# -- failing opens ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_open_error_names_and_chains_the_cause() -> None:
    cause = RuntimeError("no such widget 7")
    opener = _FailingOpener(cause)
    with pytest.raises(arig.OpenError) as info:
        await arig.open(opener)
    err = info.value
    assert isinstance(err, arig.ArigError)
    assert err.__cause__ is cause
    assert "BROKEN" in str(err)
    assert "RuntimeError" in str(err)
    assert "no such widget 7" in str(err)
    # make() ran on the device's own thread, not the loop's.
    assert opener.thread is not None and opener.thread != threading.get_ident()
    assert await _until_no_threads("arig-submit-BROKEN") == []


@pytest.mark.asyncio
async def test_open_error_from_make_passes_through() -> None:
    cause = arig.OpenError("GPU 3 does not exist: there are 2")
    with pytest.raises(arig.OpenError) as info:
        await arig.open(_FailingOpener(cause))
    assert info.value is cause


# -- an open host device ------------------------------------------------------------


@pytest.mark.asyncio
async def test_host_device_reports_what_it_is() -> None:
    async with await arig.open(arig.host.cpu(queues=3, hang_ms=500)) as dev:
        assert isinstance(dev, arig.Device)
        assert dev.name == "HOST"
        assert dev.arch == "host"
        assert dev.lost is None
        assert dev.reached == 0
        assert not dev.stopped
        facts = dev.facts
        for key in ("bus", "memory_total", "hang_ms"):
            assert key in facts
        assert facts["hang_ms"] == 500
        mem = facts["memory_total"]
        assert mem is None or (isinstance(mem, int) and mem > 0)
        with pytest.raises(TypeError):
            facts["hang_ms"] = 1  # type: ignore[index]
        with pytest.raises(TypeError):
            del facts["bus"]  # type: ignore[attr-defined]
        assert facts["hang_ms"] == 500
        assert dev.capability("anything") is None
        assert dev.capability(object()) is None
        assert len(dev.queues) == 3
        for k, q in enumerate(dev.queues):
            assert isinstance(q, arig.Queue)
            assert q.index == k
            assert q.device == "HOST"
            assert isinstance(q.handle, arig.host.HostQueue)
        assert len({id(q.handle) for q in dev.queues}) == 3
        assert "HOST" in repr(dev)


@pytest.mark.asyncio
async def test_host_device_without_watchdog_says_so() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        assert dev.facts["hang_ms"] is None
        assert len(dev.queues) == 1


def test_device_cannot_be_constructed_directly() -> None:
    with pytest.raises(TypeError):
        arig.Device()
    with pytest.raises(TypeError):
        arig.Device(arig.host.cpu())


@pytest.mark.asyncio
async def test_two_devices_are_independent() -> None:
    async with await arig.open(arig.host.cpu()) as a, await arig.open(arig.host.cpu()) as b:
        assert await a.submit(lambda q, arg, v: None) == 1
        assert await a.submit(lambda q, arg, v: None) == 2
        assert await b.submit(lambda q, arg, v: None) == 1
        await a.wait(2)
        await b.wait(1)
        with pytest.raises(ValueError):
            await b.wait(2)
        await b.stop()
        assert await a.submit(lambda q, arg, v: None) == 3


# -- cancelling an open ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_cancelled_open_releases_the_device() -> None:
    opener = _SlowHostOpener("SLOWOPEN", delay=0.3)
    task = asyncio.create_task(arig.open(opener))
    await asyncio.sleep(0.05)
    assert _threads_named("arig-submit-SLOWOPEN"), "the open should be in progress on its thread"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # make() still finishes; the thread then closes what it made and ends.
    assert await _until_no_threads("arig-submit-SLOWOPEN") == []
    assert opener.made.is_set()
    assert opener.closed.is_set()


@pytest.mark.asyncio
async def test_cancelled_open_whose_make_then_fails_leaves_nothing_unhandled() -> None:
    # The failure of a make() nobody waits for any more must not surface as
    # "Task exception was never retrieved" (the strict harness fails on it).
    opener = _FailingOpener(RuntimeError("late failure"), name="SLOWFAIL", delay=0.2)
    task = asyncio.create_task(arig.open(opener))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _until_no_threads("arig-submit-SLOWFAIL") == []
    await asyncio.sleep(0.05)
    del task
    gc.collect()
    await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_dma_is_for_nv_devices() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        buf = await dev.alloc(64)
        with pytest.raises(TypeError, match="dma\\(\\) is for NV devices"):
            await dev.dma(buf)


# -- features: what only some devices offer, fixed at open ------------------------------------


class _WrappingHostBackend(arig.host.HostBackend):
    """A host backend that also wraps foreign arrays, as no real host device does."""

    def wrap(self, obj: object) -> arig.Buffer:
        return arig.Buffer(self.name, "foreign", 0x1000, 8, lambda: None, keep=obj)


class _WrappingHostOpener:
    name = "HOST"

    def make(self) -> arig.host.HostBackend:
        return _WrappingHostBackend(1, arig.host.DEFAULT_DEPTH, None)


@pytest.mark.asyncio
async def test_a_host_device_has_no_features_and_names_each_it_lacks() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        assert dev.features == frozenset()
        with pytest.raises(TypeError, match="map_host\\(\\) is for NV devices"):
            await dev.map_host(bytearray(8))
        with pytest.raises(TypeError, match="wrap\\(\\) is for CUDA devices"):
            dev.wrap(object())
        with pytest.raises(TypeError, match="adopt\\(\\) is for CUDA devices"):
            dev.adopt(0)
        with pytest.raises(TypeError, match="cannot wait for CUDA events"):
            await dev.join_event(1234)
        assert dev.submitted == 0


@pytest.mark.asyncio
async def test_a_feature_is_found_from_what_the_backend_has() -> None:
    async with await arig.open(_WrappingHostOpener()) as dev:
        assert dev.features == {"wrap"}
        owner = object()
        buf = dev.wrap(owner)
        assert buf.kind == "foreign" and buf._keep is owner


@pytest.mark.asyncio
async def test_an_nv_device_has_dma_and_map_host() -> None:
    if _engine.unavailable(_engine.NATIVE):
        pytest.skip("the NV device runs on the native engine, which is not here")
    fake = FakeNvrm()
    with fake.installed():
        async with await arig.open(nvrm.gpu(0)) as dev:
            assert dev.features == {"dma", "map_host"}
    assert fake.violations == []
