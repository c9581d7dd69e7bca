"""The host device: arig's device model on the CPU, for machines without a GPU.

Its queue is an ordered worker thread (a fill calls ``queue.enqueue(fn,
*args)``), its memory is numpy, and its timeline is signalled by the worker
once the work enqueued before the signal has run.  It goes through the same
submit thread, timeline, back-pressure and loss as the GPU devices, so the
whole machinery is tested on any machine.

It runs on the pure engine (``arig._pure``) always: each queue is one of its
lanes, and reports from its own worker, so no watcher thread is needed.

Threads: a fill (submit thread) calls ``HostQueue.enqueue``; the pure engine
calls ``note`` and ``signal`` on the submit thread; each queue's worker runs
the work and reports; ``HostBackend.prepare`` and ``abort`` run on the loop.
"""

from __future__ import annotations

import os
import queue as _queue
import threading
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from ._errors import ArigTypeError, ArigValueError, DeviceStopped, FillError, safe_repr
from ._memory import Buffer
from ._engine import no_fill
from ._backend import DEFERRED, Backend, callable_name, deferred_result, defers_work, fill_result

__all__ = ["cpu", "HostOpener", "HostQueue"]

#: Work items a host queue holds before ``enqueue`` blocks (like a full stream).
DEFAULT_DEPTH = 4096

_STOP = object()


def _fill_error(code: int, v: int) -> BaseException:
    return FillError(code)


class HostQueue:
    """The ordered worker a host device's fills enqueue on; a lane of the pure engine (``arig._pure.Lane``).

    ``note``: the watchdog's progress callback (None: no watchdog, and a note costs nothing)."""

    def __init__(
        self,
        index: int,
        depth: int,
        report: Callable[[int, int], None],
        fail: Callable[[BaseException], None],
        note: Callable[[int, int], None] | None = None,
    ) -> None:
        self.index = index
        self._note = note
        self.notes = note is not None
        self._items: _queue.SimpleQueue[Any] = _queue.SimpleQueue()
        self._room = threading.Semaphore(depth)
        self._report = report
        self._fail = fail
        self._aborted = False
        self._failed = False
        self._thread = threading.Thread(target=self._run, name=f"arig-host-queue-{index}", daemon=True)
        self._thread.start()

    def enqueue(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the worker after everything enqueued before.

        Call it from a fill.  Blocks while the queue is full, as a CUDA
        launch blocks on a full stream.  An exception in ``fn`` loses the
        device.
        """
        if not callable(fn):
            raise ArigTypeError(f"enqueue takes a callable, got {type(fn).__name__}")
        if defers_work(fn):
            # The worker would only make the coroutine, never run it, and report the work done.
            raise ArigTypeError(
                f"enqueue takes a plain function; {callable_name(fn)} makes a coroutine or generator when called, which the host queue would never run"
            )
        self._put((fn, args))

    def _put(self, item: Any) -> None:
        while not self._room.acquire(timeout=0.05):
            if self._aborted:
                raise DeviceStopped("host queue aborted: the device was lost")
        self._items.put(item)

    def signal(self, v: int) -> None:
        """The worker reports ``v`` once the work enqueued before has run."""
        self._put((None, v))

    def note(self, v: int) -> None:
        """The worker notes ``v``'s progress without waking the loop (only the hang watchdog needs it)."""
        if self._note is not None:
            self._put((False, v))

    def abort(self) -> None:
        self._aborted = True

    def close(self, timeout: float) -> None:
        lost = self._aborted
        self._aborted = True
        self._items.put(_STOP)
        if not lost:  # a lost device's work may never end: do not wait for it
            self._thread.join(timeout)

    def _run(self) -> None:
        items, room = self._items, self._room
        while True:
            item = items.get()
            if item is _STOP:
                return
            room.release()
            fn, args = item
            if self._failed:
                continue
            if fn is None:
                self._report(self.index, args)
                continue
            if fn is False:
                if self._note is not None:  # note() puts none without a callback
                    self._note(self.index, args)
                continue
            try:
                r = fn(*args)
                if r is not None and deferred_result(r):
                    raise ArigTypeError(f"work {callable_name(fn)} returned {type(r).__name__}: it never ran; the host queue runs plain functions")
            except BaseException as exc:  # noqa: BLE001 - loses the device, not the worker
                self._failed = True
                self._fail(exc)
            r = None

    def __repr__(self) -> str:
        return f"<arig.host.HostQueue {self.index}>"


def _memory_total() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


class HostBackend(Backend):
    def __init__(self, nqueues: int, depth: int, hang_ms: int | None) -> None:
        self.name = "HOST"
        self.arch = "host"
        self.hang_ms = hang_ms
        self.facts = {
            "bus": None,
            "memory_total": _memory_total(),
            "hang_ms": hang_ms,
            "cpu_count": os.cpu_count(),
            "queues": nqueues,
        }
        self._nqueues = nqueues
        self._depth = depth
        self._queues: list[HostQueue] = []
        self.queue_handles: list[Any] = [None] * nqueues  # the workers start in bind()

    def bind(self, timeline: Any, post: Callable[..., None]) -> None:
        super().bind(timeline, post)
        # One at a time into the list: if a worker cannot start, close() still ends those that did.
        for i in range(self._nqueues):
            # Progress between signals matters only to the hang watchdog.
            note = timeline.note_progress if self.hang_ms is not None else None
            self._queues.append(HostQueue(i, self._depth, timeline.report, timeline.fail_threadsafe, note))
        self.queue_handles = list(self._queues)

    def prepare(self, fill: Any, arg: Any) -> Any:
        # The common fill, a plain function of (queue, arg, v), in one type test and three reads of its code: submit's hot path.
        if type(fill) is types.FunctionType and (c := fill.__code__).co_argcount == 3 and not c.co_flags & DEFERRED and not c.co_kwonlyargcount:
            return (fill, arg)
        if fill is None:  # no work: the value marks the queue's earlier work
            return (no_fill, None)
        return (self.check_fill(fill), arg)

    def call_fill(self, qi: int, fill: Any, arg: Any, v: int) -> None:
        r = fill(self._queues[qi], arg, v)
        if r is not None:
            fill_result(r, v, _fill_error)

    def lanes(self) -> list[HostQueue]:
        return self._queues

    def abort(self) -> None:
        for q in self._queues:
            q.abort()

    def close(self) -> None:
        for q in self._queues:
            q.close(timeout=5.0)

    def alloc(self, nbytes: int, kind: str | None) -> Buffer:
        if kind not in (None, "host"):
            raise ArigValueError(f"the host device has memory of kind 'host' only, not {safe_repr(kind)}")
        mem = np.zeros(nbytes, dtype=np.uint8)
        return Buffer(self.name, "host", mem.ctypes.data, nbytes, _nothing, host=mem, ledger=self.ledger)

    def copy_fill(self, buf: Buffer, array: np.ndarray, to_device: bool) -> tuple[Any, Any]:
        flat = array.reshape(-1).view(np.uint8)
        mem = buf.numpy()[: flat.nbytes]
        src, dst = (flat, mem) if to_device else (mem, flat)
        return _copy_fill, (dst, src)


def _copy_fill(queue: HostQueue, arg: tuple[np.ndarray, np.ndarray], v: int) -> None:
    queue.enqueue(np.copyto, *arg)


def _nothing() -> None:
    """Host memory is numpy's: dropping the buffer's array (once the work before its close is done) frees it."""


class HostOpener:
    """Opener of the host device (name ``"HOST"``)."""

    def __init__(self, queues: int, depth: int, hang_ms: int | None) -> None:
        self.name = "HOST"
        self.queues = queues
        self.depth = depth
        self.hang_ms = hang_ms

    def make(self) -> HostBackend:
        return HostBackend(self.queues, self.depth, self.hang_ms)

    def __repr__(self) -> str:
        return f"arig.host.cpu(queues={self.queues})"


def cpu(*, queues: int = 1, depth: int = DEFAULT_DEPTH, hang_ms: int | None = None) -> HostOpener:
    """The opener of the host device: always available.

    ``queues`` ordered workers (each a queue of the device), each holding up
    to ``depth`` enqueued items before a fill blocks; ``hang_ms`` loses the
    device when work is pending and makes no progress that long (None: never).
    """
    for what, value in (("queues", queues), ("depth", depth)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ArigTypeError(f"{what} must be an int, got {type(value).__name__}")
        if value < 1:
            raise ArigValueError(f"{what} must be at least 1, got {value}")
    if hang_ms is not None and (isinstance(hang_ms, bool) or not isinstance(hang_ms, int) or hang_ms <= 0):
        raise ArigValueError(f"hang_ms must be a positive int or None, got {hang_ms!r}")
    return HostOpener(queues, depth, hang_ms)

