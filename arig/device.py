"""Devices: async open, submit, wait and stop over any driver.

A device is three parts with one lifetime each:

* the *backend* (``Backend``, declared in ``arig._backend``), a driver's
  own calls, run only on
* the *submit thread* (``arig._submit``), which calls fills one at a time
  and tells the backend to signal values, and
* the *timeline* (``arig._timeline``), whose futures live on the event loop.

The device on top holds no driver state and names no driver: the host, CUDA
and kernel-driver devices differ only in their backend, and what only some
of them offer (``dev.features``) is found once, at open.
"""

from __future__ import annotations

import asyncio
import logging
import time
import types
import warnings
import weakref
from collections.abc import Callable, Mapping
from threading import get_ident
from typing import Any, TypeVar

import numpy as np

from . import _instruments, _log
from ._backend import (
    DEFERRED,
    Adopts,
    Backend,
    ExportsDmabuf,
    MapsHost,
    Opener,
    Submitter,
    WaitsEvents,
    Wraps,
    callable_name,
    deferred_result,
    defers_work,
    features_of,
    fill_result,
)
from ._errors import ArigError, ArigTypeError, ArigValueError, DeviceHang, DeviceLost, DeviceStopped, OpenError, WrongLoopError, describe, safe_repr
from ._memory import Buffer, Image
from ._submit import SubmitThread
from ._timeline import Timeline
from .queue import AdoptedQueue, Queue

__all__ = ["Backend", "Device", "Opener", "open", "open_devices", "DEFAULT_MAX_PENDING", "DEFAULT_STOP_TIMEOUT", "DEFERRED", "defers_work", "deferred_result", "fill_result", "callable_name"]

_T = TypeVar("_T")

#: Submissions that may wait for the submit thread before ``submit`` waits.
DEFAULT_MAX_PENDING = 1024
#: Seconds ``stop`` lets submitted work finish before it loses the device.
DEFAULT_STOP_TIMEOUT = 30.0
#: Seconds a stop that used up its timeout still gives the submit thread to end:
#: a thread that is not inside a fill ends at once.
STOP_GRACE = 0.05


#: Every device made, while referenced (``open_devices``).
_devices: weakref.WeakSet[Device] = weakref.WeakSet()


def open_devices(loop: asyncio.AbstractEventLoop) -> list[Device]:
    """The devices of ``loop`` that are open and not lost (loop thread)."""
    return [d for d in list(_devices) if d._loop is loop and not d._stopping and d._tl.cause is None]


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
    #: What this device offers beyond the common model, fixed at open: a subset of
    #: ``"adopt"``, ``"wait_event"``, ``"dma"``, ``"map_host"`` and ``"wrap"``, each the
    #: name of the method that works here (``"wait_event"``: ``join_event``, and so
    #: ``arig.cuda.wait_event``); the others raise ``ArigTypeError`` naming who has them.
    features: frozenset[str]
    _st: SubmitThread
    _sub: Submitter
    _put: Any
    _full: Any
    _prepare: Any
    _backend: Backend
    # The backend once more under each feature it has (None where it lacks it), typed by
    # the feature's protocol: the methods below call a feature through these only.
    _adopts: Adopts | None
    _waits: WaitsEvents | None
    _dmabuf: ExportsDmabuf | None
    _maps_host: MapsHost | None
    _wraps: Wraps | None
    _tl: Timeline
    _loop: asyncio.AbstractEventLoop
    _stop_timeout: float
    _stopping: bool
    _stop_task: asyncio.Task[None] | None
    _nqueues: int
    _hang_s: float | None
    _watch: asyncio.TimerHandle | None
    _finalizer: weakref.finalize[Any, Any]
    _tid: int
    _running: Callable[[], bool]
    _ins: _instruments.Dispatch | None  # None while no instrument watches the device

    def __init__(self, *_: Any, **__: Any) -> None:
        raise ArigTypeError("devices are made by `await arig.open(opener)`")

    @classmethod
    def _make(cls, st: SubmitThread, backend: Backend, tl: Timeline, stop_timeout: float) -> Device:
        self = object.__new__(cls)
        self._st = st
        self._backend = backend
        self._tl = tl
        self._loop = st._loop
        # Which loop may use the device, checked cheaply on every call: the
        # thread that runs the device's loop, while that loop runs (a thread
        # runs one loop at a time); anything else takes _check_loop's slow path.
        self._tid = get_ident()
        self._running = self._loop.is_running
        self._stop_timeout = stop_timeout
        self._stopping = False
        self._stop_task = None
        self.name = backend.name
        self.arch = backend.arch
        self.facts = types.MappingProxyType(dict(backend.facts))
        self.queues = tuple(backend.queue_type(self.name, i, h) for i, h in enumerate(backend.queue_handles))
        self._nqueues = len(self.queues)
        self._hang_s = None if backend.hang_ms is None else backend.hang_ms / 1000.0
        self._watch = None
        self.features = features_of(backend)
        self._adopts = backend if isinstance(backend, Adopts) else None
        self._waits = backend if isinstance(backend, WaitsEvents) else None
        self._dmabuf = backend if isinstance(backend, ExportsDmabuf) else None
        self._maps_host = backend if isinstance(backend, MapsHost) else None
        self._wraps = backend if isinstance(backend, Wraps) else None

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
        _devices.add(self)
        _instruments.attach(self, tl)
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
        cause = self._tl.cause
        if cause is not None and self._ins is not None:
            self._ins.call("on_loss_seen", self, cause)
        return cause

    @property
    def stopped(self) -> bool:
        return self._stopping

    def reached_at(self, v: int) -> float | None:
        """The ``time.perf_counter()`` at which the device reported ``v`` reached (None if not, or forgotten)."""
        return self._tl.reached_at(_check_index(v, "v"))

    @property
    def loss_delivered(self) -> bool:
        """Did the loss reach anyone: a waiter it failed, or a later call that raised ``DeviceLost``?"""
        return self._tl.told > 0

    def _check_usable(self) -> None:
        if self._tl.cause is not None:
            self._tl.told += 1
            # A new exception each time: re-raising one instance would grow its
            # traceback, and keep every frame it passed through, on every call.
            raise DeviceLost(self.name, self._tl.cause)
        if self._stopping:
            raise DeviceStopped(f"device {self.name} is stopped")

    def _check_loop(self) -> None:
        """Raise WrongLoopError unless the running loop is the device's own."""
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._tid = get_ident()  # the loop now runs on another thread: the device follows it
            return
        where = "a thread with no running event loop" if running is None else "another event loop"
        own = "an event loop that is closed now" if self._loop.is_closed() else "another event loop"
        raise WrongLoopError(
            f"device {self.name} was used from {where}; it belongs to the loop it was opened on, {own}. "
            "A device's futures and threads serve one loop: open a device in each loop that uses one"
        )

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
        if get_ident() != self._tid or not self._running():
            self._check_loop()
        ins = self._ins
        if ins is not None:
            fill, arg, keep = ins.before_submit(self, fill, arg, queue, keep)
        if type(queue) is int and 0 <= queue < self._nqueues:
            qi = queue
            item = self._prepare(fill, arg)
        elif isinstance(queue, AdoptedQueue):
            qi, item = self._adopted_item(queue, fill, arg)
        else:
            qi = self._queue_index(queue)
            item = self._prepare(fill, arg)
        tl = self._tl
        if tl.cause is not None or self._stopping:
            self._check_usable()
        if self._full():
            await self._sub.wait_space(self._check_usable)
            self._check_usable()
        # The fill, its arg and keep live until the value is reached (a native
        # fill is read by the device's own thread, after submit returned).
        held = fill if arg is None and (keep is None or (type(keep) is tuple and not keep)) else (fill, arg, keep)
        v = self._hand_over(qi, item, held)
        if ins is not None:
            ins.call("on_submit", self, v, fill, arg, qi)
        return v

    def _hand_over(self, qi: int, item: Any, held: Any) -> int:
        """Assign the next value to ``item`` on lane ``qi`` and hand it to the submitter.

        Every submission ends here, whatever made its item (``submit``, ``join_event``).
        No await in between: the value is assigned iff the work is queued.  A hand-off
        that raises once the value exists loses the device, since that value could never
        be reached: its waiters, and every later one, would otherwise wait forever.
        """
        tl = self._tl
        idle = tl.assigned == tl.reached
        v = tl.assign(qi, held)
        try:
            self._put(qi, item, v)
        except BaseException as exc:
            tl.fail(exc)
            raise
        if idle and self._hang_s is not None and self._watch is None:
            self._arm_watchdog()
        return v

    def adopt(self, stream: Any) -> AdoptedQueue:
        """A queue made from a stream another library owns (CUDA devices).

        ``stream``: an object with ``__cuda_stream__`` (cuda.core's
        protocol), a ``torch.cuda.Stream``, a ``cupy.cuda.Stream``, or a raw
        ``CUstream`` int, of this device's GPU and primary context.  Work
        enqueued on that stream before a submit on the queue is ordered
        before that submit's value: ``await dev.wait(await dev.submit(None,
        queue=q))`` awaits it with no thread blocked.  A Python fill on the
        queue receives the stream's handle.  Adopting a stream again gives
        the same queue; the stream object stays referenced until the device
        stops.  Calls no driver function (the loop thread's rule).
        """
        if get_ident() != self._tid or not self._running():
            self._check_loop()
        self._check_usable()
        adopts = self._adopts
        if adopts is None:
            raise ArigTypeError(f"{self.name} has no streams to adopt: adopt() is for CUDA devices")
        return adopts.adopt(stream)

    def _adopted_item(self, queue: AdoptedQueue, fill: Any, arg: Any) -> tuple[int, Any]:
        adopts = self._adopts
        if adopts is None or queue.device != self.name or adopts.adopted(queue.handle) is not queue:
            raise ArigValueError(f"{queue!r} is not a queue of this device")
        return queue.index, adopts.prepare_adopted(queue, fill, arg)

    async def join_event(self, handle: int, *, keep: Any = ()) -> int:
        """Submit a wait, on the device's join lane, for the event ``handle`` another library
        records (devices with ``"wait_event"``); return the value it completes on.

        The event's latest record when the device reaches the wait is what is
        awaited.  ``arig.cuda.wait_event`` is the friendly form: it reads the handle
        out of torch, CuPy or cuda.core events and awaits the value.  ``keep`` (the
        event object) stays referenced until the value is reached.  Back-pressure,
        cancellation and loss are ``submit``'s.
        """
        if get_ident() != self._tid or not self._running():
            self._check_loop()
        waits = self._waits
        if waits is None:
            raise ArigTypeError(f"{self.name} cannot wait for CUDA events: pass a CUDA device")
        if not 0 < _check_index(handle, "handle") < 1 << 64:  # 0 is no event: the driver would refuse the wait, and lose the device
            raise ArigValueError(f"handle must be an event's handle, in 1..2**64-1, got {handle}")
        self._check_usable()
        slot = waits.event_slot(handle)
        item = waits.prepare_event(slot)
        if self._full():
            await self._sub.wait_space(self._check_usable)
            self._check_usable()
        return self._hand_over(waits.join_lane, item, (slot, keep))

    async def wait(self, v: int) -> None:
        """Return once ``v`` is reached; raise ``DeviceLost`` if it never will be.

        Cancelling the waiting task affects neither the work nor other waiters.
        """
        if get_ident() != self._tid or not self._running():
            self._check_loop()
        if type(v) is not int:
            _check_index(v, "v")
        tl = self._tl
        if v <= tl.reached:
            return
        if v > tl.assigned and tl.lost is None:
            raise ArigValueError(f"value {v} was never submitted to {self.name} (last is {tl.assigned})")
        if self._ins is not None:
            return await self._ins.wait(self, v, tl.wait)
        await tl.wait(v)

    async def run(self, fill: Any, arg: Any = None, *, queue: Any = 0, keep: Any = ()) -> int:
        """``submit`` then ``wait``: the value, once its work has completed."""
        v = await self.submit(fill, arg, queue=queue, keep=keep)
        if self._ins is not None:
            await self._ins.wait(self, v, self._tl.wait)
            return v
        await self._tl.wait(v)
        return v

    # -- memory and images -------------------------------------------------------
    async def _control(self, fn: Callable[..., _T], *args: Any) -> _T:
        self._check_usable()  # the loop was checked by the caller, before its arguments
        if self._ins is not None:
            made: _T = await self._ins.control(self, self._st.put_control(fn, *args))
            return made
        result: _T = await self._st.put_control(fn, *args)
        return result

    async def alloc(self, nbytes: int, kind: str | None = None) -> Buffer:
        """A buffer of ``nbytes`` bytes of ``kind`` memory (the device's default kind if None)."""
        self._check_loop()
        nbytes = _check_index(nbytes, "nbytes")
        if nbytes <= 0:
            raise ArigValueError(f"nbytes must be positive, got {nbytes}")
        if kind is not None and not isinstance(kind, str):
            raise ArigTypeError(f"kind must be a str, got {type(kind).__name__}")
        return await self._control(self._backend.alloc, nbytes, kind)

    def _check_copy(self, buf: Buffer, array: Any, writable: bool) -> np.ndarray[Any, Any]:
        if not isinstance(buf, Buffer) or buf.device != self.name:
            raise ArigTypeError(f"expected a buffer of {self.name}, got {safe_repr(buf)}")
        if buf.closed:
            raise ArigValueError("buffer is closed")
        if not isinstance(array, np.ndarray):
            raise ArigTypeError(f"expected a numpy array, got {type(array).__name__}")
        if not array.flags.c_contiguous or (writable and not array.flags.writeable):
            raise ArigValueError("the array must be C-contiguous" + (" and writable" if writable else ""))
        if array.nbytes > buf.nbytes:
            raise ArigValueError(f"array of {array.nbytes} bytes does not fit the buffer of {buf.nbytes}")
        return array

    async def dma(self, buf: Buffer, offset: int = 0, nbytes: int | None = None) -> Any:
        """``nbytes`` (all that follows ``offset`` if None) of ``buf`` as a dma-buf another driver can
        import (NV devices, NVIDIA's open kernel modules): a ``Dmabuf`` with ``fd``, ``offset`` and
        ``size``.  The export runs on the submit thread; the kernel driver's refusal raises ``RmError``."""
        self._check_loop()
        dma = self._dmabuf
        if dma is None:
            raise ArigTypeError(f"{self.name} exports no dma-bufs: dma() is for NV devices")
        if not isinstance(buf, Buffer) or buf.device != self.name:
            raise ArigTypeError(f"expected a buffer of {self.name}, got {safe_repr(buf)}")
        if buf.closed:
            raise ArigValueError("buffer is closed")
        offset = _check_index(offset, "offset")
        n = buf.nbytes - offset if nbytes is None else _check_index(nbytes, "nbytes")
        if offset + n > buf.nbytes or n <= 0:
            raise ArigValueError(f"the region at {offset} of {n} bytes is not inside the buffer of {buf.nbytes} bytes")
        return await self._control(dma.dma, buf, offset, n)

    async def map_host(self, obj: Any) -> Buffer:
        """Host memory the program already has, mapped for the GPU without a copy (NV devices).

        ``obj``: a writable, C-contiguous object with the buffer protocol (a numpy array, a
        ``bytearray``, an ``mmap``).  The buffer's ``address`` is where the GPU sees it (an address of
        its own: the host's may lie higher than the GPU reaches), ``numpy()`` views ``obj``'s own
        memory, and kernels, copies and releases reach it directly.  The kernel driver pins the pages
        for writing while the buffer lives (``obj`` stays referenced until the GPU's mapping is undone,
        after the work submitted before ``close()``); pages it will not pin (not mapped or not writable,
        a shared mapping of a file on ext4 or xfs since Linux 6.5) raise ``arig.nvrm.PinRefused``, a
        ``ValueError``, as they always would."""
        self._check_loop()
        mh = self._maps_host
        if mh is None:
            raise ArigTypeError(f"{self.name} maps no host memory: map_host() is for NV devices")
        try:
            view = memoryview(obj)
        except TypeError:
            raise ArigTypeError(f"map_host takes an object with the buffer protocol (a numpy array, a bytearray), not {type(obj).__name__}") from None
        if view.readonly:
            raise ArigValueError("map_host needs writable memory: the GPU may write it, and the kernel pins its pages for writing")
        if not view.c_contiguous:
            raise ArigValueError("map_host needs C-contiguous memory")
        if view.nbytes == 0:
            raise ArigValueError("map_host needs at least one byte")
        address = np.frombuffer(view, dtype=np.uint8).ctypes.data
        self._check_usable()
        buf: Buffer = await self._control(mh.map_host, address, view.nbytes, obj)
        return buf

    def wrap(self, array: Any) -> Buffer:
        """Another library's GPU array (torch, CuPy, anything with ``__cuda_array_interface__``
        or ``__dlpack__``) as a buffer of this device, sharing its memory: ``upload`` and
        ``download`` copy through it.  The array stays referenced while the buffer lives; its
        library frees the memory, never arig.  Order its library's pending writes first (for
        example ``await dev.wait(await dev.submit(None, queue=dev.adopt(stream)))``)."""
        if get_ident() != self._tid or not self._running():
            self._check_loop()
        self._check_usable()
        wraps = self._wraps
        if wraps is None:
            raise ArigTypeError(f"{self.name} wraps no foreign arrays: wrap() is for CUDA devices")
        return wraps.wrap(array)

    async def upload(self, buf: Buffer, array: np.ndarray, *, queue: Any = 0) -> int:
        """Copy ``array`` into ``buf`` through a queue; return once the copy is done."""
        self._check_loop()
        array = self._check_copy(buf, array, writable=False)
        if buf.readonly:
            raise ArigValueError(f"{buf!r} wraps a read-only array: nothing may be uploaded into it")
        fill, arg = self._backend.copy_fill(buf, array, True)
        return await self.run(fill, arg, queue=queue, keep=(buf, array))

    async def download(self, buf: Buffer, out: np.ndarray, *, queue: Any = 0) -> int:
        """Copy the first ``out.nbytes`` bytes of ``buf`` into ``out``; return once done."""
        self._check_loop()
        out = self._check_copy(buf, out, writable=True)
        fill, arg = self._backend.copy_fill(buf, out, False)
        return await self.run(fill, arg, queue=queue, keep=(buf, out))

    async def load(self, image: bytes) -> Image:
        """Load an image (cubin, PTX or fatbin on CUDA); ``image.function(name)`` is a kernel."""
        self._check_loop()
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
        stop timeout the device is lost and released anyway: the whole stop
        takes at most ``stop_timeout`` (and ``STOP_GRACE``).
        """
        self._check_loop()
        if self._stop_task is None:
            self._stopping = True
            self._backend.begin_stop()
            self._st.wake_space()
            self._sub.wake_space()
            self._stop_task = self._loop.create_task(self._stop())
        await asyncio.shield(self._stop_task)

    async def _stop(self) -> None:
        tl, st, loop = self._tl, self._st, self._loop
        # One deadline for the whole stop: a fill that blocks the submit thread
        # also keeps it from ending, and must not cost the timeout twice.
        deadline = loop.time() + self._stop_timeout
        if tl.lost is None and tl.assigned > tl.reached:
            try:
                await asyncio.wait_for(tl.wait(tl.assigned), self._stop_timeout)
            except TimeoutError:
                cause = DeviceHang(f"stop: work up to value {tl.assigned} did not finish within {self._stop_timeout} s (reached {tl.reached})")
                tl.fail(cause, logging.WARNING)
            except ArigError:
                pass  # lost meanwhile: the waiters already know
        st.put_stop()
        try:
            await asyncio.wait_for(st.finished(), max(deadline - loop.time(), min(STOP_GRACE, self._stop_timeout)))
            ended = True
        except TimeoutError:
            ended = False
        self._backend.detach()
        if tl.lost is None and tl.assigned > tl.reached:
            tl.fail(DeviceStopped(f"device {self.name} stopped before value {tl.reached + 1} was reached"), logging.WARNING)
        tl.release_kept()
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self._finalizer.detach()
        # Said last, once everything is released: a handler that raises cannot leave anything held.
        if not ended:
            _log.stop_slow(
                self.name,
                f"the submit thread did not end within the stop timeout ({self._stop_timeout} s): a fill still runs on it; "
                "it ends, and releases the device's driver, once that fill returns",
            )

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
        hang = DeviceHang(f"no progress for {idle * 1000:.0f} ms (hang_ms={dev._hang_s * 1000:.0f}) with values {tl.reached + 1}..{tl.assigned} pending")
        tl.fail(hang, logging.ERROR)
        return
    dev._watch = dev._loop.call_later(period, _watchdog, ref, period)


def _abandon(st: SubmitThread, name: str) -> None:
    st.abandon()  # first: under -W error the warning raises, and the threads must end anyway
    warnings.warn(f"arig: device {name} was never stopped; use `async with` or `await dev.stop()`", ResourceWarning, stacklevel=2)


async def open(opener: Opener, *, max_pending: int = DEFAULT_MAX_PENDING, stop_timeout: float = DEFAULT_STOP_TIMEOUT) -> Device:  # noqa: A001
    """Open the device ``opener`` makes (``arig.host.cpu()``, ``arig.cuda.gpu(i)``, ...).

    The driver work of the open runs on the device's own submit thread; a
    failure raises ``OpenError`` naming why.  ``max_pending`` bounds the
    submissions waiting for that thread; ``stop_timeout`` bounds ``stop``.
    """
    name = getattr(opener, "name", None)
    if not isinstance(name, str) or not callable(getattr(opener, "make", None)):
        raise ArigTypeError(f"expected an opener (arig.host.cpu(), arig.cuda.gpu(i), ...), got {safe_repr(opener)}")
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
        raise OpenError(f"cannot open {name}: {describe(exc)}") from exc
    try:
        tl = Timeline(loop, backend.name, len(backend.queue_handles))
        backend.bind(tl, st.post)
        dev = Device._make(st, backend, tl, float(stop_timeout))
    except BaseException as exc:
        try:
            backend.detach()  # whatever bind registered with the loop
        except Exception:  # noqa: BLE001 - a half-bound backend: the open's own failure is what to report
            pass
        st.put_stop()  # the thread waits for begin(): a stop instead closes the backend and ends it
        if isinstance(exc, (OpenError, asyncio.CancelledError)) or not isinstance(exc, Exception):
            raise
        raise OpenError(f"cannot open {name}: {describe(exc)}") from exc
    st.begin(tl)
    return dev
