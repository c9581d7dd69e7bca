"""What a submission becomes on a CUDA device: the items the native core runs, or
the Python callables the pure path runs on the submit thread.  Pure data and
calls into libcuda; the loop builds items (no driver call), the submit or
native thread runs them."""

from __future__ import annotations

from typing import Any

from .. import _native
from ._lib import lib

__all__ = ["Copy"]


class _CFill:
    """A C fill, called through ctypes without the GIL."""

    __slots__ = ("fn",)

    def __init__(self, fn: Any) -> None:
        self.fn = fn


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


def _graph_fill(stream: int, graph: Any, v: int) -> int:
    return int(graph.launch(stream))


