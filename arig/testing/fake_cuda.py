"""A fake libcuda for deterministic CPU tests of arig's CUDA device (like
tinygrad's mockgpu): ``FakeCuda`` implements, in Python and with libcuda's
calling conventions, the driver functions arig calls.  See ``FakeCuda``.
"""

from __future__ import annotations

import ctypes
import itertools
import re
import threading
from collections import deque, namedtuple
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from ctypes import c_char_p, c_int, c_size_t, c_uint, c_uint64, c_void_p
from dataclasses import dataclass, field
from functools import partialmethod
from typing import Any, NamedTuple

from ..cuda import _gpu, _launch
from ..cuda import _lib as lib_module
from ..cuda._lib import _PROTOS, KERNEL_NODE_PARAMS, CudaUnavailable

__all__ = ["ERRORS", "Call", "FakeCuda", "FakeGpu", "Fault"]

#: CUresult -> (cuGetErrorName, cuGetErrorString).
ERRORS = {
    0: ("CUDA_SUCCESS", "no error"), 1: ("CUDA_ERROR_INVALID_VALUE", "invalid argument"),
    2: ("CUDA_ERROR_OUT_OF_MEMORY", "out of memory"), 3: ("CUDA_ERROR_NOT_INITIALIZED", "initialization error"),
    100: ("CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"), 101: ("CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"),
    201: ("CUDA_ERROR_INVALID_CONTEXT", "invalid device context"), 400: ("CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"),
    500: ("CUDA_ERROR_NOT_FOUND", "named symbol not found"), 600: ("CUDA_ERROR_NOT_READY", "device not ready"),
    709: ("CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"),
    700: ("CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"), 719: ("CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"),
}  # fmt: skip

_NO_INIT_NEEDED = {"cuInit", "cuDriverGetVersion", "cuGetErrorName", "cuGetErrorString"}
_HOST_FN = ctypes.CFUNCTYPE(None, c_void_p)
_handles = itertools.count(0x7A1600001000, 0x40)  # unique across fakes: a stale handle never matches
_images = itertools.count(1)


class Fault(Exception):
    """Raise in a fake kernel: its context faults with ``code`` (CUDA_ERROR_ILLEGAL_ADDRESS by default)."""

    def __init__(self, code: int = 700) -> None:
        super().__init__(f"fake GPU fault {code}")
        self.code = code


class Call(NamedTuple):
    name: str
    thread: int  # threading.get_ident() of the caller
    args: tuple[Any, ...]
    rc: int


@dataclass
class FakeGpu:
    """What one fake GPU reports."""

    name: str = "NVIDIA Fake GPU"
    cc: tuple[int, int] = (9, 0)
    sms: int = 132
    memory: int = 80 << 30
    watchdog: bool = False  # CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT
    bus: str = "0000:3B:00.0"

    def attributes(self) -> dict[int, int]:
        """CU_DEVICE_ATTRIBUTE_*: multiprocessors, kernel exec timeout, unified addressing, compute capability."""
        return {16: self.sms, 17: int(self.watchdog), 41: 1, 75: self.cc[0], 76: self.cc[1]}


class _Rc(Exception):
    """``raise _Rc(code)``: the current call returns ``code``."""


@dataclass(eq=False)
class _Context:
    handle: int
    ordinal: int
    refs: int = 0
    faulted: int = 0
    alive: bool = True


@dataclass(eq=False)
class _Stream:
    handle: int
    ctx: _Context
    items: deque[Callable[[], Any]] = field(default_factory=deque)
    held: bool = False
    destroyed: bool = False  # by cuStreamDestroy: queued work still runs, then the thread ends
    alive: bool = True


@dataclass(eq=False)
class _Event:
    handle: int
    ctx: _Context
    recorded: int = 0  # records made (cuEventRecord)
    done: int = 0  # records the fake GPU has reached


_Alloc = namedtuple("_Alloc", "buf size kind ctx")  # kind: "device", "host" or "mapped"
_Func = namedtuple("_Func", "handle name fn layout module")  # fn(arg_bytes) runs the kernel
_Owned = namedtuple("_Owned", "handle ctx items")  # module (name -> _Func), graph or exec (node -> (_Func, args))


def _addr(p: Any) -> int:
    """The address a pointer-like argument holds (byref, pointer, array, buffer, c_void_p, int, None)."""
    return (p or 0) if p is None or isinstance(p, int) else ctypes.cast(p, c_void_p).value or 0


def _fail_if(cond: Any, code: int) -> None:
    """If ``cond``, the current call returns ``code``."""
    if cond:
        raise _Rc(code)


def _put(p: Any, ctype: Any, value: Any) -> None:
    _fail_if(not _addr(p), 1)
    ctype.from_address(_addr(p)).value = value


def _put_str(buf: Any, n: int, s: str) -> None:
    data = s.encode()[: max(n - 1, 0)] + b"\0"
    ctypes.memmove(_addr(buf), data, min(len(data), n))


def _layout(sizes: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """(offset, size) of parameters of ``sizes``, each at its natural alignment."""
    out, off = [], 0
    for size in sizes:
        off += -off % min(size, 8)
        out.append((off, size))
        off += size
    return tuple(out)


class FakeCuda:
    """A fake libcuda; ``installed()`` puts it in place of ``arig.cuda._lib.lib``::

        fake = FakeCuda(gpus=2)
        image = fake.image(store=(store, (8, 4, 8)))  # name=(fn(arg_bytes), parameter sizes)
        with fake.installed():
            async with await arig.open(arig.cuda.gpu(0)) as dev:
                img = await dev.load(image)

    As libcuda (an H200 with driver 580 was asked): each GPU's primary context
    is refcounted; released to 0, or reset, it dies with its streams, memory,
    modules and graphs, and the next retain makes a fresh one under the same
    handle.  A stream's destroy returns at once and its queued work still runs;
    ``cuMemFree``, ``cuMemFreeHost``, ``cuModuleLoadData`` and the last
    release wait until the context's queued work is done.  A kernel raising ``Fault(code)`` (anything
    else: 719) sets the context's sticky ``faulted`` code, which later calls
    return, and its queued work, host functions included, never runs.

    Each stream is a thread, the fake GPU, running kernels, copies,
    ``cuStreamWriteValue64`` writes, host functions (as
    ``CFUNCTYPE(None, c_void_p)(fn)(userdata)``) and graph launches (each a
    snapshot of its exec) in order; ``hold``/``release`` stop and restart it
    between items.  Memory is host memory: device pointers are addresses, and
    freed blocks stay mapped until ``shutdown``.  ``log`` records every call
    (name, calling thread, arguments, result); ``destroyed`` exec and graph
    destroys and module unloads, in order; ``violations`` misuse a real driver
    might not report at once (queued work touching freed memory, a destroyed
    handle destroyed again, a module unloaded under a graph, a double free).

    ``gpus``: how many (or their ``FakeGpu``); ``memops=False``: no
    cuStreamWriteValue64_v2; ``available=False``: as if libcuda.so.1 could not
    be loaded; ``sticky_faults=True``: a fault poisons the process, as 700/719
    do on a real GPU (every context, even a fresh one, returns the code).
    """

    def __init__(
        self, gpus: int | Sequence[FakeGpu] = 1, *, driver_version: int = 12080, memops: bool = True, available: bool = True, sticky_faults: bool = False
    ) -> None:
        self.gpus = [FakeGpu(bus=f"0000:{0x3B + i:02X}:00.0") for i in range(gpus)] if isinstance(gpus, int) else list(gpus)
        self.driver_version, self.memops, self.available, self.sticky_faults = driver_version, memops, available, sticky_faults
        self.poisoned, self._inited = 0, False
        self.log: list[Call] = []
        self.destroyed: list[tuple[str, int]] = []  # ("exec" | "graph" | "module", handle)
        self.violations: list[str] = []
        self.contexts: dict[int, _Context] = {}
        self.streams: dict[int, _Stream] = {}
        self.events: dict[int, _Event] = {}
        self._cond = threading.Condition(threading.RLock())  # guards everything
        # Each OS thread's current context handle, by thread id: a native thread
        # calls through ctypes callbacks, whose Python thread state (and so any
        # threading.local) lives only for one call.
        self._cur: dict[int, int] = {}
        self._primary: dict[int, _Context] = {}
        self.ctx_flags: dict[int, int] = {}  # per GPU: the primary context's CU_CTX_* flags
        self._memory: dict[int, _Alloc] = {}
        self._freed: list[_Alloc] = []
        self._modules: dict[int, _Owned] = {}  # items: name -> _Func
        self._graphs: dict[int, _Owned] = {}  # items: node -> (_Func, args)
        self._execs: dict[int, _Owned] = {}  # items: node -> (_Func, args)
        self._funcs: dict[int, _Func] = {}
        self._specs: dict[int, dict[str, Any]] = {}  # fake image number -> kernels
        self._strings: dict[bytes, Any] = {}  # the const char * handed out
        self._thunks: dict[str, Any] = {}
        self._threads: list[threading.Thread] = []

    # -- for tests -----------------------------------------------------------------
    def image(self, **kernels: tuple[Callable[[bytes], Any], Sequence[int]]) -> bytes:
        """Image bytes declaring ``name=(fn, param_sizes)`` kernels; the fake GPU calls ``fn(arg_bytes)``."""
        n = next(_images)
        self._specs[n] = {k: (fn, _layout(sizes)) for k, (fn, sizes) in kernels.items()}
        return f"// arig fake image {n}\n".encode()

    def hold(self, stream: int | None = None, held: bool = True) -> None:
        """Stop ``stream``'s fake GPU (every stream's if None) before its next item."""
        with self._cond:
            for s in self.streams.values() if stream is None else [self.streams[stream]]:
                s.held = held
            self._cond.notify_all()

    release = partialmethod(hold, held=False)

    def drain(self, stream: int, timeout: float = 10.0) -> bool:
        """Wait until ``stream`` has nothing queued; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self.streams[stream].items, timeout)

    def calls(self, name: str | None = None) -> list[Call]: return [c for c in list(self.log) if name is None or c.name == name]
    def primary(self, ordinal: int = 0) -> _Context: return self._primary[ordinal]  # GPU ordinal's latest context

    @contextmanager
    def installed(self) -> Iterator[FakeCuda]:
        """Be libcuda for arig (``arig.cuda._lib.lib.swap``), with fresh process-wide CUDA
        state (GPU states, kernel layouts); restore everything and shut down on exit."""
        saved = lib_module.lib.swap(self), _gpu._states, dict(_launch._LAYOUTS)
        _gpu._states = {}
        _launch._LAYOUTS.clear()
        try:
            yield self
        finally:
            lib_module.lib.swap(saved[0])
            _gpu._states = saved[1]
            _launch._LAYOUTS.clear()
            _launch._LAYOUTS.update(saved[2])
            self.shutdown()

    def shutdown(self) -> None:
        """Destroy every context: queued work is dropped and the fake GPU threads end."""
        with self._cond:
            for ctx in list(self.contexts.values()):
                self._destroy_context(ctx)
        for t in self._threads:
            t.join(timeout=5.0)

    # -- what arig calls -----------------------------------------------------------------
    def has(self, name: str) -> bool:
        if not self.available:
            raise CudaUnavailable("cannot load libcuda.so.1 (FakeCuda(available=False))")
        return hasattr(self, "_" + name) and (self.memops or name != "cuStreamWriteValue64_v2")

    def address(self, name: str) -> int | None:
        """A C-callable thunk of fake function ``name`` (what C fills call), or None."""
        if not self.has(name):
            return None
        if name not in self._thunks:
            restype, argtypes = _PROTOS[name]
            proto = ctypes.CFUNCTYPE(restype, *(c_void_p if t is c_char_p else t for t in argtypes))
            self._thunks[name] = proto(lambda *a: self._call(name, a, check=False))
        return ctypes.cast(self._thunks[name], c_void_p).value

    def __getattr__(self, name: str) -> Any:
        if name not in _PROTOS:
            raise AttributeError(name)
        return lambda *args: self._call(name, args)  # lib.cuXxx(...), as arig calls it

    def _call(self, name: str, args: tuple[Any, ...], check: bool = True) -> int:
        if not self.has(name):
            raise CudaUnavailable(f"this libcuda has no {name}: the driver is too old")
        argtypes = _PROTOS[name][1]
        if check and len(args) != len(argtypes):
            raise TypeError(f"{name} takes {len(argtypes)} arguments ({len(args)} given)")
        for i, (t, a) in enumerate(zip(argtypes, args) if check else ()):
            try:
                t.from_param(a)  # what ctypes does with argtypes
            except TypeError as exc:
                raise ctypes.ArgumentError(f"{name} argument {i + 1}: {exc}") from None
        with self._cond:
            try:
                rc = 3 if not self._inited and name not in _NO_INIT_NEEDED else getattr(self, "_" + name)(*args) or 0
            except _Rc as r:
                rc = r.args[0]
            self.log.append(Call(name, threading.get_ident(), args, rc))
            return rc

    # -- helpers (lock held) ----------------------------------------------------------
    def _current(self) -> _Context: return self._usable(self.contexts.get(self._cur.get(threading.get_ident(), 0)), 201)

    def _find(self, addr: int, n: int, kinds: Sequence[str] = ("device", "mapped")) -> _Alloc | None:
        return next((a for base, a in self._memory.items() if base <= addr and addr + n <= base + a.size and a.kind in kinds), None)

    def _spec(self, dev: int) -> FakeGpu:
        _fail_if(not 0 <= dev < len(self.gpus), 101)  # CUDA_ERROR_INVALID_DEVICE
        return self.gpus[dev]

    def _usable(self, ctx: _Context | None, none: int = 400) -> _Context:
        if ctx is None or not ctx.alive:
            raise _Rc(none if ctx is None else 709)  # CUDA_ERROR_CONTEXT_IS_DESTROYED
        _fail_if(ctx.faulted or self.poisoned, ctx.faulted or self.poisoned)  # sticky
        return ctx

    def _stream(self, h: Any, enqueue: bool = False) -> _Stream:
        s = self._get(self.streams, h)
        self._usable(s.ctx)
        _fail_if(s.destroyed or (enqueue and self._cur.get(threading.get_ident(), 0) != s.ctx.handle), 400 if s.destroyed else 201)  # work is enqueued with the stream's context current
        stream: _Stream = s
        return stream

    def _enqueue(self, s: _Stream, item: Callable[[], Any]) -> None:
        s.items.append(item)
        self._cond.notify_all()

    def _get(self, table: dict[int, Any], h: Any) -> Any:
        o = table.get(_addr(h))
        _fail_if(o is None or (table is self._funcs and o.module not in self._modules), 400)
        return o

    def _guard(self, addr: int, n: int, what: str) -> bool:
        """On the fake GPU: may queued work touch [addr, addr+n)?  If not, record a violation."""
        with self._cond:
            if self._find(addr, n) is None:
                self.violations.append(f"{what} touched 0x{addr:x}+{n}, which is not allocated (freed while work was queued?)")
                return False
            return True

    def _args(self, f: _Func, params: Any, extra: Any) -> bytes:
        """The argument bytes of a launch (CU_LAUNCH_PARAM_BUFFER_* ``extra``, or ``kernelParams``)."""
        need = max((off + size for off, size in f.layout), default=0)
        if e := _addr(extra):
            ptr = size = i = 0
            while key := c_void_p.from_address(e + 8 * i).value or 0:
                val = c_void_p.from_address(e + 8 * i + 8).value or 0
                _fail_if(key not in (1, 2), 1)
                ptr, size = (val, size) if key == 1 else (ptr, c_size_t.from_address(val).value)
                i += 2
            data = ctypes.string_at(ptr, size) if size else b""
        elif p := _addr(params):
            buf = bytearray(need)
            for j, (off, size) in enumerate(f.layout):
                buf[off : off + size] = ctypes.string_at(c_void_p.from_address(p + 8 * j).value or 0, size)
            data = bytes(buf)
        else:
            data = b""
        _fail_if(len(data) != need, 1)
        return data

    def _fault(self, ctx: _Context, code: int) -> None:
        ctx.faulted = ctx.faulted or code
        self.poisoned = self.poisoned or (code if self.sticky_faults else 0)
        for s in self.streams.values():
            if s.ctx is ctx:
                s.items.clear()
        self._cond.notify_all()

    def _idle(self, ctx: _Context) -> bool:
        return not ctx.alive or bool(ctx.faulted) or not any(s.items for s in self.streams.values() if s.ctx is ctx)

    def _destroy_context(self, ctx: _Context) -> None:
        """A context dies (released to 0, or reset) with everything it holds."""
        ctx.alive = False
        for s in self.streams.values():
            if s.ctx is ctx:
                s.items.clear()
                s.alive, s.destroyed = False, True
        for table in (self._modules, self._graphs, self._execs):
            for h in [h for h, o in table.items() if o.ctx is ctx]:
                del table[h]
        for base in [b for b, a in self._memory.items() if a.ctx is ctx]:
            self._freed.append(self._memory.pop(base))
        self._cond.notify_all()

    def _run(self, s: _Stream) -> None:
        """The fake GPU of one stream."""
        while True:
            with self._cond:
                self._cond.wait_for(lambda: not s.alive or (s.items and not s.held))
                if not s.alive:
                    return
                item = s.items[0]
            try:
                item()
                code = 0
            except Exception as exc:  # noqa: BLE001 - a Fault's code, else an unspecified launch failure
                code = exc.code if isinstance(exc, Fault) else 719
            with self._cond:
                if s.items and s.items[0] is item:
                    s.items.popleft()
                if code:
                    self._fault(s.ctx, code)
                s.alive = s.alive and not (s.destroyed and not s.items)
                self._cond.notify_all()

    def _new(self, table: dict[int, Any], p: Any, make: Callable[[int], Any]) -> Any:
        """Make an object with a fresh handle, file it in ``table`` and write the handle to ``p``."""
        h = next(_handles)
        o = table[h] = make(h)
        _put(p, c_void_p, h)
        return o

    def _destroy(self, kind: str, table: dict[int, Any], h: Any) -> Any:
        """Destroy a live handle (a dead one would crash a real driver: a violation)."""
        o = table.pop(_addr(h), None)
        if o is None:
            self.violations.append(f"{kind} 0x{_addr(h):x} destroyed, but it is not live (destroyed twice, or died with its context?)")
            raise _Rc(400)
        self.destroyed.append((kind, o.handle))
        return o

    def _cstr(self, p: Any, s: str) -> None:
        """Write to ``p`` a ``const char *`` to ``s`` that stays valid ("": CUDA_ERROR_INVALID_VALUE)."""
        _fail_if(not s, 1)
        _put(p, c_void_p, ctypes.addressof(self._strings.setdefault(s.encode(), ctypes.create_string_buffer(s.encode()))))

    # -- driver functions (lock held; each returns None or a CUresult, or raises _Rc) ----------
    # Queries, then every function whose work fits one line:
    def _cuDriverGetVersion(self, p: Any) -> None: _put(p, c_int, self.driver_version)
    def _cuDeviceGetCount(self, p: Any) -> None: _put(p, c_int, len(self.gpus))
    def _cuDeviceGet(self, p: Any, i: int) -> None: _put(p, c_int, self.gpus.index(self._spec(i)))
    def _cuDeviceGetName(self, buf: Any, n: int, dev: int) -> None: _put_str(buf, n, self._spec(dev).name)
    def _cuDeviceGetPCIBusId(self, buf: Any, n: int, dev: int) -> None: _put_str(buf, n, self._spec(dev).bus)
    def _cuDeviceGetAttribute(self, p: Any, attr: int, dev: int) -> None: _put(p, c_int, self._spec(dev).attributes().get(attr, 0))
    def _cuDeviceTotalMem_v2(self, p: Any, dev: int) -> None: _put(p, c_size_t, self._spec(dev).memory)
    def _cuGetErrorName(self, code: int, p: Any) -> None: self._cstr(p, ERRORS.get(code, ("",))[0])
    def _cuGetErrorString(self, code: int, p: Any) -> None: self._cstr(p, ERRORS.get(code, ("", ""))[1])
    def _cuCtxGetCurrent(self, p: Any) -> None: _put(p, c_void_p, self._cur.get(threading.get_ident(), 0) or None)
    def _cuStreamQuery(self, h: Any) -> int: return 600 if self._stream(h).items else 0
    def _cuMemHostAlloc(self, p: Any, n: int, flags: int) -> None: self._cuMemAlloc_v2(p, n, "mapped" if flags & 2 else "host", c_void_p)
    def _cuMemcpyHtoDAsync_v2(self, dst: int, src: Any, n: int, h: Any) -> None: self._copy(h, dst, _addr(src), n, dst)
    def _cuMemcpyDtoHAsync_v2(self, dst: Any, src: int, n: int, h: Any) -> None: self._copy(h, _addr(dst), src, n, src)
    def _cuModuleGetFunctionCount(self, p: Any, h: Any) -> None: _put(p, c_uint, len(self._get(self._modules, h).items))
    def _cuFuncGetName(self, p: Any, h: Any) -> None: self._cstr(p, self._get(self._funcs, h).name)
    def _cuGraphCreate(self, p: Any, flags: int) -> None: self._new(self._graphs, p, lambda h: _Owned(h, self._current(), {}))
    def _cuGraphExecDestroy(self, h: Any) -> None: self._destroy("exec", self._execs, h)
    def _cuGraphDestroy(self, h: Any) -> None: self._destroy("graph", self._graphs, h)

    # init, contexts
    def _cuInit(self, flags: int) -> None:
        self._inited = True
        _fail_if(not self.gpus, 100)  # CUDA_ERROR_NO_DEVICE

    def _cuDevicePrimaryCtxRetain(self, p: Any, dev: int) -> None:
        self._spec(dev)
        old = self._primary.get(dev)
        if old is None or not old.alive:  # a fresh context, under the GPU's one handle (as libcuda does)
            h = old.handle if old else next(_handles)
            self._primary[dev] = self.contexts[h] = _Context(h, dev, old.refs if old else 0)
        self._primary[dev].refs += 1
        _put(p, c_void_p, self._primary[dev].handle)

    def _cuDevicePrimaryCtxRelease_v2(self, dev: int) -> None:
        self._spec(dev)
        ctx = self._primary.get(dev)
        if ctx is None or ctx.refs <= 0:
            self.violations.append(f"cuDevicePrimaryCtxRelease({dev}) of a context nobody retained")
            raise _Rc(201)
        ctx.refs -= 1
        if ctx.refs == 0 and ctx.alive:
            self._cond.wait_for(lambda: self._idle(ctx) or ctx.refs > 0)  # as libcuda: the last release waits for queued work
            if ctx.refs == 0:
                self._destroy_context(ctx)

    def _cuDevicePrimaryCtxReset_v2(self, dev: int) -> None:
        self._spec(dev)
        ctx = self._primary.get(dev)
        if ctx is not None and ctx.alive:  # even while others hold it; their retains stay counted
            self._cond.wait_for(lambda: self._idle(ctx))
            self._destroy_context(ctx)

    def _cuDevicePrimaryCtxGetState(self, dev: int, flags: Any, active: Any) -> None:
        self._spec(dev)
        ctx = self._primary.get(dev)
        _put(flags, c_uint, self.ctx_flags.get(dev, 0))
        _put(active, c_int, int(ctx is not None and ctx.alive and ctx.refs > 0))

    def _cuDevicePrimaryCtxSetFlags_v2(self, dev: int, flags: int) -> None:
        self._spec(dev)
        self.ctx_flags[dev] = flags

    def _cuCtxSetCurrent(self, h: Any) -> None:
        _fail_if(_addr(h) and _addr(h) not in self.contexts, 201)
        self._cur[threading.get_ident()] = _addr(h)  # a handle: the primary context made anew under it is current too

    # streams
    def _cuStreamCreate(self, p: Any, flags: int) -> None:
        s = self._new(self.streams, p, lambda h: _Stream(h, self._current()))
        self._threads.append(t := threading.Thread(target=self._run, args=(s,), name=f"fake-gpu-stream-{s.handle:x}", daemon=True))
        t.start()

    def _cuStreamDestroy_v2(self, h: Any) -> None:
        s = self._get(self.streams, h)
        _fail_if(s.destroyed, 400)
        s.destroyed, s.alive = True, s.alive and bool(s.items)
        self._cond.notify_all()

    def _cuStreamSynchronize(self, h: Any) -> int:
        s = self._stream(h)
        self._cond.wait_for(lambda: not s.items or s.ctx.faulted or not s.alive)
        return s.ctx.faulted

    def _cuStreamWriteValue64_v2(self, h: Any, addr: int, value: int, flags: int) -> None:
        s = self._stream(h, enqueue=True)
        _fail_if(self._find(addr, 8) is None, 1)
        def write() -> None:
            if self._guard(addr, 8, "cuStreamWriteValue64"):
                c_uint64.from_address(addr).value = value

        self._enqueue(s, write)

    def _cuLaunchHostFunc(self, h: Any, fn: Any, userdata: Any) -> None:
        s, fp, ud = self._stream(h, enqueue=True), _addr(fn), _addr(userdata)
        _fail_if(not fp, 1)
        self._enqueue(s, lambda: _HOST_FN(fp)(ud))

    # events: a record is an item of its stream; a wait is an item that blocks its stream until
    # the record it saw at the call is reached (a never-recorded event is complete, as in CUDA)
    def _cuEventCreate(self, p: Any, flags: int) -> None:
        self._new(self.events, p, lambda h: _Event(h, self._current()))

    def _cuEventDestroy_v2(self, h: Any) -> None:
        self._destroy("event", self.events, h)

    def _cuEventRecord(self, h: Any, sh: Any) -> None:
        ev, s = self._get(self.events, h), self._stream(sh, enqueue=True)
        _fail_if(ev.ctx is not s.ctx, 400)
        ev.recorded += 1
        n = ev.recorded

        def reach() -> None:
            with self._cond:
                ev.done = max(ev.done, n)
                self._cond.notify_all()

        self._enqueue(s, reach)

    def _cuEventQuery(self, h: Any) -> int:
        ev = self._get(self.events, h)
        return 600 if ev.done < ev.recorded else 0

    def _cuStreamWaitEvent(self, sh: Any, h: Any, flags: int) -> None:
        s, ev = self._stream(sh, enqueue=True), self._get(self.events, h)
        n = ev.recorded

        def wait() -> None:
            with self._cond:
                self._cond.wait_for(lambda: ev.done >= n or not s.alive or bool(s.ctx.faulted))

        self._enqueue(s, wait)

    def _cuLaunchKernel(self, f: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared: int, h: Any, params: Any, extra: Any) -> None:
        k, s = self._get(self._funcs, f), self._stream(h, enqueue=True)
        _fail_if(self._modules[k.module].ctx is not s.ctx or 0 in (gx, gy, gz, bx, by, bz), 1)
        args = self._args(k, params, extra)
        self._enqueue(s, lambda: k.fn(args))

    # memory
    def _cuMemAlloc_v2(self, p: Any, n: int, kind: str = "device", out: Any = c_uint64) -> None:
        ctx = self._current()
        used = sum(a.size for a in self._memory.values() if a.kind == "device" and a.ctx.ordinal == ctx.ordinal)
        _fail_if(n <= 0 or (kind == "device" and used + n > self.gpus[ctx.ordinal].memory), 1 if n <= 0 else 2)
        buf = ctypes.create_string_buffer(n + 256)
        addr = (ctypes.addressof(buf) + 255) & ~255  # as cuMemAlloc's: 256-aligned
        self._memory[addr] = _Alloc(buf, n, kind, ctx)
        _put(p, out, addr)

    def _free(self, addr: Any, kinds: tuple[str, ...]) -> int:
        a = self._memory.get(addr := _addr(addr))
        if a is None or a.kind not in kinds:
            self.violations.append(f"free of 0x{addr:x}, not a live {'/'.join(kinds)} allocation")
            raise _Rc(1)
        self._cond.wait_for(lambda: self._idle(a.ctx))  # as libcuda: a free waits for queued work
        _fail_if(self._memory.pop(addr, None) is not a, 1)  # freed meanwhile by another thread
        self._freed.append(a)
        return int(a.ctx.faulted)

    _cuMemFree_v2 = partialmethod(_free, kinds=("device",))
    _cuMemFreeHost = partialmethod(_free, kinds=("host", "mapped"))

    def _cuMemHostGetDevicePointer_v2(self, p: Any, host: Any, flags: int) -> None:
        self._current()
        _fail_if(flags or self._find(_addr(host), 1, ("mapped",)) is None, 1)
        _put(p, c_uint64, _addr(host))

    def _copy(self, h: Any, dst: int, src: int, n: int, dev: int) -> None:
        s = self._stream(h, enqueue=True)
        _fail_if(self._find(dev, n) is None, 1)
        self._enqueue(s, lambda: self._guard(dev, n, "cuMemcpy") and ctypes.memmove(dst, src, n))

    # modules
    def _cuModuleLoadData(self, p: Any, image: Any) -> None:
        self._cond.wait_for(lambda: self._idle(self._current()))  # as libcuda: a load waits for queued work
        m = self._new(self._modules, p, lambda h: _Owned(h, self._current(), {}))
        found = re.match(rb"// arig fake image (\d+)\n", ctypes.string_at(_addr(image)))
        for name, (fn, layout) in self._specs.get(int(found[1]) if found else 0, {}).items():
            fh = next(_handles)
            m.items[name] = self._funcs[fh] = _Func(fh, name, fn, layout, m.handle)

    def _cuModuleUnload(self, h: Any) -> None:
        m = self._destroy("module", self._modules, h)
        if any(f.module == m.handle for g in (*self._graphs.values(), *self._execs.values()) for f, _ in g.items.values()):
            self.violations.append(f"module 0x{m.handle:x} unloaded while a graph uses its kernels")

    def _cuModuleEnumerateFunctions(self, arr: Any, n: int, h: Any) -> None:
        for i, f in enumerate(list(self._get(self._modules, h).items.values())[:n]):
            c_void_p.from_address(_addr(arr) + 8 * i).value = f.handle

    def _cuModuleGetFunction(self, p: Any, h: Any, name: Any) -> None:
        f = self._get(self._modules, h).items.get((name if isinstance(name, bytes) else ctypes.string_at(name)).decode())
        _fail_if(f is None, 500)
        _put(p, c_void_p, f.handle)

    def _cuFuncGetParamInfo(self, h: Any, k: int, off: Any, size: Any) -> None:
        layout = self._get(self._funcs, h).layout
        _fail_if(k >= len(layout), 1)  # past the last parameter
        _put(off, c_size_t, layout[k][0])
        _put(size, c_size_t, layout[k][1])

    # graphs
    def _node(self, params: Any) -> tuple[_Func, bytes]:
        kp = KERNEL_NODE_PARAMS.from_address(_addr(params))
        f = self._get(self._funcs, kp.func)
        return f, self._args(f, kp.kernelParams, kp.extra)

    def _cuGraphAddKernelNode_v2(self, p: Any, h: Any, deps: Any, ndeps: int, params: Any) -> None:
        g = self._get(self._graphs, h)
        _fail_if(any((c_void_p.from_address(_addr(deps) + 8 * i).value or 0) not in g.items for i in range(ndeps)), 1)  # a dependency on no node of this graph
        node = next(_handles)
        g.items[node] = self._node(params)  # runs in insertion order: each after its dependencies
        _put(p, c_void_p, node)

    def _cuGraphInstantiateWithFlags(self, p: Any, h: Any, flags: int) -> None:
        g = self._get(self._graphs, h)
        self._new(self._execs, p, lambda e: _Owned(e, g.ctx, dict(g.items)))

    def _cuGraphExecKernelNodeSetParams_v2(self, h: Any, node: Any, params: Any) -> None:
        e, new = self._get(self._execs, h), self._node(params)
        _fail_if(e.items.get(_addr(node), (None,))[0] is not new[0], 1)  # no such node, or another function: a node's function is fixed
        e.items[_addr(node)] = new

    def _cuGraphLaunch(self, h: Any, stream: Any) -> None:
        e, s = self._get(self._execs, h), self._stream(stream, enqueue=True)
        snapshot = list(e.items.values())  # later updates reach only later launches
        self._enqueue(s, lambda: [f.fn(a) for f, a in snapshot])
