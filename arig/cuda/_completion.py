"""How a CUDA device's work is submitted and how its completion reaches the loop.

Two implementations of one job, chosen at open:

``NativeCompletion`` (the native core, ``arig/_native/core.c``; its loop side is
``arig._native.completion``, shared with the NV device)
    The loop pushes launches, graph launches, C fills and copies into the
    core's ring; the core's own thread runs them without the GIL, has the GPU
    write each burst's last value into the lane's word (or, without stream
    memory operations, a host function write it), watches the words, and
    writes the device's eventfd while the loop is armed.  Python fills keep
    their place in the ring: the core stops at them and opens a gate for the
    device's Python submit thread (``py_begin``/``py_end``).

``PureCompletion`` (no native core: ``ARIG_PURE=1`` or no C compiler)
    The Python submit thread runs every fill; after each fill it has the
    GPU write the lane's word (where stream memory operations exist; without
    them, each fill gets its own host function, so that a burst of long work
    shows progress), and after each burst it enqueues libc's ``sem_post`` as
    a host function (GIL-free).  One waiter
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
import threading
import time
from collections import deque
from ctypes import byref, c_int
from typing import Any


from .._memory import never_free
from .. import _native
from .._native import completion as _completion
from .._native.completion import IDLE_SPIN_NS
from .._libc import SEM_POST, Timespec, name_thread, new_semaphore, sem_destroy, sem_post, sem_timedwait
from .._backend import fill_result
from ._lib import CudaError, check, lib

__all__ = ["NativeCompletion", "PureCompletion", "FAULT_POLL"]

#: Seconds without progress, while work is outstanding, before the driver is asked for a fault.
FAULT_POLL = 0.02
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


class NativeCompletion(_completion.NativeCompletion):
    """The native core under a CUDA device (see the module docstring)."""

    def __init__(self, owner: Any, ctx: int, streams: list[int], words: int, word_dev: int, memops: bool, spin_us: int) -> None:
        n = len(streams)

        def make(efd: int) -> _native.Core:
            return _native.Core(
                driver_table(memops), ctx, streams, [words + 8 * q for q in range(n)], [word_dev + 8 * q for q in range(n)],
                memops, efd, spin_ns=spin_us * 1000, idle_ns=IDLE_SPIN_NS if spin_us else 0,
            )  # fmt: skip

        self._start(owner, n, memops, make, join=True)

    @property
    def description(self) -> str:
        return "native core: " + ("GPU-written word, " if self._memops else "host-function-written word, ") + "bounded spin, host-function backstop, eventfd"

    def _error(self, code: int, lane: int, v: int) -> BaseException:
        """The exception of the failure the core found (its code, lane and value)."""
        where = f"queue {lane}" if lane < self._n - 1 else "the join lane (adopted streams, awaited events)"
        return CudaError.of(code, f"work on {where} of {self._owner.name}, value {v} or earlier (found by the native core)")

    def _fill_result(self, r: Any, v: int) -> None:
        _fill_result(r, v)


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
        # Without stream memory operations, each fill's own host function tells it.
        if self.memops:
            check(lib.cuStreamWriteValue64_v2(self.stream, self.word_dev, v, 0), "cuStreamWriteValue64")
        else:
            self.signal(v)

    def signal(self, v: int) -> None:
        if v == self.signalled:
            return  # its host function is enqueued already (mark)
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
            never_free(self._lanes)  # a host function may still post their semaphores
        else:
            for lane in self._lanes:
                sem_destroy(lane.sem)
        self._lanes = []

