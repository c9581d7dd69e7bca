"""The NV device's memory: allocations, the program's own memory mapped for the GPU, dma-bufs, frees.

A buffer the program closes may still be in use by work the GPU has not
finished: the device's ledger (``arig._memory.Ledger``, the rule of every
device) posts its free here only once every value submitted before the
close is reached, so a free that arrives is done at once.  While the device
is lost nothing is freed before close, which frees it only if the RM freed
the channel (the GPU may still run work that uses it otherwise).

Threads: everything on the device's submit thread (every RM call is made
there), except a buffer's free callback (any thread: posts).
"""

from __future__ import annotations

import ctypes
import os
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _log
from .._errors import ArigValueError, safe_repr
from .._memory import Buffer, Kind, Ledger, describe_kinds, kind_names
from .._timeline import Timeline
from . import _rm

__all__ = ["NvMemory", "Dmabuf", "KIND_TABLE", "KINDS"]

#: An NV device's kinds of memory; every one the CPU sees lies at one address for CPU and GPU, but
#: ``"host"``'s.  ``"mapped"`` here is VRAM mapped for the CPU (through the GPU's BAR1 aperture);
#: on a CUDA device the same name is host RAM mapped for the GPU (``arig.cuda._resources.KIND_TABLE``).
KIND_TABLE = (
    Kind("device", "gpu", cpu=False, gpu=True, made_by="alloc", what="VRAM for the GPU only: the host reaches it through copies"),
    Kind("mapped", "gpu", cpu=True, gpu=True, made_by="alloc",
         what="VRAM also mapped for the CPU through BAR1, read in place by kernels and by the host (slowly: uncached reads over PCIe)"),
    Kind("pinned", "host", cpu=True, gpu=True, made_by="alloc", what="host RAM pinned by the RM and mapped for the GPU, at one address for both"),
    Kind("host", "host", cpu=True, gpu=True, made_by="map_host",
         what="the program's own memory (dev.map_host), pinned and mapped for the GPU at a GPU address of its own"),
)  # fmt: skip
#: The names ``alloc`` takes (the first is its default).
KINDS = kind_names(KIND_TABLE)
_ALLOCATED = {k.name: k for k in KIND_TABLE if k.made_by == "alloc"}


class Dmabuf:
    """A dma-buf of an NV device's memory (``await dev.dma(buf)``): ``fd`` (this object owns it:
    ``close()``, or ``with``), the region's ``offset`` in it and its ``size``.

    The dma-buf holds the RM object the region lies in until its last reference goes, freed or
    not; an importer (a NIC's RDMA driver, another GPU's) maps it where it registers the fd.
    """

    def __init__(self, fd: int, offset: int, size: int) -> None:
        self.fd, self.offset, self.size = fd, offset, size
        self._finalizer = weakref.finalize(self, os.close, fd)

    def fileno(self) -> int:
        return self.fd

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> Dmabuf:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<arig.nvrm.Dmabuf fd {self.fd} offset {self.offset} size {self.size}{' closed' if self.closed else ''}>"


class NvMemory:
    """The memory of one NV device (see the module docstring); ``bind`` once the timeline exists."""

    def __init__(self, name: str, gpu: _rm.Gpu) -> None:
        self.name, self.gpu = name, gpu
        self._mem: dict[int, _rm.Mem] = {}  # live buffers, by key
        self._keys = 0
        self._pins: dict[int, Any] = {}  # id(Mem) of map_host's memory -> the object that owns it, until unmapped
        self._orphans: list[_rm.Mem] = []  # freed while the device was lost: close decides
        self._tl: Timeline | None = None
        self._post: Callable[..., None] | None = None
        self._ledger: Ledger | None = None
        self._closed = False

    def bind(self, timeline: Timeline, post: Callable[..., None], ledger: Ledger | None = None) -> None:
        """Loop thread, at open: the timeline, ``post`` to the submit thread, and the ledger buffers join."""
        self._tl, self._post, self._ledger = timeline, post, ledger

    # -- buffers ----------------------------------------------------------------------
    def _buffer(self, m: _rm.Mem, kind: str, address: int, nbytes: int, host: Any, keep: Any = None) -> Buffer:
        self._keys += 1
        key = self._keys
        self._mem[key] = m
        post = self._post
        assert post is not None, "memory is allocated only on an open device"
        return Buffer(self.name, kind, address, nbytes, lambda: post(self._free_key, key), host=host, keep=keep, ledger=self._ledger)

    def alloc(self, nbytes: int, kind: str | None) -> Buffer:
        kind = KINDS[0] if kind is None else kind
        row = _ALLOCATED.get(kind)
        if row is None:
            raise ArigValueError(f"{self.name} has memory of kinds {', '.join(repr(k) for k in KINDS)}, not {safe_repr(kind)} ({describe_kinds(KIND_TABLE)})")
        m = self.gpu.host(kind, nbytes) if row.lives == "host" else self.gpu.vram(kind, nbytes, cpu=row.cpu)
        host = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(m.va)) if row.cpu else None
        return self._buffer(m, kind, m.va, nbytes, host)

    def map_host(self, address: int, nbytes: int, owner: Any) -> Buffer:
        """The program's memory at ``address`` mapped for the GPU (``Device.map_host``)."""
        m, gpu_address = self.gpu.map_host("host", address, nbytes)
        self._pins[id(m)] = owner  # its memory must outlive the GPU's mapping of it, which the free undoes later
        host = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))
        return self._buffer(m, "host", gpu_address, nbytes, host, keep=owner)

    def dma(self, buf: Buffer, offset: int, nbytes: int) -> Dmabuf:
        """The RM object ``buf`` lies in, exported as a new dma-buf (vidmem only)."""
        if offset < 0 or nbytes <= 0 or offset + nbytes > buf.nbytes:  # Device.dma checked it: a region inside the buffer
            raise ArigValueError(f"the region at {offset} of {nbytes} bytes is not inside the buffer of {buf.nbytes} bytes")
        m = next((m for m in self._mem.values() if m.va <= buf.address < m.va + m.size), None)
        if m is None:
            raise ArigValueError(f"{buf!r} is no memory this device allocated")
        if buf.kind == "pinned":  # host RAM (KIND_TABLE): not the GPU's to export
            vram = " and ".join(repr(k.name) for k in KIND_TABLE if k.lives == "gpu")
            raise ArigValueError(f"pinned memory is the host's: the kernel driver exports only the GPU's own memory (kinds {vram}) as a dma-buf")
        fd = self.gpu.export_dmabuf(m, 0, m.size)
        return Dmabuf(fd, buf.address - m.va + offset, nbytes)

    # -- frees --------------------------------------------------------------------------
    def _free_key(self, key: int) -> None:
        m = self._mem.pop(key, None)
        if m is not None and not self._closed:
            self.free(m)

    def free(self, m: _rm.Mem) -> None:
        """Free ``m``, whose work is done (the ledger waited for it); while lost, keep it for close."""
        tl = self._tl
        if tl is None or tl.lost is not None:
            self._orphans.append(m)
            return
        self._free(m)

    def _free(self, m: _rm.Mem) -> None:
        failures = m.free()
        self._pins.pop(id(m), None)
        if failures:
            _log.fallback(f"{self.name}: freeing {m.what} memory: {'; '.join(failures)}")

    # -- the end ----------------------------------------------------------------------
    def close(self) -> list[_rm.Mem]:
        """At close: nothing is freed from now on; every memory still held, for the device to free or keep."""
        self._closed = True
        mems = [*self._mem.values(), *self._orphans]
        self._mem.clear()
        self._orphans.clear()
        return mems

    def pins(self) -> list[Any]:
        """The objects whose pages the GPU still maps, and forgets them (close keeps them if the channel stays)."""
        owners = list(self._pins.values())
        self._pins.clear()
        return owners
