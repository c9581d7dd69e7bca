"""What a submission becomes on a CUDA device: the items the native core runs, or
the Python callables the pure path runs on the submit thread.  Pure data and
calls into libcuda; the loop builds items (no driver call), the submit or
native thread runs them."""

from __future__ import annotations

import ctypes
from ctypes import c_void_p
from typing import Any

from .. import _native
from .._errors import ArigTypeError, ArigValueError
from .._memory import Buffer
from ._lib import lib

__all__ = ["Copy"]


class _CFill:
    """A C fill, called through ctypes without the GIL."""

    __slots__ = ("fn",)

    def __init__(self, fn: Any) -> None:
        self.fn = fn


def _c_arg(arg: Any) -> int:
    """A C fill's arg as the address (or number) the fill receives: None is 0 (NULL)."""
    if arg is None:
        return 0
    if type(arg) is int:
        if not 0 <= arg < 1 << 64:
            raise ArigValueError(f"a C fill's int arg is passed as a void *: it must be in 0..2**64-1, got {arg}")
        return arg
    if isinstance(arg, ctypes.Structure):
        return ctypes.addressof(arg)
    if isinstance(arg, int) and not isinstance(arg, bool):
        return _c_arg(int(arg))
    if isinstance(arg, Buffer):
        return arg.address
    if isinstance(arg, ctypes._Pointer):  # type: ignore[attr-defined,unused-ignore]
        return ctypes.cast(arg, c_void_p).value or 0
    if isinstance(arg, (ctypes._SimpleCData, ctypes.Structure, ctypes.Array, ctypes.Union)):  # type: ignore[attr-defined,unused-ignore]
        return ctypes.addressof(arg)
    raise ArigTypeError(f"a C fill's arg must be None, an int address, a Buffer or a ctypes object, got {type(arg).__name__}")


class Copy:
    """A copy between host and device memory: run by the native core, or called as a Python fill."""

    __slots__ = ("kind", "a", "b", "c")

    def __init__(self, to_device: bool, dev: int, host: int, n: int) -> None:
        self.kind = _native.H2D if to_device else _native.D2H
        self.a, self.b, self.c = (dev, host, n) if to_device else (host, dev, n)

    def __call__(self, stream: int, arg: Any, v: int) -> int:
        if self.kind == _native.H2D:
            return int(lib.cuMemcpyHtoDAsync_v2(self.a, self.b, self.c, stream))
        return int(lib.cuMemcpyDtoHAsync_v2(self.a, self.b, self.c, stream))


def _launch_fill(stream: int, launch: Any, v: int) -> int:
    return int(launch(stream))


def _graph_fill(stream: int, graph: Any, v: int) -> int:
    return int(graph.launch(stream))


