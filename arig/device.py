"""Devices: async open, submit, wait and stop over any driver.

A device is three parts with one lifetime each:

* the *backend* (``Backend``), a driver's own calls, run only on
* the *submit thread* (``arig._submit``), which calls fills one at a time
  and tells the backend to signal values, and
* the *timeline* (``arig._timeline``), whose futures live on the event loop.

The device on top holds no driver state: the host, CUDA and kernel-driver
devices differ only in their backend.
"""

from __future__ import annotations

import abc
import asyncio
import time
import types
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from ._errors import ArigError, ArigTypeError, ArigValueError, DeviceHang, DeviceLost, DeviceStopped, OpenError
from ._memory import Buffer, Image
from ._submit import SubmitThread
from ._timeline import Timeline
from .queue import Queue

__all__ = ["Backend", "Device", "Opener", "open", "DEFAULT_MAX_PENDING", "DEFAULT_STOP_TIMEOUT"]

#: Submissions that may wait for the submit thread before ``submit`` waits.
DEFAULT_MAX_PENDING = 1024
#: Seconds ``stop`` lets submitted work finish before it loses the device.
DEFAULT_STOP_TIMEOUT = 30.0


class Opener(Protocol):
    """What ``arig.open`` takes: a name and ``make()``, run on the new device's submit thread."""

    name: str

    def make(self) -> Backend: ...


class Backend(abc.ABC):
    """A driver under a device.  Every method but ``check_fill`` and ``abort``
    runs on the device's submit thread."""

    name: str
    arch: str
    facts: Mapping[str, Any]
    #: What each queue's fills receive as ``queue``.
    queue_handles: Sequence[Any]
    #: Records declared for compiled code, by key (``Device.capability``).
    capabilities: Mapping[Any, Any] = types.MappingProxyType({})
    #: Work pending with no progress for this long loses the device (None: never).
    hang_ms: int | None = None
    timeline: Timeline

    def bind(self, timeline: Timeline, post: Callable[..., None]) -> None:
        """Report completions to ``timeline`` (``timeline.report(queue, v)``, any thread).

        ``post(fn, *args)`` runs ``fn(*args)`` later on the submit thread, from
        any thread (finalizers free memory through it).
        """
        self.timeline = timeline
        self.post = post

    def check_fill(self, fill: Any) -> Any:
        """Validate a fill on the loop thread (no driver call); return what ``call_fill`` takes."""
        if not callable(fill):
            raise ArigTypeError(f"fill must be callable as fill(queue, arg, v), got {type(fill).__name__}")
        return fill

    def prepare(self, fill: Any, arg: Any) -> Any:
        """Check a submission on the loop thread (no driver call); return the item the submitter's ``put`` takes.

        Raises for anything that cannot be a fill or its arg, before a value is assigned.
        """
        return (self.check_fill(fill), arg)

    def submitter(self, st: SubmitThread, limit: int) -> Any:
        """Loop thread, once at open: what takes submissions (``full``, ``wait_space``,
        ``wake_space``, ``put(qi, item, v)``).  Default: the submit thread."""
        return st

    @abc.abstractmethod
    def call_fill(self, qi: int, fill: Any, arg: Any, v: int) -> None:
        """Call the fill on queue ``qi``; raise to lose the device."""

    @abc.abstractmethod
    def signal(self, qi: int, v: int) -> None:
        """Arrange ``timeline.report(qi, v)`` once queue ``qi``'s work so far has completed."""

    def mark(self, qi: int, v: int) -> None:
        """After each fill: record cheaply that ``v`` follows the work so far on
        queue ``qi`` (progress between signals).  Optional."""

    def abort(self) -> None:
        """The device is lost: unblock whatever waits on the driver.  Loop thread; must not block."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release everything the backend holds."""

    def begin_stop(self) -> None:
        """Stop began (loop thread, must not block): refuse new driver work of the backend's own."""

    def detach(self) -> None:
        """After ``close``, on the loop thread: drop what the backend registered with the loop."""

    # Memory and images: optional per driver.
    def alloc(self, nbytes: int, kind: str | None) -> Buffer:
        raise ArigError(f"{self.name} allocates no memory")

    def copy_fill(self, buf: Buffer, array: np.ndarray, to_device: bool) -> tuple[Any, Any]:
        """A fill and its arg that copy ``array`` into (or out of) ``buf`` on a queue."""
        raise ArigError(f"{self.name} copies no memory")

    def load(self, image: bytes) -> Image:
        raise ArigError(f"{self.name} loads no images")


def _check_index(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArigTypeError(f"{what} must be an int, got {type(value).__name__}")
    return value


class Device:
    """An open device.  Made by ``await arig.open(opener)``; stop it with
    ``await dev.stop()`` or ``async with``."""

    name: str
    arch: str
    facts: Mapping[str, Any]
    queues: tuple[Queue, ...]
    _st: SubmitThread
    _sub: Any
    _put: Any
    _full: Any
    _prepare: Any
    _backend: Backend
    _tl: Timeline
    _loop: asyncio.AbstractEventLoop
    _stop_timeout: float
    _stopping: bool
    _stop_task: asyncio.Task[None] | None
    _nqueues: int
    _hang_s: float | None
    _watch: asyncio.TimerHandle | None
    _finalizer: weakref.finalize

    def __init__(self, *_: Any, **__: Any) -> None:
        raise TypeError("devices are made by `await arig.open(opener)`")

    @classmethod
    def _make(cls, st: SubmitThread, backend: Backend, tl: Timeline, stop_timeout: float) -> Device:
        self = object.__new__(cls)
        self._st = st
        self._backend = backend
        self._tl = tl
        self._loop = st._loop
        self._stop_timeout = stop_timeout
        self._stopping = False
        self._stop_task = None
        self.name = backend.name
        self.arch = backend.arch
        self.facts = types.MappingProxyType(dict(backend.facts))
        self.queues = tuple(Queue(self.name, i, h) for i, h in enumerate(backend.queue_handles))
        self._nqueues = len(self.queues)
        self._hang_s = None if backend.hang_ms is None else backend.hang_ms / 1000.0
        self._watch = None

        sub = self._sub = backend.submitter(st, st._limit)
        self._put = sub.put
        self._full = sub.full
        self._prepare = backend.prepare

        def on_fail() -> None:  # no reference to the device: see the finalizer below
            st.failed = True
            st.wake_space()
            sub.wake_space()
            backend.abort()

        tl.on_fail(on_fail)
        self._finalizer = weakref.finalize(self, _abandon, st, self.name)
        return self

    # -- what the device is ----------------------------------------------------
    def capability(self, key: Any) -> Any:
        """The record declared under ``key`` (e.g. ``arig.cuda_abi.KEY``), or None."""
        return self._backend.capabilities.get(key)

    @property
    def reached(self) -> int:
        """The highest value reached: all work with a value up to it has completed."""
        return self._tl.reached

    @property
    def submitted(self) -> int:
        """The highest value handed out by ``submit``."""
        return self._tl.assigned

    @property
    def lost(self) -> BaseException | None:
        """None, or the failure that lost the device."""
        return self._tl.cause

    @property
    def stopped(self) -> bool:
        return self._stopping

    def reached_at(self, v: int) -> float | None:
        """The ``time.perf_counter()`` at which the device reported ``v`` reached (None if not, or forgotten)."""
        return self._tl.reached_at(_check_index(v, "v"))

    def _check_usable(self) -> None:
        if self._tl.cause is not None:
            # A new exception each time: re-raising one instance would grow its
            # traceback, and keep every frame it passed through, on every call.
            raise DeviceLost(self.name, self._tl.cause)
        if self._stopping:
            raise DeviceStopped(f"device {self.name} is stopped")

    def _queue_index(self, queue: Any) -> int:
        if isinstance(queue, Queue):
            if queue.device != self.name or not (0 <= queue.index < len(self.queues)) or self.queues[queue.index] is not queue:
                raise ArigValueError(f"{queue!r} is not a queue of this device")
            return queue.index
        qi = _check_index(queue, "queue")
        if not 0 <= qi < len(self.queues):
            raise ArigValueError(f"queue {qi} out of range: {self.name} has {len(self.queues)} queue(s)")
        return qi

    # -- work --------------------------------------------------------------------
    async def submit(self, fill: Any, arg: Any = None, *, queue: Any = 0, keep: Any = ()) -> int:
        """Hand ``fill`` to the device; return the value its work completes on.

        ``fill(queue, arg, v)`` runs later on the device's submit thread.  This
        waits only while too many submissions wait for that thread
        (back-pressure).  Cancelled while waiting, it assigns no value; once a
        value is assigned the work is queued, so values stay gapless.
        ``keep`` (and ``arg``) stay referenced until the value is reached.
        """
        qi = queue if type(queue) is int and 0 <= queue < self._nqueues else self._queue_index(queue)
        item = self._prepare(fill, arg)
        tl = self._tl
        if tl.cause is not None or self._stopping:
            self._check_usable()
        if self._full():
            await self._sub.wait_space(self._check_usable)
            self._check_usable()
        # No await from here on: the value is assigned iff the work is queued.
        # The fill, its arg and keep live until the value is reached (a native
        # fill is read by the device's own thread, after submit returned).
        held = fill if arg is None and (keep is None or (type(keep) is tuple and not keep)) else (fill, arg, keep)
        idle = tl.assigned == tl.reached
        v = tl.assign(qi, held)
        self._put(qi, item, v)
        if idle and self._hang_s is not None and self._watch is None:
            self._arm_watchdog()
        return v

    async def wait(self, v: int) -> None:
        """Return once ``v`` is reached; raise ``DeviceLost`` if it never will be.

        Cancelling the waiting task affects neither the work nor other waiters.
        """
        if type(v) is not int:
            _check_index(v, "v")
        tl = self._tl
        if v <= tl.reached:
            return
        if v > tl.assigned and tl.lost is None:
            raise ArigValueError(f"value {v} was never submitted to {self.name} (last is {tl.assigned})")
        await tl.wait(v)

    async def run(self, fill: Any, arg: Any = None, *, queue: Any = 0, keep: Any = ()) -> int:
        """``submit`` then ``wait``: the value, once its work has completed."""
        v = await self.submit(fill, arg, queue=queue, keep=keep)
        await self._tl.wait(v)
        return v

    # -- memory and images -------------------------------------------------------
    async def _control(self, fn: Callable[..., Any], *args: Any) -> Any:
        self._check_usable()
        return await self._st.put_control(fn, *args)

    async def alloc(self, nbytes: int, kind: str | None = None) -> Buffer:
        """A buffer of ``nbytes`` bytes of ``kind`` memory (the device's default kind if None)."""
        nbytes = _check_index(nbytes, "nbytes")
        if nbytes <= 0:
            raise ArigValueError(f"nbytes must be positive, got {nbytes}")
        if kind is not None and not isinstance(kind, str):
            raise ArigTypeError(f"kind must be a str, got {type(kind).__name__}")
        return await self._control(self._backend.alloc, nbytes, kind)

    def _check_copy(self, buf: Buffer, array: Any, writable: bool) -> np.ndarray:
        if not isinstance(buf, Buffer) or buf.device != self.name:
            raise ArigTypeError(f"expected a buffer of {self.name}, got {buf!r}")
        if buf.closed:
            raise ArigValueError("buffer is closed")
        if not isinstance(array, np.ndarray):
            raise ArigTypeError(f"expected a numpy array, got {type(array).__name__}")
        if not array.flags.c_contiguous or (writable and not array.flags.writeable):
            raise ArigValueError("the array must be C-contiguous" + (" and writable" if writable else ""))
        if array.nbytes > buf.nbytes:
            raise ArigValueError(f"array of {array.nbytes} bytes does not fit the buffer of {buf.nbytes}")
        return array

    async def upload(self, buf: Buffer, array: np.ndarray, *, queue: Any = 0) -> int:
        """Copy ``array`` into ``buf`` through a queue; return once the copy is done."""
        array = self._check_copy(buf, array, writable=False)
        fill, arg = self._backend.copy_fill(buf, array, True)
        return await self.run(fill, arg, queue=queue, keep=(buf, array))

    async def download(self, buf: Buffer, out: np.ndarray, *, queue: Any = 0) -> int:
        """Copy the first ``out.nbytes`` bytes of ``buf`` into ``out``; return once done."""
        out = self._check_copy(buf, out, writable=True)
        fill, arg = self._backend.copy_fill(buf, out, False)
        return await self.run(fill, arg, queue=queue, keep=(buf, out))

    async def load(self, image: bytes) -> Image:
        """Load an image (cubin, PTX or fatbin on CUDA); ``image.function(name)`` is a kernel."""
        if not isinstance(image, (bytes, bytearray, memoryview)):
            raise ArigTypeError(f"image must be bytes, got {type(image).__name__}")
        if len(image) == 0:
            raise ArigValueError("image is empty")
        return await self._control(self._backend.load, bytes(image))

    # -- the hang watchdog -------------------------------------------------------
    def _arm_watchdog(self) -> None:
        assert self._hang_s is not None
        period = min(self._hang_s / 4, 1.0)
        self._watch = self._loop.call_later(period, _watchdog, weakref.ref(self), period)

    # -- stopping ----------------------------------------------------------------
    async def stop(self) -> None:
        """Stop: refuse new work, let submitted work finish (bounded), release everything.

        Idempotent; concurrent callers all wait for the one stop.  Past the
        stop timeout the device is lost and released anyway.
        """
        if self._stop_task is None:
            self._stopping = True
            self._backend.begin_stop()
            self._st.wake_space()
            self._sub.wake_space()
            self._stop_task = self._loop.create_task(self._stop())
        await asyncio.shield(self._stop_task)

    async def _stop(self) -> None:
        tl, st = self._tl, self._st
        if tl.lost is None and tl.assigned > tl.reached:
            try:
                await asyncio.wait_for(tl.wait(tl.assigned), self._stop_timeout)
            except asyncio.TimeoutError:
                tl.fail(DeviceHang(f"stop: work up to value {tl.assigned} did not finish within {self._stop_timeout} s (reached {tl.reached})"))
            except ArigError:
                pass  # lost meanwhile: the waiters already know
        st.put_stop()
        try:
            await asyncio.wait_for(st.finished(), self._stop_timeout)
        except asyncio.TimeoutError:
            warnings.warn(f"arig: the submit thread of {self.name} did not end within {self._stop_timeout} s", RuntimeWarning, stacklevel=2)
        self._backend.detach()
        if tl.lost is None and tl.assigned > tl.reached:
            tl.fail(DeviceStopped(f"device {self.name} stopped before value {tl.reached + 1} was reached"))
        tl.release_kept()
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self._finalizer.detach()

    async def __aenter__(self) -> Device:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    def __repr__(self) -> str:
        state = "lost" if self._tl.lost else "stopped" if self._stopping else "open"
        return f"<arig.Device {self.name} {self.arch} {state} reached={self._tl.reached}/{self._tl.assigned}>"


def _watchdog(ref: weakref.ref[Device], period: float) -> None:
    dev = ref()
    if dev is None:
        return
    dev._watch = None
    tl = dev._tl
    if tl.lost is not None or tl.assigned == tl.reached or dev._hang_s is None:
        return  # nothing pending: the next submit arms it again
    idle = time.monotonic() - max(tl.last_progress, tl.progress_time)
    if idle >= dev._hang_s:
        tl.fail(DeviceHang(f"no progress for {idle * 1000:.0f} ms (hang_ms={dev._hang_s * 1000:.0f}) with values {tl.reached + 1}..{tl.assigned} pending"))
        return
    dev._watch = dev._loop.call_later(period, _watchdog, ref, period)


def _abandon(st: SubmitThread, name: str) -> None:
    warnings.warn(f"arig: device {name} was never stopped; use `async with` or `await dev.stop()`", ResourceWarning, stacklevel=2)
    st.abandon()


async def open(opener: Opener, *, max_pending: int = DEFAULT_MAX_PENDING, stop_timeout: float = DEFAULT_STOP_TIMEOUT) -> Device:  # noqa: A001
    """Open the device ``opener`` makes (``arig.host.cpu()``, ``arig.cuda.gpu(i)``, ...).

    The driver work of the open runs on the device's own submit thread; a
    failure raises ``OpenError`` naming why.  ``max_pending`` bounds the
    submissions waiting for that thread; ``stop_timeout`` bounds ``stop``.
    """
    name = getattr(opener, "name", None)
    if not isinstance(name, str) or not callable(getattr(opener, "make", None)):
        raise ArigTypeError(f"expected an opener (arig.host.cpu(), arig.cuda.gpu(i), ...), got {opener!r}")
    if _check_index(max_pending, "max_pending") < 1:
        raise ArigValueError(f"max_pending must be at least 1, got {max_pending}")
    if not stop_timeout > 0:
        raise ArigValueError(f"stop_timeout must be positive, got {stop_timeout}")
    loop = asyncio.get_running_loop()
    st = SubmitThread(loop, name, max_pending)
    starting = asyncio.ensure_future(st.start(opener.make))
    try:
        backend = await asyncio.shield(starting)
    except asyncio.CancelledError:
        st.put_stop()  # the thread closes the backend if make() succeeds
        # Nobody awaits the open any more: retrieve a later failure of make().
        starting.add_done_callback(lambda t: t.cancelled() or t.exception())
        raise
    except OpenError:
        raise
    except Exception as exc:  # noqa: BLE001 - every failure of an open is an OpenError
        raise OpenError(f"cannot open {name}: {type(exc).__name__}: {exc}") from exc
    tl = Timeline(loop, backend.name, len(backend.queue_handles))
    backend.bind(tl, st.post)
    dev = Device._make(st, backend, tl, float(stop_timeout))
    st.begin(tl)
    return dev
