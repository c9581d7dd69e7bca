"""The fake driver's init, GPU queries, error strings and primary contexts (lock held).
"""

from __future__ import annotations

import threading
from ctypes import c_int, c_size_t, c_uint, c_void_p
from typing import Any

from ._driver import _Driver
from ._objects import ERRORS, _addr, _Context, _fail_if, _handles, _put, _put_str, _Rc


class _Contexts(_Driver):
    # Queries, whose work fits one line:
    def _cuDriverGetVersion(self, p: Any) -> None: _put(p, c_int, self.driver_version)
    def _cuDeviceGetCount(self, p: Any) -> None: _put(p, c_int, len(self.gpus))
    def _cuDeviceGet(self, p: Any, i: int) -> None: _put(p, c_int, self.gpus.index(self._spec(i)))
    def _cuDeviceGetName(self, buf: Any, n: int, dev: int) -> None: _put_str(buf, n, self._spec(dev).name)
    def _cuDeviceGetPCIBusId(self, buf: Any, n: int, dev: int) -> None: _put_str(buf, n, self._spec(dev).bus)
    def _cuDeviceGetAttribute(self, p: Any, attr: int, dev: int) -> None: _put(p, c_int, self._spec(dev).attributes().get(attr, 0))
    def _cuDeviceTotalMem_v2(self, p: Any, dev: int) -> None: _put(p, c_size_t, self._spec(dev).memory)
    def _cuDeviceCanAccessPeer(self, p: Any, dev: int, peer: int) -> None:
        self._spec(peer)
        _fail_if(dev == peer, 1)  # CUDA_ERROR_INVALID_VALUE: a GPU is not its own peer (libcuda says so too)
        _put(p, c_int, int(self._spec(dev).peer_access))
    def _cuGetErrorName(self, code: int, p: Any) -> None: self._cstr(p, ERRORS.get(code, ("",))[0])
    def _cuGetErrorString(self, code: int, p: Any) -> None: self._cstr(p, ERRORS.get(code, ("", ""))[1])
    def _cuCtxGetCurrent(self, p: Any) -> None: _put(p, c_void_p, self._cur.get(threading.get_ident(), 0) or None)

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
