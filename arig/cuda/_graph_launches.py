"""Launches not yet seen complete: how ``launch`` keeps an exec alive until its work is done.

Each launch (with ``retain=True``, the default) enqueues, right after
``cuGraphLaunch``, a host function on the same stream that is libc's
``sem_post`` on a semaphore of that launch: no Python, no GIL, no lock, no
CUDA call, which is all CUDA lets a host function do.  The launch's
(semaphore, exec) pair waits in a per-stream registry (``_pending``); every
later call of ``arig.cuda.capture`` (``launch`` included) reaps the pairs
whose semaphore was posted (``sem_trywait``, not a CUDA call), oldest
first.  The registry's strong reference is what keeps a dropped exec, and
the resources it keeps, alive: an exec referenced by a pending launch
cannot be collected, so its finalizer cannot run.  ``exec_destroy`` on an
exec with launches not yet seen complete marks it destroyed (later launches
raise) and defers ``cuGraphExecDestroy`` until the last is reaped.

Why not ``cuStreamQuery`` at the next launch: a stream that never idles
would never release anything, a query on a capturing stream invalidates the
capture, and under another thread's ``GLOBAL`` capture any query is a
"potentially unsafe" call that fails and invalidates that capture.  The
price is one host function per launch (a few microseconds of stream time);
``retain=False`` skips it for an exec the caller keeps alive itself
(``dev.submit(..., keep=exe)``).  A launch into a capture begun by
``begin_capture`` is not tracked that way: the exec is added to the
``keep`` of the template that ``end_capture`` returns (``_captures``).

The registry is per process: a child of fork starts with none, and a new
``_lock`` (rebound there, so read it as ``_graph_launches._lock``).  No CUDA
call here; any thread but the event loop's calls it (through the capture
functions).
"""

from __future__ import annotations

import collections
import functools
import threading
from typing import Any

from .._libc import new_semaphore, sem_trywait
from ._gpu import at_fork_in_child
from ._graph_handles import Exec, _destroy_buried

_lock = threading.Lock()  # registry updates only: never held across a CUDA call
#: stream -> launches not yet seen complete, oldest first: (semaphore, exec)
_pending: dict[int, collections.deque[tuple[Any, Exec]]] = {}
#: stream -> execs launched into a capture begun here (they join the template's keep)
_captures: dict[int, list[Any]] = {}
#: semaphores reaped at zero, for reuse
_free_sems: list[Any] = []


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


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()
    _pending.clear()
    _captures.clear()
    _free_sems.clear()


at_fork_in_child(_after_fork_in_child)  # the GPU states' one fork handler runs it
