"""What the pytest plugin checks after each test, and how it knows.

A device the plugin opens is *tracked*: a ``Tracker``, an instrument added
for that device alone (``arig.testing.add_instrument``), records

* every ``Buffer`` the device makes (``alloc``) and ``Image`` it loads
  (held strongly, so "not closed by the end of the test" is exact: a buffer
  dropped without ``close()`` is still counted, and released by the plugin
  afterwards);
* every graph its CUDA record (``dev.capability(arig.cuda_abi.KEY)``) makes,
  by weak reference: a graph has no ``close()``, so one still referenced
  once the test returned is the leak;
* how many tasks wait for the device's values now (pending waiters), by
  the test they started waiting in: a waiter that an earlier test on a
  module-scoped device left behind (allowed there) is that test's, not the
  current one's;
* whether the loss, if any, *reached someone*: ``dev.loss_delivered`` (a
  waiter failed at the loss, a call refused with ``DeviceLost``), or
  ``DeviceLost`` leaving a wait, alloc or load, or ``dev.lost`` read once
  it was set.  A loss nobody heard of is the silent failure the plugin
  exists to catch.

The device and its records are left as they are: the same classes, the
same methods.  Graphs reach the tracker through ``on_graph``, which runs on
the thread that built the graph (an anyio worker thread for
``graph_async``), not the loop's: the tracker takes its lock there rather
than posting the graph to the loop, so that it holds its weak reference
before the program has the graph (a graph made just before the test ends is
never missed) and no queued callback keeps a graph alive that the program
dropped.  ``DeviceLost`` leaving a graph call reaches ``on_loss_seen``
on the loop, as any other.
"""

from __future__ import annotations

import gc
import threading
import time
import weakref
from typing import Any

import anyio

from .._errors import describe
from .._instruments import Instrument, add_instrument, instruments
from .._memory import Buffer, Image
from .._running import current_task
from ..device import Device

__all__ = ["Tracker", "track", "tracker_of", "settle", "raw_lost"]

#: Seconds a check waits for work the test submitted but did not await, so
#: that a loss it causes is seen before the verdict.
SETTLE_TIMEOUT = 5.0


class Tracker(Instrument):
    """The bookkeeping of one tracked device (see the module's docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.buffers: list[Buffer] = []
        self.images: list[Image] = []
        self.graphs: list[weakref.ref[Any]] = []
        self.pending = 0
        self.seen = False
        self._test = 0  # which test runs now: begin() counts them
        self._waiting: dict[int, int] = {}  # test -> its tasks still waiting
        self._waits: dict[Any, list[int]] = {}  # task -> the tests its waits began in
        self.loss_reported = False
        self._lock = threading.Lock()  # graphs are made on worker threads (graph_async)
        self._marks = (0, 0, 0)
        self._reading = False

    # -- the instrument's hooks (the device's loop thread) ------------------------------------------
    def before_wait(self, dev: Device, v: int) -> None:
        self.pending += 1
        self._waits.setdefault(current_task(), []).append(self._test)
        self._waiting[self._test] = self._waiting.get(self._test, 0) + 1

    def after_wait(self, dev: Device, v: int) -> None:
        self.pending -= 1
        task = current_task()
        began = self._waits.get(task)
        test = began.pop() if began else self._test
        if not began:
            self._waits.pop(task, None)
        left = self._waiting.get(test, 0) - 1
        if left > 0:
            self._waiting[test] = left
        else:
            self._waiting.pop(test, None)

    def on_alloc(self, dev: Device, buf: Buffer) -> None:
        self.buffers.append(buf)

    def on_load(self, dev: Device, image: Image) -> None:
        self.images.append(image)

    def on_loss_seen(self, dev: Device, cause: BaseException) -> None:
        if not self._reading:
            self.seen = True

    def read_lost(self, dev: Device) -> BaseException | None:
        """``dev.lost`` without counting as having heard of it."""
        self._reading = True
        try:
            return dev.lost
        finally:
            self._reading = False

    def on_graph(self, dev: Device, graph: Any) -> None:  # the thread that built it: see the module's docstring
        with self._lock:
            self.graphs.append(weakref.ref(graph))

    def begin(self) -> None:
        """A test starts: what exists now is an earlier test's (module-scoped devices)."""
        with self._lock:
            self._marks = (len(self.buffers), len(self.images), len(self.graphs))
        self._test += 1

    def problems(self, dev: Device) -> list[tuple[str, str]]:
        """What this test left wrong on ``dev``: (check, sentence) pairs, the check one of
        ``"loss"``, ``"pending"``, ``"leaks"`` (empty: nothing)."""
        out: list[tuple[str, str]] = []
        cause = self.read_lost(dev)
        if cause is not None and not self.loss_reported and not self.delivered(dev):
            self.loss_reported = True
            out.append((
                "loss",
                f"device {self.name} was lost and nothing heard of it: {describe(cause)}. "
                "Await the work that can fail (dev.wait / dev.run raise DeviceLost) or check dev.lost",
            ))
        pending = self._waiting.get(self._test, 0)
        if pending:
            out.append(("pending", f"{pending} task(s) still wait for values of device {self.name} at the end of the test: await or cancel them"))
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
        return self.seen or dev.loss_delivered

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
    t = tracker_of(dev)
    return dev.lost if t is None else t.read_lost(dev)


def track(dev: Device) -> Tracker:
    """Start tracking ``dev``; return its tracker."""
    if not isinstance(dev, Device):
        raise TypeError(f"only an arig.Device can be tracked, not {type(dev).__name__}")
    t = Tracker(dev.name)
    add_instrument(t, dev)
    return t


def tracker_of(obj: Any) -> Tracker | None:
    """The tracker of a tracked device, else None."""
    if not isinstance(obj, Device):
        return None
    return next((i for i in instruments(obj) if isinstance(i, Tracker)), None)


async def settle(dev: Device, timeout: float = SETTLE_TIMEOUT) -> None:
    """Let work the test submitted finish (or the device be lost), for at most ``timeout`` seconds.

    Polls the timeline rather than waiting on it: a wait would itself be a
    waiter that hears the loss.  Then gives tasks woken by the completions a
    few turns of the loop to leave their waits.
    """
    deadline = time.monotonic() + timeout
    await anyio.sleep(0)
    while raw_lost(dev) is None and dev.reached < dev.submitted and not dev.stopped and time.monotonic() < deadline:
        await anyio.sleep(0.001)
    for _ in range(3):
        await anyio.sleep(0)
