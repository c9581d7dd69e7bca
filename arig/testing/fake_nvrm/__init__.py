"""A fake NVIDIA kernel driver for deterministic CPU tests of arig's NV device (``arig.nvrm.gpu``).

``FakeNvrm`` stands in for what ``arig.nvrm`` reaches of the machine through
one seam: the driver object (``arig.nvrm._fd.driver``, the one object every
open, ioctl, mmap and UVM call goes through, and whose ``pci_root`` says
where the PCI tree is), swapped for a :class:`_FakeDriver` over a temporary
directory.
Everything else is arig's own code: the process, GPU and channel objects,
the submit thread, the pushbuffers, QMDs, timeline words and the event fd.
The fake's parts: :mod:`.rm` (files, objects, controls, OS events),
:mod:`.memory` (mappings, UVM), :mod:`.gpu` (the GPFIFO and method
interpreter), :mod:`.state` (what they share).  See :class:`FakeNvrm`.

Threads: the library's callers and the fake GPU threads, under one lock.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ...nvrm import _fd, _rm
from ...nvrm import _exec_params
from ...nvrm import _params
from .gpu import Gpu
from .memory import Memory
from .rm import Rm
from .state import Call, KernelFn, NvFault

__all__ = ["FakeNvrm", "NvFault", "Call", "KernelFn"]


class _FakeDriver(_fd.Driver):
    """The kernel driver as the library sees it, its primitives answered by a :class:`FakeNvrm`."""

    def __init__(self, fake: FakeNvrm, dev_root: str, pci_root: str) -> None:
        super().__init__(dev_root, pci_root)
        self.fake = fake

    def open_file(self, path: str) -> int:
        return self.fake._open_file(path)

    def close(self, fd: int) -> None:
        self.fake._close(fd)

    def ioctl(self, fd: int, nr: int, arg: Any, what: str) -> None:
        self.fake._ioctl(fd, nr, arg, what)

    def uvm_ioctl(self, fd: int, nr: int, params: Any, what: str) -> None:
        try:
            self.fake._uvm_ioctl(fd, nr, params)
        except OSError as e:
            raise _params.DriverError(f"{what}: uvm ioctl {nr} failed: {e.strerror}", e.errno) from e

    def mmap(self, addr: int, size: int, prot: int, flags: int, fd: int = -1) -> int:
        return self.fake._mmap(addr, size, prot, flags, fd)

    def munmap(self, addr: int, size: int) -> None:
        self.fake._munmap(addr, size)

    def proc_version(self) -> str:
        return f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {self.fake.release}  Release Build\n"


class FakeNvrm(Rm, Memory, Gpu):
    """A fake NVIDIA kernel driver with H200s; ``installed()`` puts it under ``arig.nvrm``::

        fake = FakeNvrm()
        fake.kernel("axpy", lambda params, grid, block: ...)
        with fake.installed():
            async with await arig.open(arig.nvrm.gpu(0)) as dev:
                image = await dev.load(cubin)

    **The RM**: objects by handle under their client and parent, freed with
    their children (closing a ctl fd frees the clients made through it);
    the controls the device and ``arig.nvrm.describe`` send (id info, name,
    arch GH100, UUID in text and binary, FB sizes, utilization, watchdog,
    the class list with the HOPPER classes, work-submit tokens, schedule).
    **Memory**: VRAM, system memory and the usermode page are memfd pages;
    RM_MAP_MEMORY_DMA maps VRAM at its GPU address in this process (GPU VA
    = CPU VA, as the device lays memory out), an OS descriptor must be
    GPU-mapped at its own address; RM_MAP_MEMORY then ``mmap`` of that fd
    maps the same pages where asked (MAP_FIXED honoured) or anywhere.
    **UVM**: every call succeeds; registrations and ranges are tracked.
    **The OS event fd**: ALLOC_OS_EVENT turns the fd into an eventfd
    (``dup2``) that NON_STALL_INTERRUPT writes; the fake drains it about a
    millisecond later, as ``nvidia_poll`` clears its flag.
    **The GPU**: a thread per scheduled channel polls GPPut (USERD+0x8C),
    runs the GPFIFO entries' pushbuffer words and advances GPGet (+0x88):
    host semaphore release (payload, GPU time) and acquire (bounded),
    NON_STALL_INTERRUPT, SET_OBJECT, the compute methods arig sends (state;
    SEND_PCAS_A + SEND_SIGNALING_PCAS2_B launches the QMD: the kernel at its
    program address, known from the images the device loaded and checked
    byte for byte, runs as the Python function registered by name with its
    parameter bytes from constant bank 0), the copy engine's copies and
    semaphore releases.  A GPU access outside GPU-mapped memory is an MMU
    fault: Xid 31 in the channel's error notifier, and the channel group stops.

    ``violations``: misuse a real driver might or might not report (unknown
    escapes, controls, classes, methods; handles or fds it never gave;
    objects freed while mapped; GPU accesses outside mapped memory; what
    was left at exit).  ``log``: every call (name, calling thread, args).
    ``launches``: (kernel, grid, block) of every launch run; ``interrupts``: event fd writes;
    ``interrupts_unheard``: interrupts that woke no one because the event fd had been made
    non-blocking (the driver's poll registers a waiter only on a blocking file).
    ``stamps``: whether a release writes the GPU's time beside its payload (set it False for a GPU
    whose releases carry none: the time then reads 0, unknown).
    """

    # -- for tests ---------------------------------------------------------------------
    def kernel(self, name: str, fn: KernelFn) -> None:
        """Run ``fn(params, grid, block)`` for every launch of kernel ``name`` (of any cubin the device loads)."""
        self.kernels[name] = fn

    def fault(self, xid: int = 31) -> None:
        """The next launch faults instead of running: RC error ``xid`` in its channel's notifier, the channel stops."""
        self._fault = xid

    def array(self, address: int, dtype: Any, count: int) -> np.ndarray[Any, Any]:
        """``count`` items of ``dtype`` at GPU address ``address``, for fake kernels; NvFault(31) outside GPU-mapped memory."""
        n = np.dtype(dtype).itemsize * count
        if not self._mapped(address, n):
            raise NvFault(31, f"{n} bytes at {address:#x} are not GPU-mapped")
        return np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(self._host_of(address))).view(dtype)

    def live(self) -> dict[int, str]:
        """Handle -> what, of every RM object that exists now."""
        with self._lock:
            return {h: f"{o.cls:#x}" for h, o in self.objects.items()}

    def calls(self, name: str | None = None) -> list[Call]:
        return [c for c in list(self.log) if name is None or c.name == name]

    # -- installing ----------------------------------------------------------------------
    @contextmanager
    def installed(self) -> Iterator[FakeNvrm]:
        """Be the kernel driver for ``arig.nvrm`` (a fresh process client); on exit, free the process-level
        objects, put the machine's driver and PCI tree back and record what was left as violations."""
        root = tempfile.mkdtemp(prefix="arig-fake-nvrm-")
        self.root = root
        sys_root, dev = os.path.join(root, "sys"), os.path.join(root, "dev")
        self._lay_out(sys_root, dev)
        self.dev_root = dev
        self.driver = _FakeDriver(self, dev, sys_root)
        saved = _fd.driver
        _fd.driver = self.driver
        self._installed = True
        try:
            yield self
        finally:
            try:
                self._free_process()
            finally:
                _fd.driver = saved
                self._installed = False
                self._shutdown()
                shutil.rmtree(root, ignore_errors=True)

    def _lay_out(self, sys_root: str, dev: str) -> None:
        """The PCI functions of the fake GPUs under ``sys_root`` and the driver's files under ``dev``."""
        for bus in self.buses:
            d = os.path.join(sys_root, "devices", bus)
            os.makedirs(os.path.join(d, "power"))
            for fname, text in (("vendor", "0x10de"), ("class", "0x030200"), ("device", "0x2335"), ("power/runtime_status", "active")):
                with open(os.path.join(d, fname), "w", encoding="ascii") as f:
                    f.write(text + "\n")
        os.makedirs(dev)
        for fname in ("nvidiactl", "nvidia-uvm", *(f"nvidia{i}" for i in range(len(self.buses)))):
            with open(os.path.join(dev, fname), "wb"):
                pass

    def _free_process(self) -> None:
        """What the process keeps through this driver (its GPUs' objects, the client, UVM, the reservation)."""
        proc = _rm._process
        if proc is None or proc.d is not self.driver:
            return
        for g in proc.gpus.values():
            if g.owner is not None:
                self._violation(f"device {g.owner} was still open at exit")
                return
        for failure in _rm.reset():
            self._violation(f"freeing the process's objects at exit: {failure}")

    def _shutdown(self) -> None:
        with self._lock:
            left = [(h, o) for h, o in self.objects.items()]
            for h, o in left:
                self._violation(f"RM object {h:#x} (class {o.cls:#x}) was never freed")
            for fd, f in self.files.items():
                self._violation(f"fd {fd} ({os.path.basename(f.path)}) was never closed")
            for u in sorted(self.uvm, key=repr):
                self._violation(f"UVM {u[0]} {u[1:]} was never undone")
            for at, (size, h) in self._cpu_maps.items():
                self._violation(f"CPU mapping {at:#x}+{size:#x} of {h:#x} was never unmapped")
            channels = [o.channel for o in self.objects.values() if o.channel is not None]
            for o in self.objects.values():
                self._release(o)
            self.objects.clear()
            for fd in list(self.files):
                self._close_real(fd)
            self.files.clear()
            for mine in self._os_events.values():
                self._close_real(mine)
            self._os_events.clear()
        self._join(channels)

    # -- the escapes --------------------------------------------------------------------------
    def _ioctl(self, fd: int, nr: int, arg: Any, what: str) -> None:
        self._record(f"ioctl {nr:#x}", fd, what)
        with self._lock:
            f = self.files.get(fd)
            if f is None:
                self._violation(f"{what}: ioctl {nr:#x} on fd {fd}, which the driver never opened")
                raise _params.DriverError(f"{what}: the kernel driver failed the ioctl: Bad file descriptor", errno.EBADF)
            handler = {
                _params.NV_ESC_CHECK_VERSION_STR: self._version, _params.NV_ESC_CARD_INFO: self._card_info,
                _params.NV_ESC_REGISTER_FD: self._register_fd, _params.NV_ESC_RM_ALLOC: self._alloc, _params.NV_ESC_RM_FREE: self._free,
                _params.NV_ESC_RM_CONTROL: self._control, _exec_params.NV_ESC_RM_ALLOC_MEMORY: self._alloc_memory,
                _exec_params.NV_ESC_RM_MAP_MEMORY: self._map_memory, _exec_params.NV_ESC_RM_UNMAP_MEMORY: self._unmap_memory,
                _exec_params.NV_ESC_RM_MAP_MEMORY_DMA: self._map_dma, _exec_params.NV_ESC_RM_UNMAP_MEMORY_DMA: self._unmap_dma,
                _exec_params.NV_ESC_ALLOC_OS_EVENT: self._alloc_os_event, _exec_params.NV_ESC_FREE_OS_EVENT: self._free_os_event,
                _exec_params.NV_ESC_EXPORT_TO_DMABUF_FD: self._export_dmabuf,
            }.get(nr)  # fmt: skip
            if handler is None:
                self._violation(f"{what}: unknown escape {nr:#x}")
                raise _params.DriverError(f"{what}: the kernel driver failed the ioctl: Inappropriate ioctl for device", errno.ENOTTY)
            channels = handler(fd, f, arg, what)
        if channels:
            self._join(channels)

