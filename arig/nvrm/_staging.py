"""Copies of every kind of NV memory through the device's pinned staging area, by the copy engine.

``upload`` and ``download`` take memory of every kind (VRAM the CPU cannot
map among them) through one pinned staging area of the device
(``STAGING_BYTES``, cut into ``STAGING_SLOTS`` slots), a chunk per
copy-engine copy: an upload memcpys each chunk into a slot the GPU no
longer reads, then copies slot -> buffer; a download copies buffer -> slot,
waits for it (bounded) and memcpys out, with every slot in flight at once.

Threads: both run in the copy's fill, on the device's submit thread, while
the native thread waits at that fill's place; ``Slots`` and ``copy_chunks``
are pure arithmetic (any thread).
"""

from __future__ import annotations

import ctypes
from collections import deque
from typing import Any

import numpy as np

from .._errors import ArigValueError
from . import _rm
from ._queue import NvQueue

__all__ = ["Staging", "Slots", "copy_chunks", "copy_fill", "STAGING_BYTES", "STAGING_SLOTS"]

#: The pinned staging area every upload and download goes through, cut into slots (one copy-engine copy each).
STAGING_BYTES = 64 << 20
STAGING_SLOTS = 4


def copy_chunks(nbytes: int, chunk: int) -> list[tuple[int, int]]:
    """The ``(offset, size)`` pieces, in order, of a copy of ``nbytes`` through staging slots of ``chunk`` bytes.

    Every piece but the last is ``chunk`` bytes; a copy of 0 bytes has no pieces."""
    if chunk <= 0:
        raise ArigValueError(f"a staging slot holds at least one byte, not {chunk}")
    if nbytes < 0:
        raise ArigValueError(f"a copy moves 0 or more bytes, not {nbytes}")
    return [(off, min(chunk, nbytes - off)) for off in range(0, nbytes, chunk)]


class Slots:
    """A staging area cut into ``count`` slots of ``size`` bytes, used round-robin.

    Each slot remembers the copy-queue submission that last used it: the
    CPU may touch a slot again once the GPU reached that submission.
    :meth:`take` gives the next slot and that submission; :meth:`used`
    records the submission that now uses it.
    """

    __slots__ = ("count", "size", "seq", "next")

    def __init__(self, count: int, size: int) -> None:
        if count <= 0 or size <= 0:
            raise ArigValueError(f"staging needs at least one slot of at least one byte, not {count} of {size}")
        self.count, self.size = count, size
        self.seq = [0] * count
        self.next = 0

    def take(self) -> tuple[int, int]:
        """The next slot, and the submission the GPU must reach before the CPU may touch it."""
        i = self.next
        self.next = (i + 1) % self.count
        return i, self.seq[i]

    def used(self, slot: int, seq: int) -> None:
        self.seq[slot] = max(self.seq[slot], seq)

    def offset(self, slot: int) -> int:
        return slot * self.size


class Staging:
    """The device's staging area (``area``: pinned host memory the GPU reaches) and the copy queue it feeds."""

    def __init__(self, copy_queue: NvQueue, area: _rm.Mem, slots: int = STAGING_SLOTS) -> None:
        self.queue, self.area = copy_queue, area
        self.slots = Slots(slots, area.size // slots)

    def stage_in(self, address: int, src: np.ndarray[Any, Any]) -> None:
        """Copy ``src`` (flat bytes) to GPU address ``address``: per chunk, a CPU memcpy into a staging slot the
        GPU no longer reads, then a copy-engine copy from it (each chunk its own submission of the copy queue).

        Returns once the copies are submitted; the queues' ordering makes later work wait for them."""
        cq, slots, base = self.queue, self.slots, self.area.va
        at_src = src.ctypes.data
        for off, n in copy_chunks(src.nbytes, slots.size):
            i, busy = slots.take()
            cq.wait(busy, "a staging slot the copy engine reads")
            at = base + slots.offset(i)
            ctypes.memmove(at, at_src + off, n)
            cq.copy(address + off, at, n)
            cq.submit()
            slots.used(i, cq.seq)

    def stage_out(self, address: int, dst: np.ndarray[Any, Any]) -> None:
        """Copy ``dst.nbytes`` bytes from GPU address ``address`` into ``dst`` (flat bytes): per chunk, a copy-engine
        copy into a staging slot, a bounded wait for it, a CPU memcpy out; up to every slot in flight at once."""
        cq, slots, base = self.queue, self.slots, self.area.va
        at_dst = dst.ctypes.data
        flight: deque[tuple[int, int, int, int]] = deque()  # (slot, submission, offset, size)

        def finish() -> None:
            i, seq, off, n = flight.popleft()
            cq.wait(seq, "a copy into the staging area")
            ctypes.memmove(at_dst + off, base + slots.offset(i), n)

        for off, n in copy_chunks(dst.nbytes, slots.size):
            if len(flight) == slots.count:
                finish()
            i, busy = slots.take()
            cq.wait(busy, "a staging slot the copy engine reads")
            cq.copy(base + slots.offset(i), address + off, n)
            cq.submit()
            slots.used(i, cq.seq)
            flight.append((i, cq.seq, off, n))
        while flight:
            finish()


def _upload_fill(queue: Any, arg: tuple[Staging, int, np.ndarray[Any, Any]], v: int) -> None:
    arg[0].stage_in(arg[1], arg[2])


def _download_fill(queue: Any, arg: tuple[Staging, int, np.ndarray[Any, Any]], v: int) -> None:
    arg[0].stage_out(arg[1], arg[2])


def copy_fill(staging: Staging, address: int, array: np.ndarray[Any, Any], to_device: bool) -> tuple[Any, Any]:
    """The fill and its arg that copy ``array`` to (or from) GPU address ``address`` through ``staging``."""
    flat = array.reshape(-1).view(np.uint8)
    return (_upload_fill if to_device else _download_fill), (staging, address, flat)
