"""The fake's memory: CPU mappings of driver files, OS descriptors, GPU mappings (GPU VA = CPU VA), and UVM.

VRAM and system memory are memfd pages (made by :mod:`.rm`); RM_MAP_MEMORY_DMA
maps them at their GPU address in this process, an OS descriptor must be
GPU-mapped at its own address (or is aliased where map_host puts it), and
RM_MAP_MEMORY then ``mmap`` of that fd maps the same pages where asked.
UVM: every call succeeds; registrations and ranges are tracked.

Threads: the library's callers, under ``_State._lock``.
"""

from __future__ import annotations

import bisect
import errno
import os
from typing import Any

from ...nvrm import _exec_params
from ...nvrm import _fd
from ...nvrm import _params
from .state import _MEMORY, REAL, _cookies, _File, _Refused, _State, _status, _writable

__all__ = ["Memory"]


class Memory(_State):
    """``mmap``/``munmap`` of driver files, the memory escapes and the UVM ioctls."""

    # -- mmap ------------------------------------------------------------------------------------
    def _mmap(self, addr: int, size: int, prot: int, flags: int, fd: int = -1) -> int:
        self._record("mmap", addr, size, prot, flags, fd)
        if fd < 0 or flags & _fd.MAP_ANONYMOUS:
            got = REAL.mmap(addr, size, prot, flags, fd)
            if flags & _fd.MAP_FIXED:
                with self._lock:
                    for at in [a for a, (n, _h) in self._cpu_maps.items() if a < addr + size and addr < a + n]:
                        del self._cpu_maps[at]  # replaced
            return got
        with self._lock:
            f = self.files.get(fd)
            if f is None or f.mapping is None:
                self._violation(f"mmap of fd {fd}, which {'has no RM_MAP_MEMORY' if f else 'the driver never opened'}")
                raise _params.DriverError(f"mmap({addr:#x}, {size:#x}): Invalid argument", errno.EINVAL)
            h, offset, length, _cookie = f.mapping
            o = self.objects.get(h)
            if o is None or o.memfd < 0 or size > length:
                self._violation(f"mmap of {size:#x} bytes of fd {fd}: its memory {h:#x} is gone or smaller")
                raise _params.DriverError(f"mmap({addr:#x}, {size:#x}): Invalid argument", errno.EINVAL)
            got = REAL.mmap(addr, size, prot, flags, o.memfd)
            self._cpu_maps[got] = (size, h)
            return got

    def _munmap(self, addr: int, size: int) -> None:
        self._record("munmap", addr, size)
        with self._lock:
            self._cpu_maps.pop(addr, None)
        REAL.munmap(addr, size)

    # -- memory -------------------------------------------------------------------------------
    def _alloc_memory(self, fd: int, f: _File, arg: Any, what: str) -> None:
        p = arg.params
        try:
            if f.kind != "gpu" or f.registered < 0:
                self._violation(f"{what}: RM_ALLOC_MEMORY on fd {fd} ({f.kind}, registered {f.registered >= 0})")
                raise _Refused("INVALID_ARGUMENT")
            if p.hClass != _exec_params.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR:
                self._violation(f"{what}: RM_ALLOC_MEMORY of class {p.hClass:#x}")
                raise _Refused("INVALID_CLASS")
            self._obj(int(p.hRoot), int(p.hRoot), what)
            parent = self._obj(int(p.hRoot), int(p.hObjectParent), what)
            if int(p.hObjectNew) in self.objects:
                raise _Refused("INSERT_DUPLICATE_NAME")
            va, size = int(p.pMemory), int(p.limit) + 1
            if not va or va % 4096 or size % 4096:
                raise _Refused("INVALID_ARGUMENT")
            if not _writable(va, size):  # the kernel pins the pages for writing: any it cannot, it refuses
                raise _Refused("INVALID_ADDRESS")
            o = self._new(_exec_params.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, parent.handle, int(p.hRoot), fd, int(p.hObjectNew))
            o.os_va, o.size = va, size
            p.status = 0
        except _Refused as e:
            p.status = e.status

    def _map_memory(self, fd: int, f: _File, arg: Any, what: str) -> None:
        p = arg.params
        try:
            o = self._obj(int(p.hClient), int(p.hMemory), what)
            target = self.files.get(int(arg.fd))
            if o.memfd < 0:
                self._violation(f"{what}: RM_MAP_MEMORY of a {o.cls:#x}, which the CPU cannot map")
                raise _Refused("INVALID_OBJECT")
            if target is None or target.mapping is not None or (target.kind == "gpu" and target.registered < 0) or target.kind == "uvm":
                self._violation(f"{what}: RM_MAP_MEMORY onto fd {int(arg.fd)}, which is not a fresh driver file")
                raise _Refused("INVALID_ARGUMENT")
            if p.offset + p.length > o.size:
                raise _Refused("INVALID_LIMIT")
            cookie = next(_cookies)
            target.mapping = (o.handle, int(p.offset), int(p.length), cookie)
            p.pLinearAddress = cookie
            p.status = 0
        except _Refused as e:
            p.status = e.status

    def _unmap_memory(self, fd: int, f: _File, arg: Any, what: str) -> None:
        found = next((g for g in self.files.values() if g.mapping is not None and g.mapping[0] == arg.hMemory and g.mapping[3] == arg.pLinearAddress), None)
        if found is None:
            self._violation(f"{what}: RM_UNMAP_MEMORY of {arg.hMemory:#x} at {arg.pLinearAddress:#x}, which is not mapped")
            arg.status = _status("INVALID_ARGUMENT")
            return
        found.mapping = None
        arg.status = 0

    def _map_dma(self, fd: int, f: _File, arg: Any, what: str) -> None:
        try:
            o = self._obj(int(arg.hClient), int(arg.hMemory), what)
            virt = self._obj(int(arg.hClient), int(arg.hDma), what)
            if virt.cls != _exec_params.NV01_MEMORY_VIRTUAL or o.cls not in _MEMORY:
                self._violation(f"{what}: RM_MAP_MEMORY_DMA of a {o.cls:#x} through a {virt.cls:#x}")
                raise _Refused("INVALID_ARGUMENT")
            va, size = int(arg.dmaOffset), int(arg.length)
            if not arg.flags & _exec_params.field(*_exec_params.NVOS46_FLAGS_DMA_OFFSET_FIXED, 1) or va % 4096 or size > o.size - int(arg.offset):
                self._violation(f"{what}: RM_MAP_MEMORY_DMA of {size:#x} at {va:#x} (flags {arg.flags:#x}) of {o.size:#x} bytes")
                raise _Refused("INVALID_ARGUMENT")
            if any(s < va + size and va < e for s, (e, _h) in self._gpu_maps.items()):
                self._violation(f"{what}: GPU range {va:#x}+{size:#x} overlaps a mapping")
                raise _Refused("INVALID_ADDRESS")
            if o.cls == _exec_params.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR:
                if va != o.os_va:
                    self._alias[va] = o.os_va  # the program's own pages, at a GPU address of their own
            elif o.memfd >= 0:
                REAL.mmap(va, size, _fd.PROT_RW, _fd.MAP_SHARED | _fd.MAP_FIXED, o.memfd)  # the GPU's view, at its address
            self._gpu_maps[va] = (va + size, o.handle)
            bisect.insort(self._gpu_starts, va)
            arg.status = 0
        except _Refused as e:
            arg.status = e.status

    def _unmap_dma(self, fd: int, f: _File, arg: Any, what: str) -> None:
        va = int(arg.dmaOffset)
        m = self._gpu_maps.get(va)
        if m is None or m[1] != arg.hMemory:
            self._violation(f"{what}: RM_UNMAP_MEMORY_DMA of {arg.hMemory:#x} at {va:#x}, which is not mapped there")
            arg.status = _status("INVALID_ARGUMENT")
            return
        o = self.objects.get(m[1])
        if any(h == m[1] for _n, h in self._cpu_maps.values()):
            self._violation(f"{what}: GPU mapping of {m[1]:#x} undone before its CPU mapping")
        self._drop_gpu_map(va)
        if o is not None and o.memfd >= 0:
            REAL.mmap(va, m[0] - va, _fd.PROT_NONE, _fd.MAP_PRIVATE | _fd.MAP_ANONYMOUS | _fd.MAP_NORESERVE | _fd.MAP_FIXED, -1)
        arg.status = 0

    # -- UVM -----------------------------------------------------------------------------------
    def _uvm_ioctl(self, fd: int, nr: int, params: Any) -> None:
        self._record(f"uvm {nr}", fd)
        with self._lock:
            f = self.files.get(fd)
            if f is None or f.kind != "uvm":
                self._violation(f"UVM ioctl {nr} on fd {fd}, which is no /dev/nvidia-uvm file")
                raise OSError(errno.ENOTTY, os.strerror(errno.ENOTTY))
            key: tuple[Any, ...] | None = None
            undo: tuple[Any, ...] | None = None
            if nr in (_exec_params.UVM_INITIALIZE, _exec_params.UVM_MM_INITIALIZE):
                pass
            elif nr == _exec_params.UVM_REGISTER_GPU:
                key = ("gpu", bytes(params.gpu_uuid), fd)
            elif nr == _exec_params.UVM_UNREGISTER_GPU:
                undo = ("gpu", bytes(params.gpu_uuid), fd)
            elif nr == _exec_params.UVM_REGISTER_GPU_VASPACE:
                key = ("vaspace", bytes(params.gpuUuid), fd)
            elif nr == _exec_params.UVM_UNREGISTER_GPU_VASPACE:
                undo = ("vaspace", bytes(params.gpuUuid), fd)
            elif nr == _exec_params.UVM_REGISTER_CHANNEL:
                key = ("channel", int(params.hChannel), fd)
            elif nr == _exec_params.UVM_UNREGISTER_CHANNEL:
                undo = ("channel", int(params.hChannel), fd)
            elif nr == _exec_params.UVM_CREATE_EXTERNAL_RANGE:
                key = ("range", int(params.base), int(params.length), fd)
            elif nr == _exec_params.UVM_MAP_EXTERNAL_ALLOCATION:
                if ("range", int(params.base), int(params.length), fd) not in self.uvm:
                    self._violation(f"UVM_MAP_EXTERNAL_ALLOCATION at {params.base:#x}+{params.length:#x} outside an external range")
            elif nr == _exec_params.UVM_FREE:
                undo = ("range", int(params.base), int(params.length), fd)
            else:
                self._violation(f"unknown UVM ioctl {nr}")
                raise OSError(errno.ENOTTY, os.strerror(errno.ENOTTY))
            if key is not None:
                if key in self.uvm:
                    self._violation(f"UVM {key[0]} {key[1:-1]} registered twice")
                self.uvm.add(key)
            if undo is not None:
                if undo not in self.uvm:
                    self._violation(f"UVM {undo[0]} {undo[1:-1]} undone but never made")
                self.uvm.discard(undo)
            params.rmStatus = 0
