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

import logging
import time
import sys
import traceback
import types
import weakref
from collections.abc import Awaitable, Callable, Mapping
from threading import get_ident
from typing import Any, TypeVar

import numpy as np

from . import _device_registry, _instruments, _log
from ._after import check_after, hand_over_after
from ._backend import (
    DEFERRED,
    Backend,
    Opener,
    Submitter,
    callable_name,
    deferred_result,
    defers_work,
    fill_result,
)
from ._device_args import check_alloc, check_buffer_copy, check_copy, check_image, check_index, check_open, check_value, owned
from ._device_features import FeatureCalls
from ._errors import ArigError, ArigTypeError, ArigValueError, DeviceHang, DeviceLost, DeviceStopped, OpenError, WrongLoopError, describe, forget_frames
from ._fill import Work
from ._hang_watch import HangWatch
from ._inline import check_inline, run_inline
from ._memory import Buffer, Image, refuse_closed
from ._port import LoopPort, OnClose, port_of, settle
from ._running import running_loop
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
#: Seconds a stop waits for submitted work before it says, once, what it waits for.
STOP_NOTICE = 1.0


def open_devices(loop: Any) -> list[Device]:
    """The devices of ``loop`` (``arig._running.running_loop()``) that are open and not lost (loop thread)."""
    return [d for d in _device_registry.devices() if d._loop is loop and not d._stopping and d._tl.cause is None]


class Device(FeatureCalls):
    """An open device.  Made by ``await arig.open(opener)``; stop it with
    ``await dev.stop()`` or ``async with``.  What only some devices offer
    (``features``: ``adopt``, ``join_event``, ``dma``, ``map_host``, ``wrap``)
    is ``FeatureCalls``'."""

    name: str
    arch: str
    facts: Mapping[str, Any]
    queues: tuple[Queue, ...]
    _st: SubmitThread
    _sub: Submitter
    _put: Any
    _full: Any
    _prepare: Any
    _inline_checked: dict[int, Any]  # id -> a weak reference to an inline fill checked once
    _backend: Backend
    _tl: Timeline
    _loop: Any  # what runs the device: an asyncio loop, or a trio run's port (arig._running)
    _port: LoopPort
    _stop_timeout: float
    _stopping: bool
    _stop_task: Any  # the port's future of the one stop
    _nqueues: int
    _watch: HangWatch | None  # None where the backend has no hang timeout
    _finalizer: weakref.finalize[Any, Any]  # alive until the device is released (by stop, or at collection)
    _on_close: OnClose
    _tid: int
    _running: Callable[[], bool]
    _ins: _instruments.Dispatch | None  # None while no instrument watches the device
    _holds: Any = None  # arig._after.Holds, from the first submission the loop holds for another device
    _gates: Any = None  # arig._after.Gates, from the first one gated on the device

    def __init__(self, *_: Any, **__: Any) -> None:
        raise ArigTypeError("devices are made by `await arig.open(opener)`")

    @classmethod
    def _make(cls, st: SubmitThread, backend: Backend, tl: Timeline, stop_timeout: float, source: Any = None) -> Device:
        self = object.__new__(cls)
        self._st = st
        self._backend = backend
        self._tl = tl
        self._loop = st._loop
        self._port = st._port
        # Which loop may use the device, checked cheaply on every call: the
        # thread that runs the device's loop, while that loop runs (a thread
        # runs one loop at a time); anything else takes _check_loop's slow path.
        self._tid = get_ident()
        self._running = self._port.running_check()
        self._stop_timeout = stop_timeout
        self._stopping = False
        self._stop_task = None
        self.name = backend.name
        self.arch = backend.arch
        self.facts = types.MappingProxyType(dict(backend.facts))
        self.queues = tuple(backend.queue_type(self.name, i, h) for i, h in enumerate(backend.queue_handles))
        self._nqueues = len(self.queues)
        self._watch = None if backend.hang_ms is None else HangWatch(self._loop, tl, backend.hang_ms / 1000.0)
        self._find_features(backend)

        sub = self._sub = backend.submitter(st, st._limit)
        self._put = sub.put
        self._full = sub.full
        self._prepare = backend.prepare
        self._inline_checked = {}

        def on_fail() -> None:  # no reference to the device: see the finalizer below
            st.failed = True
            st.wake_space()
            sub.wake_space()
            backend.abort()

        tl.on_fail(on_fail)
        self._finalizer = _device_registry.track(self, st, self.name, source)
        # Once the loop is closed, a task left in wait() must not keep the device (and its
        # threads) alive through the timeline: the waiters are dropped, and the device can
        # be collected (and released by its finalizer) or stopped from another loop.
        self._on_close = self._port.on_close(_forgetting(tl, self._sub))
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
        return self._tl.reached_at(check_value(v))

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
            running: Any = running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._tid = get_ident()  # the loop now runs on another thread: the device follows it
            return
        where = "a thread with no running event loop" if running is None else "another event loop"
        own = "an event loop that is closed now" if self._port.closed else "another event loop"
        raise WrongLoopError(
            f"device {self.name} was used from {where}; it belongs to the loop it was opened on, {own}. "
            "A device's futures and threads serve one loop: open a device in each loop that uses one"
        )

    def _check_here_and_usable(self) -> None:
        """The checks of a call that needs no driver: the device's own loop (the cheap way first), then usable."""
        if get_ident() != self._tid or not self._running():
            self._check_loop()
        self._check_usable()

    def _queue_index(self, queue: Any) -> int:
        if isinstance(queue, Queue):
            if queue.device != self.name or not (0 <= queue.index < len(self.queues)) or self.queues[queue.index] is not queue:
                raise ArigValueError(f"{queue!r} is not a queue of this device")
            return queue.index
        qi = check_index(queue, "queue")
        if not 0 <= qi < len(self.queues):
            raise ArigValueError(f"queue {qi} out of range: {self.name} has {len(self.queues)} queue(s)")
        return qi

    # -- work --------------------------------------------------------------------
    async def submit(self, fill: Work, arg: Any = None, *, queue: Any = 0, keep: Any = (), after: Any = None, inline: bool = False) -> int:
        """Hand ``fill`` to the device; return the value its work completes on.

        ``fill(queue, arg, v)`` runs later on the device's submit thread.  This
        waits only while too many submissions wait for that thread
        (back-pressure).  Cancelled while waiting, it assigns no value; once a
        value is assigned the work is queued, so values stay gapless.
        ``keep`` (and ``arg``) stay referenced until the value is reached; a
        closed buffer or image as ``arg``/``keep`` (or directly in a tuple or
        list of them) is refused with ``ArigValueError`` before a value.
        ``after=[(other, v), ...]``: the work waits until each other device
        (of this loop) reached its value; a loss of one loses this device too
        (``arig._after`` says how, and what it refuses).
        ``inline=True``: the Python ``fill`` runs now, on the loop's thread, with
        a recorder as its ``queue``, and hands it one piece of arig work (a
        ``Launch`` called with it, or ``queue.put(work)``), which the device
        takes as if submitted itself: no thread hop.  The fill must not touch
        the driver; one that raises or returns an error code assigns no value
        and leaves the device usable (``arig._inline`` says why).
        """
        if get_ident() != self._tid or not self._running():
            self._check_loop()
        ins = self._ins
        if ins is not None:
            given = fill
            fill, arg, keep = ins.before_submit(self, fill, arg, queue, keep)
            inline = inline and fill is given  # an instrument's substitute (a fault's) runs as submitted work
        try:
            if inline:
                qi = self._inline_queue(fill, queue)
                item = None
            elif type(queue) is int and 0 <= queue < self._nqueues:
                qi = queue
                item = self._prepare(fill, arg)
            elif isinstance(queue, AdoptedQueue):
                qi, item = self._adopted_item(queue, fill, arg)
            else:
                qi = self._queue_index(queue)
                item = self._prepare(fill, arg)
        except ArigValueError:
            # A stop unloads the device's images and closes its buffers: a launch of one, submitted
            # after the stop (or a loss), is refused for the device's state, as any other work is.
            self._check_usable()
            raise
        tl = self._tl
        if tl.cause is not None or self._stopping:
            self._check_usable()
        if self._full():
            await self._sub.wait_space(self._check_usable)
            self._check_usable()
        held: Any
        waits = None
        if inline:  # after the wait for room: from here to the hand-over nothing awaits
            if after is not None:
                waits = check_after(after, self)  # before the fill runs: a refused after= runs nothing
            # The fill is synchronous and submit is async: nothing it can call assigns a value
            # before its own, so v is the value its work gets.
            rec = run_inline(fill, arg, self.queues[qi], tl.assigned + 1)
            item = self._prepare(rec.work, rec.arg)
            refuse_closed(arg, keep, rec.arg)
            held = (rec.work, rec.arg, keep, fill, arg)  # the fill and its own arg stay referenced as the work's
            fill, arg = rec.work, rec.arg
        # The fill, its arg and keep live until the value is reached (a native
        # fill is read by the device's own thread, after submit returned).
        elif arg is None and (keep is None or (type(keep) is tuple and not keep)):
            held = fill
        else:
            refuse_closed(arg, keep)  # here, after any wait for room: a close during that wait counts
            held = (fill, arg, keep)
        if after is not None:
            v = hand_over_after(self, qi, fill, arg, item, held, waits if waits is not None else check_after(after, self))
        else:
            v = self._hand_over(qi, item, held)
        if ins is not None:
            ins.call("on_submit", self, v, fill, arg, qi)
        return v

    def _inline_queue(self, fill: Any, queue: Any) -> int:
        """The queue index of an inline submission (``submit(..., inline=True)``), its fill checked."""
        if isinstance(queue, AdoptedQueue):
            raise ArigValueError("an inline fill cannot run on an adopted queue: its work is arig's, run on the device's own queues")
        seen = self._inline_checked.get(id(fill))
        if seen is None or seen() is not fill:
            check_inline(fill)
            self._backend.check_fill(fill)
            if len(self._inline_checked) > 256:  # lambdas made per call: do not grow without bound
                self._inline_checked.clear()
            try:
                # Weakly: a fill's closure may hold the caller's buffers, which the cache must not keep.
                self._inline_checked[id(fill)] = weakref.ref(fill)
            except TypeError:
                pass  # a callable that takes no weak reference is checked each time
        return queue if type(queue) is int and 0 <= queue < self._nqueues else self._queue_index(queue)

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
        if idle and self._watch is not None:
            self._watch.arm()
        return v

    async def wait(self, v: int) -> None:
        """Return once ``v`` is reached; raise ``DeviceLost`` if it never will be.

        Cancelling the waiting task affects neither the work nor other waiters.
        """
        if get_ident() != self._tid or not self._running():
            self._check_loop()
        if type(v) is not int or v < 0:
            v = check_value(v)
        tl = self._tl
        if v <= tl.reached:
            return
        if v > tl.assigned and tl.lost is None:
            raise ArigValueError(f"value {v} was never submitted to {self.name} (last is {tl.assigned})")
        await self._reach(v)

    async def run(self, fill: Work, arg: Any = None, *, queue: Any = 0, keep: Any = (), after: Any = None) -> int:
        """``submit`` then ``wait``: the value, once its work has completed."""
        v = await self.submit(fill, arg, queue=queue, keep=keep, after=after)
        await self._reach(v)
        return v

    def _reach(self, v: int) -> Awaitable[None]:
        """The wait for a checked value ``v``: through the instruments where some are added."""
        if self._ins is not None:
            return self._ins.wait(self, v, self._tl.wait)
        return self._tl.wait(v)

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
        nbytes = check_alloc(nbytes, kind)
        return owned(await self._control(self._backend.alloc, nbytes, kind), self)

    async def upload(self, buf: Buffer, array: np.ndarray, *, queue: Any = 0, after: Any = None) -> int:
        """Copy ``array`` into ``buf`` through a queue; return once the copy is done."""
        self._check_loop()
        try:
            array = check_copy(buf, array, self, writable=False)
        except ArigValueError:
            self._check_usable()  # its own buffer, closed by its stop: refused for the stop (see submit)
            raise
        if buf.readonly:
            raise ArigValueError(f"{buf!r} wraps a read-only array: nothing may be uploaded into it")
        fill, arg = self._backend.copy_fill(buf, array, True)
        return await self.run(fill, arg, queue=queue, keep=(buf, array), after=after)

    async def download(self, buf: Buffer, out: np.ndarray, *, queue: Any = 0, after: Any = None) -> int:
        """Copy the first ``out.nbytes`` bytes of ``buf`` into ``out``; return once done."""
        self._check_loop()
        try:
            out = check_copy(buf, out, self, writable=True)
        except ArigValueError:
            self._check_usable()
            raise
        fill, arg = self._backend.copy_fill(buf, out, False)
        return await self.run(fill, arg, queue=queue, keep=(buf, out), after=after)

    async def copy(self, dst: Buffer, src: Buffer, *, nbytes: int | None = None, queue: Any = 0, after: Any = None) -> int:
        """Copy the first ``nbytes`` bytes of ``src`` (all of it if None) into ``dst``, a buffer of
        this device; ``src`` may be a buffer of any open device of this loop, this one included.
        Returns this device's value of the copy, once the copy is done.

        The bytes are staged through host memory: ``src``'s device downloads them after its work
        so far on its queue 0 (and after ``after``, as ``download``'s), then this device uploads
        them on ``queue``.  A loss of either device fails the copy with its ``DeviceLost``."""
        self._check_loop()
        try:
            src_dev, n = check_buffer_copy(dst, src, nbytes, self)
        except ArigValueError:
            self._check_usable()  # this device stopped (or lost): refused for that, as any new work
            raise
        if self._tl.cause is not None or self._stopping:
            self._check_usable()
        staging = np.empty(n, np.uint8)
        await src_dev.download(src, staging, after=after)
        return await self.upload(dst, staging, queue=queue)

    async def load(self, image: bytes) -> Image:
        """Load an image (cubin, PTX or fatbin on CUDA); ``image.function(name)`` is a kernel."""
        self._check_loop()
        return await self._control(self._backend.load, check_image(image))

    # -- stopping ----------------------------------------------------------------
    async def stop(self) -> None:
        """Stop: refuse new work, let submitted work finish (bounded), release everything.

        Every buffer and image of the device is closed then (their memory is
        the backend's to free): using one afterwards raises ``ArigValueError``,
        but new work on this device itself raises ``DeviceStopped`` (as any
        work submitted after the stop does), whatever it names.
        Idempotent; concurrent callers all wait for the one stop.  Past the
        stop timeout the device is lost and released anyway: the whole stop
        takes at most ``stop_timeout`` (and ``STOP_GRACE``).  A stop that waits
        for work longer than ``STOP_NOTICE`` says so, once, at WARNING.

        Once the device's own loop is closed, ``stop`` may be awaited on any
        loop: work not yet run is dropped, and the device's threads and driver
        are released (see ``_release_orphan``).
        """
        if self._port.closed:
            await self._release_orphan()
            return
        self._check_loop()
        if self._stop_task is None:
            self._stopping = True
            self._backend.begin_stop()
            self._st.wake_space()
            self._sub.wake_space()
            self._stop_task = self._port.spawn(self._stop())
        await self._port.shield(self._stop_task)

    async def _stop(self) -> None:
        tl, st, port = self._tl, self._st, self._port
        # One deadline for the whole stop: a fill that blocks the submit thread
        # also keeps it from ending, and must not cost the timeout twice.
        deadline = time.monotonic() + self._stop_timeout
        if tl.lost is None and tl.assigned > tl.reached:
            await self._finish_work()
        st.put_stop()
        try:
            await port.wait_for(st.finished(), max(deadline - time.monotonic(), min(STOP_GRACE, self._stop_timeout)))
            ended = True
        except TimeoutError:
            ended = False
        self._backend.detach()
        self._backend.ledger.end()  # the backend freed (or kept) the memory: no buffer or image of the device may be used
        if tl.lost is None and tl.assigned > tl.reached:
            tl.fail(DeviceStopped(f"device {self.name} stopped before value {tl.reached + 1} was reached"), logging.WARNING)
        tl.release_kept()
        if self._watch is not None:
            self._watch.cancel()
        self._on_close.cancel()
        self._finalizer.detach()
        if tl.cause is not None:
            forget_frames(tl.cause)  # dev.lost outlives the stop: it must not keep the fill's arg and the backend
        # Said last, once everything is released: a handler that raises cannot leave anything held.
        if not ended:
            _log.stop_slow(
                self.name,
                f"the submit thread did not end within the stop timeout ({self._stop_timeout} s): a fill still runs on it; "
                "it ends, and releases the device's driver, once that fill returns",
            )

    async def _finish_work(self) -> None:
        """Stop's wait for submitted work: at most ``stop_timeout``, then the device is lost.
        A wait past ``STOP_NOTICE`` is said once (a Ctrl-C would otherwise wait in silence)."""
        tl, timeout = self._tl, self._stop_timeout
        notice = self._port.call_later(STOP_NOTICE, _say_stop_waits, tl, self.name, timeout) if timeout > STOP_NOTICE else None
        try:
            await self._port.wait_for(tl.wait(tl.assigned), timeout)
        except TimeoutError:
            cause = DeviceHang(f"stop: work up to value {tl.assigned} did not finish within {timeout} s (reached {tl.reached})")
            tl.fail(cause, logging.WARNING)
        except ArigError:
            pass  # lost meanwhile: the waiters already know
        finally:
            if notice is not None:
                notice.cancel()

    async def _release_orphan(self) -> None:
        """``stop`` of a device whose loop is closed, awaited on another loop (or the same stop again).

        Nothing of the closed loop can run, so this is not the loop-side stop: the submit
        thread skips what is left and closes the backend, and a thread of its own waits for
        that and then drops what the backend registered with the loop (``_device_registry.release``).
        Pending values are never reached (their waiters were dropped with the loop).  Waits
        at most ``stop_timeout`` for the submit thread, as a stop does."""
        if not self._finalizer.alive:
            return  # released already: by a stop that finished, or an earlier call
        self._finalizer.detach()
        self._stopping = True
        port = port_of(running_loop())
        done = port.create_future()
        post = port.post
        _device_registry.release(self._st, lambda: post(settle, done, None))
        try:
            await port.wait_for(port.shield(done), self._stop_timeout)
        except TimeoutError:
            _log.stop_slow(self.name, f"its loop is closed, and the submit thread did not end within the stop timeout ({self._stop_timeout} s): a fill still runs on it; it ends, and releases the device's driver, once that fill returns")

    async def __aenter__(self) -> Device:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    def __repr__(self) -> str:
        state = "lost" if self._tl.lost else "stopped" if self._stopping else "open"
        return f"<arig.Device {self.name} {self.arch} {state} reached={self._tl.reached}/{self._tl.assigned}>"


def _say_stop_waits(tl: Timeline, name: str, timeout: float) -> None:
    if tl.lost is None and tl.assigned > tl.reached:
        _log.stop_waits(name, tl.reached + 1, tl.assigned, timeout)


def _forgetting(tl: Timeline, sub: Submitter) -> Callable[[], None]:
    """What a closed loop's hook does: drop the futures of tasks in ``wait`` and of tasks waiting for
    room (it holds the timeline and the submitter, never the device)."""

    def forget() -> None:
        tl.forget_waiters()
        sub.forget_space()

    return forget


async def open(opener: Opener, *, max_pending: int = DEFAULT_MAX_PENDING, stop_timeout: float = DEFAULT_STOP_TIMEOUT) -> Device:  # noqa: A001
    """Open the device ``opener`` makes (``arig.host.cpu()``, ``arig.cuda.gpu(i)``, ...).

    The driver work of the open runs on the device's own submit thread; a
    failure raises ``OpenError`` naming why.  ``max_pending`` bounds the
    submissions waiting for that thread; ``stop_timeout`` bounds ``stop``.
    """
    name = check_open(opener, max_pending, stop_timeout)
    loop = running_loop()
    port = port_of(loop)
    # Where the device was opened, for the report of one never stopped: in debug mode only, as
    # asyncio records where its own tasks and handles were made.
    source = traceback.extract_stack(sys._getframe(1)) if port.debug else None
    st = SubmitThread(loop, name, max_pending)
    try:
        backend = await st.start(opener.make)  # the future is shielded: a cancelled open leaves it to the thread
    except OpenError:
        raise
    except Exception as exc:  # noqa: BLE001 - every failure of an open is an OpenError
        raise OpenError(f"cannot open {name}: {describe(exc)}") from exc
    except BaseException:  # cancelled (asyncio's CancelledError, trio's Cancelled), or interrupted
        st.abandon_open()  # the thread closes the backend if make() succeeds
        raise
    try:
        tl = Timeline(loop, backend.name, len(backend.queue_handles))
        backend.bind(tl, st.post)
        dev = Device._make(st, backend, tl, float(stop_timeout), source)
    except BaseException as exc:
        try:
            backend.detach()  # whatever bind registered with the loop
        except Exception:  # noqa: BLE001 - a half-bound backend: the open's own failure is what to report
            pass
        st.put_stop()  # the thread waits for begin(): a stop instead closes the backend and ends it
        if isinstance(exc, OpenError) or not isinstance(exc, Exception):
            raise
        raise OpenError(f"cannot open {name}: {describe(exc)}") from exc
    st.begin(tl)
    return dev
