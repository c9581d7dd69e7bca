"""Device instruments (``arig.testing.Instrument``): which hooks run, when, with what; adding and
removing them per device and process-wide; a raising instrument is reported and removed, the device
goes on; a CUDA record tells them of its graphs on the building thread, without keeping the device."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from typing import Any

import numpy as np
import pytest
import pytest_asyncio

import arig
import arig.cuda
import arig.cuda_abi as abi
from arig import _instruments
from arig.testing import FakeCuda, Instrument, add_instrument, fail_next_fill, instruments, remove_instrument

T = 10.0


def _noop(queue: Any, arg: Any, v: int) -> None:
    return None


def _bad(queue: Any, arg: Any, v: int) -> None:
    raise ValueError("the fill failed")


class Recorder(Instrument):
    """Every hook call, as (hook, *arguments but the device)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.devices: set[str] = set()

    def _note(self, dev: arig.Device, *call: Any) -> None:
        self.devices.add(dev.name)
        self.calls.append(call)

    def before_submit(self, dev: arig.Device, fill: Any, arg: Any, queue: Any, keep: Any) -> None:
        self._note(dev, "before_submit", fill, arg, queue, keep)

    def on_submit(self, dev: arig.Device, v: int, fill: Any, arg: Any, queue: int) -> None:
        self._note(dev, "on_submit", v, fill, arg, queue)

    def before_wait(self, dev: arig.Device, v: int) -> None:
        self._note(dev, "before_wait", v)

    def after_wait(self, dev: arig.Device, v: int) -> None:
        self._note(dev, "after_wait", v)

    def on_alloc(self, dev: arig.Device, buf: arig.Buffer) -> None:
        self._note(dev, "on_alloc", buf)

    def on_loss(self, dev: arig.Device, cause: BaseException) -> None:
        self._note(dev, "on_loss", cause)

    def on_loss_seen(self, dev: arig.Device, cause: BaseException) -> None:
        self._note(dev, "on_loss_seen", cause)

    def hooks(self) -> list[str]:
        return [c[0] for c in self.calls]


@pytest_asyncio.fixture
async def dev() -> AsyncIterator[arig.Device]:
    async with await arig.open(arig.host.cpu(queues=2)) as d:
        yield d


@pytest.fixture
def everywhere() -> Iterator[Recorder]:
    """A process-wide recorder, removed after the test whatever happened."""
    rec = Recorder()
    add_instrument(rec)
    try:
        yield rec
    finally:
        if rec in instruments():
            remove_instrument(rec)


@pytest.mark.asyncio
async def test_submit_and_wait_call_their_hooks_in_order(dev: arig.Device) -> None:
    rec = Recorder()
    add_instrument(rec, dev)
    gate = threading.Event()
    v = await dev.submit(lambda q, a, v: q.enqueue(gate.wait, T), queue=dev.queues[1])
    fill = rec.calls[0][1]
    assert rec.calls == [("before_submit", fill, None, dev.queues[1], ()), ("on_submit", v, fill, None, 1)]
    waiter = asyncio.create_task(dev.wait(v))
    await asyncio.sleep(0.01)
    assert rec.hooks()[-1] == "before_wait"
    gate.set()
    await asyncio.wait_for(waiter, T)
    assert rec.calls[2:] == [("before_wait", v), ("after_wait", v)]
    await dev.wait(v)  # reached already: no task waits, no hook
    assert len(rec.calls) == 4


@pytest.mark.asyncio
async def test_run_upload_and_alloc_are_seen(dev: arig.Device) -> None:
    rec = Recorder()
    add_instrument(rec, dev)
    buf = await dev.alloc(64)
    try:
        assert rec.calls == [("on_alloc", buf)]
        v = await dev.upload(buf, np.zeros(16, np.float32))
        assert rec.hooks()[1:3] == ["before_submit", "on_submit"] and rec.calls[2][1] == v
        assert set(rec.hooks()[3:]) <= {"before_wait", "after_wait"}  # the copy may be done before run waits
    finally:
        buf.close()


@pytest.mark.asyncio
async def test_a_cancelled_waiter_leaves_its_wait(dev: arig.Device) -> None:
    rec = Recorder()
    add_instrument(rec, dev)
    gate = threading.Event()
    v = await dev.submit(lambda q, a, v: q.enqueue(gate.wait, T))
    waiter = asyncio.create_task(dev.wait(v))
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert rec.hooks()[-2:] == ["before_wait", "after_wait"]
    gate.set()
    await asyncio.wait_for(dev.wait(v), T)


@pytest.mark.asyncio
async def test_loss_and_its_sight(dev: arig.Device) -> None:
    rec = Recorder()
    add_instrument(rec, dev)
    v = await dev.submit(_bad)
    with pytest.raises(arig.DeviceLost) as lost:
        await asyncio.wait_for(dev.wait(v), T)
    cause = lost.value.cause
    assert isinstance(cause, ValueError)
    assert ("on_loss", cause) in rec.calls and ("on_loss_seen", cause) in rec.calls
    assert rec.hooks().index("on_loss") < rec.hooks().index("after_wait")
    rec.calls.clear()
    assert dev.lost is cause and rec.calls == [("on_loss_seen", cause)]


@pytest.mark.asyncio
async def test_before_submit_may_substitute_the_fill(dev: arig.Device) -> None:
    ran: list[tuple[Any, int]] = []

    class Swap(Instrument):
        def before_submit(self, dev: arig.Device, fill: Any, arg: Any, queue: Any, keep: Any) -> tuple[Any, Any, Any]:
            return (lambda q, a, v: ran.append((a, v))), "swapped", (fill, keep)

    add_instrument(Swap(), dev)
    called = []
    v = await dev.run(lambda q, a, v: called.append(v), "original")
    assert ran == [("swapped", v)] and called == []


@pytest.mark.asyncio
async def test_process_wide_instruments_see_every_device_first(everywhere: Recorder) -> None:
    order: list[str] = []

    class Own(Instrument):
        def on_submit(self, dev: arig.Device, v: int, fill: Any, arg: Any, queue: int) -> None:
            order.append("own")

    class Wide(Instrument):
        def on_submit(self, dev: arig.Device, v: int, fill: Any, arg: Any, queue: int) -> None:
            order.append("wide")

    wide = Wide()
    async with await arig.open(arig.host.cpu()) as a, await arig.open(arig.host.cpu()) as b:
        add_instrument(Own(), a)
        add_instrument(wide)  # added after the devices opened: still reaches them
        try:
            await a.run(_noop)
            await b.run(_noop)
        finally:
            remove_instrument(wide)
    assert order == ["wide", "own", "wide"]
    assert everywhere.hooks().count("on_submit") == 2 and everywhere.devices == {"HOST"}


@pytest.mark.asyncio
async def test_removal(dev: arig.Device) -> None:
    rec = Recorder()
    assert dev._ins is None  # nothing watches: the hot paths test one None
    add_instrument(rec, dev)
    add_instrument(rec, dev)  # once only
    assert instruments(dev) == (rec,) and dev._ins is not None
    await dev.run(_noop)
    n = len(rec.calls)
    assert rec.hooks().count("on_submit") == 1
    remove_instrument(rec, dev)
    assert instruments(dev) == () and dev._ins is None
    await dev.run(_noop)
    assert len(rec.calls) == n
    with pytest.raises(KeyError, match="is not an instrument of HOST"):
        remove_instrument(rec, dev)
    with pytest.raises(KeyError, match="is not an instrument of the process"):
        remove_instrument(rec)
    with pytest.raises(TypeError, match="expected an arig Instrument"):
        add_instrument(object(), dev)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="device must be an open arig.Device or None, got str"):
        add_instrument(rec, "HOST")  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_a_raising_instrument_is_reported_and_removed(dev: arig.Device, caplog: pytest.LogCaptureFixture) -> None:
    class Broken(Instrument):
        def before_submit(self, dev: arig.Device, fill: Any, arg: Any, queue: Any, keep: Any) -> None:
            raise RuntimeError("instrument bug")

        def __repr__(self) -> str:
            return "<Broken>"

    rec = Recorder()
    add_instrument(Broken(), dev)
    add_instrument(rec, dev)
    with caplog.at_level(logging.ERROR, logger="arig"):
        v = await dev.run(_noop)
    assert dev.lost is None and dev.reached == v
    assert instruments(dev) == (rec,) and rec.hooks()[:2] == ["before_submit", "on_submit"]  # the others still run
    [record] = [r for r in caplog.records if "instrument" in r.getMessage()]
    assert record.levelno == logging.ERROR and record.getMessage() == "instrument <Broken> raised in before_submit on device HOST; it was removed"
    assert record.exc_info is not None and str(record.exc_info[1]) == "instrument bug"


@pytest.mark.asyncio
async def test_an_observer_that_raises_loses_nothing(dev: arig.Device, caplog: pytest.LogCaptureFixture) -> None:
    class Broken(Instrument):
        def after_wait(self, dev: arig.Device, v: int) -> None:
            raise KeyError("oops")

    gate = threading.Event()
    add_instrument(Broken(), dev)
    with caplog.at_level(logging.ERROR, logger="arig"):
        v = await dev.submit(lambda q, a, v: q.enqueue(gate.wait, T))
        waiter = asyncio.create_task(dev.wait(v))
        await asyncio.sleep(0.01)
        gate.set()
        await asyncio.wait_for(waiter, T)  # the wait returns, as without the instrument
    assert dev.lost is None and instruments(dev) == ()
    assert any("raised in after_wait" in r.getMessage() for r in caplog.records)


def test_an_instrument_holding_its_device_does_not_keep_it() -> None:
    """A fault holds its device; a device dropped unstopped with one armed is still collected."""

    async def drop() -> weakref.ref[arig.Device]:
        dev = await arig.open(arig.host.cpu())
        fail_next_fill(dev, RuntimeError("never fires"))
        return weakref.ref(dev)

    with pytest.warns(ResourceWarning, match="was never stopped"):
        ref = asyncio.run(drop())
        gc.collect()
    assert ref() is None


# -- graphs: told by the CUDA record, on the thread that built them ------------------------------


class GraphWatcher(Instrument):
    """Each graph told, with the thread it was told on; each loss seen, likewise."""

    def __init__(self) -> None:
        self.graphs: list[tuple[Any, int]] = []
        self.seen: list[tuple[BaseException, int]] = []

    def on_graph(self, dev: arig.Device, graph: Any) -> None:
        self.graphs.append((graph, threading.get_ident()))

    def on_loss_seen(self, dev: arig.Device, cause: BaseException) -> None:
        self.seen.append((cause, threading.get_ident()))


@pytest_asyncio.fixture
async def gpu() -> AsyncIterator[arig.Device]:
    with FakeCuda().installed():
        async with await arig.open(arig.cuda.gpu(0)) as d:
            yield d


@pytest.mark.asyncio
async def test_graphs_are_told_on_the_thread_that_built_them(gpu: arig.Device) -> None:
    rec = gpu.capability(abi.KEY)
    watcher = GraphWatcher()
    add_instrument(watcher, gpu)
    made = await rec.graph_async([])
    assert [g for g, _ in watcher.graphs] == [made]
    assert watcher.graphs[0][1] != threading.get_ident()  # graph_async builds on a worker thread
    here: list[int] = []

    def build() -> Any:
        here.append(threading.get_ident())
        return rec.graph([])

    other = await asyncio.to_thread(build)
    assert watcher.graphs[1] == (other, here[0])  # graph: told on the caller's thread, before it returned


@pytest.mark.asyncio
async def test_a_lost_device_refusing_a_graph_is_a_loss_seen_on_the_loop(gpu: arig.Device) -> None:
    watcher = GraphWatcher()
    add_instrument(watcher, gpu)
    v = await gpu.submit(_bad)
    await asyncio.sleep(0.05)  # the failure lands without anyone waiting for v
    assert gpu.reached < v and not watcher.seen
    with pytest.raises(arig.DeviceLost):
        await gpu.capability(abi.KEY).graph_async([])
    for _ in range(100):
        if watcher.seen:
            break
        await asyncio.sleep(0.001)
    [(cause, tid)] = watcher.seen
    assert isinstance(cause, ValueError) and tid == threading.get_ident()
    assert watcher.graphs == []


@pytest.mark.asyncio
async def test_a_device_without_instruments_is_not_looked_up(gpu: arig.Device) -> None:
    """Zero cost: the record finds an empty map of watched backends and stops there."""
    backend = gpu._backend
    assert backend not in _instruments._watched and _instruments._watcher(backend) is None
    watcher = GraphWatcher()
    add_instrument(watcher, gpu)
    assert _instruments._watched[backend]() is gpu
    remove_instrument(watcher, gpu)
    assert backend not in _instruments._watched
    await gpu.capability(abi.KEY).graph_async([])
    assert watcher.graphs == []


def test_an_instrument_on_a_cuda_device_does_not_keep_it() -> None:
    """The record reaches its device's instruments without holding the device: a stopped
    device with an instrument that holds it, and a graph it told of, is collected."""

    class Holder(GraphWatcher):
        dev: arig.Device | None = None

        def on_graph(self, dev: arig.Device, graph: Any) -> None:
            super().on_graph(dev, graph)
            self.dev = dev

    async def drop() -> tuple[weakref.ref[arig.Device], Any]:
        dev = await arig.open(arig.cuda.gpu(0))
        add_instrument(Holder(), dev)
        graph = await dev.capability(abi.KEY).graph_async([])
        await dev.stop()
        del graph
        return weakref.ref(dev), dev._backend

    with FakeCuda().installed():
        ref, backend = asyncio.run(drop())
        gc.collect()
        assert ref() is None
        assert _instruments._watched.get(backend) is None or _instruments._watched[backend]() is None
