"""No path leaks: after a stop, a stop timeout, a blocked fill, a loss, a hang, a device never
stopped and collected, or a failed open, no thread, file descriptor, loop reader or kept
object is left behind."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import pytest
from _lifetimes import Token, arig_threads, ended, fds, noop, readers, run

import arig
import arig.host
from arig.device import Backend
from arig.host import HostBackend, HostOpener


async def _after_stop(dev: arig.Device, gate: threading.Event) -> None:
    await dev.run(lambda q, a, v: q.enqueue(time.sleep, 0.001))
    await dev.stop()


async def _after_stop_timeout(dev: arig.Device, gate: threading.Event) -> None:
    await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0))
    await dev.stop()
    gate.set()


async def _after_a_blocked_fill(dev: arig.Device, gate: threading.Event) -> None:
    await dev.submit(lambda q, a, v: gate.wait(5.0) and None)
    await dev.stop()
    gate.set()


async def _after_loss(dev: arig.Device, gate: threading.Event) -> None:
    with pytest.raises(arig.DeviceLost):
        await dev.run(lambda q, a, v: 3)
    await dev.stop()


async def _after_hang(dev: arig.Device, gate: threading.Event) -> None:
    v = await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0))
    with pytest.raises(arig.DeviceLost):
        await dev.wait(v)
    await dev.stop()
    gate.set()


PATHS = {
    "stop": _after_stop,
    "stop timeout": _after_stop_timeout,
    "blocked fill": _after_a_blocked_fill,
    "loss": _after_loss,
    "hang": _after_hang,
}


async def through(path: str, refs: list[weakref.ref[Token]]) -> arig.Device:
    """A host device (watchdog on) given three submits that keep tokens (weakly in ``refs``),
    then taken down ``path``; returned for what the caller checks after."""
    gate = threading.Event()
    dev = await arig.open(arig.host.cpu(hang_ms=100), stop_timeout=0.2)
    for _ in range(3):
        kept, arg = Token(), Token()
        refs.extend([weakref.ref(kept), weakref.ref(arg)])
        await dev.submit(noop, arg, keep=kept)
    try:
        await PATHS[path](dev, gate)
    finally:
        gate.set()
    return dev


@pytest.mark.parametrize("path", sorted(PATHS))
def test_no_path_leaks_a_thread_fd_reader_or_kept_object(path: str) -> None:
    before, open_fds = arig_threads(), fds()
    refs: list[weakref.ref[Token]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        readers_before = readers(loop)
        await through(path, refs)
        assert readers(loop) == readers_before

    run(main)
    assert ended(arig_threads() - before)
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)
    assert fds() == open_fds


async def never_stopped(refs: list[weakref.ref[Token]]) -> None:
    """Open a device, submit work that keeps a token (weakly in ``refs``), and drop the device unstopped."""
    dev = await arig.open(arig.host.cpu(queues=2))
    kept = Token()
    refs.append(weakref.ref(kept))
    await dev.submit(lambda q, a, v: q.enqueue(time.sleep, 0.05), keep=kept)
    del kept
    with pytest.warns(ResourceWarning, match="never stopped"):
        del dev
        gc.collect()


def test_a_device_never_stopped_and_collected_leaks_nothing() -> None:
    before, open_fds = arig_threads(), fds()
    refs: list[weakref.ref[Token]] = []
    reported: list[dict[str, Any]] = []
    run(lambda: never_stopped(refs), reported)
    assert [c["message"] for c in reported] == ["arig: device HOST was never stopped; use `async with` or `await dev.stop()`"]
    assert ended(arig_threads() - before)
    gc.collect()
    assert refs[0]() is None
    assert fds() == open_fds


def test_a_device_collected_under_warnings_as_errors_still_ends_its_threads() -> None:
    before = arig_threads()

    async def main() -> None:
        dev = await arig.open(arig.host.cpu())
        await dev.run(noop)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            # The finalizer's warning raises; Python reports it as unraisable, and the threads end anyway.
            with _unraisable() as seen:
                del dev
                gc.collect()
        assert seen and isinstance(seen[0].exc_value, ResourceWarning)

    run(main, [])
    assert ended(arig_threads() - before)


class _unraisable:
    """Collect what ``sys.unraisablehook`` receives while active."""

    def __enter__(self) -> list[Any]:
        import sys

        self._sys = sys
        self._old = sys.unraisablehook
        self.seen: list[Any] = []
        sys.unraisablehook = self.seen.append
        return self.seen

    def __exit__(self, *exc: Any) -> None:
        self._sys.unraisablehook = self._old


class _FailingBind(HostBackend):
    def bind(self, timeline: Any, post: Callable[..., None]) -> None:
        super().bind(timeline, post)  # the queues' workers start here ...
        raise OSError("cannot start a thread")  # ... and then the open fails


class _FailingBindOpener(HostOpener):
    def make(self) -> HostBackend:
        return _FailingBind(self.queues, self.depth, self.hang_ms)


class _FailingMake:
    name = "HOST"

    def make(self) -> Backend:
        raise MemoryError("no memory for the device")


@pytest.mark.parametrize("opener", [_FailingMake(), _FailingBindOpener(3, 16, None)], ids=["make", "bind"])
def test_a_failed_open_leaks_nothing(opener: Any) -> None:
    before, open_fds = arig_threads(), fds()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        readers_before = readers(loop)
        with pytest.raises(arig.OpenError, match="cannot open HOST"):
            await arig.open(opener)
        assert readers(loop) == readers_before

    run(main)
    assert ended(arig_threads() - before)
    assert fds() == open_fds
