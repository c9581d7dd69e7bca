"""The GPU side every CUDA benchmark shares, through arig's own ctypes binding of libcuda.

``RawCuda`` retains GPU 0's primary context for the whole run and makes it
current on the main thread.  That does two jobs:

* the *raw floor*: the shipped cubin loaded straight through ctypes, a
  non-blocking stream, ``cuLaunchKernel`` + ``cuStreamSynchronize`` with no
  event loop, and the "on the loop thread" baselines of benchmark 4;
* it keeps the primary context alive between the benchmarks' devices, so
  each ``arig.open`` finds it made (arig, PyTorch and CuPy all use it).

Events created here time work inside fills (an event belongs to the
context, any stream of it may record it).

This is the one module of the benchmarks that uses a private name of arig.cuda:
``arig.cuda._lib``, arig's ctypes binding of libcuda.  The raw floor and the
loop-thread baselines must call libcuda with no arig device in between, and
arig has no public raw binding (a device's users never need one); binding
libcuda a second time here would measure another binding, not the same calls.
Everything else (the shipped image, ``Launch``, ``pack``) is public.
"""

from __future__ import annotations

import ctypes
from ctypes import byref, c_float, c_int, c_void_p
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["RawCuda", "cubin_path", "get_raw", "gpu_name"]

_RAW: RawCuda | None = None


def cubin_path() -> str:
    """The shipped cubin's path (next to the fatbin ``arig.cuda.shipped_image()`` reads)."""
    import arig

    return str(Path(arig.__file__).resolve().parent / "kernels" / "kernels.cubin")


def gpu_name() -> str | None:
    """GPU 0's name as libcuda gives it, or None where there is no libcuda or no GPU 0."""
    try:
        from arig.cuda._lib import lib

        name = ctypes.create_string_buffer(256)
        dev = c_int()
        if lib.cuDeviceGet(byref(dev), 0) == 0 and lib.cuDeviceGetName(name, 256, dev.value) == 0:
            return name.value.decode()
    except Exception:  # noqa: BLE001
        pass
    return None


def get_raw() -> RawCuda:
    """The process's one RawCuda (made on first use, on the calling thread: call it from the main thread)."""
    global _RAW
    if _RAW is None:
        _RAW = RawCuda()
    return _RAW


class RawCuda:
    def __init__(self) -> None:
        from arig.cuda import shipped_image
        from arig.cuda._lib import check, lib

        self.lib, self.check = lib, check
        check(lib.cuInit(0), "cuInit")
        dev = c_int()
        check(lib.cuDeviceGet(byref(dev), 0), "cuDeviceGet")
        self.cudev = dev.value
        ctx = c_void_p()
        check(lib.cuDevicePrimaryCtxRetain(byref(ctx), self.cudev), "cuDevicePrimaryCtxRetain")
        self.ctx = ctx.value
        self.make_current()
        data = shipped_image()
        self._image = ctypes.create_string_buffer(data, len(data))
        mod = c_void_p()
        check(lib.cuModuleLoadData(byref(mod), self._image), "cuModuleLoadData")
        self.module = mod.value
        self.funcs: dict[str, int] = {}
        for name in ("empty", "spin", "store", "step"):
            f = c_void_p()
            check(lib.cuModuleGetFunction(byref(f), self.module, name.encode()), f"cuModuleGetFunction({name})")
            self.funcs[name] = f.value or 0
        s = c_void_p()
        check(lib.cuStreamCreate(byref(s), 1), "cuStreamCreate")  # CU_STREAM_NON_BLOCKING
        self.stream = s.value or 0
        self._elapsed = self._bind_elapsed()
        #: Two events for timing work inside fills (made here: the loop thread never makes them).
        self.timing_events = (self.event(), self.event())

    def make_current(self) -> None:
        """Make the primary context current on the calling thread."""
        self.check(self.lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    # -- launches ------------------------------------------------------------------
    def function(self, name: str) -> int:
        """The CUfunction of this module's kernel ``name`` (looked up once, then kept)."""
        if name not in self.funcs:
            f = c_void_p()
            self.check(self.lib.cuModuleGetFunction(byref(f), self.module, name.encode()), f"cuModuleGetFunction({name})")
            self.funcs[name] = f.value or 0
        return self.funcs[name]

    def launch(self, name: str, args: bytes = b"", grid: int = 1) -> Any:
        """An ``arig.cuda.Launch`` of this module's kernel ``name`` (``grid`` blocks of 1 thread)."""
        from arig.cuda import Launch

        return Launch(self.function(name), grid, 1, args)

    def spin_or_empty(self, us: int) -> Any:
        from arig.cuda import pack

        return self.launch("empty") if us == 0 else self.launch("spin", pack(np.uint64(us * 1000)))

    def sync(self) -> None:
        self.check(self.lib.cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    # -- events ------------------------------------------------------------------
    def event(self) -> int:
        e = c_void_p()
        self.check(self.lib.cuEventCreate(byref(e), 0), "cuEventCreate")  # CU_EVENT_DEFAULT: timing on
        return e.value or 0

    def record(self, event: int, stream: int) -> int:
        rc: int = self.lib.cuEventRecord(event, stream)
        return rc

    def elapsed_ms(self, e0: int, e1: int) -> float:
        """Milliseconds between two completed events.  Any thread (the context is made current)."""
        self.make_current()
        self.check(self.lib.cuEventSynchronize(e1), "cuEventSynchronize")
        ms = c_float()
        self.check(self._elapsed(byref(ms), e0, e1), "cuEventElapsedTime")
        return float(ms.value)

    def _bind_elapsed(self) -> Any:
        if self.lib.has("cuEventElapsedTime_v2"):
            return self.lib.cuEventElapsedTime_v2
        f = self.lib.dll().cuEventElapsedTime
        f.restype, f.argtypes = c_int, (ctypes.POINTER(c_float), c_void_p, c_void_p)
        return f

    # -- host memory (benchmark 4's on-the-loop baseline) ---------------------------
    def host_alloc(self, nbytes: int) -> int:
        p = c_void_p()
        self.check(self.lib.cuMemHostAlloc(byref(p), nbytes, 1), f"cuMemHostAlloc({nbytes})")  # PORTABLE
        return p.value or 0

    def host_free(self, p: int) -> None:
        self.lib.cuMemFreeHost(p)
