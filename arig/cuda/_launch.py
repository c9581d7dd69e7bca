"""Kernel arguments and launches from Python fills.

A kernel's arguments travel as one buffer laid out as the kernel reads them
(``CU_LAUNCH_PARAM_BUFFER_POINTER``): each parameter at its natural
alignment.  Where the driver reported the kernel's parameter layout at load
(``cuFuncGetParamInfo``), a buffer of the wrong size is refused, with a
``ValueError`` naming the layout, before it can reach the GPU.

The layouts are process-wide, keyed by CUfunction, because functions are
process-wide handles: a graph's kernel node (``arig.cuda_abi``) is checked by
the same table as a :class:`Launch`.  They are written on a device's submit
thread at load and unload, and read on the event loop (a dict lookup).
"""

from __future__ import annotations

import ctypes
import importlib.resources
import struct
from typing import Any

from .._inline import Recorder
from .._launchspec import Args, LaunchSpec, ParamLayout, check_params, dims, pack
from .._native import LAUNCH, LaunchRecord
from ._lib import lib

__all__ = ["pack", "check_args", "Launch", "dims", "layout_of", "shipped_image"]


def shipped_image() -> bytes:
    """arig's own kernels (``arig/kernels/kernels.cu``: ``saxpy``, ``empty``, ``spin``,
    ``spin_stamped``, ``store``, ``step``, ``illegal``, ``trap``, and the device's own
    ``arig_release``) as a fatbin with machine code for every GPU architecture CUDA 13 builds for
    (sm_75 ... sm_121) and PTX of the newest, which the driver JIT-compiles on newer GPUs:
    ``await dev.load(arig.cuda.shipped_image())``; ``cuModuleLoadData`` picks the entry."""
    return (importlib.resources.files("arig") / "kernels" / "kernels.fatbin").read_bytes()

#: CUfunction -> its parameter layout, recorded when a device loads its image.
_LAYOUTS: dict[int, ParamLayout] = {}


def layout_of(func: int) -> ParamLayout | None:
    """The parameter layout of a loaded CUfunction, recorded at load (None if unknown)."""
    return _LAYOUTS.get(func)


_END, _BUFFER_POINTER, _BUFFER_SIZE = 0, 1, 2


class _Block(ctypes.Structure):
    """What a Launch hands the driver, in one allocation: the record the native thread reads,
    ``cuLaunchKernel``'s ``extra`` array and the argument size it points at.  Made from bytes
    (``_BLOCK``) in one copy: a launch is often made per call, on the loop."""

    _fields_ = [("rec", LaunchRecord), ("extra", ctypes.c_void_p * 5), ("size", ctypes.c_size_t)]


#: _Block's bytes: the record (func, grid, block, shared, pad, extra), the extra array, the size.
_BLOCK = struct.Struct("<Q3I3IIIQ5QQ")
assert _BLOCK.size == ctypes.sizeof(_Block) and _Block.rec.offset == 0
_EXTRA_AT, _SIZE_AT = _Block.extra.offset, _Block.size.offset


def check_args(func: int, args: bytes) -> None:
    """Raise ValueError if ``args`` does not match ``func``'s parameter layout (when known)."""
    layout = layout_of(func)
    if layout is not None:
        check_params(layout, args, f"{func:#x}")


class Launch(LaunchSpec):
    """A prepared ``cuLaunchKernel``: build once, then submit it.

    ``await dev.submit(launch)`` hands it to the device's native thread,
    which launches it without Python (the fast path).  From a Python fill,
    ``launch(stream)`` launches it there and returns the CUresult, so a fill
    can ``return launch(queue)``; called with an inline fill's recorder
    (``submit(fill, arg, inline=True)``) it is recorded instead, and the
    device launches it as if it had been submitted.  Do not change a Launch (``set_args``)
    while a submission of it is pending: the launch reads its arguments when
    it runs, not when it was submitted.  A submit of it is refused once its
    image is unloaded or a buffer given to ``pack`` for it is closed.
    """

    # _item is what the device's prepare hands the core, found by type(fill) is Launch.
    __slots__ = ("_buf", "_blk", "_extra", "_rec", "_addr", "_item", "__weakref__")
    _extra: int | None

    def __init__(self, func: int, grid: Any, block: Any, args: Args = b"", shared: int = 0) -> None:
        super().__init__(func, grid, block, args, shared)
        g, b = self.grid, self.block
        blk = self._blk = _Block.from_buffer_copy(
            _BLOCK.pack(self.func, g[0], g[1], g[2], b[0], b[1], b[2], self.shared, 0, 0, _BUFFER_POINTER, 0, _BUFFER_SIZE, 0, _END, 0))
        self._rec = blk.rec  # at the block's start: the native core reads it at _addr
        self._addr = ctypes.addressof(blk)
        self._item = (LAUNCH, self._addr, 0, 0)  # what the native core is handed
        self._point_at(self.args)

    def _params(self) -> tuple[str, ParamLayout] | None:
        layout = layout_of(self.func)
        return None if layout is None else (f"{self.func:#x}", layout)

    def set_args(self, args: Args) -> None:
        """Replace the argument buffer (same checks as at construction)."""
        self.args = self._checked(args)
        self._point_at(self.args)

    def _point_at(self, args: bytes) -> None:
        """Make the record's ``extra`` array point at a copy of ``args`` that this Launch keeps alive."""
        self._buf = ctypes.create_string_buffer(args, max(len(args), 1))
        blk, base = self._blk, self._addr
        blk.size = len(args)
        if args:
            extra = blk.extra
            extra[1] = ctypes.addressof(self._buf)
            extra[3] = base + _SIZE_AT
            self._extra = base + _EXTRA_AT
        else:
            self._extra = None
        blk.rec.extra = self._extra

    def __call__(self, stream: Any) -> int:
        if type(stream) is Recorder:  # an inline fill's queue: the device launches it, as if submitted
            return stream.put_launch(self)
        g, b = self.grid, self.block
        return int(lib.cuLaunchKernel(self.func, g[0], g[1], g[2], b[0], b[1], b[2], self.shared, stream, None, self._extra))
