"""How a CUDA device's work is submitted and how its completion reaches the loop.

Two implementations of one job, chosen at open:

``NativeCompletion`` (the native core, ``arig/_native/core.c``)
    The loop pushes launches, graph launches, C fills and copies into the
    core's ring; the core's own thread runs them without the GIL, has the GPU
    write each burst's last value into the lane's word (or, without stream
    memory operations, a host function write it), watches the words, and
    writes the device's eventfd while the loop is armed.  Python fills keep
    their place in the ring: the core stops at them and opens a gate for the
    device's Python submit thread (``py_begin``/``py_end``).

``PureCompletion`` (no native core: ``ARIG_PURE=1`` or no C compiler)
    The Python submit thread runs every fill; after each burst it has the
    GPU write the lane's word (where stream memory operations exist) and
    enqueues libc's ``sem_post`` as a host function (GIL-free).  One waiter
    thread per lane sleeps in ``sem_timedwait`` and reports.  Without stream
    memory operations the values signalled are kept in order, and each post
    of the host function, never anything else, reaches the next one.

Either way a value is reached only once the GPU ran every work before it:
the GPU's own write, or a host function that the stream runs after that
work.  No wake-up, timeout or poll is ever taken for a completion.

Threads: ``bind``, ``detach``, ``on_wake``, ``push`` and ``abort`` run on the
event loop and call no libcuda function; ``call_fill``, ``mark``,
``signal`` and ``close`` run on the Python submit thread.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections import deque
from ctypes import byref, c_int
from typing import Any


from .. import _native
from .._libc import SEM_POST, Timespec, name_thread, new_semaphore, sem_destroy, sem_post, sem_timedwait
from .._loop import selector_of
from ..device import fill_result
from ._lib import CudaError, check, lib

__all__ = ["NativeCompletion", "PureCompletion", "FAULT_POLL"]

#: Seconds without progress, while work is outstanding, before the driver is asked for a fault.
FAULT_POLL = 0.02
#: How long the native thread waits, spinning, for the next submission once nothing is in flight, at
#: least: a task that awaited a completion usually submits again within this, and then needs no
#: wake-up.  The core lengthens it (to 150 us at most) where the next submission usually comes later.
IDLE_SPIN_NS = 50_000
CUDA_ERROR_NOT_READY = 600


def _cuda_error(code: int, v: int) -> BaseException:
    return CudaError.of(code, f"fill of value {v}")


def _fill_result(rc: Any, v: int) -> None:
    """Raise for a Python fill's result that is not success (None, 0 or a CUresult; numpy ints too)."""
    if rc is not None:
        fill_result(rc, v, _cuda_error, "a CUresult")

def driver_table(memops: bool) -> _native.CudaTable:
    """The libcuda functions the native thread calls, from whatever ``lib`` is (libcuda or a fake)."""
    table = _native.CudaTable()
    optional = {"exchange_capture_mode"} | (set() if memops else {"write_value64"})
    for field, symbol in _native.CudaTable.SYMBOLS.items():
        addr = lib.address(symbol)
        if addr is None and field not in optional:
            raise CudaError(500, f"libcuda has no {symbol}")
        setattr(table, field, addr)
    return table


class NativeCompletion:
    """The native core under a CUDA device (see the module docstring)."""

    name = "native"

    def __init__(self, owner: Any, ctx: int, streams: list[int], words: int, word_dev: int, memops: bool, spin_us: int) -> None:
        n = len(streams)

        def make(efd: int) -> _native.Core:
            return _native.Core(
                driver_table(memops), ctx, streams, [words + 8 * q for q in range(n)], [word_dev + 8 * q for q in range(n)],
                memops, efd, spin_ns=spin_us * 1000, idle_ns=IDLE_SPIN_NS if spin_us else 0,
            )  # fmt: skip

        self._start(owner, n, memops, make, join=True)

    def _start(self, owner: Any, n: int, memops: bool, make: Any, join: bool) -> None:
        """Make and start the core (``make(eventfd)``); ``join``: its last lane is the join lane."""
        self._owner = owner  # the backend: its name, timeline and submit thread
        self._n = n
        self._memops = memops
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.core: _native.Core | None = None
        self._reader = False
        self._efd_free = False
        try:
            self.core = make(self._efd)
            self.core.start()
        except BaseException:
            self.close(idle=True)
            raise
        core = self.core
        self._ptr = core.ptr
        self._push = core.push_fn
        self._arm = core._arm
        self._tail = core.tail
        self._fault = core.fault_word
        lanes = list(zip(range(self._n), core.words if memops else [None] * self._n, core.hwords, core.time_values, core.times))
        # The last lane is the join lane: read once something was joined there (add_join_lane).
        self._lanes = lanes[:-1] if join else lanes
        self._join: tuple[Any, ...] | None = lanes[-1] if join else None
        self._pushed = 0  # items pushed (the ring's head, as the loop counts it)
        self._loop: Any = None
        self._selector: Any = None
        self._space: list[Any] = []  # futures of submits waiting for room
        self._limit = core.cap
        self._lost_told = False

    @property
    def open(self) -> bool:
        return self.core is not None

    @property
    def description(self) -> str:
        return "native core: " + ("GPU-written word, " if self._memops else "host-function-written word, ") + "bounded spin, host-function backstop, eventfd"

    # -- loop thread ---------------------------------------------------------------
    def bind(self, loop: Any, limit: int) -> None:
        self._loop = loop
        self._limit = min(limit, self.core.cap if self.core else limit)
        loop.add_reader(self._efd, self.on_wake)
        self._reader = True
        self._selector = selector_of(loop)
        if self._selector is not None:
            self._selector.watch(self)

    def add_join_lane(self) -> None:
        """Loop thread: deliver the join lane's progress too (its timeline lane exists now)."""
        if self._join is not None:
            self._lanes.append(self._join)
            self._join = None

    def full(self) -> bool:
        return self._pushed - self._tail.value >= self._limit

    async def wait_space(self, check: Any) -> None:
        while self.full():
            check()
            fut = self._loop.create_future()  # one per waiter: cancelling one cancels no other
            self._space.append(fut)
            assert self.core is not None
            self.core.want_space()
            if not self.full():  # re-check after announcing: the core kicks only after it
                break
            await fut

    def wake_space(self) -> None:
        waiters, self._space = self._space, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def put(self, qi: int, item: tuple[Any, ...], v: int) -> None:
        """Loop thread: hand a prepared item to the core (a Python fill also to the submit thread)."""
        kind = item[0]
        if kind == _native.PY:
            self._owner.submit_thread.put_fill(qi, item[1], item[2], v)
            rc = self._push(self._ptr, kind | qi << 8, v, 0, 0, 0)
        else:
            rc = self._push(self._ptr, kind | qi << 8, v, item[1], item[2], item[3])
        if rc:  # the ring is full: full() bounds submissions below its size
            raise RuntimeError("arig: the native ring overflowed")
        self._pushed += 1

    def on_wake(self) -> None:
        """The eventfd is readable: re-arm, then read every lane and resolve in one batch."""
        try:
            os.read(self._efd, 8)
        except (BlockingIOError, OSError):
            pass
        if self.core is not None:
            self._arm(self._ptr)
            self.deliver()

    def deliver(self) -> None:
        """Loop thread: report every lane's progress (one batch), then any fault."""
        tl = self._owner.timeline
        seen = self.core.seen if self.core is not None else None
        if seen is None:
            return
        for q, word, hword, tv, t in self._lanes:
            v = hword.value
            if word is not None:
                w = word.value
                if w > v:
                    v = w
            if v > seen[q]:
                seen[q] = v
                # The core's time of this value (read after the value it is of: it is
                # written first), or now where the loop read the word before the core did.
                stamped = tv.value >= v
                ns = t.value if stamped else self._release_time(q)
                tl.report_local(q, v, ns * 1e-9 if ns else None)
        if self._fault.value and not self._lost_told:
            self._fault_found()
        if self._space and not self.full():
            self.wake_space()

    def _fault_found(self) -> None:
        assert self.core is not None
        f = self.core.fault()
        if f is None:
            return
        self._lost_told = True
        code, lane, v = f
        tl = self._owner.timeline
        if code not in (_native.PY_FAILED, -2) and tl.lost is None:  # Python reported its own error, or the loop lost it
            tl.fail(self._error(code, lane, v))

    def _release_time(self, lane: int) -> int:
        """CLOCK_MONOTONIC ns of a lane's completion the core has not stamped yet (0: unknown: now)."""
        return 0

    def _error(self, code: int, lane: int, v: int) -> BaseException:
        """The exception of the failure the core found (its code, lane and value)."""
        where = f"queue {lane}" if lane < self._n - 1 else "the join lane (adopted streams, awaited events)"
        return CudaError.of(code, f"work on {where} of {self._owner.name}, value {v} or earlier (found by the native core)")

    def abort(self) -> None:
        """The device is lost (loop thread): the core runs nothing more."""
        if self.core is not None:
            self._lost_told = True
            self.core.abort()

    # -- the low-latency loop's selector (loop thread) ------------------------------------
    def spin_due(self, now_ns: int, window_ns: int) -> bool:
        """Is a waiter pending and a completion predicted within ``window_ns``?"""
        if self.core is None or not self._owner.timeline.waiting:
            return False
        due = self.core.due()  # 0: nothing predicted yet (just submitted); the spin ends once it is, if past the window
        return due - now_ns < window_ns

    def spin(self, ns: int) -> bool:
        return self.core is not None and self.core.loop_spin(ns)

    def deliver_spun(self) -> None:
        if self.core is not None:
            self.core.arm()  # the spin left the loop disarmed
            self.deliver()

    def detach(self) -> None:
        if self._selector is not None:
            self._selector.unwatch(self)
            self._selector = None
        if self._reader:
            try:
                self._loop.remove_reader(self._efd)
            except (RuntimeError, ValueError):  # the loop is closed
                pass
            self._reader = False
        if self._efd_free and self._efd >= 0:
            os.close(self._efd)
            self._efd = -1

    # -- the Python submit thread ---------------------------------------------------------
    def call_fill(self, stream: int, fill: Any, arg: Any, v: int) -> None:
        core = self.core
        assert core is not None
        if not core.py_begin(v):
            return  # lost or stopping: the core skipped this value
        try:
            _fill_result(fill(stream, arg, v), v)
        except BaseException:
            core.py_end(v, _native.PY_FAILED)
            raise
        core.py_end(v, 0)

    def mark(self, qi: int, v: int) -> None:
        pass  # the core signals

    def signal(self, qi: int, v: int) -> None:
        pass

    def stop_thread(self) -> None:
        """Stop the native thread (submit thread, at close): nothing is launched after this."""
        if self.core is not None:
            self.core.stop()

    def stats(self) -> dict[str, int]:
        return self.core.stats() if self.core is not None else {}

    def close(self, idle: bool) -> None:
        """Free the core and the eventfd, or keep them forever where a host
        function may still run (``idle`` False: a stream still has work)."""
        core, self.core = self.core, None
        if core is not None:
            core.stop()
            if idle:
                core.destroy()
            else:
                _ORPHANS.append(core)
        if not idle:
            _ORPHANS.append(self._efd)  # a host function may still write it: never reused
        elif not self._reader and self._efd >= 0:
            os.close(self._efd)
            self._efd = -1
        else:
            self._efd_free = True  # closed by detach, once the loop no longer reads it
        loop = self._loop
        if self._reader and loop is not None and not loop.is_closed():
            # A device never stopped (collected) is closed without Device.stop's detach:
            # the loop drops the reader itself.  Harmless twice: detach is idempotent.
            try:
                loop.call_soon_threadsafe(self.detach)
            except RuntimeError:  # the loop closed meanwhile
                pass


class _PureLane:
    """One queue of the pure path: its stream, its word, its semaphore and its waiter thread.

    The submit thread calls ``mark`` and ``signal``; the waiter thread runs ``run``.
    """

    def __init__(self, owner: Any, qi: int, stream: int, word: int, word_dev: int, memops: bool) -> None:
        self.owner, self.qi, self.stream, self.word_dev, self.memops = owner, qi, stream, word_dev, memops
        self.word = ctypes.c_uint64.from_address(word)
        self.sem = new_semaphore()
        self.signalled = 0  # submit thread: last value signalled
        self.seen = 0  # waiter: last value reported
        self.values: deque[int] = deque()  # without memops: values in host-function order
        self.closing = False
        self.thread: threading.Thread | None = None

    # -- the submit thread -----------------------------------------------------------
    def mark(self, v: int) -> None:
        # The GPU writes v once the fill's work is done: progress shows between
        # host functions (the waiter's poll reads it, and so the hang watchdog).
        if self.memops:
            check(lib.cuStreamWriteValue64_v2(self.stream, self.word_dev, v, 0), "cuStreamWriteValue64")

    def signal(self, v: int) -> None:
        if not self.memops:
            self.values.append(v)  # before the host function exists: its post finds it
        rc = lib.cuLaunchHostFunc(self.stream, SEM_POST, ctypes.addressof(self.sem))
        if rc:
            if not self.memops:
                self.values.pop()
            raise CudaError.of(rc, "cuLaunchHostFunc")
        self.signalled = v

    # -- the waiter thread ---------------------------------------------------------
    def start(self, ctx: int) -> None:
        self.thread = threading.Thread(target=self.run, args=(ctx,), name=f"arig-cuda-wait-{self.owner.name}-{self.qi}", daemon=True)
        self.thread.start()

    def run(self, ctx: int) -> None:
        name_thread(f"arig-wait-{self.qi}")
        lib.cuCtxSetCurrent(ctx)
        mode = c_int(2)  # CU_STREAM_CAPTURE_MODE_RELAXED: its cuStreamQuery must not break users' captures
        if lib.has("cuThreadExchangeStreamCaptureMode"):
            lib.cuThreadExchangeStreamCaptureMode(byref(mode))
        sem = ctypes.addressof(self.sem)
        ts = Timespec()
        tl = self.owner.timeline
        while True:
            # Always the short period: the submit thread never posts the semaphore itself (a
            # post is a completion, without stream memory operations), so new work is noticed here.
            deadline = time.time() + FAULT_POLL
            ts.tv_sec = int(deadline)
            ts.tv_nsec = int((deadline - ts.tv_sec) * 1e9)
            posted = sem_timedwait(sem, byref(ts)) == 0
            if self.closing:
                return
            v = 0
            if self.memops:
                v = self.word.value  # written by the GPU only
            elif posted and self.values:
                v = self.values.popleft()  # this post is the host function's, after v's work
            if v > self.seen:
                self.seen = v
                tl.report(self.qi, v)
            elif not posted and self.seen < self.signalled:
                rc = lib.cuStreamQuery(self.stream)
                if rc not in (0, CUDA_ERROR_NOT_READY):
                    tl.fail_threadsafe(CudaError.of(rc, f"work on queue {self.qi} of {self.owner.name} (found by cuStreamQuery)"))
                    return

    def stop(self) -> None:
        self.closing = True
        sem_post(self.sem)
        if self.thread is not None:
            self.thread.join(timeout=2.0)


class PureCompletion:
    """Python threads: the submit thread signals, one waiter thread per lane reports."""

    name = "pure"

    def __init__(self, owner: Any, ctx: int, streams: list[int], words: int, word_dev: int, memops: bool, spin_us: int) -> None:
        self._ctx = ctx
        self._memops = memops
        self._lanes = [_PureLane(owner, q, s, words + 8 * q, word_dev + 8 * q, memops) for q, s in enumerate(streams)]
        self.open = True

    @property
    def description(self) -> str:
        return "pure Python: " + ("GPU-written word, " if self._memops else "") + "sem_post host function and a waiter thread"

    # -- loop thread ---------------------------------------------------------------
    def bind(self, loop: Any, limit: int) -> None:
        for lane in self._lanes:
            lane.start(self._ctx)

    def abort(self) -> None:
        pass

    def detach(self) -> None:
        pass

    # -- the submit thread -----------------------------------------------------------
    def call_fill(self, stream: int, fill: Any, arg: Any, v: int) -> None:
        _fill_result(fill(stream, arg, v), v)

    def mark(self, qi: int, v: int) -> None:
        self._lanes[qi].mark(v)

    def signal(self, qi: int, v: int) -> None:
        self._lanes[qi].signal(v)

    def stop_thread(self) -> None:
        for lane in self._lanes:
            lane.stop()

    def stats(self) -> dict[str, int]:
        return {}

    def close(self, idle: bool) -> None:
        self.open = False
        if not idle:
            _ORPHANS.append(self._lanes)  # a host function may still post their semaphores
        else:
            for lane in self._lanes:
                sem_destroy(lane.sem)
        self._lanes = []


#: Cores, eventfds and semaphores of devices closed while their streams still had work:
#: a host function may still write them, so they are never freed.
_ORPHANS: list[Any] = []
