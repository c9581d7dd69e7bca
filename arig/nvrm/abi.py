"""What compiled code needs from an NV device: its record, under ``arig.nvrm.abi.KEY``.

A compiled fill (``int fill(void *queue, void *arg, uint64_t v)``, the
prototype ``arig.cuda_abi.FILL``) submitted to an NV device runs on the
device's native thread.  Its ``queue`` is the NV queue it was submitted to
(``struct arig_nvq *``, opaque); the record gives the functions that enqueue
on it, the C counterparts of the NV queue's methods (``arig.nvrm._queue.NvQueue``)::

    struct arig_nv_abi {
        uint32_t version, size;                /* 1, sizeof(struct arig_nv_abi) */
        int (*launch)(void *queue, const void *launch);   /* NvLaunch.record of an arig.nvrm.Launch */
        int (*copy)(void *queue, uint64_t dst, uint64_t src, uint64_t nbytes);
        int (*release)(void *queue, uint64_t address, uint64_t value);  /* 16-byte aligned */
        int (*acquire)(void *queue, uint64_t address, uint64_t value);  /* 8-byte aligned */
    };

Each returns 0, or a negative code (``arig._native.NV_ERRORS``); a fill
that gets one returns it, and the device is lost with it named.  Like
Python fills, a C fill's work reaches the GPU with the value's release, in
submission order; launches run on the compute channel and copies on the copy
channel whichever queue the fill was given, ordered with each other.

``dev.capability(KEY)`` is an :class:`NvAbi` on every NV device (an NV device
runs on the native core, which runs compiled fills without the GIL), and
None anywhere else (``arig.cuda_abi.KEY`` is None on an NV device).
"""

from __future__ import annotations

import ctypes
from ctypes import c_uint32, c_void_p

from .. import _native
from .._launchspec import fill_address

__all__ = ["KEY", "NvAbi", "declare", "fill_address"]


class _Key:
    """The key of an NV device's record: ``dev.capability(arig.nvrm.abi.KEY)``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "arig.nvrm.abi.KEY"


KEY = _Key()


class NvAbi(ctypes.Structure):
    """``struct arig_nv_abi``: the native core's functions that enqueue on an NV queue.

    ``address`` is the record's address in the core (pass it to compiled code);
    the fields are the functions' addresses."""

    _fields_ = [("version", c_uint32), ("size", c_uint32), ("launch", c_void_p), ("copy", c_void_p), ("release", c_void_p), ("acquire", c_void_p)]

    address: int

    @classmethod
    def native(cls) -> NvAbi:
        """The core's record (the native core must be loaded)."""
        libs = _native.library()
        if libs is None:
            raise RuntimeError(_native.status())
        addr = libs[0].arig_nv_abi_record()
        rec = cls.from_address(addr)
        rec.address = addr
        if rec.version != 1 or rec.size != ctypes.sizeof(cls):
            raise RuntimeError(f"the native core's NV record is version {rec.version}, {rec.size} bytes: reinstall arig")
        return rec

    def __repr__(self) -> str:
        return f"<arig.nvrm.abi.NvAbi version {self.version} at {self.address:#x}>"


def declare(record: NvAbi) -> tuple[_Key, NvAbi]:
    """``record`` under ``KEY``, as an NV device's capabilities carry it."""
    return (KEY, record)
