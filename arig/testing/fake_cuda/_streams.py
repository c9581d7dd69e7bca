"""The fake driver's streams, their memory writes and host functions, and events (lock held).

Each stream is a thread (``_Driver._run``): what these functions enqueue runs there, in order.
"""

from __future__ import annotations

import threading
from ctypes import c_uint64
from typing import Any

from ._driver import _Driver
from ._objects import _HOST_FN, _addr, _Event, _fail_if, _Stream


def _geq(word: int, value: int) -> bool:
    """CU_STREAM_WAIT_VALUE_GEQ on 64-bit words: ``(int64_t)(word - value) >= 0``."""
    return (word - value) % (1 << 64) < (1 << 63)


class _Streams(_Driver):
    def _cuStreamQuery(self, h: Any) -> int: return 600 if self._stream(h).items else 0

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

    def _cuStreamWaitValue64_v2(self, h: Any, addr: int, value: int, flags: int) -> None:
        """An item that blocks its stream until the 64-bit word at ``addr`` is at least ``value``
        (CU_STREAM_WAIT_VALUE_GEQ, the one flag arig uses), compared as CUDA documents it:
        cyclically, ``(int64_t)(*addr - value) >= 0``, so a word more than 2**63 above the value
        reads as below it.  The word is host memory the host writes with no call to the fake, so
        the stream polls it; a wait still blocked when the fake shuts down is a violation (the
        GPU would spin on it for ever)."""
        s = self._stream(h, enqueue=True)
        _fail_if(flags != 0 or self._find(addr, 8, ("mapped",)) is None, 1)

        def wait() -> None:
            with self._cond:
                while not _geq(c_uint64.from_address(addr).value, value) and s.alive and not s.ctx.faulted:
                    self._cond.wait(0.002)

        wait.waits_for = (addr, value)  # type: ignore[attr-defined]
        self._enqueue(s, wait)

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
        ev.stream = s
        n = ev.recorded

        def reach() -> None:
            with self._cond:
                ev.done = max(ev.done, n)
                self._cond.notify_all()

        self._enqueue(s, reach)

    def _cuEventSynchronize(self, h: Any) -> int:
        """Block until the event's last record is reached (the fake's lock released meanwhile);
        a fault of its context returns its error, the end of its context or stream 709."""
        ev = self._get(self.events, h)
        n, s = ev.recorded, ev.stream
        self._cond.wait_for(lambda: ev.done >= n or bool(ev.ctx.faulted) or not ev.ctx.alive or (s is not None and not s.alive))
        return 0 if ev.done >= n else ev.ctx.faulted or 709  # CUDA_ERROR_CONTEXT_IS_DESTROYED

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
