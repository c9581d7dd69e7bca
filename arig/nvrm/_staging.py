"""Uploads and downloads of every kind of NV memory, through the device's pinned staging area, by the copy engine.

``upload`` and ``download`` take memory of every kind (VRAM the CPU cannot
map among them) through one pinned staging area of the device
(``STAGING_BYTES``, cut into ``STAGING_SLOTS`` slots), a chunk per
copy-engine copy.  A copy is one item of the native core (``NvCopy``:
``H2D`` or ``D2H``, like a CUDA device's), which the core's native thread
runs at its place in the queue's order (``nv_stage.c``): no Python thread
takes part, so a copy of any size holds the GIL for no time on any thread,
and the loop only checks it and hands the item over.  An upload memcpys each
chunk into a slot the GPU no longer reads, then has the copy engine copy
slot -> buffer; a download has it copy buffer -> slot, with every slot in
flight at once, and memcpys each out once done.

Threads: ``Staging.copy`` and ``copy_chunks`` are pure (the loop calls
them); ``Staging()`` and ``stage_in``/``stage_out`` (the same copies, called
directly, with the GIL released) on the device's submit thread, before the
core starts or inside a Python fill, as every ``NvQueue`` call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _native
from .._errors import ArigValueError
from . import _rm
from ._queue import NvQueue

__all__ = ["Staging", "NvCopy", "copy_chunks", "STAGING_BYTES", "STAGING_SLOTS"]

#: The pinned staging area every upload and download goes through, cut into slots (one copy-engine copy each).
STAGING_BYTES = 64 << 20
STAGING_SLOTS = 4


def copy_chunks(nbytes: int, chunk: int) -> list[tuple[int, int]]:
    """The ``(offset, size)`` pieces, in order, of a copy of ``nbytes`` through staging slots of ``chunk`` bytes
    (what ``nv_stage.c`` copies: a copy-engine copy and a submission each).

    Every piece but the last is ``chunk`` bytes; a copy of 0 bytes has no pieces."""
    if chunk <= 0:
        raise ArigValueError(f"a staging slot holds at least one byte, not {chunk}")
    if nbytes < 0:
        raise ArigValueError(f"a copy moves 0 or more bytes, not {nbytes}")
    return [(off, min(chunk, nbytes - off)) for off in range(0, nbytes, chunk)]


class NvCopy:
    """An upload or a download as the native core's item: ``item`` is (H2D, GPU address, host address, bytes)
    or (D2H, host address, GPU address, bytes).  The submission keeps the buffer and the array alive."""

    __slots__ = ("item", "to_device")

    def __init__(self, to_device: bool, gpu: int, host: int, nbytes: int) -> None:
        self.to_device = to_device
        self.item = (_native.H2D, gpu, host, nbytes) if to_device else (_native.D2H, host, gpu, nbytes)

    def __repr__(self) -> str:
        kind, a, b, n = self.item
        return f"<arig.nvrm copy of {n} bytes {'to the GPU at' if self.to_device else 'from the GPU at'} {(a if self.to_device else b):#x}>"


class Staging:
    """The device's staging area (``area``: pinned host memory the GPU reaches, at one address for both),
    cut into ``slots`` slots, given to the copy queue that runs every staged copy."""

    def __init__(self, copy_queue: NvQueue, area: _rm.Mem, slots: int = STAGING_SLOTS) -> None:
        self.queue, self.area = copy_queue, area
        self.slot_bytes = area.size // slots
        self._lib = copy_queue._lib
        copy_queue._check(self._lib.arig_nv_staging(copy_queue.ptr, area.va, area.size, slots), "the staging area")

    def copy(self, address: int, array: np.ndarray[Any, Any], to_device: bool) -> NvCopy:
        """The core's item that copies ``array`` (C-contiguous) to (or from) GPU address ``address``."""
        return NvCopy(to_device, address, array.ctypes.data, array.nbytes)

    def stage_in(self, address: int, src: np.ndarray[Any, Any]) -> None:
        """Copy ``src`` (C-contiguous) to GPU address ``address`` now; returns once the copies are submitted
        (the queues' ordering makes later work wait for them)."""
        q = self.queue
        q._check(self._lib.arig_nv_stage_in(q.ptr, address, src.ctypes.data, src.nbytes), "an upload")

    def stage_out(self, address: int, dst: np.ndarray[Any, Any]) -> None:
        """Copy ``dst.nbytes`` bytes from GPU address ``address`` into ``dst`` (C-contiguous, writable) now."""
        q = self.queue
        q._check(self._lib.arig_nv_stage_out(q.ptr, dst.ctypes.data, address, dst.nbytes), "a download")
