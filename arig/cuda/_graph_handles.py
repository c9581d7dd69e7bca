"""The lifetime of a captured graph's handles: ``Template`` (CUgraph) and ``Exec`` (CUgraphExec).

Neither knows which kernels, modules and buffers the captured work names,
so ``end_capture(..., keep=...)`` and ``instantiate(..., keep=...)`` take
them: the template keeps ``keep``; the exec keeps its template's ``keep``
plus its own, so the template can be destroyed first.  Kernel parameters
need no keeping: CUDA copies them when the launch is captured.  While a
template or exec of a primary context is alive, its GPU's state (the GPU's
one reclaimer, ``arig.cuda._gpu``, which also owns the record's graphs and
their modules) holds that context, so the handle stays valid after the
device that made it stopped.  ``destroy``/``exec_destroy`` release eagerly
and are idempotent; otherwise a finalizer (holding only the handle) queues
the destruction with the GPU's state (``_bury``), and the next call of
``arig.cuda.capture`` from a thread that may call CUDA, ``reclaim()``, or
the GPU's next open, load, unload or graph construction destroys it: the
collector may run on the event loop's thread, inside a fill or while a lock
is held, where a CUDA call must not be made.  A child of ``fork`` destroys
nothing inherited from its parent (``_PID``, the process that owns the
handles, is reset in the child).
"""

from __future__ import annotations

import functools
import os
import weakref
from ctypes import byref, c_int
from typing import Any

from .._errors import ArigError
from ._capture_ctx import _in, _relaxed
from ._gpu import GpuState, at_fork_in_child, gpu_state, states
from ._lib import lib

#: Handles destroyed so far, by kind (``capture.stats()``).
_counts = {"templates": 0, "execs": 0}
#: The process that owns the handles made here: rebound in a child of fork, so read it as ``_graph_handles._PID``.
_PID = os.getpid()


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
        """Mark destroyed; the finalizer's arguments if this call did it (``_graph_launches._lock`` held)."""
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


def _after_fork_in_child() -> None:
    global _PID
    _PID = os.getpid()


at_fork_in_child(_after_fork_in_child)  # the GPU states' one fork handler runs it
