"""What compiled code needs from a CUDA device: its record and the fill prototype.

Compiled code drives a CUDA device through the CUDA library the device was
opened with.  It reaches the device's driver two ways: the *record*
(``CudaAbi``), which finds libcuda's functions and makes graphs in the
device's context, and *fills* (``FILL``), which the device's submit thread
calls to enqueue the code's work.  The device declares its record at open
(``declare``); code finds it with ``dev.capability(KEY)``, which is None on
any other device.  Neither side links the other.

Graphs: ``record.graph(kernels)`` records one launch per kernel, each after
the one before has completed.  Only a fill, during its call, updates
(``Graph.update``) or launches (``Graph.launch``) a graph; the device calls
fills one at a time, so CUDA never sees two calls on one graph at once.
Each graph the record makes is told to the device's instruments
(``Instrument.on_graph``) on the thread that built it, before the caller
has it; nothing is done for that while no instrument watches the device.

A submission that launches a graph must keep it (``dev.submit(fill, keep=g)``):
once collected, a graph is queued for destruction, and the next open, image
load, image unload or graph construction on that GPU destroys it (then its
modules), even after the device stopped or its context failed.  Collection
and stopping alone call no CUDA destructor, and a child of ``fork`` destroys
no graph inherited from its parent.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from ctypes import byref, c_size_t, c_void_p
from dataclasses import dataclass
from typing import Any, Protocol


from .. import _instruments
from .._worker import Serial, run_sync
from .._errors import ArigTypeError, ArigValueError, DeviceLost, DeviceStopped
from ._launch import check_args, dims
from ._gpu import GpuState
from ._lib import FILL, KERNEL_NODE_PARAMS, CudaError, check, lib

__all__ = ["FILL", "KEY", "Kernel", "Graph", "CudaAbi", "declare"]

_U32 = (1 << 32) - 1
#: Long pure-Python loops on worker threads give the GIL away this often:
#: otherwise the event loop's thread waits for it up to the switch interval
#: (5 ms) at a time while a large graph is made.
_YIELD_EVERY = 128


class _Key:
    """The key of a CUDA device's record: ``dev.capability(arig.cuda_abi.KEY)``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "arig.cuda_abi.KEY"


KEY = _Key()


@dataclass(frozen=True, slots=True)
class Kernel:
    """A kernel launch a graph records.

    ``func``: a CUfunction of an image loaded on the device
    (``image.function(name)``); ``grid``/``block``: blocks per grid and
    threads per block as (x, y, z), each 1 .. 2**32-1 (an int means (x, 1, 1));
    ``args``: the argument buffer as the kernel reads it
    (``CU_LAUNCH_PARAM_BUFFER_POINTER``; ``arig.cuda.pack``); ``shared``:
    dynamic shared memory bytes.
    """

    func: int
    grid: Any
    block: Any
    args: bytes = b""
    shared: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.func, bool) or not isinstance(self.func, int) or self.func <= 0:
            raise ArigValueError(f"func must be a CUfunction (a positive int), got {self.func!r}")
        object.__setattr__(self, "grid", dims(self.grid, "grid"))
        object.__setattr__(self, "block", dims(self.block, "block"))
        if not isinstance(self.args, (bytes, bytearray, memoryview)):
            raise ArigTypeError(f"args must be bytes, got {type(self.args).__name__}")
        object.__setattr__(self, "args", bytes(self.args))
        if isinstance(self.shared, bool) or not isinstance(self.shared, int) or not 0 <= self.shared <= _U32:
            raise ArigValueError(f"shared must be an int in 0..2**32-1, got {self.shared!r}")


class _Params:
    """A node's launch parameters as CUDA reads them, kept for cheap updates.

    The argument buffer, its size and the ``extra`` array live here, so a
    fill's update of a node's arguments is one ``memmove`` and one driver
    call, with nothing allocated.
    """

    __slots__ = ("struct", "buf", "size", "_extra")

    def __init__(self, k: Kernel) -> None:
        self.struct = KERNEL_NODE_PARAMS(k.func, *k.grid, *k.block, k.shared, None, None, None, None)
        self._extra: Any = None
        self.set_buffer(k.args)

    def set_buffer(self, args: bytes) -> None:
        self.buf = ctypes.create_string_buffer(args, max(len(args), 1))
        self.size = c_size_t(len(args))
        if args:
            self._extra = (c_void_p * 5)(1, ctypes.addressof(self.buf), 2, ctypes.addressof(self.size), 0)
            self.struct.extra = ctypes.addressof(self._extra)
        else:
            self._extra = None
            self.struct.extra = None

    def set_dims(self, grid: tuple[int, int, int] | None, block: tuple[int, int, int] | None) -> None:
        st = self.struct
        if grid is not None:
            st.gridDimX, st.gridDimY, st.gridDimZ = grid
        if block is not None:
            st.blockDimX, st.blockDimY, st.blockDimZ = block


class Graph:
    """A native graph: ``handle`` (CUgraphExec) and ``nodes`` (each kernel's CUgraphNode, in order).

    ``Graph(handle, nodes, collect)`` is how a driver hands one over: from
    then on ``collect()`` runs once this value is collected, and must only
    queue the destruction (no CUDA call, no blocking, no reference to the
    value).  Handle, nodes and the modules of its kernels live while the
    value is reachable.
    """

    __slots__ = ("handle", "nodes", "_params", "_finalizer", "__weakref__")

    def __init__(self, handle: int, nodes: Sequence[int], collect: Callable[[], None]) -> None:
        if not callable(collect):
            raise ArigTypeError("collect must be callable")
        self.handle = int(handle)
        self.nodes = tuple(int(n) for n in nodes)
        self._params: list[_Params] | None = None
        self._finalizer = weakref.finalize(self, collect)

    # -- for fills, during their call ------------------------------------------
    def update(self, i: int, *, args: bytes | None = None, grid: Any = None, block: Any = None, shared: int | None = None) -> int:
        """Update node ``i``'s argument bytes, grid, block or shared memory; return the CUresult.

        Call it from a fill, before that fill's ``launch``: the update reaches
        the launches after it and none enqueued before it, so it waits for
        nothing.  The node's function is fixed: make another graph to change it.
        Arguments of the node's current size are copied in place (no
        allocation); another size is checked against the kernel's layout.
        A failed update leaves the node's recorded parameters undefined, as
        the device is lost anyway once its fill returns the failure.
        """
        params = self._params
        if params is None:
            raise ArigValueError("this graph was not made by arig's record: its nodes' parameters are unknown")
        p = params[i]
        st = p.struct
        saved = (p.buf, p.size, p._extra, p.buf.raw, st.extra, st.gridDimX, st.gridDimY, st.gridDimZ, st.blockDimX, st.blockDimY, st.blockDimZ, st.sharedMemBytes)
        if args is not None:
            if not isinstance(args, (bytes, bytearray, memoryview)):
                raise ArigTypeError(f"args must be bytes, got {type(args).__name__}")
            n = len(args)
            if n == p.size.value and n:
                ctypes.memmove(p.buf, bytes(args) if isinstance(args, memoryview) else args, n)
            else:
                check_args(p.struct.func or 0, bytes(args))
                p.set_buffer(bytes(args))
        if grid is not None or block is not None:
            p.set_dims(None if grid is None else dims(grid, "grid"), None if block is None else dims(block, "block"))
        if shared is not None:
            if isinstance(shared, bool) or not isinstance(shared, int) or not 0 <= shared <= _U32:
                raise ArigValueError(f"shared must be an int in 0..2**32-1, got {shared!r}")
            p.struct.sharedMemBytes = shared
        rc: int = lib.cuGraphExecKernelNodeSetParams_v2(self.handle, self.nodes[i], byref(st))
        if rc:  # refused: the node keeps its parameters, and so does the record of them
            p.buf, p.size, p._extra, raw, st.extra = saved[:5]
            ctypes.memmove(p.buf, raw, len(raw))
            (st.gridDimX, st.gridDimY, st.gridDimZ, st.blockDimX, st.blockDimY, st.blockDimZ, st.sharedMemBytes) = saved[5:]
        return rc

    @property
    def _kernels(self) -> list[Kernel] | None:
        """Each node's parameters as last set (tests and debugging)."""
        if self._params is None:
            return None
        out = []
        for p in self._params:
            st = p.struct
            out.append(Kernel(st.func or 0, (st.gridDimX, st.gridDimY, st.gridDimZ), (st.blockDimX, st.blockDimY, st.blockDimZ), p.buf.raw[: p.size.value], st.sharedMemBytes))
        return out

    @_kernels.setter
    def _kernels(self, kernels: list[Kernel]) -> None:
        self._params = [_Params(k) for k in kernels]

    def launch(self, stream: int) -> int:
        """Enqueue the graph on ``stream`` (a fill's queue); return the CUresult."""
        rc: int = lib.cuGraphLaunch(self.handle, stream)
        return rc

    def __repr__(self) -> str:
        return f"<arig.cuda_abi.Graph 0x{self.handle:x} of {len(self.nodes)} kernels>"


class RecordBackend(Protocol):
    """What a record needs of its device's backend (``arig.cuda._device.CudaBackend``): declared
    here so that the record names no backend class (the backend makes the record)."""

    name: str
    ctx: Any
    gpu: GpuState
    @property
    def images_loaded(self) -> set[int]:
        """Modules of the device's images not unloaded."""

    def module_of(self, func: int) -> int | None: ...

    def lost_cause(self) -> BaseException | None: ...


class CudaAbi:
    """The record a CUDA device declares under ``KEY``."""

    _backend: RecordBackend
    _cond: threading.Condition
    _calls: int
    _stopping: bool
    _limiter: Serial

    def __init__(self, *_: Any) -> None:
        raise TypeError("a CUDA device makes its record: use dev.capability(arig.cuda_abi.KEY)")

    @classmethod
    def _for_backend(cls, backend: RecordBackend) -> CudaAbi:
        self = object.__new__(cls)
        self._backend = backend
        self._cond = threading.Condition()
        self._calls = 0
        self._stopping = False
        self._limiter = Serial()  # one construction at a time, under asyncio or trio
        return self

    @property
    def context(self) -> int:
        """The device's CUcontext as an int, for code that must make it current
        (``arig.cuda.capture``).  Any thread; no driver call.  Raises
        ``DeviceStopped`` once the device's stop released the context."""
        ctx = self._backend.ctx
        if not ctx:
            raise DeviceStopped(f"{self._backend.name} is stopped: its context is released")
        return int(ctx)

    def symbol(self, name: str) -> int | None:
        """The address of libcuda's export ``name``, or None.  The suffix selects
        the interface version: ``"cuStreamWaitValue64_v2"``.  Any thread."""
        if not isinstance(name, str):
            raise ArigTypeError(f"name must be a str, got {type(name).__name__}")
        return lib.address(name)

    # -- graph construction ----------------------------------------------------------
    def graph(self, kernels: Sequence[Kernel]) -> Graph:
        """A graph of the device's context launching ``kernels`` in order, each
        after the one before has completed; ``[]`` makes an empty graph.

        Any thread but the event loop's (use ``graph_async`` there): libcuda
        holds its lock for tens of milliseconds while a large graph
        instantiates; the GIL is released meanwhile.  Raises ``ValueError``,
        having changed nothing, for a kernel whose function belongs to no image
        loaded on the device or whose argument size is wrong; ``CudaError``
        with CUDA's reason if it cannot make or instantiate the graph; the
        context's error once a fault failed it; ``DeviceStopped`` once stop began.
        """
        ks = list(kernels)
        for k in ks:
            if not isinstance(k, Kernel):
                raise ArigTypeError(f"graph takes Kernel values, got {type(k).__name__}")
        b = self._backend
        images = b.images_loaded
        checked: set[tuple[int, int]] = set()
        for i, k in enumerate(ks):
            if (k.func, len(k.args)) in checked:
                continue  # one check per function and argument size, not per node
            module = b.module_of(k.func)
            # A module may outlive its image while a graph uses it: the image must be loaded still.
            if module is None or not b.gpu.loaded(module) or module not in images:
                raise ArigValueError(f"kernel function 0x{k.func:x} belongs to no image loaded on {b.name}")
            check_args(k.func, k.args)
            checked.add((k.func, len(k.args)))
            if i % _YIELD_EVERY == _YIELD_EVERY - 1:
                time.sleep(0)
        try:
            self._enter()
        except DeviceLost as lost:  # the program hears of the loss here: tell who watches it
            _instruments.tell_loss_seen(b, lost.cause)
            raise
        try:
            graph = self._build(ks)
        finally:
            self._exit()
        _instruments.tell_graph(b, graph)  # on this thread, before the caller has the graph
        return graph

    async def graph_async(self, kernels: Sequence[Kernel]) -> Graph:
        """``graph`` in a worker thread, so the event loop goes on.

        Cancelling the awaiting task does not abandon the construction (it
        finishes, and the graph it made is collected); one construction per
        device runs at a time.
        """
        ks = list(kernels)
        box: list[Graph] = []

        def build() -> None:
            # The result travels in ``box``, not as the worker's return value:
            # the worker thread's frame keeps its last result until its next job,
            # which would keep the graph (and its destruction) alive.
            box.append(self.graph(ks))

        await run_sync(build, serial=self._limiter)
        return box.pop()

    def _enter(self) -> None:
        with self._cond:
            if self._stopping:
                raise DeviceStopped(f"{self._backend.name} is stopping: it makes no more graphs")
            cause = self._backend.lost_cause()
            if cause is not None:
                if isinstance(cause, CudaError):
                    raise CudaError.of(cause.code, f"graph: the context of {self._backend.name} failed") from cause
                raise DeviceLost(self._backend.name, cause) from cause
            self._calls += 1

    def _exit(self) -> None:
        with self._cond:
            self._calls -= 1
            self._cond.notify_all()

    def _begin_stop(self) -> None:
        """The device's stop began (loop thread): refuse new graph calls from now on."""
        with self._cond:  # held only around counter updates, never across a CUDA call
            self._stopping = True

    def _stop(self, timeout: float = 60.0) -> None:
        """Refuse new graph calls and wait for those in flight (the device's stop)."""
        with self._cond:
            self._stopping = True
            self._cond.wait_for(lambda: self._calls == 0, timeout)

    def _build(self, ks: list[Kernel]) -> Graph:
        b = self._backend
        prev = c_void_p()
        lib.cuCtxGetCurrent(byref(prev))
        check(lib.cuCtxSetCurrent(b.ctx), "cuCtxSetCurrent")
        try:
            b.gpu.reclaim()  # graph construction is one of the operations that destroy collected graphs
            g = c_void_p()
            check(lib.cuGraphCreate(byref(g), 0), "cuGraphCreate")
            exec_ = c_void_p()
            nodes: list[int] = []
            params: list[_Params] = []  # kept by the graph: updates reuse them
            try:
                last = node = c_void_p()
                for k in ks:
                    p = _Params(k)
                    params.append(p)
                    if len(params) % _YIELD_EVERY == 0:
                        time.sleep(0)  # let the event loop's thread have the GIL: see _YIELD_EVERY
                    check(lib.cuGraphAddKernelNode_v2(byref(node), g, byref(last) if nodes else None, 1 if nodes else 0, byref(p.struct)), "cuGraphAddKernelNode")
                    nodes.append(node.value or 0)
                    last, node = node, c_void_p()
                check(lib.cuGraphInstantiateWithFlags(byref(exec_), g, 0), "cuGraphInstantiate")
            except BaseException:
                lib.cuGraphDestroy(g)
                raise
            modules = tuple(sorted({b.module_of(k.func) or 0 for k in ks}))
            b.gpu.retain(modules)
            collect = functools.partial(b.gpu.collect, exec_.value or 0, g.value or 0, modules, b.gpu.generation)
            graph = Graph(exec_.value or 0, nodes, collect)
            graph._params = params
            return graph
        finally:
            lib.cuCtxSetCurrent(prev)


def declare(record: CudaAbi) -> tuple[_Key, CudaAbi]:
    """``record`` under ``KEY``, as a CUDA device's capabilities carry it."""
    if not isinstance(record, CudaAbi):
        raise ArigTypeError(f"declare takes a CudaAbi record, got {type(record).__name__}")
    return (KEY, record)
