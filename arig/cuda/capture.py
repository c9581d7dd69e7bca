"""Stream capture: record a stream's work once, replay it with one call.

::

    begin_capture(stream)                        # work enqueued on stream is recorded, not run
    Launch(store, 1, 1, pack(buf, np.uint32(0), np.uint64(7)))(stream)
    template = end_capture(stream, keep=(image, buf))
    exe = instantiate(template)                  # the template may be destroyed from now on
    destroy(template)
    await dev.submit(lambda queue, exe, v: launch(exe, queue), exe)   # the whole sequence, one call

``stream`` is a CUstream as an int (what a CUDA fill receives as ``queue``),
an ``arig.Queue`` of a CUDA device, or an object with ``__cuda_stream__``.

Threads
    Every function here may be called from a fill (the device's submit
    thread) or from a worker thread, never from the event loop's thread: a
    CUDA call can block for tens of milliseconds (libcuda's lock while a graph
    instantiates, a full stream), which would stall the loop.  Called there,
    each raises ``OnEventLoop`` (a ``RuntimeError``) before touching libcuda.
    With ``GLOBAL`` or ``THREAD_LOCAL`` capture, CUDA wants ``end_capture`` on
    the thread that called ``begin_capture``.

Contexts
    Each call runs in the right CUDA context without help: begin/end_capture
    in the context of ``stream`` (``cuStreamGetCtx``), instantiate, launch
    and the destructors in the context the template was captured in.  When
    that context is not current on the calling thread it is made current for
    the call and the previous one restored, so a fill's current context is
    never left changed.  ``context=`` overrides that choice: a CUcontext int,
    a device's record (``dev.capability(arig.cuda_abi.KEY)``) or a CUDA
    ``arig.Device``.  The kernel launches you capture are your own CUDA
    calls: on a worker thread make the context current around them with
    ``with using(record):``.  Capture on a stream of your own
    (``cuStreamCreate``) rather than on a device queue, or begin and end
    the capture inside one fill: a device queue that stays in capture mode
    across fills would capture the device's own completion signals.

Lifetimes
    A ``Template`` holds the CUgraph, an ``Exec`` the CUgraphExec.  Neither
    knows which kernels, modules and buffers the captured work names, so
    ``end_capture(..., keep=...)`` and ``instantiate(..., keep=...)`` take
    them: the template keeps ``keep``; the exec keeps its template's ``keep``
    plus its own, so the template can be destroyed first.  Kernel parameters
    need no keeping: CUDA copies them when the launch is captured.  While a
    template or exec of a primary context is alive, its GPU's state (the
    GPU's one reclaimer, ``arig/cuda/_gpu.py``, which also owns the record's
    graphs and their modules) holds that context, so the handle stays valid
    after the device that made it stopped.  ``destroy``/``exec_destroy``
    release eagerly and are idempotent; otherwise a finalizer (holding only
    the handle) queues the destruction with the GPU's state, and the next
    call of this module from a thread that may call CUDA, ``reclaim()``, or
    the GPU's next open, load, unload or graph construction destroys it:
    the collector may run on the event loop's thread, inside a fill or while
    a lock is held, where a CUDA call must not be made.  A child of ``fork``
    destroys nothing inherited from its parent.

How ``launch`` keeps an exec alive until its work is done
    Each launch (with ``retain=True``, the default) enqueues, right after
    ``cuGraphLaunch``, a host function on the same stream that is libc's
    ``sem_post`` on a semaphore of that launch: no Python, no GIL, no lock, no
    CUDA call, which is all CUDA lets a host function do.
    The launch's (semaphore, exec) pair waits in a per-stream registry; every
    later call of this module (``launch`` included) reaps the pairs whose
    semaphore was posted (``sem_trywait``, not a CUDA call), oldest first.
    The registry's strong reference is what keeps a dropped exec, and the
    resources it keeps, alive: an exec referenced by a pending launch cannot
    be collected, so its finalizer cannot run.  ``exec_destroy`` on an exec
    with launches not yet seen complete marks it destroyed (later launches
    raise) and defers ``cuGraphExecDestroy`` until the last is reaped.
    Why not ``cuStreamQuery`` at the next launch, as first proposed: a
    stream that never idles would never release anything, a query on a
    capturing stream invalidates the capture, and under another thread's
    ``GLOBAL`` capture any query is a "potentially unsafe" call that fails
    and invalidates that capture.  The price is one host function per
    launch (a few microseconds of stream time); ``retain=False`` skips it
    for an exec the caller keeps alive itself (``dev.submit(..., keep=exe)``).
    A launch into a capture begun here is not tracked that way: the exec is
    added to the ``keep`` of the template that ``end_capture`` returns.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import enum
import functools
import os
import threading
import weakref
from collections.abc import Iterator
from ctypes import byref, c_int, c_void_p
from typing import Any

from .._memory import never_free
from .._errors import ArigError, ArigTypeError, ArigValueError
from .._libc import SEM_POST, new_semaphore, sem_trywait
from ..queue import Queue
from ._abi import KEY, CudaAbi
from ._gpu import GpuState, at_fork_in_child, gpu_state, states
from ._lib import CudaError, check, lib

__all__ = [
    "GLOBAL",
    "RELAXED",
    "THREAD_LOCAL",
    "CaptureMode",
    "Exec",
    "OnEventLoop",
    "Template",
    "begin_capture",
    "destroy",
    "end_capture",
    "exec_destroy",
    "instantiate",
    "launch",
    "reclaim",
    "stats",
    "using",
]

CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901


class CaptureMode(enum.IntEnum):
    """``CUstreamCaptureMode``: which API calls made during a capture invalidate it.

    ``GLOBAL`` (CUDA's default): potentially unsafe calls (those that are
    not stream-ordered, such as ``cuMemAlloc``) from any thread;
    ``THREAD_LOCAL``: only those from the capturing thread; ``RELAXED``: no
    cross-thread restriction.
    """

    GLOBAL = 0
    THREAD_LOCAL = 1
    RELAXED = 2


GLOBAL = CaptureMode.GLOBAL
THREAD_LOCAL = CaptureMode.THREAD_LOCAL
RELAXED = CaptureMode.RELAXED


class OnEventLoop(ArigError, RuntimeError):
    """A capture function was called on the event loop's thread."""


# -- libc semaphores for launch completion -------------------------------------------
# (arig._libc: SEM_POST, new_semaphore, sem_trywait)

# -- process-wide state ---------------------------------------------------------------
_lock = threading.Lock()  # registry updates only: never held across a CUDA call
#: stream -> launches not yet seen complete, oldest first: (semaphore, exec)
_pending: dict[int, collections.deque[tuple[Any, Exec]]] = {}
#: stream -> execs launched into a capture begun here (they join the template's keep)
_captures: dict[int, list[Any]] = {}
#: semaphores reaped at zero, for reuse
_free_sems: list[Any] = []
_counts = {"templates": 0, "execs": 0}
_PID = os.getpid()


def _not_on_loop(what: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise OnEventLoop(
        f"arig.cuda.capture.{what} was called on the event loop's thread: its CUDA calls can block for "
        "tens of milliseconds (libcuda's lock, a full stream) and would stall the loop; call it from a "
        "fill or a worker thread (asyncio.to_thread)"
    )


def _stream(stream: Any) -> int:
    if isinstance(stream, bool):
        raise ArigTypeError("stream must be a CUstream (an int), an arig.Queue or a CUDA stream object")
    if isinstance(stream, int):
        s = stream
    elif isinstance(stream, Queue) and isinstance(stream.handle, int):
        s = stream.handle
    elif hasattr(stream, "__cuda_stream__"):
        s = stream.__cuda_stream__()[1]
    else:
        raise ArigTypeError(f"stream must be a CUstream (an int), an arig.Queue or a CUDA stream object, got {type(stream).__name__}")
    if not 0 <= s < 1 << 64:
        raise ArigValueError(f"stream handle out of range: {s!r}")
    return int(s)


def _mode(mode: Any) -> CaptureMode:
    try:
        return CaptureMode(mode)
    except ValueError:
        raise ArigValueError(f"mode must be GLOBAL, THREAD_LOCAL or RELAXED, got {mode!r}") from None


def _keep(keep: Any) -> tuple[Any, ...]:
    if keep is None:
        return ()
    if isinstance(keep, (tuple, list)):
        return tuple(keep)
    return (keep,)


def _resolve(context: Any) -> int:
    """A CUcontext from ``context``: an int, a CUDA device's record, or a CUDA device."""
    if isinstance(context, int) and not isinstance(context, bool):
        if context <= 0:
            raise ArigValueError(f"context must be a CUcontext (a positive int), got {context}")
        return context
    record = context
    capability = getattr(context, "capability", None)
    if callable(capability):
        record = capability(KEY)
        if record is None:
            raise ArigTypeError(f"{context!r} is not a CUDA device")
    if not isinstance(record, CudaAbi):
        raise ArigTypeError(f"context must be a CUcontext int, a CUDA device's record or a CUDA device, got {type(context).__name__}")
    return record.context


def _current() -> int:
    cur = c_void_p()
    check(lib.cuCtxGetCurrent(byref(cur)), "cuCtxGetCurrent")
    return cur.value or 0


@contextlib.contextmanager
def _in(ctx: int) -> Iterator[int]:
    """Make ``ctx`` current for the block (if it is not already), then restore."""
    cur = _current()
    if not ctx or ctx == cur:
        yield cur
        return
    check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    try:
        yield ctx
    finally:
        lib.cuCtxSetCurrent(cur or None)


@contextlib.contextmanager
def using(context: Any) -> Iterator[int]:
    """Make ``context`` current on this thread for the block, then restore the previous one.

    For your own CUDA calls on a worker thread (the launches you capture):
    ``with using(dev.capability(arig.cuda_abi.KEY)):``.  Not on the loop thread.
    """
    _not_on_loop("using")
    with _in(_resolve(context)) as ctx:
        yield ctx


def _stream_ctx(s: int) -> int:
    c = c_void_p()
    check(lib.cuStreamGetCtx(s, byref(c)), "cuStreamGetCtx")
    return c.value or 0


@contextlib.contextmanager
def _relaxed() -> Iterator[None]:
    """This thread's capture interaction mode RELAXED for the block: a destructor
    run here must not invalidate a capture in progress (ours or another thread's)."""
    mode = c_int(int(RELAXED))
    ok = lib.cuThreadExchangeStreamCaptureMode(byref(mode)) == 0
    try:
        yield
    finally:
        if ok:
            lib.cuThreadExchangeStreamCaptureMode(byref(mode))


def _hold(ctx: int) -> tuple[int, GpuState | None]:
    """Count a handle made in ``ctx`` (current on this thread) with its GPU's state, the one
    reclaimer of that GPU: (the GPU held, or -1 for a context of the user's own, and the state)."""
    dev = c_int()
    if lib.cuCtxGetDevice(byref(dev)) != 0:
        return -1, None
    state = gpu_state(dev.value)
    state.hold_handle()  # the state holds the primary context, once for all it counts
    if state.primary != ctx:  # a context of the user's own: its life is theirs
        state.release_handle()
        return -1, state
    return dev.value, state


def _bury(kind: str, handle: int, ctx: int, held: int, pid: int, state: GpuState | None) -> None:
    """Finalizer: queue the handle's destruction with its GPU.  No CUDA call, no lock, no blocking."""
    if pid == _PID and state is not None:
        state.bury(functools.partial(_destroy_buried, kind, handle, ctx, held))


def _destroy_now(kind: str, handle: int, ctx: int, held: int) -> None:
    with _in(ctx):
        if kind == "exec":
            lib.cuGraphExecDestroy(handle)
            _counts["execs"] += 1
        else:
            lib.cuGraphDestroy(handle)
            _counts["templates"] += 1
    if held >= 0:
        gpu_state(held).release_handle()


def _destroy_buried(kind: str, handle: int, ctx: int, held: int) -> None:
    """A queued destruction, run by its GPU state's drain or reclaim."""
    with _relaxed():
        try:
            _destroy_now(kind, handle, ctx, held)
        except ArigError:
            pass  # a failed context: the handle died with it


def _drain() -> None:
    """Destroy what finalizers and deferred ``exec_destroy`` queued, GPU by GPU."""
    if os.getpid() != _PID:
        return
    for state in states():
        state.drain()


def _release_launch(ex: Exec) -> None:
    """One launch of ``ex`` is done (or was never made): with ``_lock`` held."""
    ex._launches -= 1
    if ex._launches == 0 and ex._deferred is not None:
        kind, handle, ctx, held, state = ex._deferred
        if state is not None:
            state.bury(functools.partial(_destroy_buried, kind, handle, ctx, held))
        ex._deferred = None


def _reap() -> None:
    """Release the execs of launches whose host function has run (no CUDA call)."""
    if not _pending:
        return
    done: list[Exec] = []  # dropped after the lock: a last reference may run finalizers
    with _lock:
        for stream in list(_pending):
            q = _pending[stream]
            while q and sem_trywait(q[0][0]) == 0:
                sem, ex = q.popleft()
                _free_sems.append(sem)
                _release_launch(ex)
                done.append(ex)
            if not q:
                del _pending[stream]
    del done


def _new_sem() -> Any:
    try:
        return _free_sems.pop()
    except IndexError:
        pass
    return new_semaphore()


def _housekeeping() -> None:
    _reap()
    _drain()


# -- the values -------------------------------------------------------------------------
class _Handle:
    __slots__ = ("__weakref__", "_ctx", "_finalizer", "_handle", "_pid", "keep")
    _kind = ""
    _handle: int
    _ctx: int
    _pid: int
    keep: tuple[Any, ...]
    _finalizer: weakref.finalize[Any, Any]

    def __init__(self, *_: Any, **__: Any) -> None:
        raise TypeError(f"a {type(self).__name__} is made by arig.cuda.capture ({'end_capture' if self._kind == 'graph' else 'instantiate'})")

    @classmethod
    def _make(cls, handle: int, ctx: int, hold: tuple[int, GpuState | None], keep: tuple[Any, ...]) -> Any:
        self = object.__new__(cls)
        self._handle = handle
        self._ctx = ctx
        self._pid = os.getpid()
        self.keep = keep
        self._finalizer = weakref.finalize(self, _bury, cls._kind, handle, ctx, hold[0], self._pid, hold[1])
        return self

    @property
    def handle(self) -> int:
        """The native handle (0 once destroyed)."""
        return self._handle

    @property
    def destroyed(self) -> bool:
        return self._handle == 0

    def _take(self) -> tuple[Any, ...] | None:
        """Mark destroyed; the finalizer's arguments if this call did it (``_lock`` held)."""
        if not self._handle:
            return None
        self._handle = 0
        info = self._finalizer.detach()
        return None if info is None else tuple(info[2])

    def __repr__(self) -> str:
        what = "destroyed" if not self._handle else f"0x{self._handle:x}"
        return f"<arig.cuda.capture.{type(self).__name__} {what}, keeping {len(self.keep)} object(s)>"


class Template(_Handle):
    """A captured graph (CUgraph), not yet executable.  ``keep``: what it keeps alive."""

    __slots__ = ()
    _kind = "graph"


class Exec(_Handle):
    """An executable graph (CUgraphExec).  ``keep``: what it keeps alive;
    ``pending``: its launches not yet seen complete."""

    __slots__ = ("_deferred", "_launches")
    _kind = "exec"
    _launches: int
    _deferred: tuple[Any, ...] | None

    @classmethod
    def _make(cls, handle: int, ctx: int, hold: tuple[int, GpuState | None], keep: tuple[Any, ...]) -> Any:
        self = super()._make(handle, ctx, hold, keep)
        self._launches = 0
        self._deferred = None
        return self

    @property
    def pending(self) -> int:
        return self._launches


# -- the functions -------------------------------------------------------------------------
def begin_capture(stream: Any, mode: CaptureMode | int = GLOBAL, *, context: Any = None) -> None:
    """Start capturing the work enqueued on ``stream``: it is recorded, not run (``cuStreamBeginCapture``).

    ``mode`` (default ``GLOBAL``) says which calls made during the capture
    invalidate it (``CaptureMode``).
    """
    _not_on_loop("begin_capture")
    s = _stream(stream)
    m = _mode(mode)
    with _in(_resolve(context) if context is not None else _stream_ctx(s)):
        _housekeeping()
        check(lib.cuStreamBeginCapture_v2(s, int(m)), "cuStreamBeginCapture")
        with _lock:
            _captures[s] = []


def end_capture(stream: Any, *, keep: Any = (), context: Any = None) -> Template:
    """End the capture on ``stream`` and return the captured graph (``cuStreamEndCapture``).

    Raises ``CudaError`` if the capture was invalidated, or if ``stream`` was
    not capturing.  ``keep``: objects the captured work names (images,
    buffers), kept alive by the template and the execs made from it.
    """
    _not_on_loop("end_capture")
    s = _stream(stream)
    extra = _keep(keep)
    # The capture ends first: until then only the capture's own calls touch the stream.
    g = c_void_p()
    rc = lib.cuStreamEndCapture(s, byref(g))
    with _lock:
        launched = _captures.pop(s, [])
    if rc:
        raise CudaError.of(rc, "cuStreamEndCapture" + (": the capture was invalidated" if rc == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED else ""))
    if not g.value:
        raise CudaError.of(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "cuStreamEndCapture returned no graph")
    try:
        ctx = _resolve(context) if context is not None else _stream_ctx(s)
        with _in(ctx):
            template: Template = Template._make(g.value, ctx, _hold(ctx), extra + tuple(launched))
    except BaseException:
        lib.cuGraphDestroy(g)
        raise
    with _in(ctx):
        _housekeeping()
    return template


def instantiate(template: Template, *, keep: Any = (), context: Any = None) -> Exec:
    """An executable graph of ``template`` (``cuGraphInstantiateWithFlags``).

    The exec keeps the template's ``keep`` and its own, so the template may
    be destroyed afterwards.
    """
    _not_on_loop("instantiate")
    if not isinstance(template, Template):
        raise ArigTypeError(f"instantiate takes a Template (from end_capture), got {type(template).__name__}")
    extra = _keep(keep)
    with _in(_resolve(context) if context is not None else template._ctx) as ctx:
        _housekeeping()
        h = template._handle
        if not h:
            raise ArigValueError("the template was destroyed")
        if template._pid != os.getpid():
            raise ArigValueError("the template was inherited from the parent process: a child of fork cannot use it")
        e = c_void_p()
        check(lib.cuGraphInstantiateWithFlags(byref(e), h, 0), "cuGraphInstantiate")
        ex: Exec = Exec._make(e.value or 0, ctx, _hold(ctx), template.keep + extra)
    return ex


def launch(exec_: Exec, stream: Any, *, retain: bool = True, context: Any = None) -> None:
    """Enqueue the whole captured work on ``stream`` as one call (``cuGraphLaunch``).

    The stream retains the exec until the launch's work is done, so
    dropping the last reference to it cannot destroy it while the launch is
    pending (see the module's docstring; ``retain=False`` skips that for an
    exec kept alive otherwise).  Raises ``CudaError`` if CUDA refuses; in a
    fill, return its ``.code`` or let it propagate (either loses the device).
    """
    _not_on_loop("launch")
    if not isinstance(exec_, Exec):
        raise ArigTypeError(f"launch takes an Exec (from instantiate), got {type(exec_).__name__}")
    s = _stream(stream)
    with _in(_resolve(context) if context is not None else exec_._ctx):
        into: list[Any] | None = None
        with _lock:
            h = exec_._handle
            if h and exec_._pid == os.getpid():
                exec_._launches += 1  # reserved: exec_destroy defers from now on
                into = _captures.get(s)
        if not h:
            raise ArigValueError("the exec was destroyed")
        if exec_._pid != os.getpid():
            raise ArigValueError("the exec was inherited from the parent process: a child of fork cannot use it")
        registered = False
        try:
            check(lib.cuGraphLaunch(h, s), "cuGraphLaunch")
            if into is not None:
                into.append(exec_)  # a capture begun here: the template will keep it
            elif retain:
                sem = _new_sem()
                rc = lib.cuLaunchHostFunc(s, SEM_POST, ctypes.addressof(sem))
                if rc:
                    never_free(exec_)  # launched, but its end cannot be seen: never released
                    raise CudaError.of(rc, "cuLaunchHostFunc (after cuGraphLaunch)")
                with _lock:
                    _pending.setdefault(s, collections.deque()).append((sem, exec_))
                registered = True
        finally:
            if not registered:
                with _lock:
                    _release_launch(exec_)
        _housekeeping()


def destroy(template: Template, *, context: Any = None) -> None:
    """Destroy the template now (``cuGraphDestroy``).  Idempotent; execs made from it are unaffected."""
    _not_on_loop("destroy")
    if not isinstance(template, Template):
        raise ArigTypeError(f"destroy takes a Template, got {type(template).__name__}")
    with _lock:
        info = template._take()
    _finish(info, context)


def exec_destroy(exec_: Exec, *, context: Any = None) -> None:
    """Destroy the exec (``cuGraphExecDestroy``).  Idempotent.

    Launching it afterwards raises.  If launches of it are not yet seen
    complete, the destruction waits for the last of them (it is done by a
    later call of this module, or ``reclaim()``).
    """
    _not_on_loop("exec_destroy")
    if not isinstance(exec_, Exec):
        raise ArigTypeError(f"exec_destroy takes an Exec, got {type(exec_).__name__}")
    _reap()
    with _lock:
        info = exec_._take()
        if info is not None and exec_._launches:
            exec_._deferred = (*info[:4], info[5]) if info[4] == _PID else None
            info = None
    _finish(info, context)


def _finish(info: tuple[Any, ...] | None, context: Any) -> None:
    if info is not None and info[4] == _PID:
        kind, handle, ctx, held = info[:4]
        with _relaxed(), _in(_resolve(context) if context is not None else ctx):
            _destroy_now(kind, handle, ctx, held)
    _housekeeping()


def reclaim(*, context: Any = None) -> None:
    """Release the execs of completed launches and destroy what was collected, now."""
    _not_on_loop("reclaim")
    with _in(_resolve(context) if context is not None else 0):
        _housekeeping()


def stats() -> dict[str, int]:
    """Counters (any thread): templates/execs destroyed so far, handles awaiting
    destruction, launches not yet seen complete."""
    return {
        "templates_destroyed": _counts["templates"],
        "execs_destroyed": _counts["execs"],
        "awaiting_destruction": sum(state.buried for state in states()),
        "launches_pending": sum(len(q) for q in list(_pending.values())),
    }


def _after_fork_in_child() -> None:
    global _PID, _lock
    _PID = os.getpid()
    _lock = threading.Lock()
    _pending.clear()
    _captures.clear()
    _free_sems.clear()


at_fork_in_child(_after_fork_in_child)  # the GPU states' one fork handler runs it
