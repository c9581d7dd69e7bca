"""How a CUDA device's work is submitted and how its completion reaches the loop.

Two implementations of one job; ``arig._engine`` decides which a device gets
(:func:`open_completion`), and the backend holds that one object.  Both have
the same shape, so the backend never asks which one it holds:

* the loop side: ``submitter`` (who takes the items), ``attach``, ``abort``,
  ``detach``, ``add_join_lane``, and the item of each kind of fill
  (``graph_item``, ``cfill_item``, ``copy_item``, ``python_item``,
  ``mark_item``, ``join_item``).  A ``Launch`` is the exception: its item is
  the core record it carries, on either engine (the pure one runs that
  record in Python), so that the hottest submission costs no engine call;
* the submit thread: ``call_fill``, ``mark``, ``signal``, ``stop_thread``,
  ``stats`` and ``close``.

``CudaNativeCompletion`` (the native core, ``arig/_native/core.c``; its loop side is
``arig._native.completion``, shared with the NV device)
    The loop pushes launches, graph launches, C fills and copies into the
    core's ring; the core's own thread runs them without the GIL, has the GPU
    write each burst's last value into the lane's word (or, without stream
    memory operations, a host function write it), watches the words, and
    writes the device's eventfd while the loop is armed.  Python fills keep
    their place in the ring: the core stops at them and opens a gate for the
    device's Python submit thread (``py_begin``/``py_end``).

``PureCompletion`` (the pure engine: ``ARIG_PURE=1``, or no native core)
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

Threads: ``attach``, ``detach``, ``on_wake``, ``put``, ``abort`` and the
``*_item`` methods run on the event loop and call no libcuda function;
``call_fill``, ``mark``, ``signal`` and ``close`` run on the Python submit
thread.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections import deque
from ctypes import byref, c_int
from typing import Any, Protocol


from .._memory import never_free
from .. import _native
from .._engine import NATIVE, PURE, Engine, no_fill
from .._native import CFILL, GRAPH, JOIN, MARK, PY, LaunchRecord
from .._native.completion import IDLE_SPIN_NS, NativeCompletion
from .._libc import SEM_POST, Timespec, name_thread, new_semaphore, sem_destroy, sem_post, sem_timedwait
from .._backend import fill_result
from ._items import Copy, _CFill, _graph_fill
from ._lib import FILL, CudaError, check, lib

__all__ = ["CudaNativeCompletion", "PureCompletion", "Completion", "open_completion", "FAULT_POLL"]

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


class JoinSpec(Protocol):
    """A join (``cuda._device._Join``): make the join lane wait for ``stream``'s work so far
    (``record``: an event recorded on it now, kept in ``slot``) or for the event ``slot`` holds."""

    stream: int
    slot: ctypes.c_void_p
    record: bool

    def __call__(self, lane: int, arg: Any, v: int) -> Any: ...


class CudaNativeCompletion(NativeCompletion):
    """The native core under a CUDA device (see the module docstring): items are the core's
    records, run by its thread; a Python fill waits at its place in the ring."""

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

    # -- loop thread: who takes items, and what each fill becomes -----------------------
    def submitter(self, submit_thread: Any) -> Any:
        return self  # the core's ring; Python fills reach the submit thread through put

    def graph_item(self, graph: Any) -> tuple[Any, ...]:
        return (GRAPH, graph.handle, 0, 0)

    def cfill_item(self, address: int, arg: int) -> tuple[Any, ...]:
        return (CFILL, address, arg, 0)

    def copy_item(self, copy: Copy) -> tuple[Any, ...]:
        return (copy.kind, copy.a, copy.b, copy.c)

    def python_item(self, fill: Any, arg: Any) -> tuple[Any, ...]:
        return (PY, fill, arg)

    def mark_item(self) -> tuple[Any, ...]:
        return _MARK

    def join_item(self, join: JoinSpec) -> tuple[Any, ...]:
        self.add_join_lane()  # a join means the join lane's progress matters from now on
        return (JOIN, join.stream, ctypes.addressof(join.slot), 1 if join.record else 0)


_MARK = (MARK, 0, 0, 0)


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
    """Python threads: the submit thread runs every fill and signals, one waiter thread per
    lane reports.  Items are ``(callable, arg)`` pairs for the submit thread."""

    name = PURE

    def __init__(self, owner: Any, ctx: int, streams: list[int], words: int, word_dev: int, memops: bool, spin_us: int) -> None:
        self._ctx = ctx
        self._memops = memops
        self._lanes = [_PureLane(owner, q, s, words + 8 * q, word_dev + 8 * q, memops) for q, s in enumerate(streams)]
        self.open = True

    @property
    def description(self) -> str:
        return "pure Python: " + ("GPU-written word, " if self._memops else "") + "sem_post host function and a waiter thread"

    # -- loop thread ---------------------------------------------------------------
    def attach(self, loop: Any, limit: int) -> None:
        for lane in self._lanes:
            lane.start(self._ctx)

    def abort(self) -> None:
        pass

    def detach(self) -> None:
        pass

    def add_join_lane(self) -> None:
        pass  # every lane has its waiter thread from the start

    def submitter(self, submit_thread: Any) -> Any:
        return submit_thread  # it runs every fill

    def graph_item(self, graph: Any) -> tuple[Any, ...]:
        return (_graph_fill, graph)

    def cfill_item(self, address: int, arg: int) -> tuple[Any, ...]:
        return (_CFill(FILL(address)), arg)

    def copy_item(self, copy: Copy) -> tuple[Any, ...]:
        return (copy, None)

    def python_item(self, fill: Any, arg: Any) -> tuple[Any, ...]:
        return (fill, arg)

    def mark_item(self) -> tuple[Any, ...]:
        return _NO_FILL

    def join_item(self, join: JoinSpec) -> tuple[Any, ...]:
        return (join, None)

    # -- the submit thread -----------------------------------------------------------
    def call_fill(self, stream: int, fill: Any, arg: Any, v: int) -> None:
        t = type(fill)
        if t is int:  # a Launch's core record: (LAUNCH, its address), as the native core is handed it
            _fill_result(_launch_record(stream, arg), v)
        elif t is _CFill:  # called through ctypes without the GIL; its result is a CUresult
            rc = fill.fn(stream, arg, v)
            if rc:
                raise CudaError.of(rc, f"C fill of value {v}")
        else:
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



_NO_FILL = (no_fill, None)


def _launch_record(stream: int, address: int) -> int:
    """Launch the kernel a ``LaunchRecord`` at ``address`` describes, as the native core would
    (its owner, the ``Launch``, is held by the device until the value is reached)."""
    rec = LaunchRecord.from_address(address)
    g, b = rec.grid, rec.block
    return int(lib.cuLaunchKernel(rec.func, g[0], g[1], g[2], b[0], b[1], b[2], rec.shared, stream, None, rec.extra))

#: The object of one job per engine ``arig._engine`` names.
Completion = CudaNativeCompletion | PureCompletion
_KINDS: dict[str, type[CudaNativeCompletion] | type[PureCompletion]] = {NATIVE: CudaNativeCompletion, PURE: PureCompletion}


def open_completion(engine: Engine, owner: Any, ctx: int, streams: list[int], words: int, word_dev: int, memops: bool, spin_us: int) -> Completion:
    """The completion object of ``engine`` for a CUDA device's lanes (submit thread, at open)."""
    return _KINDS[engine.name](owner, ctx, streams, words, word_dev, memops, spin_us)
