"""The fake libcuda's core: its state, how a call is dispatched, and the helpers every
driver function uses (lock held).

Every driver function is a method ``_<name>`` of a subclass (``_contexts``, ``_streams``,
``_memory``, ``_modules``, ``_graphs``), called by ``_call`` with the fake's one lock held,
from whatever thread arig calls the driver on; ``_run`` is each stream's thread, the fake GPU.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence
from ctypes import c_char_p, c_size_t, c_void_p
from typing import Any

from ...cuda._lib import _PROTOS, CudaUnavailable
from ._objects import _NO_INIT_NEEDED, Call, FakeGpu, Fault, _addr, _Alloc, _Context, _Event, _fail_if, _Func, _handles, _Owned, _put, _Rc, _Stream


#: Every thunk handed out, kept for the life of the process: C may call a driver function from a
#: thread that outlives the fake (a native core's waiter left inside cuEventSynchronize on work that
#: hung returns from it later), as libcuda's functions never go away.
_IMMORTAL: list[Any] = []


class _Driver:
    """What every area of the fake driver shares: the tables, the lock, the dispatch."""

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

    # -- what arig calls -----------------------------------------------------------------
    def has(self, name: str) -> bool:
        if not self.available:
            raise CudaUnavailable("cannot load libcuda.so.1 (FakeCuda(available=False))")
        return hasattr(self, "_" + name) and (self.memops or name not in ("cuStreamWriteValue64_v2", "cuStreamWaitValue64_v2"))

    def address(self, name: str) -> int | None:
        """A C-callable thunk of fake function ``name`` (what C fills call), or None."""
        if not self.has(name):
            return None
        if name not in self._thunks:
            restype, argtypes = _PROTOS[name]
            proto = ctypes.CFUNCTYPE(restype, *(c_void_p if t is c_char_p else t for t in argtypes))
            self._thunks[name] = proto(lambda *a: self._call(name, a, check=False))
            _IMMORTAL.append(self._thunks[name])
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
