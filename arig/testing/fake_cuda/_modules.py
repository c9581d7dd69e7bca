"""The fake driver's modules, their functions, and kernel launches (lock held).
"""

from __future__ import annotations

import ctypes
import re
import struct
import time
from ctypes import c_size_t, c_uint, c_uint64, c_void_p
from typing import Any

from ...cuda import _stamp
from ._driver import _Driver
from ._objects import _addr, _fail_if, _Func, _handles, _Owned, _put


_STAMP_LAYOUT = ((0, 8), (8, 8), (16, 8))


class _Modules(_Driver):
    def _cuModuleGetFunctionCount(self, p: Any, h: Any) -> None: _put(p, c_uint, len(self._get(self._modules, h).items))
    def _cuFuncGetName(self, p: Any, h: Any) -> None: self._cstr(p, self._get(self._funcs, h).name)

    def _cuLaunchKernel(self, f: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared: int, h: Any, params: Any, extra: Any) -> None:
        k, s = self._get(self._funcs, f), self._stream(h, enqueue=True)
        _fail_if(self._modules[k.module].ctx is not s.ctx or 0 in (gx, gy, gz, bx, by, bz), 1)
        args = self._args(k, params, extra)
        self._enqueue(s, lambda: k.fn(args))


    # modules
    def _cuModuleLoadData(self, p: Any, image: Any) -> None:
        self._cond.wait_for(lambda: self._idle(self._current()))  # as libcuda: a load waits for queued work
        m = self._new(self._modules, p, lambda h: _Owned(h, self._current(), {}))
        data = ctypes.string_at(_addr(image))
        found = re.match(rb"// arig fake image (\d+)\n", data)
        specs = self._specs.get(int(found[1]) if found else 0, {})
        if data.startswith(_stamp.MARK):  # arig's own stamp kernel: the fake GPU's timer is CLOCK_MONOTONIC
            specs = {_stamp.NAME.decode(): (self._stamp, _STAMP_LAYOUT)}
        for name, (fn, layout) in specs.items():
            fh = next(_handles)
            m.items[name] = self._funcs[fh] = _Func(fh, name, fn, layout, m.handle)

    def _stamp(self, args: bytes) -> None:
        """``arig_stamp(word, v, pair)`` on the fake GPU: {0, t}, {v, t}, then the word."""
        word, v, pair = struct.unpack("<QQQ", args[:24])
        if self._guard(pair, 16, "arig_stamp") and self._guard(word, 8, "arig_stamp"):
            c_uint64.from_address(pair).value = 0
            c_uint64.from_address(pair + 8).value = time.monotonic_ns()
            c_uint64.from_address(pair).value = v
            c_uint64.from_address(word).value = v

    def _cuModuleUnload(self, h: Any) -> None:
        # A device's own stamp kernel is told apart: tests of users' images count "module"s.
        stamp = any(f.name == _stamp.NAME.decode() for f in self._get(self._modules, h).items.values()) if _addr(h) in self._modules else False
        m = self._destroy("stamp module" if stamp else "module", self._modules, h)
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
