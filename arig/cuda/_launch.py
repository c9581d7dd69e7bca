"""Kernel arguments and launches from Python fills.

A kernel's arguments travel as one buffer laid out as the kernel reads them
(``CU_LAUNCH_PARAM_BUFFER_POINTER``): each parameter at its natural
alignment.  Where the driver reported the kernel's parameter layout at load
(``cuFuncGetParamInfo``), a buffer of the wrong size is refused here, with a
``ValueError`` naming the layout, before it can reach the GPU.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from .._errors import ArigTypeError, ArigValueError
from .._memory import Buffer
from .._launchspec import dims
from .._native import LAUNCH, LaunchRecord
from ._lib import lib

__all__ = ["pack", "check_args", "Launch", "dims", "layout_of"]

#: CUfunction -> its parameters as (offset, size), recorded when a device loads its image.
_LAYOUTS: dict[int, tuple[tuple[int, int], ...]] = {}


def layout_of(func: int) -> tuple[tuple[int, int], ...] | None:
    """The parameter layout of a loaded CUfunction, recorded at load (None if unknown)."""
    return _LAYOUTS.get(func)

_END, _BUFFER_POINTER, _BUFFER_SIZE = 0, 1, 2
_U32 = (1 << 32) - 1


def _bytes_of(value: Any) -> tuple[bytes, int]:
    if isinstance(value, Buffer):
        return int(value.address).to_bytes(8, "little"), 8
    if isinstance(value, np.generic):
        return value.tobytes(), value.dtype.alignment
    if isinstance(value, ctypes._SimpleCData):  # type: ignore[attr-defined,unused-ignore]
        return bytes(value), ctypes.alignment(value)
    raise ArigTypeError(
        f"kernel argument {value!r} has no fixed size: give numpy scalars (np.float32(2.0), np.int32(n), np.uint64(ptr)), ctypes scalars or Buffers"
    )


def pack(*values: Any) -> bytes:
    """The argument buffer of ``values``, each at its natural alignment.

    ``pack(np.float32(2.0), x_buf, y_buf, np.int32(n))`` for
    ``saxpy(float a, const float *x, float *y, int n)``.
    """
    out = bytearray()
    for value in values:
        data, align = _bytes_of(value)
        out += b"\0" * (-len(out) % align)
        out += data
    return bytes(out)


def check_args(func: int, args: bytes) -> None:
    """Raise ValueError if ``args`` does not match ``func``'s parameter layout (when known)."""
    layout = layout_of(func)
    if layout is None:
        return
    need = max((off + size for off, size in layout), default=0)
    if len(args) != need:
        raise ArigValueError(f"argument buffer of {len(args)} bytes for a kernel whose parameters (offset, size) are {list(layout)}: {need} bytes expected")


class Launch:
    """A prepared ``cuLaunchKernel``: build once, then submit it.

    ``await dev.submit(launch)`` hands it to the device's native thread,
    which launches it without Python (the fast path).  From a Python fill,
    ``launch(stream)`` launches it there and returns the CUresult, so a fill
    can ``return launch(queue)``.  Do not change a Launch (``set_args``)
    while a submission of it is pending: the launch reads its arguments when
    it runs, not when it was submitted.
    """

    __slots__ = ("func", "grid", "block", "shared", "_args", "_size", "_extra", "_rec", "_addr", "_item", "__weakref__")
    _extra: Any

    def __init__(self, func: int, grid: Any, block: Any, args: bytes = b"", shared: int = 0) -> None:
        if not isinstance(func, int) or func == 0:
            raise ArigValueError(f"func must be a CUfunction (a nonzero int), got {func!r}")
        self.func = func
        self.grid = dims(grid, "grid")
        self.block = dims(block, "block")
        if not 0 <= shared <= _U32:
            raise ArigValueError(f"shared must be in 0..2**32-1, got {shared}")
        self.shared = shared
        g, b = self.grid, self.block
        self._rec = LaunchRecord(func, (g[0], g[1], g[2]), (b[0], b[1], b[2]), shared, 0, None)
        self._addr = ctypes.addressof(self._rec)
        self._item = (LAUNCH, self._addr, 0, 0)  # what the native core is handed
        self.set_args(args)

    def set_args(self, args: bytes) -> None:
        """Replace the argument buffer (same layout check)."""
        check_args(self.func, args)
        self._args = ctypes.create_string_buffer(bytes(args), max(len(args), 1))
        self._size = ctypes.c_size_t(len(args))
        if args:
            self._extra = (ctypes.c_void_p * 5)(_BUFFER_POINTER, ctypes.addressof(self._args), _BUFFER_SIZE, ctypes.addressof(self._size), _END)
        else:
            self._extra = None
        self._rec.extra = None if self._extra is None else ctypes.addressof(self._extra)

    def __call__(self, stream: int) -> int:
        g, b = self.grid, self.block
        return int(lib.cuLaunchKernel(self.func, g[0], g[1], g[2], b[0], b[1], b[2], self.shared, stream, None, self._extra))
