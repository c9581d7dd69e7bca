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
* the submit thread: ``call_fill``, ``lanes``, ``stop_thread``, ``stats``
  and ``close``.

``CudaNativeCompletion`` (the native core, ``arig/_native/core.c``; its loop side is
``arig._native.completion``, shared with the NV device)
    The loop pushes launches, graph launches, C fills and copies into the
    core's ring; the core's own thread runs them without the GIL, has the GPU
    write each burst's last value into the lane's word (or, without stream
    memory operations, a host function write it), watches the words, and
    writes the device's eventfd while the loop is armed.  Python fills keep
    their place in the ring: the core stops at them and opens a gate for the
    device's Python submit thread (``py_begin``/``py_end``).

``PureCompletion`` (the pure engine, ``arig._pure``: ``ARIG_PURE=1``, or no native core)
    The Python submit thread runs every fill; the engine decides when to
    note and signal, and these lanes say how: a note has the GPU write the
    lane's word (where stream memory operations exist; without them, each
    fill gets its own host function, so that a burst of long work shows
    progress), a signal enqueues libc's ``sem_post`` as a host function
    (GIL-free).  One watcher thread per lane (``arig._pure.Watcher``) sleeps
    in ``sem_timedwait`` and reports.  Without stream memory operations the
    values signalled are kept in order, and each post of the host function,
    never anything else, reaches the next one.

Either way a value is reached only once the GPU ran every work before it:
the GPU's own write, or a host function that the stream runs after that
work.  No wake-up, timeout or poll is ever taken for a completion.

Threads: ``attach``, ``detach``, ``on_wake``, ``put``, ``abort`` and the
``*_item`` methods run on the event loop and call no libcuda function;
``call_fill``, the lanes' ``note`` and ``signal``, and ``close`` run on the
Python submit thread.
"""

from __future__ import annotations

import ctypes
import time
from collections import deque
from ctypes import byref, c_int
from typing import Any, NamedTuple, Protocol


from .._memory import never_free
from .. import _env, _native
from .._engine import NATIVE, PURE, Engine, no_fill
from .._pure import FAULT_POLL, Watcher
from .._native import CFILL, GRAPH, JOIN, MARK, PY, LaunchRecord
from .._native.completion import IDLE_SPIN_NS, NativeCompletion
from .._libc import SEM_POST, Timespec, name_thread, new_semaphore, sem_destroy, sem_post, sem_timedwait
from .._backend import fill_result
from ._items import Copy, _CFill, _graph_fill
from ._lib import FILL, CudaError, check, lib

__all__ = ["CudaNativeCompletion", "PureCompletion", "Completion", "open_completion", "FAULT_POLL"]

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


#: The stamp kernel's CUfunction, then its pairs' and calibration's host and device addresses.
Stamps = tuple[int, int, int, int, int]


class JoinSpec(Protocol):
    """A join (``cuda._device._Join``): make the join lane wait for ``stream``'s work so far
    (``record``: an event recorded on it now, kept in ``slot``) or for the event ``slot`` holds."""

    stream: int
    slot: ctypes.c_void_p
    record: bool

    def __call__(self, lane: int, arg: Any, v: int) -> Any: ...


#: ``ARIG_CUDA_BACKSTOP=poll``'s nap, without ``:us``.
POLL_NS = 500_000


class Watch(NamedTuple):
    """How the native core watches long CUDA work (``ARIG_CUDA_BACKSTOP``)."""

    waiter: bool  # backstops are blocking-sync events a waiter thread sits on (else host functions)
    early: bool  # a backstop is asked for before each long sleep (else only when a spin gives up)
    poll_ns: int  # the long sleep's first stage in naps of at most this (0: one sleep)


def _backstop_of(how: str) -> Watch:
    """``ARIG_CUDA_BACKSTOP``'s value as a ``Watch``; a clear error otherwise."""
    if how == "event":
        return Watch(True, True, 0)
    if how == "early":
        return Watch(False, True, 0)
    name, colon, us = how.partition(":")
    if name == "poll" and (not colon or us.isdigit() and int(us) > 0):
        return Watch(False, False, int(us) * 1000 if us else POLL_NS)
    raise ValueError(f"ARIG_CUDA_BACKSTOP={how!r}: say event, early, poll or poll:<microseconds>")


class CudaNativeCompletion(NativeCompletion):
    """The native core under a CUDA device (see the module docstring): items are the core's
    records, run by its thread; a Python fill waits at its place in the ring."""

    def __init__(self, owner: Any, ctx: int, streams: list[int], words: int, word_dev: int, memops: bool, spin_us: int,
                 stamps: Stamps | None = None) -> None:  # fmt: skip
        n = len(streams)
        self.stamped = self.waiter = False

        def make(efd: int) -> _native.Core:
            core = _native.Core(
                driver_table(memops), ctx, streams, [words + 8 * q for q in range(n)], [word_dev + 8 * q for q in range(n)],
                memops, efd, spin_ns=spin_us * 1000, idle_ns=IDLE_SPIN_NS if spin_us else 0,
            )  # fmt: skip
            self.stamped = stamps is not None and memops and core.cuda_stamps(*stamps)
            watch = _backstop_of(_env.CUDA_BACKSTOP)
            self.waiter = watch.waiter and memops and core.cuda_waiter()
            core.tune(watch.early, watch.poll_ns)
            return core

        self._start(owner, n, memops, make, join=True)

    @property
    def description(self) -> str:
        word = ("GPU-written word" + (" (long work's with the GPU's time), " if self.stamped else ", ")) if self._memops else "host-function-written word, "
        backstop = "blocking-event backstop" if self.waiter else "host-function backstop"
        return "native core: " + word + f"bounded spin, {backstop}, eventfd"

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
        return (PY, fill, arg, 0)

    def gated_item(self, fill: Any, arg: Any) -> tuple[Any, ...]:
        """A Python fill whose work waits on the GPU for a gate: the core runs it behind a gate of
        its own (fills next to it wait), its lane signalled up to the value before it first."""
        return (PY, fill, arg, 1)

    def mark_item(self) -> tuple[Any, ...]:
        return _MARK

    def join_item(self, join: JoinSpec) -> tuple[Any, ...]:
        self.add_join_lane()  # a join means the join lane's progress matters from now on
        return (JOIN, join.stream, ctypes.addressof(join.slot), 1 if join.record else 0)


_MARK = (MARK, 0, 0, 0)


class _PureLane:
    """One CUDA lane of the pure engine (``arig._pure``): its stream, its word and its semaphore.

    A ``Lane`` for the submit thread (``note``, ``signal``) and a ``Watched`` lane for its watcher
    thread (``thread_start``, ``wait``, ``reached``, ``check_fault``; ``halt`` from any thread).
    """

    def __init__(self, owner: Any, qi: int, stream: int, word: int, word_dev: int, memops: bool, ctx: int) -> None:
        self.owner, self.qi, self.stream, self.word_dev, self.memops, self.ctx = owner, qi, stream, word_dev, memops, ctx
        self.word = ctypes.c_uint64.from_address(word)
        self.sem = new_semaphore()
        self._sem_at = ctypes.addressof(self.sem)
        self.signalled = 0  # submit thread: last value signalled
        self.notes = True  # a note is what shows progress between host functions
        self.values: deque[int] = deque()  # without memops: values in host-function order
        self._ts = Timespec()  # the watcher's deadline

    # -- the submit thread -----------------------------------------------------------
    def note(self, v: int) -> None:
        # The GPU writes v once the item's work is done: progress shows between
        # host functions (the watcher reads it, and so the hang watchdog).
        # Without stream memory operations, each item's own host function tells it.
        if self.memops:
            check(lib.cuStreamWriteValue64_v2(self.stream, self.word_dev, v, 0), "cuStreamWriteValue64")
        else:
            self.signal(v)

    def signal(self, v: int) -> None:
        if v == self.signalled:
            return  # its host function is enqueued already (note)
        if not self.memops:
            self.values.append(v)  # before the host function exists: its post finds it
        rc = lib.cuLaunchHostFunc(self.stream, SEM_POST, self._sem_at)
        if rc:
            if not self.memops:
                self.values.pop()
            raise CudaError.of(rc, "cuLaunchHostFunc")
        self.signalled = v

    # -- the watcher thread ----------------------------------------------------------
    def thread_start(self) -> None:
        name_thread(f"arig-wait-{self.qi}")
        lib.cuCtxSetCurrent(self.ctx)
        mode = c_int(2)  # CU_STREAM_CAPTURE_MODE_RELAXED: its cuStreamQuery must not break users' captures
        if lib.has("cuThreadExchangeStreamCaptureMode"):
            lib.cuThreadExchangeStreamCaptureMode(byref(mode))

    def wait(self, timeout: float) -> bool:
        ts = self._ts
        deadline = time.time() + timeout
        ts.tv_sec = int(deadline)
        ts.tv_nsec = int((deadline - ts.tv_sec) * 1e9)
        return bool(sem_timedwait(self._sem_at, byref(ts)) == 0)

    def reached(self, posted: bool) -> int:
        if self.memops:
            return self.word.value  # written by the GPU only
        if posted and self.values:
            return self.values.popleft()  # this post is the host function's, after the value's work
        return 0

    def check_fault(self) -> BaseException | None:
        rc = lib.cuStreamQuery(self.stream)
        if rc in (0, CUDA_ERROR_NOT_READY):
            return None
        return CudaError.of(rc, f"work on queue {self.qi} of {self.owner.name} (found by cuStreamQuery)")

    def halt(self) -> None:
        sem_post(self.sem)


class PureCompletion:
    """The pure engine on a CUDA device: the submit thread runs every item (``arig._pure.Bursts``
    over these lanes), one watcher thread per lane reports.  Items are ``(callable, arg)`` pairs."""

    name = PURE

    def __init__(self, owner: Any, ctx: int, streams: list[int], words: int, word_dev: int, memops: bool, spin_us: int,
                 stamps: Stamps | None = None) -> None:  # fmt: skip
        self._owner = owner  # stamps: the native core's only (Python sees no word early enough to use them)
        self._memops = memops
        self._lanes = [_PureLane(owner, q, s, words + 8 * q, word_dev + 8 * q, memops, ctx) for q, s in enumerate(streams)]
        self._watchers: list[Watcher] = []
        self.open = True

    @property
    def description(self) -> str:
        return "pure Python: " + ("GPU-written word, " if self._memops else "") + "sem_post host function and a waiter thread"

    # -- loop thread ---------------------------------------------------------------
    def attach(self, loop: Any, limit: int) -> None:
        tl, name = self._owner.timeline, self._owner.name
        for lane in self._lanes:
            w = Watcher(lane, f"arig-cuda-wait-{name}-{lane.qi}", tl.report, tl.fail_threadsafe)
            self._watchers.append(w)  # before it starts: stop_thread ends every one that did
            w.start()

    def abort(self) -> None:
        pass

    def detach(self) -> None:
        pass

    def add_join_lane(self) -> None:
        pass  # every lane has its watcher thread from the start

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

    def gated_item(self, fill: Any, arg: Any) -> tuple[Any, ...]:
        return (fill, arg)  # every fill runs alone on the submit thread

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

    def lanes(self) -> list[_PureLane]:
        return self._lanes

    def stop_thread(self) -> None:
        for w in self._watchers:
            w.stop()
        self._watchers = []

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


def open_completion(engine: Engine, owner: Any, ctx: int, streams: list[int], words: int, word_dev: int, memops: bool, spin_us: int,
                    stamps: Stamps | None = None) -> Completion:  # fmt: skip
    """The completion object of ``engine`` for a CUDA device's lanes (submit thread, at open);
    ``stamps``: the stamp kernel and its memory (``_native.Core.cuda_stamps``' arguments)."""
    return _KINDS[engine.name](owner, ctx, streams, words, word_dev, memops, spin_us, stamps)
