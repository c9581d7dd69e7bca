"""A GPU's memory: VRAM, uncached system memory, host pages and the program's own pages, each GPU-mapped
at one address for the CPU and the GPU; dma-buf export; the OS event fd.

:class:`GpuMemory` is the memory half of :class:`arig.nvrm._rm.Gpu`.  Each
allocation is made with its own undo list, which :meth:`Mem.free` runs.  Every
call blocks in the driver: the submit thread's or a worker's, never the event loop's.
"""

from __future__ import annotations

import abc
import ctypes
from typing import Any, Protocol

from . import _exec_params
from . import _fd
from . import _params
from ._fd import MAP_ANONYMOUS, MAP_FIXED, MAP_SHARED, PROT_READ, PROT_RW
from ._undo import PAGE_2M, PAGE_4K, Mem, Undo, VaAllocator, _rereserve, round_up

__all__ = ["GpuMemory"]


class _Client(Protocol):
    """What memory needs of the process's RM client (:class:`arig.nvrm._rm.Process`)."""

    d: _fd.Driver
    ctl: int
    root: int
    uvm_fd: int
    va: VaAllocator | None

    def alloc_undo(self, undo: Undo, parent: int, cls: int, params: Any, what: str) -> int: ...
    def free(self, parent: int, h: int, what: str = "RM free") -> None: ...
    def uvm(self, fd: int, nr: int, params: Any, what: str) -> None: ...
    def os_desc_handle(self) -> int: ...


class GpuMemory:
    """The memory calls of a GPU whose RM objects (``device``, ``subdevice``, ``virtmem``, ``uuid``) are made."""

    p: _Client
    device: int
    subdevice: int
    virtmem: int
    uuid: bytes
    gpu_fd: int

    @abc.abstractmethod
    def open_gpu_fd(self, undo: Undo | None = None, what: str = "gpu fd") -> int:
        """A fresh /dev/nvidiaN registered to the ctl fd (the GPU's)."""

    def export_dmabuf(self, mem: Mem, offset: int, size: int) -> int:
        """A new dma-buf fd of ``size`` bytes at ``offset`` in ``mem``'s RM object (vidmem of this GPU;
        page-aligned).  The dma-buf holds the object until its last reference goes."""
        arg = _exec_params.ExportToDmabufFd(fd=-1, hClient=self.p.root, totalObjects=1, numObjects=1, index=0, totalSize=size)
        arg.handles[0], arg.offsets[0], arg.sizes[0] = mem.handle, offset, size
        self.p.d.ioctl(self.gpu_fd, _exec_params.NV_ESC_EXPORT_TO_DMABUF_FD, arg, f"export {mem.what} to a dma-buf")
        _params.check_status(f"export {mem.what} to a dma-buf", arg.status)
        return int(arg.fd)

    # -- memory: each kind with its own undo list ------------------------------------------------
    def _va(self, undo: Undo, size: int, align: int) -> int:
        va = self.p.va
        assert va is not None
        at = va.alloc(size, align)
        undo.push("free VA range", lambda: va.free(at))
        return at

    def _gpu_map(self, undo: Undo, handle: int, va: int, size: int, what: str) -> None:
        """UVM external range, RM_MAP_MEMORY_DMA at the fixed address, UVM map external: the GPU sees it at ``va``."""
        p = self.p
        p.uvm(p.uvm_fd, _exec_params.UVM_CREATE_EXTERNAL_RANGE, _exec_params.UvmCreateExternalRangeParams(base=va, length=size), f"UVM external range for {what}")
        undo.push(f"UVM free {what}", lambda: p.uvm(p.uvm_fd, _exec_params.UVM_FREE, _exec_params.UvmFreeParams(base=va, length=size), f"UVM free {what}"))
        flags = (_exec_params.field(*_exec_params.NVOS46_FLAGS_DMA_OFFSET_FIXED, _exec_params.NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE)
                 | _exec_params.field(*_exec_params.NVOS46_FLAGS_PAGE_SIZE, _exec_params.NVOS46_FLAGS_PAGE_SIZE_4KB)
                 | _exec_params.field(*_exec_params.NVOS46_FLAGS_CACHE_SNOOP, _exec_params.NVOS46_FLAGS_CACHE_SNOOP_ENABLE))  # fmt: skip
        d = _exec_params.Nvos46(hClient=p.root, hDevice=self.device, hDma=self.virtmem, hMemory=handle, offset=0, length=size, flags=flags, dmaOffset=va)
        p.d.ioctl(p.ctl, _exec_params.NV_ESC_RM_MAP_MEMORY_DMA, d, f"map {what} DMA")
        _params.check_status(f"map {what} DMA", d.status)

        def unmap_dma() -> None:
            x = _exec_params.Nvos47(hClient=p.root, hDevice=self.device, hDma=self.virtmem, hMemory=handle, dmaOffset=va, size=size)
            p.d.ioctl(p.ctl, _exec_params.NV_ESC_RM_UNMAP_MEMORY_DMA, x, f"unmap {what} DMA")
            _params.check_status(f"unmap {what} DMA", x.status)

        undo.push(f"unmap DMA {what}", unmap_dma)
        m = _exec_params.UvmMapExternalAllocationParams(base=va, length=size, offset=0, gpuAttributesCount=1, rmCtrlFd=p.ctl, hClient=p.root, hMemory=handle)
        ctypes.memmove(m.perGpuAttributes[0].gpuUuid, self.uuid, 16)
        m.perGpuAttributes[0].gpuMappingType = _exec_params.UVM_GPU_MAPPING_TYPE_READ_WRITE_ATOMIC
        p.uvm(p.uvm_fd, _exec_params.UVM_MAP_EXTERNAL_ALLOCATION, m, f"UVM map {what}")

    def _cpu_map(self, undo: Undo, handle: int, va: int, size: int, *, sysmem: bool, what: str) -> int:
        """RM_MAP_MEMORY on a fresh fd, then mmap that fd at ``va`` (0: anywhere; write-combined for VRAM).  The address."""
        p = self.p
        fd = p.d.open_ctl() if sysmem else self.open_gpu_fd()
        undo.push(f"close map fd of {what}", lambda: p.d.close(fd))
        flags = 0 if sysmem else _exec_params.field(*_exec_params.NVOS33_FLAGS_CACHING_TYPE, _exec_params.NVOS33_FLAGS_CACHING_TYPE_WRITECOMBINED)
        arg = _exec_params.Nvos33WithFd(params=_exec_params.Nvos33(hClient=p.root, hDevice=self.device, hMemory=handle, offset=0, length=size, flags=flags), fd=fd)
        p.d.ioctl(p.ctl, _exec_params.NV_ESC_RM_MAP_MEMORY, arg, f"map {what} to the CPU")
        _params.check_status(f"map {what} to the CPU", arg.params.status)
        linear = int(arg.params.pLinearAddress)

        def unmap_rm() -> None:
            x = _exec_params.Nvos34(hClient=p.root, hDevice=self.device, hMemory=handle, pLinearAddress=linear)
            p.d.ioctl(p.ctl, _exec_params.NV_ESC_RM_UNMAP_MEMORY, x, f"unmap {what} from the CPU")
            _params.check_status(f"unmap {what} from the CPU", x.status)

        undo.push(f"RM unmap {what} from the CPU", unmap_rm)
        if va:
            p.d.mmap(va, size, PROT_RW, MAP_SHARED | MAP_FIXED, fd)
            undo.push(f"munmap {what}", lambda: _rereserve(p.d, va, size))
            return va
        at = p.d.mmap(0, size, PROT_READ, MAP_SHARED, fd)
        undo.push(f"munmap {what}", lambda: p.d.munmap(at, size))
        return at

    def vram(self, what: str, size: int, *, contiguous: bool = False, cpu: bool = True) -> Mem:
        """VRAM (NV1_MEMORY_USER) with 2 MiB pages, mapped on the GPU and (``cpu``) to the CPU, same address."""
        p, undo = self.p, Undo()
        try:
            size = round_up(size, PAGE_2M)
            va = self._va(undo, size, PAGE_2M)
            phys = _exec_params.NVOS32_ATTR_PHYSICALITY_CONTIGUOUS if contiguous else _exec_params.NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS
            params = _exec_params.NvMemoryAllocationParams(
                owner=p.root, type=_exec_params.NVOS32_TYPE_IMAGE, flags=_exec_params.VRAM_ALLOC_FLAGS, format=_exec_params.VRAM_FORMAT,
                attr=_exec_params.field(*_exec_params.NVOS32_ATTR_PHYSICALITY, phys) | _exec_params.field(*_exec_params.NVOS32_ATTR_PAGE_SIZE, _exec_params.NVOS32_ATTR_PAGE_SIZE_HUGE),
                attr2=(_exec_params.field(*_exec_params.NVOS32_ATTR2_ZBC, _exec_params.NVOS32_ATTR2_ZBC_PREFER_NO_ZBC)
                       | _exec_params.field(*_exec_params.NVOS32_ATTR2_GPU_CACHEABLE, _exec_params.NVOS32_ATTR2_GPU_CACHEABLE_YES)
                       | _exec_params.field(*_exec_params.NVOS32_ATTR2_PAGE_SIZE_HUGE, _exec_params.NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB)),
                size=size, alignment=PAGE_2M)  # fmt: skip
            h = p.alloc_undo(undo, self.device, _exec_params.NV1_MEMORY_USER, params, f"VRAM {what}")
            self._gpu_map(undo, h, va, size, what)
            if cpu:
                self._cpu_map(undo, h, va, size, sysmem=False, what=what)
        except BaseException:
            undo.unwind()
            raise
        return Mem(what, h, va, size, cpu, undo)

    def sysmem_uncached(self, what: str, size: int, *, cpu: bool = False) -> Mem:
        """Uncached system memory (NV1_MEMORY_SYSTEM, location PCI): a channel's error notifier.

        ``cpu`` also maps it read-only to the CPU, anywhere (``va`` is then that address)."""
        p, undo = self.p, Undo()
        try:
            size = round_up(size, PAGE_4K)
            params = _exec_params.NvMemoryAllocationParams(
                owner=p.root, type=_exec_params.NVOS32_TYPE_IMAGE, format=_exec_params.VRAM_FORMAT,
                flags=(_exec_params.NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT | _exec_params.NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE
                       | _exec_params.NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED | _exec_params.NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED),
                attr=(_exec_params.field(*_exec_params.NVOS32_ATTR_LOCATION, _exec_params.NVOS32_ATTR_LOCATION_PCI)
                      | _exec_params.field(*_exec_params.NVOS32_ATTR_PHYSICALITY, _exec_params.NVOS32_ATTR_PHYSICALITY_NONCONTIGUOUS)
                      | _exec_params.field(*_exec_params.NVOS32_ATTR_PAGE_SIZE, _exec_params.NVOS32_ATTR_PAGE_SIZE_4KB)
                      | _exec_params.field(*_exec_params.NVOS32_ATTR_COHERENCY, _exec_params.NVOS32_ATTR_COHERENCY_UNCACHED)),
                attr2=(_exec_params.field(*_exec_params.NVOS32_ATTR2_ZBC, _exec_params.NVOS32_ATTR2_ZBC_PREFER_NO_ZBC)
                       | _exec_params.field(*_exec_params.NVOS32_ATTR2_GPU_CACHEABLE, _exec_params.NVOS32_ATTR2_GPU_CACHEABLE_NO)),
                size=size, alignment=PAGE_4K)  # fmt: skip
            h = p.alloc_undo(undo, self.device, _exec_params.NV01_MEMORY_SYSTEM, params, f"sysmem {what}")
            mem = Mem(what, h, 0, size, False, undo)
            if cpu:
                try:
                    sub = Undo()
                    mem.va = self._cpu_map(sub, h, 0, size, sysmem=True, what=what)
                    mem.cpu = True
                    undo.steps.extend(sub.steps)
                except (_params.RmError, _params.DriverError):
                    sub.unwind()  # not mapped: the notifier is then not read (the caller says so)
        except BaseException:
            undo.unwind()
            raise
        return mem

    def _os_descriptor(self, undo: Undo, what: str, address: int, size: int) -> tuple[int, int]:
        """The host pages ``[address, address + size)`` made an RM OS descriptor, which pins them while it
        lives: ``(status, handle)``.  On status 0 its free is pushed on ``undo``; any other status is the
        caller's to report (a refused pin means different things to its two callers)."""
        p = self.p
        flags = (_exec_params.field(*_exec_params.NVOS02_FLAGS_PHYSICALITY, _exec_params.NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS)
                 | _exec_params.field(*_exec_params.NVOS02_FLAGS_LOCATION, _exec_params.NVOS02_FLAGS_LOCATION_PCI)
                 | _exec_params.field(*_exec_params.NVOS02_FLAGS_COHERENCY, _exec_params.NVOS02_FLAGS_COHERENCY_CACHED)
                 | _exec_params.field(*_exec_params.NVOS02_FLAGS_MAPPING, _exec_params.NVOS02_FLAGS_MAPPING_NO_MAP))  # fmt: skip
        arg = _exec_params.Nvos02WithFd(params=_exec_params.Nvos02(hRoot=p.root, hObjectParent=self.device, hObjectNew=p.os_desc_handle(),
                                             hClass=_exec_params.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, flags=flags, pMemory=address, limit=size - 1), fd=-1)  # fmt: skip
        p.d.ioctl(self.gpu_fd, _exec_params.NV_ESC_RM_ALLOC_MEMORY, arg, f"OS descriptor {what}")
        status = int(arg.params.status)
        if status:
            return status, 0
        h = int(arg.params.hObjectNew)
        dev = self.device
        undo.push(f"free OS descriptor {what}", lambda: p.free(dev, h, f"free OS descriptor {what}"))
        return 0, h

    def host(self, what: str, size: int) -> Mem:
        """Host memory: anonymous shared pages at a chosen address, made an RM OS descriptor, GPU-mapped there."""
        p, undo = self.p, Undo()
        try:
            size = round_up(size, PAGE_4K)
            va = self._va(undo, size, PAGE_4K)
            p.d.mmap(va, size, PROT_RW, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED)
            undo.push(f"munmap host {what}", lambda: _rereserve(p.d, va, size))
            ctypes.memset(va, 0, size)
            status, h = self._os_descriptor(undo, what, va, size)
            _params.check_status(f"OS descriptor {what}", status)
            self._gpu_map(undo, h, va, size, what)
        except BaseException:
            undo.unwind()
            raise
        return Mem(what, h, va, size, True, undo)

    def map_host(self, what: str, address: int, size: int) -> tuple[Mem, int]:
        """The program's own host memory ``[address, address + size)`` mapped for the GPU: its pages
        (whole pages around it) made an RM OS descriptor, which pins them for writing while it lives,
        GPU-mapped at an address of their own from the reservation (the host's may lie higher than the
        GPU reaches).  ``(mem, the GPU address of address)``; ``mem.cpu`` is False (the host keeps its own).

        A pin that falls short (pages not mapped or not writable, a shared mapping of a file on a
        file system that tracks dirty pages since Linux 6.5, a lack of memory) is ``_params.PinRefused``: it
        would be refused again.  A lack of the RM's memory or of GPU addresses is ``RmError``."""
        undo = Undo()
        start = address - address % PAGE_4K
        n = round_up(address + size, PAGE_4K) - start
        try:
            status, h = self._os_descriptor(undo, what, start, n)
            if status:
                raise _params.PinRefused(
                    f"the kernel driver will not pin the {n // PAGE_4K} page(s) at {start:#x} for the GPU "
                    f"({_params.status_name(status)}): pages not mapped or not writable, a shared mapping of a file "
                    "on a file system that tracks dirty pages (ext4, xfs: Linux 6.5 and later refuse those), or no memory to pin"
                )
            va = self._va(undo, n, PAGE_4K)
            self._gpu_map(undo, h, va, n, what)
        except BaseException:
            undo.unwind()
            raise
        return Mem(what, h, va, n, False, undo), va + (address - start)

    # -- the OS event fd ----------------------------------------------------------------------
    def os_event(self, undo: Undo) -> int:
        """A ctl fd that becomes readable at the GPU's non-stall interrupts (NON_STALL_INTERRUPT after a release).

        The caller owns the fd and closes it, after ``undo`` (which frees the RM's event objects
        through it) has run and once no event loop reads it any more; if this fails, the fd is
        closed here."""
        p = self.p
        ev = p.d.open_ctl()  # blocking: poll on it must wait
        mark = len(undo.steps)
        try:
            arg = _exec_params.AllocOsEvent(hClient=p.root, hDevice=self.device, fd=ev)
            p.d.ioctl(ev, _exec_params.NV_ESC_ALLOC_OS_EVENT, arg, "alloc OS event")
            _params.check_status("alloc OS event", arg.Status)

            def free_os_event() -> None:
                f = _exec_params.FreeOsEvent(hClient=p.root, hDevice=self.device, fd=ev)
                p.d.ioctl(ev, _exec_params.NV_ESC_FREE_OS_EVENT, f, "free OS event")
                _params.check_status("free OS event", f.Status)

            undo.push("free OS event", free_os_event)
            notify = _exec_params.NV2080_NOTIFIERS_FIFO_EVENT_MTHD | _exec_params.NV01_EVENT_NONSTALL_INTR | _exec_params.NV01_EVENT_WITHOUT_EVENT_DATA | _exec_params.NV01_EVENT_SUBDEVICE_SPECIFIC
            p.alloc_undo(undo, self.subdevice, _exec_params.NV01_EVENT_OS_EVENT,
                         _exec_params.Nv0005AllocParameters(hParentClient=p.root, hSrcResource=self.subdevice, hClass=_exec_params.NV01_EVENT_OS_EVENT, notifyIndex=notify, data=ev),
                         "OS event object")  # fmt: skip
        except BaseException:
            undo.unwind_to(mark)
            p.d.close(ev)
            raise
        return ev
