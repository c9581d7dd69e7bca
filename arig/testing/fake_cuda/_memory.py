"""The fake driver's memory: allocations (host memory standing for the GPU's), frees and copies (lock held).
"""

from __future__ import annotations

import ctypes
from ctypes import c_uint64, c_void_p
from functools import partialmethod
from typing import Any

from ._driver import _Driver
from ._objects import _addr, _Alloc, _fail_if, _put, _Rc


class _Memory(_Driver):
    def _cuMemHostAlloc(self, p: Any, n: int, flags: int) -> None: self._cuMemAlloc_v2(p, n, "mapped" if flags & 2 else "host", c_void_p)
    def _cuMemcpyHtoDAsync_v2(self, dst: int, src: Any, n: int, h: Any) -> None: self._copy(h, dst, _addr(src), n, dst)
    def _cuMemcpyDtoHAsync_v2(self, dst: Any, src: int, n: int, h: Any) -> None: self._copy(h, _addr(dst), src, n, src)

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
