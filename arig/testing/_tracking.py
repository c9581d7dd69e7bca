"""What the pytest plugin checks after each test, and how it knows.

A device the plugin opens is *tracked*: its class becomes ``TrackedDevice``,
a subclass of ``arig.Device`` that only adds bookkeeping (``isinstance``
still holds, nothing else changes), and a ``Tracker`` records

* every ``Buffer`` from ``alloc`` and ``Image`` from ``load`` (held
  strongly, so "not closed by the end of the test" is exact: a buffer
  dropped without ``close()`` is still counted, and released by the
  plugin afterwards);
* every graph its CUDA record (``dev.capability(arig.cuda_abi.KEY)``) makes,
  by weak reference: a graph has no ``close()``, so one still referenced
  once the test returned is the leak;
* how many tasks are inside ``wait``/``run`` now (pending waiters);
* whether the loss, if any, *reached someone*: a ``DeviceLost`` raised
  out of any of the device's methods (a waiter failed at the loss is one),
  or ``dev.lost`` read once it was set.  A loss nobody heard of is the
  silent failure the plugin exists to catch.

arig itself does not record whether a loss was delivered; where a later
arig has ``Device.loss_delivered`` (see the plugin's docs), it is used too.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._errors import DeviceLost, describe
from .._memory import Buffer, Image
from ..device import Device

__all__ = ["Tracker", "TrackedDevice", "track", "tracker_of", "settle", "raw_lost"]

#: Seconds a check waits for work the test submitted but did not await, so
#: that a loss it causes is seen before the verdict.
SETTLE_TIMEOUT = 5.0


class Tracker:
    """The bookkeeping of one tracked device (see the module's docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.buffers: list[Buffer] = []
        self.images: list[Image] = []
        self.graphs: list[weakref.ref[Any]] = []
        self.pending = 0
        self.seen = False
        self.loss_reported = False
        self._lock = threading.Lock()  # graphs are made on worker threads (graph_async)
        self._marks = (0, 0, 0)

    def add_graph(self, graph: Any) -> None:
        with self._lock:
            self.graphs.append(weakref.ref(graph))

    def begin(self) -> None:
        """A test starts: what exists now is an earlier test's (module-scoped devices)."""
        with self._lock:
            self._marks = (len(self.buffers), len(self.images), len(self.graphs))

    @contextmanager
    def hearing(self) -> Iterator[None]:
        """Around a device call: a DeviceLost leaving it means the loss reached a caller."""
        try:
            yield
        except DeviceLost:
            self.seen = True
            raise

    def problems(self, dev: Device) -> list[tuple[str, str]]:
        """What this test left wrong on ``dev``: (check, sentence) pairs, the check one of
        ``"loss"``, ``"pending"``, ``"leaks"`` (empty: nothing)."""
        out: list[tuple[str, str]] = []
        cause = raw_lost(dev)
        if cause is not None and not self.loss_reported and not self.delivered(dev):
            self.loss_reported = True
            out.append((
                "loss",
                f"device {self.name} was lost and nothing heard of it: {describe(cause)}. "
                "Await the work that can fail (dev.wait / dev.run raise DeviceLost) or check dev.lost",
            ))
        if self.pending:
            out.append(("pending", f"{self.pending} task(s) still wait for values of device {self.name} at the end of the test: await or cancel them"))
        b0, i0, g0 = self._marks
        bufs = [b for b in self.buffers[b0:] if not b.closed]
        if bufs:
            out.append(("leaks", f"{len(bufs)} buffer(s) allocated on {self.name} during the test were not closed: {_few(bufs)}; call buf.close()"))
        imgs = [i for i in self.images[i0:] if i.loaded]
        if imgs:
            out.append(("leaks", f"{len(imgs)} image(s) loaded on {self.name} during the test were not unloaded: {_few(imgs)}; call image.unload()"))
        with self._lock:
            refs = self.graphs[g0:]
        if any(r() is not None for r in refs):
            gc.collect()  # a graph in a reference cycle is not a leak: it goes once collected
            graphs = [g for g in (r() for r in refs) if g is not None]
            if graphs:
                out.append(("leaks", f"{len(graphs)} graph(s) made on {self.name} during the test are still referenced: {_few(graphs)}; drop them once their work is done"))
        return out

    def delivered(self, dev: Device) -> bool:
        hook = getattr(dev, "loss_delivered", None)  # a later arig may say itself
        return self.seen or hook is True

    def release(self) -> None:
        """Close what the tests left open (the failure, if any, was already said)."""
        for b in self.buffers:
            b.close()
        for i in self.images:
            i.unload()
        self.buffers.clear()
        self.images.clear()
        self._marks = (0, 0, self._marks[2])


def _few(objs: list[Any]) -> str:
    shown = ", ".join(repr(o) for o in objs[:3])
    return shown + (f" and {len(objs) - 3} more" if len(objs) > 3 else "")


def raw_lost(dev: Device) -> BaseException | None:
    """``dev.lost`` without counting as having heard of it."""
    cause: BaseException | None = Device.lost.__get__(dev)
    return cause


class TrackedDevice(Device):
    """A device whose calls the plugin watches; behaves exactly as ``arig.Device``."""

    _arig_tracker: Tracker

    @property
    def lost(self) -> BaseException | None:
        cause = raw_lost(self)
        if cause is not None:
            self._arig_tracker.seen = True
        return cause

    async def submit(self, fill: Any, arg: Any = None, *, queue: Any = 0, keep: Any = ()) -> int:
        with self._arig_tracker.hearing():
            return await super().submit(fill, arg, queue=queue, keep=keep)

    async def wait(self, v: int) -> None:
        t = self._arig_tracker
        t.pending += 1
        try:
            with t.hearing():
                await super().wait(v)
        finally:
            t.pending -= 1

    async def run(self, fill: Any, arg: Any = None, *, queue: Any = 0, keep: Any = ()) -> int:
        t = self._arig_tracker
        t.pending += 1
        try:
            with t.hearing():
                return await super().run(fill, arg, queue=queue, keep=keep)
        finally:
            t.pending -= 1

    async def alloc(self, nbytes: int, kind: str | None = None) -> Buffer:
        with self._arig_tracker.hearing():
            buf = await super().alloc(nbytes, kind)
        self._arig_tracker.buffers.append(buf)
        return buf

    async def load(self, image: bytes) -> Image:
        with self._arig_tracker.hearing():
            img = await super().load(image)
        self._arig_tracker.images.append(img)
        return img


def track(dev: Device) -> Tracker:
    """Start tracking ``dev`` (an ``arig.Device`` exactly); return its tracker."""
    if type(dev) is not Device:
        raise TypeError(f"only a plain arig.Device can be tracked, not {type(dev).__name__}")
    t = Tracker(dev.name)
    dev._arig_tracker = t  # type: ignore[attr-defined]
    dev.__class__ = TrackedDevice
    _track_graphs(dev, t)
    return t


def tracker_of(obj: Any) -> Tracker | None:
    """The tracker of a tracked device, else None."""
    t = getattr(obj, "_arig_tracker", None) if isinstance(obj, TrackedDevice) else None
    return t if isinstance(t, Tracker) else None


def _track_graphs(dev: Device, t: Tracker) -> None:
    """Make the device's CUDA record report the graphs it makes (only CUDA devices have one)."""
    if not dev.name.startswith("CUDA"):
        return
    from ..cuda_abi import KEY, CudaAbi

    rec = dev.capability(KEY)
    if type(rec) is not CudaAbi:
        return

    class _TrackedAbi(CudaAbi):
        def graph(self, kernels: Any) -> Any:
            with t.hearing():
                g = super().graph(kernels)  # graph_async calls this one too, on a worker thread
            t.add_graph(g)
            return g

    rec.__class__ = _TrackedAbi


async def settle(dev: Device, timeout: float = SETTLE_TIMEOUT) -> None:
    """Let work the test submitted finish (or the device be lost), for at most ``timeout`` seconds.

    Polls the timeline rather than waiting on it: a wait would itself be a
    waiter that hears the loss.  Then gives tasks woken by the completions a
    few turns of the loop to leave their waits.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    await asyncio.sleep(0)
    while raw_lost(dev) is None and dev.reached < dev.submitted and not dev.stopped and loop.time() < deadline:
        await asyncio.sleep(0.001)
    for _ in range(3):
        await asyncio.sleep(0)
