"""The fake driver's objects (contexts, streams, events, allocations, functions) and the
small helpers every fake driver function uses to read arguments and return a ``CUresult``.

Plain data: each object lives in one of ``FakeCuda``'s tables, under its lock.
"""

from __future__ import annotations

import ctypes
import itertools
from collections import deque, namedtuple
from collections.abc import Callable, Sequence
from ctypes import c_void_p
from dataclasses import dataclass, field
from typing import Any, NamedTuple

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
    peer_access: bool = True  # cuDeviceCanAccessPeer from this GPU to every other fake GPU

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
    stream: _Stream | None = None  # the stream of the last record


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
