"""Process-wide state of each CUDA GPU: its one reclaimer.

Every deferred destruction on a GPU goes through its ``GpuState``: the
record's collected graphs, the modules they keep loaded, and the captured
templates and execs of ``arig.cuda.capture``.  One reference on the primary
context is held while any of them lives, one destroyer runs at a time, and
one fork handler (below) forgets everything a child inherits.

Why process-wide: a graph may outlive the device that made it (a user keeps
the ``Graph``), and collected graphs are destroyed at the next
open, image load, image unload or graph construction *on that GPU*, even
after the device stopped or its context failed.  So the queue of collected
graphs, and the reference counts that keep a graph's modules loaded until
the graph is destroyed, belong to the GPU, not to a device.

``collect`` callbacks (run by the garbage collector, on any thread) only
append to a list: no CUDA call, no blocking lock.  ``reclaim`` runs the
destructors, from a thread that may call CUDA with the primary context
current.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from ctypes import byref, c_int, c_void_p

from ._lib import lib

__all__ = ["GpuState", "gpu_state"]


class GpuState:
    """Modules in use and graphs waiting for destruction on one GPU."""

    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        self._refs: dict[int, int] = {}  # CUmodule -> references (its image + each graph using it)
        self._collected: list[tuple[int, int, tuple[int, ...], int | None]] = []  # (exec, graph, modules, generation)
        self._unloads: list[int] = []
        self._lock = threading.Lock()  # held only for list/dict updates, never across a CUDA call
        self._reclaiming = threading.Lock()
        self.destroyed = 0  # graphs destroyed so far (tests read it)
        # While modules or graphs live, the state holds its own reference on
        # the primary context, so their handles stay valid after the device
        # that made them stopped and released its reference.  _ctx_lock makes
        # "hold, then count" and "check nothing is counted, then release" atomic
        # (only bookkeeping and the retain/release calls run under it).
        self._ctx_held = False
        self.primary = 0  # the primary context's handle while held
        self._ctx_lock = threading.Lock()
        self._graphs = 0  # graphs made and not yet destroyed (an empty graph references no module)
        self._handles = 0  # capture templates and execs of the primary context not yet destroyed
        self._doomed: deque[Callable[[], None]] = deque()  # their destructions, queued by finalizers
        # Bumped when the primary context fails: handles of an older generation
        # died with that context and must never reach a CUDA destructor.
        self.generation = 0

    # -- bookkeeping (any thread, never blocks on CUDA) ------------------------
    def add_module(self, module: int) -> None:
        """Count a module just loaded (a thread with the context current)."""
        with self._ctx_lock:
            self._hold_context()
            with self._lock:
                self._refs[module] = self._refs.get(module, 0) + 1

    def _hold_context(self) -> None:
        if not self._ctx_held:
            ctx, dev = c_void_p(), c_int()
            lib.cuDeviceGet(byref(dev), self.ordinal)
            if lib.cuDevicePrimaryCtxRetain(byref(ctx), dev.value) == 0:
                self._ctx_held = True
                self.primary = ctx.value or 0

    def _drop_context(self) -> None:
        with self._ctx_lock:
            if self._ctx_held and not self._refs and not self._collected and not self._graphs and not self._handles and not self._doomed:
                dev = c_int()
                lib.cuDeviceGet(byref(dev), self.ordinal)
                lib.cuDevicePrimaryCtxRelease_v2(dev.value)
                self._ctx_held = False

    def context_failed(self) -> None:
        """The primary context faulted: every handle died with it.  Forget them
        and give back the state's reference, so the context can be made anew."""
        with self._lock:
            self.generation += 1
            self.destroyed += len(self._collected)
            self._collected.clear()
            self._refs.clear()
            self._unloads.clear()
            self._graphs = 0
        self._drop_context()

    def loaded(self, module: int) -> bool:
        with self._lock:
            return self._refs.get(module, 0) > 0

    def retain(self, modules: Iterable[int]) -> None:
        """Count a new graph and its references on its modules (a thread that may call CUDA)."""
        with self._ctx_lock:
            self._hold_context()
            with self._lock:
                self._graphs += 1
                for m in modules:
                    self._refs[m] = self._refs.get(m, 0) + 1

    def release_module(self, module: int) -> None:
        """Drop one reference; the unload itself waits for ``reclaim``."""
        with self._lock:
            self._unloads.append(module)

    def collect(self, exec_: int, graph: int, modules: tuple[int, ...], generation: int | None = None) -> None:
        """Queue a graph for destruction.  Safe in a finalizer: no CUDA, no blocking.

        ``generation``: the state's ``generation`` when the graph was made (None:
        the current one); a graph of a failed context is forgotten, not destroyed.
        """
        self._collected.append((exec_, graph, modules, generation))  # list.append is atomic

    @property
    def pending(self) -> int:
        return len(self._collected)

    # -- capture templates and execs (any thread; bury: also finalizers) ----------------
    def hold_handle(self) -> None:
        """Count a template or exec made in this GPU's primary context: the state holds
        the context (once, for all it counts) until the last is destroyed."""
        with self._ctx_lock:
            self._hold_context()
            with self._lock:
                self._handles += 1

    def release_handle(self) -> None:
        """A counted template or exec was destroyed."""
        with self._lock:
            self._handles = max(0, self._handles - 1)
        self._drop_context()

    def bury(self, destroy: Callable[[], None]) -> None:
        """Queue a destruction.  Safe in a finalizer: no CUDA call, no lock."""
        self._doomed.append(destroy)  # deque.append is atomic

    @property
    def buried(self) -> int:
        return len(self._doomed)

    def drain(self) -> None:
        """Run the queued destructions of templates and execs (each makes its own context
        current).  One destroyer at a time: a drain already running is left to it."""
        if os.getpid() != _PID or not self._doomed:
            return
        if not self._reclaiming.acquire(blocking=False):
            return
        try:
            self._drain_locked()
        finally:
            self._reclaiming.release()
        self._drop_context()

    def _drain_locked(self) -> None:
        while True:
            try:
                destroy = self._doomed.popleft()
            except IndexError:
                return
            destroy()

    # -- destruction (a thread with this GPU's primary context current) ----------
    def reclaim(self) -> None:
        """Destroy collected graphs, then unload modules nobody references.

        A reclaim already running on another thread is left to it.
        """
        if os.getpid() != _PID:
            return  # a child of fork destroys nothing inherited from its parent
        if not self._reclaiming.acquire(blocking=False):
            return
        try:
            self._drain_locked()  # captured templates and execs first: their graphs may use modules
            while self._collected:
                exec_, graph, modules, generation = self._collected.pop(0)
                if generation is not None and generation != self.generation:
                    self.destroyed += 1  # it died with its failed context: no destructor, no unload
                    continue
                if exec_:
                    lib.cuGraphExecDestroy(c_void_p(exec_))
                if graph:
                    lib.cuGraphDestroy(c_void_p(graph))
                self.destroyed += 1
                with self._lock:
                    self._graphs = max(0, self._graphs - 1)
                    self._unloads.extend(modules)
            with self._lock:
                unloads, self._unloads = self._unloads, []
                dead = []
                for m in unloads:
                    if m not in self._refs:
                        continue  # not counted here (forgotten with a failed context): not ours to unload
                    n = self._refs[m] - 1
                    if n <= 0:
                        del self._refs[m]
                        dead.append(m)
                    else:
                        self._refs[m] = n
            for m in dead:
                lib.cuModuleUnload(c_void_p(m))
            self._drop_context()
        finally:
            self._reclaiming.release()

    def forget(self) -> None:
        """After fork, in the child: nothing inherited is ours to destroy."""
        self._ctx_held = False
        self._refs.clear()
        self._collected.clear()
        self._unloads.clear()
        self._graphs = 0
        self._handles = 0
        self._doomed.clear()
        self._lock = threading.Lock()
        self._reclaiming = threading.Lock()
        self._ctx_lock = threading.Lock()


_PID = os.getpid()
_states: dict[int, GpuState] = {}
_states_lock = threading.Lock()


def gpu_state(ordinal: int) -> GpuState:
    with _states_lock:
        s = _states.get(ordinal)
        if s is None:
            s = _states[ordinal] = GpuState(ordinal)
        return s


_fork_hooks: list[Callable[[], None]] = []


def at_fork_in_child(hook: Callable[[], None]) -> None:
    """Run ``hook`` in a forked child, after the GPU states forgot what it inherited."""
    _fork_hooks.append(hook)


def states() -> list[GpuState]:
    with _states_lock:
        return list(_states.values())


def _after_fork_in_child() -> None:
    global _PID
    _PID = os.getpid()
    for s in _states.values():
        s.forget()
    for hook in _fork_hooks:
        hook()


os.register_at_fork(after_in_child=_after_fork_in_child)
