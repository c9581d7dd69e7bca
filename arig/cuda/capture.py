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
Lifetimes
    A ``Template`` holds the CUgraph, an ``Exec`` the CUgraphExec; each
    keeps what its captured work names (``keep=``) and, while alive, its
    primary context.  ``destroy``/``exec_destroy`` release eagerly and are
    idempotent; a dropped handle is destroyed later, by a call here from a
    thread that may call CUDA (``arig.cuda._graph_handles`` says how).  A
    launch keeps its exec alive until its work is done, seen through a host
    function that posts a semaphore (``arig.cuda._graph_launches``).
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import enum
import os
from collections.abc import Iterator
from ctypes import byref, c_void_p
from typing import Any

from .._errors import ArigError, ArigTypeError, ArigValueError
from .._libc import SEM_POST
from .._memory import never_free
from .._running import running_loop
from ..queue import Queue
from . import _graph_handles as _handles
from . import _graph_launches as _launches
from ._capture_ctx import _in, _relaxed, _resolve, _stream_ctx
from ._graph_handles import Exec, Template, _destroy_now, _drain, _hold
from ._graph_launches import _captures, _new_sem, _pending, _reap, _release_launch
from ._gpu import states
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



def _not_on_loop(what: str) -> None:
    try:
        running_loop()
    except RuntimeError:
        return
    raise OnEventLoop(
        f"arig.cuda.capture.{what} was called on the event loop's thread: its CUDA calls can block for "
        "tens of milliseconds (libcuda's lock, a full stream) and would stall the loop; call it from a "
        "fill or a worker thread (asyncio.to_thread, trio.to_thread.run_sync)"
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



@contextlib.contextmanager
def using(context: Any) -> Iterator[int]:
    """Make ``context`` current on this thread for the block, then restore the previous one.

    For your own CUDA calls on a worker thread (the launches you capture):
    ``with using(dev.capability(arig.cuda_abi.KEY)):``.  Not on the loop thread.
    """
    _not_on_loop("using")
    with _in(_resolve(context)) as ctx:
        yield ctx



def _housekeeping() -> None:
    _reap()
    _drain()


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
        with _launches._lock:
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
    with _launches._lock:
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
        with _launches._lock:
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
                with _launches._lock:
                    _pending.setdefault(s, collections.deque()).append((sem, exec_))
                registered = True
        finally:
            if not registered:
                with _launches._lock:
                    _release_launch(exec_)
        _housekeeping()


def destroy(template: Template, *, context: Any = None) -> None:
    """Destroy the template now (``cuGraphDestroy``).  Idempotent; execs made from it are unaffected."""
    _not_on_loop("destroy")
    if not isinstance(template, Template):
        raise ArigTypeError(f"destroy takes a Template, got {type(template).__name__}")
    with _launches._lock:
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
    with _launches._lock:
        info = exec_._take()
        if info is not None and exec_._launches:
            exec_._deferred = (*info[:4], info[5]) if info[4] == _handles._PID else None
            info = None
    _finish(info, context)


def _finish(info: tuple[Any, ...] | None, context: Any) -> None:
    if info is not None and info[4] == _handles._PID:
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
        "templates_destroyed": _handles._counts["templates"],
        "execs_destroyed": _handles._counts["execs"],
        "awaiting_destruction": sum(state.buried for state in states()),
        "launches_pending": sum(len(q) for q in list(_pending.values())),
    }
