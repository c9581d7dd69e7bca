"""Probe: open a compute channel on an NVIDIA GPU through the kernel driver alone and run axpy.

No libcuda: /dev/nvidiactl, /dev/nvidiaN and /dev/nvidia-uvm only, with the
structs of arig.nvrm._exec_params, the methods of arig.nvrm._push and the QMD
of arig.nvrm._qmd, following shared/research/tinygrad_nv.md §1-3 step by step.

Every step prints one line, ``<step>: ok (x ms)`` or ``<step>: FAILED <why>``,
and the probe stops at the first failure; everything made so far is freed in
reverse order either way (each undo prints ``undo <what>: ok|failed``).  Every
wait is bounded (2 s per GPU wait, and a whole-probe alarm).  With $OUT set the
steps and results go to $OUT/nv_probe.json as well.

Usage (GPU machine, repository root):
    python3 scripts/nv_probe.py [--gpu 0] [--n 100000] [--vamode 0] [--skip-map-dma] [--timeout 60]

What _fd/_client lack and is done here: UVM ioctls (plain numbers, no size
field, so not _fd.ioctl's _IOWR), RM_ALLOC_MEMORY with a client-chosen
handle, RM_MAP_MEMORY/RM_MAP_MEMORY_DMA and their undo, the OS event escapes,
and mmap at fixed addresses (libc, since Python's mmap cannot place a map).
The device is made here too (not through _client.client()) so that the probe
owns, and frees, every object it makes.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import fcntl
import json
import mmap
import os
import select
import signal
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from arig.nvrm import _cubin, _fd  # noqa: E402
from arig.nvrm import _exec_params as E  # noqa: E402
from arig.nvrm import _params as P  # noqa: E402
from arig.nvrm import _push as pb  # noqa: E402
from arig.nvrm import _qmd as q  # noqa: E402

CUBIN = ROOT / "tests" / "data" / "nv" / "probe.sm_90.cubin"
MIB = 1 << 20
PAGE_2M = 2 * MIB
GPU_WAIT_S = 2.0

# The CPU = GPU address region (tinygrad_nv.md §1: CPU-visible buffers at 0x10_0000_0000..; GPFIFO
# and QMD addresses must stay below 2**40).  Reserved PROT_NONE first; buffers are mapped over it.
VA_BASES = (0x10_0000_0000, 0x18_0000_0000, 0x30_0000_0000)
VA_BYTES = 1 << 30  # 1 GiB
# The research's VA space (§1 step 8) and virtual memory limit (step 5).
VASPACE_BASE, VASPACE_SIZE = 0x1000, 0x1FFFFFB000000
VIRTMEM_LIMIT = 0x1FFFFFFFFFFFF
GPFIFO_ENTRIES = 0x10000
CHANNEL_UVM_BYTES = 64 * MIB  # UVM_REGISTER_CHANNEL's reserved range (§1 step 12)
MAX_TPCS = 72  # GH100's full TPC count: local memory is sized for every TPC index the GPU may use
OS_DESC_HANDLE = 0xA7160001  # client-chosen handle for RM_ALLOC_MEMORY (MEMORY_HANDLE_PROVIDED)

PROT_NONE, PROT_RW = 0, mmap.PROT_READ | mmap.PROT_WRITE
MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS = 0x01, 0x02, 0x10, 0x20
MAP_NORESERVE, MAP_FIXED_NOREPLACE = 0x4000, 0x100000

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
MAP_FAILED = ctypes.c_void_p(-1).value


class StepFailed(Exception):
    """A step failed; the message is what the step line says after FAILED."""


class ProbeTimeout(Exception):
    """The whole-probe alarm went off."""


def _why(e: BaseException) -> str:
    if isinstance(e, StepFailed):
        return str(e)
    if isinstance(e, P.RmError):
        return f"{e.status_name} (0x{e.status:X}) in {e.op}"
    if isinstance(e, P.DriverError):
        return f"errno {e.errno} {os.strerror(e.errno) if e.errno else ''}: {e}"
    if isinstance(e, OSError):
        return f"errno {e.errno} {e.strerror}"
    return f"{type(e).__name__}: {e}"


def _mmap(addr: int, size: int, prot: int, flags: int, fd: int = -1) -> int:
    got = _libc.mmap(addr, size, prot, flags, fd, 0)
    if got in (None, MAP_FAILED):
        err = ctypes.get_errno()
        raise OSError(err, f"mmap({addr:#x}, {size:#x}): {os.strerror(err)}")
    if addr and got != addr:
        _libc.munmap(got, size)
        raise OSError(0, f"mmap gave {got:#x}, not the asked {addr:#x}")
    return int(got)


def _munmap(addr: int, size: int) -> None:
    if _libc.munmap(addr, size) != 0:
        raise OSError(ctypes.get_errno(), "munmap")


def _rm_status(what: str, status: int) -> None:
    P.check_status(what, status)


class Buffer:
    """An RM memory object and where it is: GPU (= CPU) address, size, handle."""

    def __init__(self, name: str, handle: int, va: int, size: int) -> None:
        self.name, self.handle, self.va, self.size = name, handle, va, size

    def u32(self, offset: int) -> ctypes.c_uint32:
        return ctypes.c_uint32.from_address(self.va + offset)

    def u64(self, offset: int) -> ctypes.c_uint64:
        return ctypes.c_uint64.from_address(self.va + offset)

    def write(self, offset: int, data: bytes) -> None:
        ctypes.memmove(self.va + offset, data, len(data))

    def read(self, offset: int, n: int) -> bytes:
        return ctypes.string_at(self.va + offset, n)


class Probe:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.steps: list[dict[str, Any]] = []
        self.undo: list[tuple[str, Callable[[], None]]] = []
        self.results: dict[str, Any] = {}
        self.va_next = 0
        self.va_end = 0

    # --- bookkeeping -----------------------------------------------------------------------

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        try:
            got = fn()
        except ProbeTimeout:
            raise
        except Exception as e:  # noqa: BLE001 - every failure is reported as the step's
            ms = (time.perf_counter() - t0) * 1e3
            why = _why(e)
            print(f"{name}: FAILED {why} ({ms:.1f} ms)", flush=True)
            self.steps.append({"step": name, "ok": False, "ms": round(ms, 3), "error": why})
            raise StepFailed(f"{name}: {why}") from e
        ms = (time.perf_counter() - t0) * 1e3
        extra = f" {got}" if isinstance(got, str) else ""
        print(f"{name}: ok ({ms:.1f} ms){extra}", flush=True)
        self.steps.append({"step": name, "ok": True, "ms": round(ms, 3), **({"info": got} if extra else {})})
        return got

    def defer(self, what: str, fn: Callable[[], None]) -> None:
        self.undo.append((what, fn))

    def cleanup(self) -> None:
        while self.undo:
            what, fn = self.undo.pop()
            try:
                fn()
                print(f"undo {what}: ok", flush=True)
                self.steps.append({"step": f"undo {what}", "ok": True})
            except Exception as e:  # noqa: BLE001 - keep freeing the rest
                print(f"undo {what}: failed {_why(e)}", flush=True)
                self.steps.append({"step": f"undo {what}", "ok": False, "error": _why(e)})

    # --- RM and UVM calls not in _fd ---------------------------------------------------------

    def alloc(self, parent: int, cls: int, params: Any, what: str) -> int:
        h = _fd.rm_alloc(self.ctl, self.root, parent, cls, params, what)
        self.defer(f"free {what} 0x{h:08X}", lambda: self._free(parent, h))
        return h

    def _free(self, parent: int, h: int) -> None:
        arg = P.Nvos00(hRoot=self.root, hObjectParent=parent, hObjectOld=h)
        _fd.ioctl(self.ctl, P.NV_ESC_RM_FREE, arg, "RM free")
        _rm_status("RM free", arg.status)

    def control(self, obj: int, cmd: int, params: Any) -> None:
        _fd.rm_control(self.ctl, self.root, obj, cmd, params)

    def uvm(self, fd: int, nr: int, params: Any, what: str) -> None:
        try:
            fcntl.ioctl(fd, nr, params, True)
        except OSError as e:
            raise P.DriverError(f"{what}: uvm ioctl {nr} failed: {e.strerror}", e.errno) from e
        _rm_status(what, params.rmStatus)

    def open_gpu_fd(self) -> int:
        """A fresh /dev/nvidiaN registered to the ctl fd (one per CPU mapping, §1 'Memory')."""
        fd = _fd.open_file(f"/dev/nvidia{self.minor}")
        try:
            _fd.ioctl(fd, E.NV_ESC_REGISTER_FD, P.RegisterFd(ctl_fd=self.ctl), "register fd")
        except BaseException:
            _fd.close(fd)
            raise
        return fd

    def va(self, size: int) -> int:
        size = -(-size // PAGE_2M) * PAGE_2M
        if self.va_next + size > self.va_end:
            raise StepFailed("the reserved VA region is full")
        got, self.va_next = self.va_next, self.va_next + size
        return got

    def cpu_map(self, handle: int, va: int, size: int, *, sysmem: bool = False, what: str) -> None:
        """RM_MAP_MEMORY on a fresh fd, then mmap that fd at ``va`` (write-combined for VRAM)."""
        fd = _fd.open_file("/dev/nvidiactl") if sysmem else self.open_gpu_fd()
        self.defer(f"close map fd of {what}", lambda: _fd.close(fd))
        flags = 0 if sysmem else E.field(*E.NVOS33_FLAGS_CACHING_TYPE, E.NVOS33_FLAGS_CACHING_TYPE_WRITECOMBINED)
        arg = E.Nvos33WithFd(params=E.Nvos33(hClient=self.root, hDevice=self.device, hMemory=handle,
                                             offset=0, length=size, flags=flags), fd=fd)
        _fd.ioctl(self.ctl, E.NV_ESC_RM_MAP_MEMORY, arg, f"map {what} to the CPU")
        _rm_status(f"map {what} to the CPU", arg.params.status)
        linear = int(arg.params.pLinearAddress)

        def unmap_rm() -> None:
            u = E.Nvos34(hClient=self.root, hDevice=self.device, hMemory=handle, pLinearAddress=linear)
            _fd.ioctl(self.ctl, E.NV_ESC_RM_UNMAP_MEMORY, u, "unmap from the CPU")
            _rm_status("unmap from the CPU", u.status)

        self.defer(f"RM unmap {what} from the CPU", unmap_rm)
        _mmap(va, size, PROT_RW, MAP_SHARED | MAP_FIXED, fd)
        # Back to a PROT_NONE reservation on the way out, so the region stays ours until freed.
        self.defer(f"munmap {what}", lambda: self._rereserve(va, size))

    def _rereserve(self, va: int, size: int) -> None:
        _mmap(va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED)

    def gpu_map(self, handle: int, va: int, size: int, what: str) -> None:
        """UVM external range, RM_MAP_MEMORY_DMA at the fixed address, UVM map external (§1 'Memory')."""
        rng = E.UvmCreateExternalRangeParams(base=va, length=size)
        self.uvm(self.uvm_fd, E.UVM_CREATE_EXTERNAL_RANGE, rng, f"UVM external range for {what}")

        def uvm_free() -> None:
            self.uvm(self.uvm_fd, E.UVM_FREE, E.UvmFreeParams(base=va, length=size), "UVM free")

        self.defer(f"UVM free {what}", uvm_free)
        if not self.args.skip_map_dma:
            flags = (E.field(*E.NVOS46_FLAGS_DMA_OFFSET_FIXED, E.NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE)
                     | E.field(*E.NVOS46_FLAGS_PAGE_SIZE, E.NVOS46_FLAGS_PAGE_SIZE_4KB)
                     | E.field(*E.NVOS46_FLAGS_CACHE_SNOOP, E.NVOS46_FLAGS_CACHE_SNOOP_ENABLE))
            d = E.Nvos46(hClient=self.root, hDevice=self.device, hDma=self.virtmem, hMemory=handle,
                         offset=0, length=size, flags=flags, dmaOffset=va)
            _fd.ioctl(self.ctl, E.NV_ESC_RM_MAP_MEMORY_DMA, d, f"map {what} DMA")
            _rm_status(f"map {what} DMA", d.status)

            def unmap_dma() -> None:
                u = E.Nvos47(hClient=self.root, hDevice=self.device, hDma=self.virtmem, hMemory=handle,
                             dmaOffset=va, size=size)
                _fd.ioctl(self.ctl, E.NV_ESC_RM_UNMAP_MEMORY_DMA, u, "unmap DMA")
                _rm_status("unmap DMA", u.status)

            self.defer(f"unmap DMA {what}", unmap_dma)
        m = E.UvmMapExternalAllocationParams(base=va, length=size, offset=0, gpuAttributesCount=1,
                                             rmCtrlFd=self.ctl, hClient=self.root, hMemory=handle)
        ctypes.memmove(m.perGpuAttributes[0].gpuUuid, self.uuid, 16)
        m.perGpuAttributes[0].gpuMappingType = E.UVM_GPU_MAPPING_TYPE_READ_WRITE_ATOMIC
        self.uvm(self.uvm_fd, E.UVM_MAP_EXTERNAL_ALLOCATION, m, f"UVM map {what}")

    def vram(self, name: str, size: int, *, contiguous: bool = False, cpu: bool = True) -> Buffer:
        """VRAM (NV1_MEMORY_USER) with 2 MiB pages, mapped on the GPU and (``cpu``) to the CPU, same address."""
        size = -(-size // PAGE_2M) * PAGE_2M
        va = self.va(size)
        phys = E.NVOS32_ATTR_PHYSICALITY_CONTIGUOUS if contiguous else E.NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS
        p = E.NvMemoryAllocationParams(
            owner=self.root, type=E.NVOS32_TYPE_IMAGE, flags=E.VRAM_ALLOC_FLAGS, format=E.VRAM_FORMAT,
            attr=E.field(*E.NVOS32_ATTR_PHYSICALITY, phys) | E.field(*E.NVOS32_ATTR_PAGE_SIZE, E.NVOS32_ATTR_PAGE_SIZE_HUGE),
            attr2=(E.field(*E.NVOS32_ATTR2_ZBC, E.NVOS32_ATTR2_ZBC_PREFER_NO_ZBC)
                   | E.field(*E.NVOS32_ATTR2_GPU_CACHEABLE, E.NVOS32_ATTR2_GPU_CACHEABLE_YES)
                   | E.field(*E.NVOS32_ATTR2_PAGE_SIZE_HUGE, E.NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB)),
            size=size, alignment=PAGE_2M)
        h = self.alloc(self.device, E.NV1_MEMORY_USER, p, f"VRAM {name}")
        self.gpu_map(h, va, size, name)
        if cpu:
            self.cpu_map(h, va, size, what=name)
        return Buffer(name, h, va, size)

    def sysmem_uncached(self, name: str, size: int) -> Buffer:
        """Uncached system memory (NV1_MEMORY_SYSTEM, location PCI): the channel's error notifier."""
        size = -(-size // 4096) * 4096
        p = E.NvMemoryAllocationParams(
            owner=self.root, type=E.NVOS32_TYPE_IMAGE, format=E.VRAM_FORMAT,
            flags=(E.NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT | E.NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE
                   | E.NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED | E.NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED),
            attr=(E.field(*E.NVOS32_ATTR_LOCATION, E.NVOS32_ATTR_LOCATION_PCI)
                  | E.field(*E.NVOS32_ATTR_PHYSICALITY, E.NVOS32_ATTR_PHYSICALITY_NONCONTIGUOUS)
                  | E.field(*E.NVOS32_ATTR_PAGE_SIZE, E.NVOS32_ATTR_PAGE_SIZE_4KB)
                  | E.field(*E.NVOS32_ATTR_COHERENCY, E.NVOS32_ATTR_COHERENCY_UNCACHED)),
            attr2=(E.field(*E.NVOS32_ATTR2_ZBC, E.NVOS32_ATTR2_ZBC_PREFER_NO_ZBC)
                   | E.field(*E.NVOS32_ATTR2_GPU_CACHEABLE, E.NVOS32_ATTR2_GPU_CACHEABLE_NO)),
            size=size, alignment=4096)
        h = self.alloc(self.device, E.NV01_MEMORY_SYSTEM, p, f"sysmem {name}")
        return Buffer(name, h, 0, size)

    def host(self, name: str, size: int) -> Buffer:
        """Host memory: anonymous shared pages at a chosen address, made an RM OS descriptor, GPU-mapped there."""
        size = -(-size // 4096) * 4096
        va = self.va(size)
        _mmap(va, size, PROT_RW, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED)
        self.defer(f"munmap host {name}", lambda: self._rereserve(va, size))
        ctypes.memset(va, 0, size)
        flags = (E.field(*E.NVOS02_FLAGS_PHYSICALITY, E.NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS)
                 | E.field(*E.NVOS02_FLAGS_LOCATION, E.NVOS02_FLAGS_LOCATION_PCI)
                 | E.field(*E.NVOS02_FLAGS_COHERENCY, E.NVOS02_FLAGS_COHERENCY_CACHED)
                 | E.field(*E.NVOS02_FLAGS_MAPPING, E.NVOS02_FLAGS_MAPPING_NO_MAP))
        arg = E.Nvos02WithFd(params=E.Nvos02(hRoot=self.root, hObjectParent=self.device, hObjectNew=OS_DESC_HANDLE,
                                             hClass=E.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, flags=flags,
                                             pMemory=va, limit=size - 1), fd=-1)
        _fd.ioctl(self.gpu_fd, E.NV_ESC_RM_ALLOC_MEMORY, arg, f"OS descriptor {name}")
        _rm_status(f"OS descriptor {name}", arg.params.status)
        h = int(arg.params.hObjectNew)
        self.defer(f"free OS descriptor {name}", lambda: self._free(self.device, h))
        self.gpu_map(h, va, size, name)
        return Buffer(name, h, va, size)

    # --- the probe ------------------------------------------------------------------------

    def run(self) -> None:
        a = self.args
        self.ctl = self.step("open /dev/nvidiactl", lambda: _fd.open_file("/dev/nvidiactl"))
        self.defer("close ctl fd", lambda: _fd.close(self.ctl))

        def version() -> str:
            v = P.VersionStr(cmd=P.VERSION_QUERY)
            _fd.ioctl(self.ctl, P.NV_ESC_CHECK_VERSION_STR, v, "version")
            self.results["driver"] = v.versionString.decode("ascii", "replace")
            return str(self.results["driver"])

        self.step("driver version", version)

        def root() -> int:
            h = _fd.rm_alloc(self.ctl, 0, 0, E.NV01_ROOT_CLIENT, None, "root client")
            self.defer("free root client", lambda: self._free(h, h))  # frees everything under it too
            return h

        self.root = self.step("root client", root)

        def uvm_open() -> str:
            self.uvm_fd = _fd.open_file("/dev/nvidia-uvm")
            self.defer("close uvm fd", lambda: _fd.close(self.uvm_fd))
            self.uvm_fd2 = _fd.open_file("/dev/nvidia-uvm")
            self.defer("close uvm fd 2", lambda: _fd.close(self.uvm_fd2))
            self.uvm(self.uvm_fd, E.UVM_INITIALIZE, E.UvmInitializeParams(flags=0), "UVM_INITIALIZE")
            mm = E.UvmMmInitializeParams(uvmFd=self.uvm_fd)
            try:  # the research: an error here is ignored (CUDA hits it too)
                self.uvm(self.uvm_fd2, E.UVM_MM_INITIALIZE, mm, "UVM_MM_INITIALIZE")
                return "mm init ok"
            except (P.RmError, P.DriverError) as e:
                return f"mm init ignored: {_why(e)}"

        self.step("UVM initialize", uvm_open)

        def card() -> str:
            cards = P.CardInfoArray()
            _fd.ioctl(self.ctl, E.NV_ESC_CARD_INFO, cards, "card info")
            valid = [c for c in cards if c.valid]
            if a.gpu >= len(valid):
                raise StepFailed(f"GPU {a.gpu} asked, the driver holds {len(valid)}")
            c = valid[a.gpu]
            self.minor, self.gpu_id = int(c.minor_number), int(c.gpu_id)
            self.results["bus"] = P.bus_name(c.pci_info)
            return f"{self.results['bus']} minor {self.minor} gpu_id 0x{self.gpu_id:x}"

        self.step("card info", card)

        def gpu_fd() -> int:
            fd = self.open_gpu_fd()
            self.defer("close gpu fd", lambda: _fd.close(fd))
            return fd

        self.gpu_fd = self.step(f"open /dev/nvidia{self.minor} + register fd", gpu_fd)

        def device() -> str:
            info = P.IdInfoV2(gpuId=self.gpu_id)
            self.control(self.root, P.CTRL_GPU_GET_ID_INFO_V2, info)
            self.device = self.alloc(self.root, E.NV01_DEVICE_0,
                                     P.Nv0080Alloc(deviceId=info.deviceInstance, hClientShare=self.root, vaMode=a.vamode),
                                     "device")
            self.subdevice = self.alloc(self.device, E.NV20_SUBDEVICE_0, P.Nv2080Alloc(subDeviceId=0), "subdevice")
            return f"device 0x{self.device:08X} subdevice 0x{self.subdevice:08X}"

        self.step("device + subdevice", device)

        def uuid() -> str:
            g = E.GidInfoBinary(flags=E.GID_FLAGS_BINARY_SHA1)
            self.control(self.subdevice, E.NV2080_CTRL_CMD_GPU_GET_GID_INFO, g)
            self.uuid = g.uuid()
            return self.uuid.hex()

        self.step("GPU UUID (binary)", uuid)

        def classes() -> str:
            cl = E.ClassListV2()
            self.control(self.device, E.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, cl)
            have = set(cl.classes())
            self.results["classes"] = sorted(f"0x{c:04x}" for c in have)

            def pick(prefs: tuple[int, ...], what: str) -> int:
                for c in prefs:
                    if c in have:
                        return c
                raise StepFailed(f"no {what} class among {[hex(c) for c in prefs]}")

            self.usermode_cls = pick(E.USERMODE_CLASSES, "usermode")
            self.gpfifo_cls = pick(E.GPFIFO_CLASSES, "GPFIFO")
            self.compute_cls = pick(E.COMPUTE_CLASSES, "compute")
            return f"usermode 0x{self.usermode_cls:x} gpfifo 0x{self.gpfifo_cls:x} compute 0x{self.compute_cls:x}"

        self.step("class list", classes)

        def register_gpu() -> str:
            r = E.UvmRegisterGpuParams(rmCtrlFd=-1)
            ctypes.memmove(r.gpu_uuid, self.uuid, 16)
            self.uvm(self.uvm_fd, E.UVM_REGISTER_GPU, r, "UVM_REGISTER_GPU")

            def unregister() -> None:
                u = E.UvmUnregisterGpuParams()
                ctypes.memmove(u.gpu_uuid, self.uuid, 16)
                self.uvm(self.uvm_fd, E.UVM_UNREGISTER_GPU, u, "UVM_UNREGISTER_GPU")

            self.defer("UVM unregister GPU", unregister)
            return f"numa {r.numaEnabled} node {r.numaNodeId}"

        self.step("UVM register GPU", register_gpu)

        self.virtmem = self.step("virtual memory object", lambda: self.alloc(
            self.device, E.NV01_MEMORY_VIRTUAL, E.NvMemoryVirtualAllocationParams(limit=VIRTMEM_LIMIT), "virtmem"))

        def usermode() -> str:
            h = self.alloc(self.subdevice, self.usermode_cls, None, "usermode")
            fd = self.open_gpu_fd()
            self.defer("close usermode fd", lambda: _fd.close(fd))
            arg = E.Nvos33WithFd(params=E.Nvos33(hClient=self.root, hDevice=self.device, hMemory=h,
                                                 offset=0, length=E.USERMODE_MAP_BYTES, flags=0), fd=fd)
            _fd.ioctl(self.ctl, E.NV_ESC_RM_MAP_MEMORY, arg, "map usermode")
            _rm_status("map usermode", arg.params.status)
            linear = int(arg.params.pLinearAddress)

            def unmap_rm() -> None:
                u = E.Nvos34(hClient=self.root, hDevice=self.device, hMemory=h, pLinearAddress=linear)
                _fd.ioctl(self.ctl, E.NV_ESC_RM_UNMAP_MEMORY, u, "unmap usermode")
                _rm_status("unmap usermode", u.status)

            self.defer("RM unmap usermode", unmap_rm)
            self.doorbell_addr = _mmap(0, E.USERMODE_MAP_BYTES, PROT_RW, MAP_SHARED, fd)
            self.defer("munmap usermode", lambda: _munmap(self.doorbell_addr, E.USERMODE_MAP_BYTES))
            return f"mapped at {self.doorbell_addr:#x}"

        self.step("usermode doorbell map", usermode)

        def vaspace() -> int:
            p = E.NvVaspaceAllocationParameters(
                vaBase=VASPACE_BASE, vaSize=VASPACE_SIZE,
                flags=E.NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING | E.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED)
            return self.alloc(self.device, E.FERMI_VASPACE_A, p, "vaspace")

        self.vaspace = self.step("VA space (externally owned)", vaspace)

        def register_vaspace() -> None:
            r = E.UvmRegisterGpuVaspaceParams(rmCtrlFd=self.ctl, hClient=self.root, hVaSpace=self.vaspace)
            ctypes.memmove(r.gpuUuid, self.uuid, 16)
            self.uvm(self.uvm_fd, E.UVM_REGISTER_GPU_VASPACE, r, "UVM_REGISTER_GPU_VASPACE")

            def unregister() -> None:
                u = E.UvmUnregisterGpuVaspaceParams()
                ctypes.memmove(u.gpuUuid, self.uuid, 16)
                self.uvm(self.uvm_fd, E.UVM_UNREGISTER_GPU_VASPACE, u, "UVM_UNREGISTER_GPU_VASPACE")

            self.defer("UVM unregister VA space", unregister)

        self.step("UVM register VA space", register_vaspace)

        def reserve() -> str:
            errors = []
            for base in VA_BASES:
                try:
                    _mmap(base, VA_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE)
                except OSError as e:
                    errors.append(f"{base:#x}: {e}")
                    continue
                self.va_next, self.va_end = base, base + VA_BYTES
                self.defer("munmap VA reservation", lambda at=base: _munmap(at, VA_BYTES))
                return f"{base:#x}..{base + VA_BYTES:#x}"
            raise StepFailed("; ".join(errors))

        self.step("reserve CPU=GPU VA region", reserve)

        def group() -> str:
            self.tsg = self.alloc(self.device, E.KEPLER_CHANNEL_GROUP_A,
                                  E.NvChannelGroupAllocationParameters(engineType=E.NV2080_ENGINE_TYPE_GRAPHICS), "channel group")
            self.ctxshare = self.alloc(self.tsg, E.FERMI_CONTEXT_SHARE_A, E.NvCtxshareAllocationParameters(
                hVASpace=self.vaspace, flags=E.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC), "context share")
            return f"tsg 0x{self.tsg:08X} ctxshare 0x{self.ctxshare:08X}"

        self.step("channel group + context share", group)

        self.notifier = self.step("error notifier (uncached sysmem)", lambda: self.sysmem_uncached("notifier", 2 * MIB))
        self.ring = self.step("GPFIFO ring + USERD (contiguous VRAM, CPU-mapped)",
                              lambda: self.vram("gpfifo", GPFIFO_ENTRIES * 8 + E.USERD_BYTES, contiguous=True))
        self.userd_offset = GPFIFO_ENTRIES * 8

        def channel() -> str:
            p = E.NvChannelAllocParams(hObjectError=self.notifier.handle, hObjectBuffer=self.ring.handle,
                                       gpFifoOffset=self.ring.va, gpFifoEntries=GPFIFO_ENTRIES,
                                       hContextShare=self.ctxshare)
            p.hUserdMemory[0] = self.ring.handle
            p.userdOffset[0] = self.userd_offset
            self.channel = self.alloc(self.tsg, self.gpfifo_cls, p, "channel")
            self.compute = self.alloc(self.channel, self.compute_cls, None, "compute object")
            return f"channel 0x{self.channel:08X} compute 0x{self.compute:08X}"

        self.step("GPFIFO channel + compute object", channel)

        def token() -> str:
            t = E.WorkSubmitTokenParams()
            self.control(self.channel, E.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, t)
            self.token = int(t.workSubmitToken)
            return f"token 0x{self.token:x}"

        self.step("work submit token", token)

        def register_channel() -> str:
            base = self.va(CHANNEL_UVM_BYTES)
            r = E.UvmRegisterChannelParams(rmCtrlFd=self.ctl, hClient=self.root, hChannel=self.channel,
                                           base=base, length=CHANNEL_UVM_BYTES)
            ctypes.memmove(r.gpuUuid, self.uuid, 16)
            self.uvm(self.uvm_fd, E.UVM_REGISTER_CHANNEL, r, "UVM_REGISTER_CHANNEL")

            def unregister() -> None:
                u = E.UvmUnregisterChannelParams(hClient=self.root, hChannel=self.channel)
                ctypes.memmove(u.gpuUuid, self.uuid, 16)
                self.uvm(self.uvm_fd, E.UVM_UNREGISTER_CHANNEL, u, "UVM_UNREGISTER_CHANNEL")

            self.defer("UVM unregister channel", unregister)
            return f"range {base:#x}+{CHANNEL_UVM_BYTES:#x}"

        self.step("UVM register channel", register_channel)
        self.step("schedule channel group", lambda: self.control(
            self.tsg, E.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, E.GpfifoScheduleParams(bEnable=1)))

        def event() -> str:
            ev = os.open("/dev/nvidiactl", os.O_RDWR | os.O_CLOEXEC)  # no O_NONBLOCK: poll must wait
            self.ev = ev
            self.defer("close event fd", lambda: _fd.close(ev))
            arg = E.AllocOsEvent(hClient=self.root, hDevice=self.device, fd=ev)
            _fd.ioctl(ev, E.NV_ESC_ALLOC_OS_EVENT, arg, "alloc OS event")
            _rm_status("alloc OS event", arg.Status)

            def free_os_event() -> None:
                f = E.FreeOsEvent(hClient=self.root, hDevice=self.device, fd=ev)
                _fd.ioctl(ev, E.NV_ESC_FREE_OS_EVENT, f, "free OS event")
                _rm_status("free OS event", f.Status)

            self.defer("free OS event", free_os_event)
            notify = (E.NV2080_NOTIFIERS_FIFO_EVENT_MTHD | E.NV01_EVENT_NONSTALL_INTR
                      | E.NV01_EVENT_WITHOUT_EVENT_DATA | E.NV01_EVENT_SUBDEVICE_SPECIFIC)
            self.alloc(self.subdevice, E.NV01_EVENT_OS_EVENT, E.Nv0005AllocParameters(
                hParentClient=self.root, hSrcResource=self.subdevice, hClass=E.NV01_EVENT_OS_EVENT,
                notifyIndex=notify, data=ev), "OS event object")
            return f"fd {ev} notifyIndex 0x{notify:08x}"

        self.step("OS event fd", event)

        self.sem = self.step("semaphore page (host memory, GPU-mapped)", lambda: self.host("semaphore", 4096))

        kernel = self.step("parse cubin", lambda: _cubin.parse(CUBIN.read_bytes()).kernels["axpy"])

        def no_relocations() -> None:
            if kernel.relocations:  # axpy's code is position-independent; a relocated kernel needs patching first
                raise StepFailed(f"axpy has {len(kernel.relocations)} relocations")

        self.step("axpy needs no relocation", no_relocations)
        n = a.n
        per_tpc = pb.local_bytes_per_tpc(q.local_bytes_per_thread(kernel))
        self.code = self.step("code buffer (VRAM)", lambda: self.vram("code", len(kernel.text) + 256))
        self.args_buf = self.step("argument buffer (VRAM)", lambda: self.vram("args", 64 * 1024))
        self.data = self.step("data buffers x, y (VRAM)", lambda: self.vram("data", 2 * n * 4 + 4096))
        self.local = self.step("local memory (VRAM)", lambda: self.vram("local", per_tpc * MAX_TPCS, cpu=False))
        self.cmd = self.step("pushbuffer (VRAM)", lambda: self.vram("pushbuffer", PAGE_2M))

        rng = np.random.default_rng(1)
        x = rng.standard_normal(n, dtype=np.float32)
        y = rng.standard_normal(n, dtype=np.float32)
        alpha = np.float32(2.5)
        x_va, y_va = self.data.va, self.data.va + ((n * 4 + 4095) // 4096) * 4096

        def fill() -> str:
            self.code.write(0, kernel.text)
            self.data.write(x_va - self.data.va, x.tobytes())
            self.data.write(y_va - self.data.va, y.tobytes())
            back = np.frombuffer(self.data.read(x_va - self.data.va, n * 4), dtype=np.float32)
            if not np.array_equal(back, x):
                raise StepFailed("BAR1 read-back of x differs from what was written")
            return f"{len(kernel.text)} B code, {n} floats each"

        self.step("write code and data through BAR1", fill)

        grid, block = (n + 255) // 256, 256
        params = struct.pack("<f4xQQi", float(alpha), x_va, y_va, n)

        def build() -> str:
            cb0 = q.cbank0(kernel, grid, block, params, shared_window=pb.SHARED_WINDOW, local_window=pb.LOCAL_WINDOW)
            qmd_off = -(-len(cb0) // 256) * 256
            self.qmd_va = self.args_buf.va + qmd_off
            fields = q.kernel_qmd(kernel, grid=grid, block=block, program_address=self.code.va,
                                  cbank0_address=self.args_buf.va, cbank0_size=len(cb0),
                                  release=q.Release(self.sem.va + 16, 0xA5A5))  # a QMD release too: does it land?
            self.args_buf.write(0, cb0)
            self.args_buf.write(qmd_off, q.pack(fields))
            return f"grid {grid} block {block} cb0 {len(cb0)} B, QMD at {self.qmd_va:#x}"

        self.step("constant bank 0 + QMD", build)

        self.put = 0
        self.cmd_off = 0

        def submit(push: pb.Push) -> None:
            data = push.data()
            if self.cmd_off + len(data) > self.cmd.size:
                self.cmd_off = 0
            seg = self.cmd.va + self.cmd_off
            self.cmd.write(self.cmd_off, data)
            self.cmd_off += -(-len(data) // 256) * 256
            self.ring.u64((self.put % GPFIFO_ENTRIES) * 8).value = pb.gpfifo_entry(seg, len(push))
            self.put += 1
            self.ring.u32(self.userd_offset + E.USERD_GP_PUT).value = self.put % GPFIFO_ENTRIES
            _ = self.ring.u32(self.userd_offset + E.USERD_GP_PUT).value  # read back: the WC writes are out
            ctypes.c_uint32.from_address(self.doorbell_addr + E.USERMODE_NOTIFY_CHANNEL_PENDING).value = self.token

        def sem_value() -> int:
            return int(self.sem.u64(0).value)

        def state() -> str:
            get = self.ring.u32(self.userd_offset + E.USERD_GP_GET).value
            return f"GPGet={get} GPPut={self.put % GPFIFO_ENTRIES} semaphore={sem_value()}"

        def poll(value: int) -> str:
            t0 = time.perf_counter()
            deadline = t0 + GPU_WAIT_S
            while sem_value() < value:
                if time.perf_counter() > deadline:
                    raise StepFailed(f"semaphore did not reach {value} in {GPU_WAIT_S} s ({state()})")
            return f"{(time.perf_counter() - t0) * 1e6:.0f} us after submit"

        def wait_event(value: int) -> str:
            # Done when the semaphore holds the value AND the fd has woken at least once: a release that
            # lands before select() must still wake the fd, else the fd path is not shown to work.
            t0 = time.perf_counter()
            deadline = t0 + GPU_WAIT_S
            wakes, woke_us = 0, -1.0
            while sem_value() < value or not wakes:
                left = deadline - time.perf_counter()
                if left <= 0:
                    landed = "landed" if sem_value() >= value else "did not land"
                    raise StepFailed(f"{wakes} wake(s) in {GPU_WAIT_S} s and the semaphore {landed} ({state()})")
                r, _, _ = select.select([self.ev], [], [], left)
                if r:
                    wakes += 1
                    woke_us = woke_us if woke_us >= 0 else (time.perf_counter() - t0) * 1e6
            return f"first wake {woke_us:.0f} us after submit, {wakes} wake(s)"

        def drain_event() -> None:
            select.select([self.ev], [], [], 0)  # poll clears a stale pending flag

        self.step("submit setup + host release 1", lambda: submit(
            pb.setup(self.compute_cls, None, local_address=self.local.va, local_per_tpc=per_tpc)
            .release(self.sem.va, 1).non_stall_interrupt()))
        self.results["release_poll"] = self.step("wait release 1 (poll)", lambda: poll(1))

        self.step("submit axpy + release 2", lambda: submit(pb.launch_and_signal(self.qmd_va, self.sem.va, 2)))
        self.results["kernel_poll"] = self.step("wait axpy (poll)", lambda: poll(2))

        def check() -> str:
            got = np.frombuffer(self.data.read(y_va - self.data.va, n * 4), dtype=np.float32)
            want = alpha * x + y
            err = float(np.max(np.abs(got - want)))
            bad = int(np.count_nonzero(~np.isclose(got, want, rtol=1e-5, atol=1e-6)))
            self.results["axpy_max_abs_err"], self.results["axpy_bad"] = err, bad
            if bad:
                raise StepFailed(f"{bad}/{n} wrong, max abs err {err:g}, first y {got[:4].tolist()} want {want[:4].tolist()}")
            return f"{n}/{n} right, max abs err {err:g}"

        self.step("check axpy against numpy", check)
        qmd_rel = int(self.sem.u64(16).value)
        self.results["qmd_release_seen"] = qmd_rel == 0xA5A5
        print(f"info: QMD RELEASE_SEMAPHORE0 {'landed' if qmd_rel == 0xA5A5 else f'did not land (0x{qmd_rel:x})'}", flush=True)

        self.step("drain stale event", drain_event)
        self.step("submit host release 3 + interrupt", lambda: submit(pb.Push().release(self.sem.va, 3).non_stall_interrupt()))
        self.results["release_event"] = self.step("wait release 3 (event fd)", lambda: wait_event(3))

        y1 = alpha * x + y  # what y holds now; a second axpy computes alpha*x + y1
        self.step("drain stale event 2", drain_event)
        self.step("submit axpy + release 4", lambda: submit(pb.launch_and_signal(self.qmd_va, self.sem.va, 4)))
        self.results["kernel_event"] = self.step("wait axpy (event fd)", lambda: wait_event(4))

        def check2() -> str:
            got = np.frombuffer(self.data.read(y_va - self.data.va, n * 4), dtype=np.float32)
            want = alpha * x + y1
            bad = int(np.count_nonzero(~np.isclose(got, want, rtol=1e-5, atol=1e-5)))
            if bad:
                raise StepFailed(f"{bad}/{n} wrong after the second launch")
            return f"{n}/{n} right"

        self.step("check second axpy", check2)
        ts = int(self.sem.u64(8).value)
        self.results["gpu_timestamp_ns"] = ts
        print(f"info: GPU timestamp of the last release {ts} ns (Unix time {time.time_ns()} ns)", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", type=int, default=0, help="index among the driver's GPUs")
    ap.add_argument("--n", type=int, default=100_000, help="axpy length")
    ap.add_argument("--vamode", type=int, default=0, help="NV0080 vaMode (0 optional-multiple, 2 multiple)")
    ap.add_argument("--skip-map-dma", action="store_true", help="do not RM_MAP_MEMORY_DMA (UVM mappings only)")
    ap.add_argument("--timeout", type=int, default=60, help="whole-probe limit, seconds")
    args = ap.parse_args()
    probe = Probe(args)

    def alarm(_sig: int, _frame: Any) -> None:
        raise ProbeTimeout(f"the probe ran past {args.timeout} s")

    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(args.timeout)
    failed: str | None = None
    t0 = time.perf_counter()
    try:
        probe.run()
    except StepFailed as e:
        failed = str(e)
    except ProbeTimeout as e:
        failed = str(e)
        print(f"TIMEOUT: {e}", flush=True)
    except Exception as e:  # noqa: BLE001 - report it, then free what was made
        failed = _why(e)
        print(f"ERROR: {failed}", flush=True)
    finally:
        signal.alarm(20)  # the cleanup gets its own bound
        try:
            probe.cleanup()
        except ProbeTimeout:
            print("TIMEOUT during cleanup", flush=True)
        finally:
            signal.alarm(0)
    total = (time.perf_counter() - t0) * 1e3
    summary = {"ok": failed is None, "failed": failed, "total_ms": round(total, 1), "steps": probe.steps,
               "results": probe.results, "args": vars(args)}
    print(f"nv_probe: {'OK' if failed is None else 'FAILED at ' + failed} ({total:.0f} ms)", flush=True)
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "nv_probe.json").write_text(json.dumps(summary, indent=1, default=str))
    return 0 if failed is None else 1


if __name__ == "__main__":
    sys.exit(main())
