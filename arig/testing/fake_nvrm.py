"""A fake NVIDIA kernel driver for deterministic CPU tests of arig's NV device (``arig.nvrm.gpu``).

``FakeNvrm`` stands in for what ``arig.nvrm`` reaches of the machine: the
PCI tree and ``/dev`` (a temporary directory), ``arig.nvrm._fd``'s
``open_file``/``close``/``ioctl`` (the RM escapes), the UVM ioctls
``arig.nvrm._rm`` sends with ``fcntl.ioctl``, and ``_rm._mmap``/``_munmap``
(mappings of the driver's files).  Everything else is arig's own code: the
process, GPU and channel objects, the submit thread, the pushbuffers, QMDs,
timeline words and the event fd.  See :class:`FakeNvrm`.
"""

from __future__ import annotations

import bisect
import ctypes
import ctypes.util
import errno
import itertools
import os
import shutil
import struct
import tempfile
import threading
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ..nvrm import _client, _cubin, _fd, _launch, _rm, _sysfs
from ..nvrm import _exec_params as E
from ..nvrm import _params as P
from ..nvrm import _push as pb
from ..nvrm import _qmd

__all__ = ["FakeNvrm", "NvFault", "Call", "KernelFn"]

#: ``fn(params, grid, block)``: a fake kernel, called with its parameter bytes (from constant bank 0).
KernelFn = Callable[[bytes, tuple[int, int, int], tuple[int, int, int]], Any]

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_MAP_FAILED = ctypes.c_void_p(-1).value
_PROT_NONE, _PROT_RW = 0, 3
_MAP_SHARED, _MAP_PRIVATE, _MAP_FIXED, _MAP_ANONYMOUS, _MAP_NORESERVE = 0x01, 0x02, 0x10, 0x20, 0x4000

_handles = itertools.count(0xCF000001)  # unique across fakes: a stale handle never matches
_cookies = itertools.count(0x7F5A_0000_0000, 0x10000)

UUID_TEXT = "GPU-7cc9fa83-3b2e-3e5a-008a-f824f2af7a22"
#: The classes an H200's RM lists (those arig looks for, and a few it does not).
HOPPER_CLASSES = (E.NV01_ROOT_CLIENT, E.NV01_DEVICE_0, E.NV20_SUBDEVICE_0, E.NV01_MEMORY_SYSTEM, E.NV1_MEMORY_USER,
                  E.NV01_MEMORY_VIRTUAL, E.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, E.NV01_EVENT_OS_EVENT, E.FERMI_CONTEXT_SHARE_A,
                  E.FERMI_VASPACE_A, E.KEPLER_CHANNEL_GROUP_A, E.TURING_USERMODE_A, E.AMPERE_USERMODE_A, E.HOPPER_USERMODE_A,
                  E.VOLTA_CHANNEL_GPFIFO_A, E.AMPERE_CHANNEL_GPFIFO_A, E.HOPPER_CHANNEL_GPFIFO_A, E.HOPPER_COMPUTE_A,
                  E.HOPPER_DMA_COPY_A, E.GT200_DEBUGGER)  # fmt: skip
_MEMORY = (E.NV01_MEMORY_SYSTEM, E.NV1_MEMORY_USER, E.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR)
_ENGINES = (*E.COMPUTE_CLASSES, *E.COPY_CLASSES)


def _writable(va: int, size: int) -> bool:
    """Are the pages of [va, va + size) all mapped writable in this process (what a pin for writing needs)?"""
    at, end = va, va + size
    with open("/proc/self/maps") as f:
        spans = sorted((int(lo, 16), int(hi, 16), perms) for lo, hi, perms in (
            (line.split()[0].split("-")[0], line.split()[0].split("-")[1], line.split()[1]) for line in f))  # fmt: skip
    for lo, hi, perms in spans:
        if hi <= at:
            continue
        if lo > at or "w" not in perms:  # a hole, or pages not writable
            return False
        at = hi
        if at >= end:
            return True
    return False


def _status(name: str) -> int:
    return P._ERR_NAMES.index(name) + 1


class NvFault(Exception):
    """Raise in a fake kernel: its channel ends with RC error ``xid`` (31, an MMU fault, by default)."""

    def __init__(self, xid: int = 31, why: str = "") -> None:
        super().__init__(f"fake GPU fault: Xid {xid}{': ' + why if why else ''}")
        self.xid = xid


class Call(NamedTuple):
    name: str
    thread: int  # threading.get_ident() of the caller
    args: tuple[Any, ...]


class _Stop(Exception):
    """The channel stops (``xid``: and the RM writes its error notifier)."""

    def __init__(self, why: str, xid: int | None) -> None:
        super().__init__(why)
        self.xid = xid


class _Refused(Exception):
    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = _status(status)


@dataclass
class _File:
    path: str
    kind: str  # "ctl", "gpu", "uvm"
    minor: int = -1
    registered: int = -1  # the ctl fd a /dev/nvidiaN was registered to
    mapping: tuple[int, int, int, int] | None = None  # (handle, offset, length, cookie) of RM_MAP_MEMORY on it


@dataclass(eq=False)
class _Channel:
    handle: int
    tsg: int
    gpu: int
    ring: int  # GPU VA of the GPFIFO entries
    entries: int
    userd: int  # GPU VA of USERD
    notifier: int  # handle of the error notifier
    token: int
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    dead: str | None = None
    get: int = 0
    subch: dict[int, int] = field(default_factory=dict)  # subchannel -> bound class
    state: dict[tuple[int, int], int] = field(default_factory=dict)  # (class, method) -> last value
    sem: dict[int, int] = field(default_factory=dict)  # host semaphore methods -> value


@dataclass(eq=False)
class _Obj:
    handle: int
    cls: int
    parent: int
    client: int
    fd: int  # the ctl fd it was made through
    children: list[int] = field(default_factory=list)
    size: int = 0
    memfd: int = -1  # VRAM, sysmem and usermode: the memory's pages
    view: int = 0  # the fake's own read-write mapping of them (sysmem, usermode)
    os_va: int = 0  # an OS descriptor's CPU address
    gpu: int = 0  # device: which GPU
    event_fd: int = -1  # an OS event object's fd
    channel: _Channel | None = None


def _real_mmap(addr: int, size: int, prot: int, flags: int, fd: int) -> int:
    got = _libc.mmap(addr, size, prot, flags, fd, 0)
    if got in (None, _MAP_FAILED):
        err = ctypes.get_errno()
        raise P.DriverError(f"mmap({addr:#x}, {size:#x}): {os.strerror(err)}", err)
    if addr and flags & _MAP_FIXED and got != addr:
        _libc.munmap(got, size)
        raise P.DriverError(f"mmap gave {got:#x}, not the asked {addr:#x}")
    return int(got)


def _bits(data: bytes, name: str) -> int:
    hi, lo = _qmd.FIELDS[name][:2]
    return (int.from_bytes(data, "little") >> lo) & ((1 << (hi - lo + 1)) - 1)


class FakeNvrm:
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
    ``launches``: (kernel, grid, block) of every launch run; ``interrupts``: event fd writes.
    """

    def __init__(self, gpus: int = 1, *, release: str = "580.159.04", name: str = "NVIDIA H200",
                 memory_kib: int = 147_221_504, acquire_timeout: float = 10.0) -> None:
        self.buses = [f"0000:{0x06 + i:02x}:00.0" for i in range(gpus)]
        self.release, self.name, self.memory_kib, self.acquire_timeout = release, name, memory_kib, acquire_timeout
        self.watchdog = 0x5  # not running: hang_ms 30000
        self.log: list[Call] = []
        self.violations: list[str] = []
        self.launches: list[tuple[str, tuple[int, int, int], tuple[int, int, int]]] = []
        self.interrupts = 0  # event fd writes made (NON_STALL_INTERRUPT, copy-engine interrupts, RC errors)
        self.kernels: dict[str, KernelFn] = {}
        self.objects: dict[int, _Obj] = {}
        self.files: dict[int, _File] = {}
        self.uvm: set[tuple[Any, ...]] = set()
        self.root = ""
        self._lock = threading.RLock()
        self._gpu_maps: dict[int, tuple[int, int]] = {}  # GPU VA -> (end, handle)
        # GPU VA -> the host address its pages are at, where they differ (an OS descriptor of a program's
        # own memory, map_host's, GPU-mapped at an address of its own): the fake GPU reads and writes there.
        self._alias: dict[int, int] = {}
        self._gpu_starts: list[int] = []
        self._cpu_maps: dict[int, tuple[int, int]] = {}  # CPU address -> (size, handle) of mmaps of driver files
        self._os_events: dict[int, int] = {}  # the device's event fd -> the fake's eventfd (same file)
        self._drain: dict[int, float] = {}  # the fake's eventfd -> when to clear it
        self._fault: int | None = None
        self._tokens = itertools.count(0x100)
        self._installed = False

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
        """Be the kernel driver for ``arig.nvrm`` (a fresh process and read-path client); on exit, free
        the process-level objects, restore everything and record what was left as violations."""
        root = tempfile.mkdtemp(prefix="arig-fake-nvrm-")
        self.root = root
        sys_root, dev = os.path.join(root, "sys"), os.path.join(root, "dev")
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
        saved: list[tuple[Any, str, Any]] = []

        def swap(module: Any, attr: str, value: Any) -> None:
            saved.append((module, attr, getattr(module, attr)))
            setattr(module, attr, value)

        self._real_rm_mmap, self._real_rm_munmap = _rm._mmap, _rm._munmap
        swap(_sysfs, "ROOT", sys_root)
        swap(_client, "DEV_ROOT", dev)
        swap(_client, "_client", None)
        swap(_rm, "_process", None)
        swap(_fd, "open_file", self._open_file)
        swap(_fd, "close", self._close)
        swap(_fd, "ioctl", self._ioctl)
        swap(_rm, "_mmap", self._mmap)
        swap(_rm, "_munmap", self._munmap)
        swap(_rm, "fcntl", types.SimpleNamespace(ioctl=self._uvm_ioctl))
        self._installed = True
        try:
            yield self
        finally:
            try:
                self._free_process()
            finally:
                for module, attr, value in reversed(saved):
                    setattr(module, attr, value)
                self._installed = False
                self._shutdown()
                shutil.rmtree(root, ignore_errors=True)

    def _free_process(self) -> None:
        """What the device keeps for the process (its GPUs' objects, the client, UVM, the reservation) and the read path's client."""
        proc = _rm._process
        if proc is not None:
            for g in proc.gpus.values():
                if g.owner is not None:
                    self._violation(f"device {g.owner} was still open at exit")
                    return
            for g in list(proc.gpus.values()):
                for failure in g.undo.unwind():
                    self._violation(f"freeing the GPU's objects at exit: {failure}")
            for failure in proc.undo.unwind():
                self._violation(f"freeing the process's objects at exit: {failure}")
            _rm._process = None
        _client.reset()

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

    # -- bookkeeping -------------------------------------------------------------------------
    def _violation(self, what: str) -> None:
        with self._lock:
            self.violations.append(what)

    def _record(self, name: str, *args: Any) -> None:
        self.log.append(Call(name, threading.get_ident(), args))

    @staticmethod
    def _close_real(fd: int) -> None:
        try:
            os.close(fd)
        except OSError:
            pass

    def _host_of(self, addr: int) -> int:
        """Where the GPU's address ``addr`` (mapped) lies for the host: itself, but in map_host's memory."""
        if not self._alias:
            return addr
        with self._lock:
            i = bisect.bisect_right(self._gpu_starts, addr) - 1
            start = self._gpu_starts[i] if i >= 0 else None
            return addr if start is None or start not in self._alias else self._alias[start] + (addr - start)

    def _mapped(self, addr: int, n: int) -> bool:
        with self._lock:
            i = bisect.bisect_right(self._gpu_starts, addr) - 1
            if i < 0:
                return False
            end = self._gpu_maps[self._gpu_starts[i]][0]
            return addr + n <= end

    # -- files -------------------------------------------------------------------------------
    def _open_file(self, path: str) -> int:
        self._record("open", path)
        dev = _client.DEV_ROOT
        name = os.path.basename(path)
        kinds = {"nvidiactl": ("ctl", -1), "nvidia-uvm": ("uvm", -1), **{f"nvidia{i}": ("gpu", i) for i in range(len(self.buses))}}
        if os.path.dirname(path) != dev or name not in kinds:
            raise P.DriverError(f"cannot open {path}: No such file or directory (is the NVIDIA kernel driver loaded?)", errno.ENOENT)
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        kind, minor = kinds[name]
        with self._lock:
            self.files[fd] = _File(path, kind, minor)
        return fd

    def _close(self, fd: int) -> None:
        self._record("close", fd)
        with self._lock:
            f = self.files.pop(fd, None)
            if f is None:
                self._violation(f"close of fd {fd}, which the driver never opened")
                return
            channels: list[_Channel] = []
            if f.kind == "ctl":  # the RM frees the clients made through it
                for h, o in list(self.objects.items()):
                    if o.cls == E.NV01_ROOT_CLIENT and o.fd == fd and h in self.objects:
                        channels += self._free_tree(h, quiet=True)
            elif f.kind == "uvm":
                self.uvm = {u for u in self.uvm if u[-1] != fd}
            elif f.kind == "event" and fd in self._os_events:
                self._violation(f"event fd {fd} closed before FREE_OS_EVENT")
                self._close_real(self._os_events.pop(fd))
            if f.mapping is not None:
                self._violation(f"fd {fd} closed while RM_MAP_MEMORY of {f.mapping[0]:#x} on it was not undone")
        self._join(channels)
        self._close_real(fd)

    # -- mmap ------------------------------------------------------------------------------------
    def _mmap(self, addr: int, size: int, prot: int, flags: int, fd: int = -1) -> int:
        self._record("mmap", addr, size, prot, flags, fd)
        if fd < 0 or flags & _MAP_ANONYMOUS:
            got = self._real_rm_mmap(addr, size, prot, flags, fd)
            if flags & _MAP_FIXED:
                with self._lock:
                    for at in [a for a, (n, _h) in self._cpu_maps.items() if a < addr + size and addr < a + n]:
                        del self._cpu_maps[at]  # replaced
            return got
        with self._lock:
            f = self.files.get(fd)
            if f is None or f.mapping is None:
                self._violation(f"mmap of fd {fd}, which {'has no RM_MAP_MEMORY' if f else 'the driver never opened'}")
                raise P.DriverError(f"mmap({addr:#x}, {size:#x}): Invalid argument", errno.EINVAL)
            h, offset, length, _cookie = f.mapping
            o = self.objects.get(h)
            if o is None or o.memfd < 0 or size > length:
                self._violation(f"mmap of {size:#x} bytes of fd {fd}: its memory {h:#x} is gone or smaller")
                raise P.DriverError(f"mmap({addr:#x}, {size:#x}): Invalid argument", errno.EINVAL)
            got = _real_mmap(addr, size, prot, flags, o.memfd)
            self._cpu_maps[got] = (size, h)
            return got

    def _munmap(self, addr: int, size: int) -> None:
        self._record("munmap", addr, size)
        with self._lock:
            self._cpu_maps.pop(addr, None)
        self._real_rm_munmap(addr, size)

    # -- the escapes --------------------------------------------------------------------------
    def _ioctl(self, fd: int, nr: int, arg: Any, what: str) -> None:
        self._record(f"ioctl {nr:#x}", fd, what)
        with self._lock:
            f = self.files.get(fd)
            if f is None and nr == E.NV_ESC_ALLOC_OS_EVENT and self._is_ctl_file(fd):
                # os.open'ed by arig.nvrm._rm (not _fd.open_file): the driver sees a ctl file all the same
                f = self.files[fd] = _File(os.path.join(_client.DEV_ROOT, "nvidiactl"), "event")
            if f is None:
                self._violation(f"{what}: ioctl {nr:#x} on fd {fd}, which the driver never opened")
                raise P.DriverError(f"{what}: the kernel driver failed the ioctl: Bad file descriptor", errno.EBADF)
            handler = {
                P.NV_ESC_CHECK_VERSION_STR: self._version, P.NV_ESC_CARD_INFO: self._card_info,
                P.NV_ESC_REGISTER_FD: self._register_fd, P.NV_ESC_RM_ALLOC: self._alloc, P.NV_ESC_RM_FREE: self._free,
                P.NV_ESC_RM_CONTROL: self._control, E.NV_ESC_RM_ALLOC_MEMORY: self._alloc_memory,
                E.NV_ESC_RM_MAP_MEMORY: self._map_memory, E.NV_ESC_RM_UNMAP_MEMORY: self._unmap_memory,
                E.NV_ESC_RM_MAP_MEMORY_DMA: self._map_dma, E.NV_ESC_RM_UNMAP_MEMORY_DMA: self._unmap_dma,
                E.NV_ESC_ALLOC_OS_EVENT: self._alloc_os_event, E.NV_ESC_FREE_OS_EVENT: self._free_os_event,
                E.NV_ESC_EXPORT_TO_DMABUF_FD: self._export_dmabuf,
            }.get(nr)  # fmt: skip
            if handler is None:
                self._violation(f"{what}: unknown escape {nr:#x}")
                raise P.DriverError(f"{what}: the kernel driver failed the ioctl: Inappropriate ioctl for device", errno.ENOTTY)
            channels = handler(fd, f, arg, what)
        if channels:
            self._join(channels)

    def _is_ctl_file(self, fd: int) -> bool:
        try:
            return os.path.samestat(os.fstat(fd), os.stat(os.path.join(_client.DEV_ROOT, "nvidiactl")))
        except OSError:
            return False

    def _version(self, fd: int, f: _File, arg: Any, what: str) -> None:
        arg.versionString, arg.reply = self.release.encode(), 1

    def _card_info(self, fd: int, f: _File, arg: Any, what: str) -> None:
        for k, bus in enumerate(self.buses):
            domain, b, rest = bus.split(":")
            slot, fn = rest.split(".")
            arg[k].valid, arg[k].minor_number, arg[k].gpu_id = 1, k, 0x600 + 0x100 * k
            arg[k].pci_info.domain, arg[k].pci_info.bus = int(domain, 16), int(b, 16)
            arg[k].pci_info.slot, arg[k].pci_info.function = int(slot, 16), int(fn, 16)

    def _register_fd(self, fd: int, f: _File, arg: Any, what: str) -> None:
        ctl = self.files.get(int(arg.ctl_fd))
        if f.kind != "gpu" or ctl is None or ctl.kind != "ctl":
            self._violation(f"{what}: REGISTER_FD of fd {fd} ({f.kind}) to {arg.ctl_fd}")
            raise P.DriverError(f"{what}: the kernel driver failed the ioctl: Invalid argument", errno.EINVAL)
        f.registered = int(arg.ctl_fd)

    def _obj(self, client: int, h: int, what: str) -> _Obj:
        o = self.objects.get(h)
        if o is None or o.client != client:
            self._violation(f"{what}: handle {h:#x} is no object of client {client:#x}")
            raise _Refused("INVALID_OBJECT_HANDLE")
        return o

    def _new(self, cls: int, parent: int, client: int, fd: int, handle: int | None = None) -> _Obj:
        h = next(_handles) if handle is None else handle
        o = _Obj(h, cls, parent, client if client else h, fd)
        self.objects[h] = o
        if parent and parent in self.objects and parent != h:
            self.objects[parent].children.append(h)
        return o

    def _memfd(self, o: _Obj, size: int, *, view: bool = False) -> None:
        o.size = size
        o.memfd = os.memfd_create(f"fake-nvrm-{o.handle:x}", os.MFD_CLOEXEC)
        os.ftruncate(o.memfd, size)
        if view:
            o.view = _real_mmap(0, size, _PROT_RW, _MAP_SHARED, o.memfd)

    def _gpu_of(self, o: _Obj) -> int:
        while o.cls != E.NV01_DEVICE_0 and o.parent in self.objects and o.parent != o.handle:
            o = self.objects[o.parent]
        return o.gpu

    def _alloc(self, fd: int, f: _File, arg: Any, what: str) -> None:
        cls, client, parent = int(arg.hClass), int(arg.hRoot), int(arg.hObjectParent)
        params = int(arg.pAllocParms)
        status = 0
        try:
            if f.kind != "ctl":
                raise _Refused("INVALID_ARGUMENT")
            if cls == E.NV01_ROOT_CLIENT:
                arg.hObjectNew = self._new(cls, 0, 0, fd).handle
            else:
                self._obj(client, client, what)
                p = self._obj(client, parent, what)
                arg.hObjectNew = self._make(cls, p, client, fd, params, int(arg.paramsSize), what).handle
        except _Refused as e:
            self._violation(f"{what}: RM_ALLOC of class {cls:#x} refused: {P.status_name(e.status)}")
            status = e.status
        arg.status = status

    def _params(self, kind: Any, at: int, size: int, what: str) -> Any:
        if not at or size != ctypes.sizeof(kind):
            self._violation(f"{what}: {kind.__name__} of {size} bytes at {at:#x} (want {ctypes.sizeof(kind)})")
            raise _Refused("INVALID_PARAM_STRUCT")
        return kind.from_address(at)

    def _make(self, cls: int, p: _Obj, client: int, fd: int, at: int, size: int, what: str) -> _Obj:
        def under(*parents: int) -> None:
            if p.cls not in parents:
                self._violation(f"{what}: class {cls:#x} under a {p.cls:#x}")
                raise _Refused("INVALID_OBJECT_PARENT")

        if cls == E.NV01_DEVICE_0:
            under(E.NV01_ROOT_CLIENT)
            d = self._params(P.Nv0080Alloc, at, size, what)
            if not 0 <= d.deviceId < len(self.buses):
                raise _Refused("INVALID_ARGUMENT")
            o = self._new(cls, p.handle, client, fd)
            o.gpu = int(d.deviceId)
            return o
        if cls in (E.NV20_SUBDEVICE_0, E.NV01_MEMORY_VIRTUAL, E.FERMI_VASPACE_A, E.KEPLER_CHANNEL_GROUP_A):
            under(E.NV01_DEVICE_0)
        elif cls == E.FERMI_CONTEXT_SHARE_A:
            under(E.KEPLER_CHANNEL_GROUP_A)
        elif cls in E.USERMODE_CLASSES:
            under(E.NV20_SUBDEVICE_0)
            o = self._new(cls, p.handle, client, fd)
            self._memfd(o, E.USERMODE_MAP_BYTES, view=True)
            return o
        elif cls in (E.NV1_MEMORY_USER, E.NV01_MEMORY_SYSTEM):
            under(E.NV01_DEVICE_0)
            m = self._params(E.NvMemoryAllocationParams, at, size, what)
            if m.size <= 0 or (m.alignment and m.size % m.alignment):
                raise _Refused("INVALID_ARGUMENT")
            o = self._new(cls, p.handle, client, fd)
            self._memfd(o, int(m.size), view=cls == E.NV01_MEMORY_SYSTEM)
            return o
        elif cls in E.GPFIFO_CLASSES:
            under(E.KEPLER_CHANNEL_GROUP_A)
            return self._make_channel(cls, p, client, fd, self._params(E.NvChannelAllocParams, at, size, what), what)
        elif cls in _ENGINES:
            under(*E.GPFIFO_CLASSES)
        elif cls == E.NV01_EVENT_OS_EVENT:
            under(E.NV20_SUBDEVICE_0)
            ev = self._params(E.Nv0005AllocParameters, at, size, what)
            if int(ev.data) not in self._os_events:
                self._violation(f"{what}: the OS event object's fd {int(ev.data)} had no ALLOC_OS_EVENT")
                raise _Refused("INVALID_EVENT")
            o = self._new(cls, p.handle, client, fd)
            o.event_fd = int(ev.data)
            return o
        else:
            self._violation(f"{what}: class {cls:#x} is not one the fake knows")
            raise _Refused("INVALID_CLASS")
        return self._new(cls, p.handle, client, fd)

    def _make_channel(self, cls: int, tsg: _Obj, client: int, fd: int, cp: Any, what: str) -> _Obj:
        err, buf, userd = (self.objects.get(int(h)) for h in (cp.hObjectError, cp.hObjectBuffer, cp.hUserdMemory[0]))
        if err is None or err.cls != E.NV01_MEMORY_SYSTEM or buf is None or userd is None:
            self._violation(f"{what}: the channel's error notifier or GPFIFO memory is no memory object")
            raise _Refused("INVALID_OBJECT_BUFFER")
        ring, entries = int(cp.gpFifoOffset), int(cp.gpFifoEntries)
        userd_va = self._dma_va(userd.handle)
        if userd_va is None or not self._mapped(ring, entries * 8) or not self._mapped(userd_va + int(cp.userdOffset[0]), E.USERD_BYTES):
            self._violation(f"{what}: the GPFIFO ring or USERD is not GPU-mapped")
            raise _Refused("INVALID_ADDRESS")
        if ring >= pb.GPFIFO_ADDRESS_LIMIT or entries & (entries - 1):
            raise _Refused("INVALID_ARGUMENT")
        o = self._new(cls, tsg.handle, client, fd)
        o.channel = _Channel(o.handle, tsg.handle, self._gpu_of(tsg), ring, entries, userd_va + int(cp.userdOffset[0]), err.handle, next(self._tokens))
        return o

    def _dma_va(self, h: int) -> int | None:
        return next((va for va, (_end, hh) in self._gpu_maps.items() if hh == h), None)

    def _free(self, fd: int, f: _File, arg: Any, what: str) -> list[_Channel]:
        client, h = int(arg.hRoot), int(arg.hObjectOld)
        o = self.objects.get(h)
        if o is None or o.client != client:
            self._violation(f"{what}: free of handle {h:#x}, which client {client:#x} does not hold")
            arg.status = _status("INVALID_OBJECT_HANDLE")
            return []
        arg.status = 0
        return self._free_tree(h, quiet=False)

    def _free_tree(self, h: int, *, quiet: bool) -> list[_Channel]:
        """Free ``h`` and everything under it (children first); the channels whose threads must end."""
        o = self.objects.pop(h)
        channels: list[_Channel] = []
        if not quiet and o.children:  # the RM frees them with it; arig frees each itself, so one left is a leak
            left = ", ".join(f"{c:#x} (class {self.objects[c].cls:#x})" for c in o.children if c in self.objects)
            self._violation(f"RM object {h:#x} (class {o.cls:#x}) freed with live children, which were never freed: {left}")
        for c in list(o.children):
            if c in self.objects:
                channels += self._free_tree(c, quiet=quiet)
        parent = self.objects.get(o.parent)
        if parent is not None and h in parent.children:
            parent.children.remove(h)
        if o.channel is not None:
            channels.append(o.channel)
        if not quiet:
            for va, (_end, hh) in list(self._gpu_maps.items()):
                if hh == h:
                    self._violation(f"RM object {h:#x} freed while GPU-mapped at {va:#x}")
            for at, (_n, hh) in list(self._cpu_maps.items()):
                if hh == h:
                    self._violation(f"RM object {h:#x} freed while mapped to the CPU at {at:#x}")
        for va, (_end, hh) in list(self._gpu_maps.items()):
            if hh == h:
                self._drop_gpu_map(va)
        self._release(o)
        return channels

    def _release(self, o: _Obj) -> None:
        if o.channel is not None:
            o.channel.stop.set()
        if o.view:
            _libc.munmap(o.view, o.size)
            o.view = 0
        if o.memfd >= 0:
            self._close_real(o.memfd)
            o.memfd = -1

    def _join(self, channels: list[_Channel]) -> None:
        for ch in channels:
            ch.stop.set()
            t = ch.thread
            if t is not None and t is not threading.current_thread():
                t.join(timeout=10.0)
                if t.is_alive():
                    self._violation(f"the fake GPU thread of channel {ch.handle:#x} did not end")

    # -- controls ------------------------------------------------------------------------------
    def _control(self, fd: int, f: _File, arg: Any, what: str) -> list[_Channel]:
        cmd, client, h = int(arg.cmd), int(arg.hClient), int(arg.hObject)
        status = 0
        try:
            o = self._obj(client, h, what)
            self._control_on(o, cmd, int(arg.params), int(arg.paramsSize), what)
        except _Refused as e:
            status = e.status
            if status != _status("NOT_SUPPORTED"):
                self._violation(f"{what}: control {cmd:#x} refused: {P.status_name(status)}")
        arg.status = status
        return []

    def _control_on(self, o: _Obj, cmd: int, at: int, size: int, what: str) -> None:
        def params(kind: Any, *on: int) -> Any:
            if o.cls not in on:
                self._violation(f"{what}: control {cmd:#x} on a {o.cls:#x}")
                raise _Refused("INVALID_OBJECT_HANDLE")
            return self._params(kind, at, size, what)

        if cmd == P.CTRL_GPU_GET_ID_INFO_V2:
            p = params(P.IdInfoV2, E.NV01_ROOT_CLIENT)
            ids = [0x600 + 0x100 * k for k in range(len(self.buses))]
            if p.gpuId not in ids:
                raise _Refused("INVALID_ARGUMENT")
            p.deviceInstance, p.subDeviceInstance = ids.index(p.gpuId), 0
        elif cmd == P.CTRL_GPU_GET_NAME_STRING:
            p = params(P.NameString, E.NV20_SUBDEVICE_0)
            text = self.name.encode()[:127]
            p.gpuNameString[: len(text)] = list(text)
        elif cmd == P.CTRL_MC_GET_ARCH_INFO:
            p = params(P.ArchInfo, E.NV20_SUBDEVICE_0)
            p.architecture, p.implementation = 0x180, 0
        elif cmd == P.CTRL_GPU_GET_GID_INFO:
            p = params(P.GidInfo, E.NV20_SUBDEVICE_0)
            if p.flags == E.GID_FLAGS_BINARY_SHA1:
                raw = bytes.fromhex(UUID_TEXT[4:].replace("-", ""))
            else:
                raw = UUID_TEXT.encode() + b"\0"
            p.data[: len(raw)], p.length = list(raw), len(raw)
        elif cmd == P.CTRL_RC_GET_WATCHDOG_INFO:
            params(P.WatchdogInfo, E.NV20_SUBDEVICE_0).watchdogStatusFlags = self.watchdog
        elif cmd == P.CTRL_FB_GET_INFO_V2:
            p = params(P.FbInfoV2, E.NV20_SUBDEVICE_0)
            kib = {P.FB_RAM_SIZE: self.memory_kib, P.FB_HEAP_SIZE: self.memory_kib - (1 << 20),
                   P.FB_HEAP_FREE: self.memory_kib - (1 << 20) - self._vram_kib(), P.FB_BAR1_SIZE: 256 << 20}
            for k in range(min(p.fbInfoListSize, P.FB_INFO_MAX)):
                p.fbInfoList[k].data = kib.get(p.fbInfoList[k].index, 0)
        elif cmd == P.CTRL_PERF_UTIL_SAMPLES_V2:
            p = params(P.UtilSamplesV2, E.NV20_SUBDEVICE_0)
            now = time.monotonic_ns()
            for k in range(10):
                p.samples[k].timeStamp = now - (10 - k) * 200_000_000
        elif cmd == E.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2:
            p = params(E.ClassListV2, E.NV01_DEVICE_0)
            p.numClasses = len(HOPPER_CLASSES)
            p.classList[: len(HOPPER_CLASSES)] = list(HOPPER_CLASSES)
        elif cmd == E.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN:
            p = params(E.WorkSubmitTokenParams, *E.GPFIFO_CLASSES)
            assert o.channel is not None
            p.workSubmitToken = o.channel.token
        elif cmd == E.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE:
            p = params(E.GpfifoScheduleParams, E.KEPLER_CHANNEL_GROUP_A)
            if p.bEnable:
                self._schedule(o)
        else:
            self._violation(f"{what}: unknown control {cmd:#x}")
            raise _Refused("NOT_SUPPORTED")

    def _vram_kib(self) -> int:
        return sum(o.size for o in self.objects.values() if o.cls == E.NV1_MEMORY_USER) >> 10

    def _schedule(self, tsg: _Obj) -> None:
        chans = [self.objects[c].channel for c in tsg.children if self.objects[c].channel is not None]
        if not chans:
            self._violation("GPFIFO_SCHEDULE of a channel group without channels")
            raise _Refused("INVALID_STATE")
        for ch in chans:
            assert ch is not None
            if ch.thread is None:
                ch.thread = threading.Thread(target=self._gpu_thread, args=(ch,), name=f"fake-nvrm-channel-{ch.handle:x}", daemon=True)
                ch.thread.start()

    # -- memory -------------------------------------------------------------------------------
    def _alloc_memory(self, fd: int, f: _File, arg: Any, what: str) -> None:
        p = arg.params
        try:
            if f.kind != "gpu" or f.registered < 0:
                self._violation(f"{what}: RM_ALLOC_MEMORY on fd {fd} ({f.kind}, registered {f.registered >= 0})")
                raise _Refused("INVALID_ARGUMENT")
            if p.hClass != E.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR:
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
            o = self._new(E.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, parent.handle, int(p.hRoot), fd, int(p.hObjectNew))
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
            if virt.cls != E.NV01_MEMORY_VIRTUAL or o.cls not in _MEMORY:
                self._violation(f"{what}: RM_MAP_MEMORY_DMA of a {o.cls:#x} through a {virt.cls:#x}")
                raise _Refused("INVALID_ARGUMENT")
            va, size = int(arg.dmaOffset), int(arg.length)
            if not arg.flags & E.field(*E.NVOS46_FLAGS_DMA_OFFSET_FIXED, 1) or va % 4096 or size > o.size - int(arg.offset):
                self._violation(f"{what}: RM_MAP_MEMORY_DMA of {size:#x} at {va:#x} (flags {arg.flags:#x}) of {o.size:#x} bytes")
                raise _Refused("INVALID_ARGUMENT")
            if any(s < va + size and va < e for s, (e, _h) in self._gpu_maps.items()):
                self._violation(f"{what}: GPU range {va:#x}+{size:#x} overlaps a mapping")
                raise _Refused("INVALID_ADDRESS")
            if o.cls == E.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR:
                if va != o.os_va:
                    self._alias[va] = o.os_va  # the program's own pages, at a GPU address of their own
            elif o.memfd >= 0:
                _real_mmap(va, size, _PROT_RW, _MAP_SHARED | _MAP_FIXED, o.memfd)  # the GPU's view, at its address
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
            _real_mmap(va, m[0] - va, _PROT_NONE, _MAP_PRIVATE | _MAP_ANONYMOUS | _MAP_NORESERVE | _MAP_FIXED, -1)
        arg.status = 0

    def _drop_gpu_map(self, va: int) -> None:
        del self._gpu_maps[va]
        self._alias.pop(va, None)
        self._gpu_starts.remove(va)

    def _alloc_os_event(self, fd: int, f: _File, arg: Any, what: str) -> None:
        if int(arg.fd) != fd or fd in self._os_events:
            self._violation(f"{what}: ALLOC_OS_EVENT of fd {int(arg.fd)} sent on fd {fd}")
            arg.Status = _status("INVALID_ARGUMENT")
            return
        mine = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        os.dup2(mine, fd, inheritable=False)  # the device's fd is now the same pollable file
        self._os_events[fd] = mine
        arg.Status = 0

    def _free_os_event(self, fd: int, f: _File, arg: Any, what: str) -> None:
        mine = self._os_events.pop(int(arg.fd), None)
        if mine is None:
            self._violation(f"{what}: FREE_OS_EVENT of fd {int(arg.fd)}, which has no event")
            arg.Status = _status("INVALID_EVENT")
            return
        if any(o.event_fd == int(arg.fd) for o in self.objects.values()):
            self._violation(f"{what}: FREE_OS_EVENT of fd {int(arg.fd)} while an OS event object uses it")
        self._drain.pop(mine, None)
        self._close_real(mine)
        arg.Status = 0

    def _export_dmabuf(self, fd: int, f: _File, arg: Any, what: str) -> None:
        try:
            if f.kind != "gpu":
                raise _Refused("INVALID_ARGUMENT")
            for k in range(int(arg.numObjects)):
                o = self._obj(int(arg.hClient), int(arg.handles[k]), what)
                if o.cls != E.NV1_MEMORY_USER:
                    raise _Refused("INVALID_OBJECT")
            arg.fd = os.memfd_create("fake-nvrm-dmabuf", os.MFD_CLOEXEC)
            arg.status = 0
        except _Refused as e:
            arg.status = e.status

    # -- UVM -----------------------------------------------------------------------------------
    def _uvm_ioctl(self, fd: int, nr: int, params: Any, mutate: bool = True) -> int:
        self._record(f"uvm {nr}", fd)
        with self._lock:
            f = self.files.get(fd)
            if f is None or f.kind != "uvm":
                self._violation(f"UVM ioctl {nr} on fd {fd}, which is no /dev/nvidia-uvm file")
                raise OSError(errno.ENOTTY, os.strerror(errno.ENOTTY))
            key: tuple[Any, ...] | None = None
            undo: tuple[Any, ...] | None = None
            if nr in (E.UVM_INITIALIZE, E.UVM_MM_INITIALIZE):
                pass
            elif nr == E.UVM_REGISTER_GPU:
                key = ("gpu", bytes(params.gpu_uuid), fd)
            elif nr == E.UVM_UNREGISTER_GPU:
                undo = ("gpu", bytes(params.gpu_uuid), fd)
            elif nr == E.UVM_REGISTER_GPU_VASPACE:
                key = ("vaspace", bytes(params.gpuUuid), fd)
            elif nr == E.UVM_UNREGISTER_GPU_VASPACE:
                undo = ("vaspace", bytes(params.gpuUuid), fd)
            elif nr == E.UVM_REGISTER_CHANNEL:
                key = ("channel", int(params.hChannel), fd)
            elif nr == E.UVM_UNREGISTER_CHANNEL:
                undo = ("channel", int(params.hChannel), fd)
            elif nr == E.UVM_CREATE_EXTERNAL_RANGE:
                key = ("range", int(params.base), int(params.length), fd)
            elif nr == E.UVM_MAP_EXTERNAL_ALLOCATION:
                if ("range", int(params.base), int(params.length), fd) not in self.uvm:
                    self._violation(f"UVM_MAP_EXTERNAL_ALLOCATION at {params.base:#x}+{params.length:#x} outside an external range")
            elif nr == E.UVM_FREE:
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
        return 0

    # -- the fake GPU ----------------------------------------------------------------------------
    def _gpu_thread(self, ch: _Channel) -> None:
        pause = 10e-6
        while not ch.stop.is_set():
            try:
                worked = self._step(ch)
            except _Stop as e:
                self._stop_group(ch, str(e), e.xid)
                worked = False
            except Exception as e:  # noqa: BLE001 - the fake's own bug: say so, stop the channel
                self._violation(f"the fake GPU of channel {ch.handle:#x} failed: {type(e).__name__}: {e}")
                self._stop_group(ch, str(e), None)
                worked = False
            if worked:
                pause = 10e-6
                continue
            self._drain_events()
            ch.stop.wait(pause)
            pause = min(pause * 2, 1e-3)

    def _step(self, ch: _Channel) -> bool:
        """Run one GPFIFO entry if GPPut is ahead of GPGet; whether one ran."""
        if ch.dead is not None:
            return False
        with self._lock:
            if ch.stop.is_set() or not self._mapped(ch.userd, E.USERD_BYTES):
                return False
            put = ctypes.c_uint32.from_address(ch.userd + E.USERD_GP_PUT).value
        if put == ch.get:
            return False
        if put >= ch.entries:
            raise _Stop(f"GPPut {put} is past the ring's {ch.entries} entries", 43)
        self._check(ch.ring + ch.get * 8, 8, "GPFIFO entry read")
        entry = ctypes.c_uint64.from_address(ch.ring + ch.get * 8).value
        e0, e1 = entry & 0xFFFFFFFF, entry >> 32
        address = (e0 & ~3) | (e1 & 0xFF) << 32
        length = (e1 >> 10) & 0x1FFFFF
        if length:
            self._check(address, length * 4, "pushbuffer read")
            self._run_segment(ch, struct.unpack(f"<{length}I", ctypes.string_at(address, length * 4)))
        ch.get = (ch.get + 1) % ch.entries
        with self._lock:
            if not ch.stop.is_set():
                ctypes.c_uint32.from_address(ch.userd + E.USERD_GP_GET).value = ch.get
        return True

    def _check(self, addr: int, n: int, what: str) -> int:
        """The host address of ``n`` GPU-mapped bytes at ``addr``; an MMU fault where they are not mapped."""
        if not self._mapped(addr, n):
            self._violation(f"GPU {what} of {n} bytes at {addr:#x}: not GPU-mapped (MMU fault)")
            raise _Stop(f"MMU fault at {addr:#x}", 31)
        return self._host_of(addr)

    def _run_segment(self, ch: _Channel, words: tuple[int, ...]) -> None:
        i = 0
        while i < len(words):
            w = words[i]
            sec, count, subch, mthd = w >> 29, (w >> 16) & 0x1FFF, (w >> 13) & 7, (w & 0xFFF) << 2
            i += 1
            if sec == pb.C86F.DMA_SEC_OP_IMMD_DATA_METHOD:
                self._method(ch, subch, mthd, count)
                continue
            if sec not in (pb.C86F.DMA_SEC_OP_INC_METHOD, pb.C86F.DMA_SEC_OP_NON_INC_METHOD, pb.C86F.DMA_SEC_OP_ONE_INC):
                self._violation(f"channel {ch.handle:#x}: method header {w:#010x} of SEC_OP {sec}")
                raise _Stop("bad method header", 43)
            data = words[i : i + count]
            if len(data) < count:
                self._violation(f"channel {ch.handle:#x}: method {mthd:#x} wants {count} words, the segment has {len(data)}")
                raise _Stop("short segment", 43)
            i += count
            for k, v in enumerate(data):
                if sec == pb.C86F.DMA_SEC_OP_NON_INC_METHOD:
                    at = mthd
                elif sec == pb.C86F.DMA_SEC_OP_ONE_INC:
                    at = mthd + (4 if k else 0)
                else:
                    at = mthd + 4 * k
                self._method(ch, subch, at, v)

    def _method(self, ch: _Channel, subch: int, mthd: int, v: int) -> None:
        H = pb.C86F
        if mthd == H.SET_OBJECT:
            engines = {self.objects[c].cls for c in self.objects[ch.handle].children if c in self.objects} if ch.handle in self.objects else set()
            bound = v & 0xFFFF
            if bound not in engines:
                self._violation(f"channel {ch.handle:#x}: SET_OBJECT of class {bound:#x}, which has no object on the channel")
                raise _Stop("SET_OBJECT of a missing engine", 13)
            ch.subch[subch] = bound
        elif mthd < 0x100:  # host methods, on any subchannel
            if mthd in (H.SEM_ADDR_LO, H.SEM_ADDR_HI, H.SEM_PAYLOAD_LO, H.SEM_PAYLOAD_HI):
                ch.sem[mthd] = v
            elif mthd == H.SEM_EXECUTE:
                self._sem_execute(ch, v)
            elif mthd == H.NON_STALL_INTERRUPT:
                self._interrupt(ch)
            elif mthd == H.WFI:
                pass  # the fake runs everything in order: always idle
            else:
                self._violation(f"channel {ch.handle:#x}: unknown host method {mthd:#x}")
                raise _Stop("unknown host method", 13)
        else:
            cls = ch.subch.get(subch)
            if cls is None:
                self._violation(f"channel {ch.handle:#x}: method {mthd:#x} on subchannel {subch}, which has no engine bound")
                raise _Stop("method on an unbound subchannel", 13)
            ch.state[(cls, mthd)] = v
            if cls in E.COMPUTE_CLASSES:
                self._compute(ch, cls, mthd, v)
            else:
                self._copy(ch, cls, mthd, v)

    def _sem_execute(self, ch: _Channel, v: int) -> None:
        H = pb.C86F
        addr = (ch.sem.get(H.SEM_ADDR_LO, 0) & ~3) | (ch.sem.get(H.SEM_ADDR_HI, 0) & 0x1FFFFFF) << 32
        payload = ch.sem.get(H.SEM_PAYLOAD_LO, 0) | ch.sem.get(H.SEM_PAYLOAD_HI, 0) << 32
        op, wide, stamp = v & 7, (v >> 24) & 1, (v >> 25) & 1
        if not wide:
            payload &= 0xFFFFFFFF
        if op == H.SEM_EXECUTE_OPERATION_RELEASE:
            self._release_sem(addr, payload, wide=bool(wide), stamp=bool(stamp))
        elif op in (H.SEM_EXECUTE_OPERATION_ACQUIRE, 2, H.SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ):
            self._acquire(ch, addr, payload, wide=bool(wide), op=op)
        else:
            self._violation(f"channel {ch.handle:#x}: SEM_EXECUTE operation {op}")
            raise _Stop("unknown semaphore operation", 13)

    def _release_sem(self, addr: int, payload: int, *, wide: bool, stamp: bool) -> None:
        addr = self._check(addr, 16 if stamp else 8 if wide else 4, "semaphore release")
        if stamp:
            ctypes.c_uint64.from_address(addr + 8).value = time.monotonic_ns()
        if wide:
            ctypes.c_uint64.from_address(addr).value = payload
        else:
            ctypes.c_uint32.from_address(addr).value = payload

    def _acquire(self, ch: _Channel, addr: int, value: int, *, wide: bool, op: int) -> None:
        addr = self._check(addr, 8 if wide else 4, "semaphore acquire")
        bits = 64 if wide else 32
        kind = ctypes.c_uint64 if wide else ctypes.c_uint32
        deadline = time.monotonic() + self.acquire_timeout
        pause = 5e-6
        while True:
            cur = kind.from_address(addr).value
            if op == 0:
                ok = cur == value
            elif op == 2:
                ok = cur >= value
            else:
                ok = (cur - value) % (1 << bits) < 1 << (bits - 1)
            if ok:
                return
            if ch.stop.is_set():
                raise _Stop("the channel was freed during an acquire", None)
            if time.monotonic() > deadline:
                self._violation(f"channel {ch.handle:#x}: acquire of {addr:#x} >= {value} never satisfied in {self.acquire_timeout} s (it holds {cur})")
                raise _Stop("acquire timed out", None)
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)

    def _interrupt(self, ch: _Channel) -> None:
        with self._lock:
            for o in self.objects.values():
                if o.cls == E.NV01_EVENT_OS_EVENT and self._gpu_of(o) == ch.gpu and o.event_fd in self._os_events:
                    mine = self._os_events[o.event_fd]
                    os.write(mine, (1).to_bytes(8, "little"))
                    self.interrupts += 1
                    self._drain[mine] = time.monotonic() + 1e-3

    def _drain_events(self) -> None:
        if not self._drain:
            return
        now = time.monotonic()
        with self._lock:
            for mine, at in list(self._drain.items()):
                if now >= at:
                    del self._drain[mine]
                    try:
                        os.read(mine, 8)
                    except OSError:
                        pass

    def _compute(self, ch: _Channel, cls: int, mthd: int, v: int) -> None:
        C = pb.CBC0
        if mthd == C.SEND_SIGNALING_PCAS2_B:
            if v & 0xF != C.SEND_SIGNALING_PCAS2_B_PCAS_ACTION_PREFETCH_SCHEDULE:
                self._violation(f"channel {ch.handle:#x}: PCAS action {v & 0xF}")
                raise _Stop("unknown PCAS action", 13)
            self._launch(ch, ch.state.get((cls, C.SEND_PCAS_A), 0) << 8)
        elif mthd not in (C.WAIT_FOR_IDLE, C.INVALIDATE_SHADER_CACHES_NO_WFI, C.SEND_PCAS_A,
                          C.SET_SHADER_SHARED_MEMORY_WINDOW_A, C.SET_SHADER_SHARED_MEMORY_WINDOW_B,
                          C.SET_SHADER_LOCAL_MEMORY_WINDOW_A, C.SET_SHADER_LOCAL_MEMORY_WINDOW_B,
                          C.SET_SHADER_LOCAL_MEMORY_A, C.SET_SHADER_LOCAL_MEMORY_B,
                          C.SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A, C.SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B,
                          C.SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C):  # fmt: skip
            self._violation(f"channel {ch.handle:#x}: compute method {mthd:#x} the fake does not know")
            raise _Stop("unknown compute method", 13)

    def _launch(self, ch: _Channel, qmd_at: int) -> None:
        self._check(qmd_at, _qmd.QMD_BYTES, "QMD read")
        qmd = ctypes.string_at(qmd_at, _qmd.QMD_BYTES)
        if _bits(qmd, "QMD_MAJOR_VERSION") != 4:
            self._violation(f"channel {ch.handle:#x}: QMD at {qmd_at:#x} is version {_bits(qmd, 'QMD_MAJOR_VERSION')}, not 4")
            raise _Stop("bad QMD", 13)
        program = _bits(qmd, "PROGRAM_ADDRESS_LOWER") | _bits(qmd, "PROGRAM_ADDRESS_UPPER") << 32
        grid = (_bits(qmd, "GRID_WIDTH"), _bits(qmd, "GRID_HEIGHT"), _bits(qmd, "GRID_DEPTH"))
        block = (_bits(qmd, "CTA_THREAD_DIMENSION0"), _bits(qmd, "CTA_THREAD_DIMENSION1"), _bits(qmd, "CTA_THREAD_DIMENSION2"))
        cb0 = (_bits(qmd, "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)") | _bits(qmd, "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(0)") << 32) << 6
        cb0_size = _bits(qmd, "CONSTANT_BUFFER_SIZE_SHIFTED4(0)") << 4
        kernel = self._kernel_at(program)
        if self._fault is not None:
            xid, self._fault = self._fault, None
            raise _Stop(f"injected fault in {kernel.name}", xid)
        if kernel.param_base + kernel.param_size > cb0_size or cb0_size < _qmd.CB0_PREFIX:
            self._violation(f"launch of {kernel.name}: constant bank 0 of {cb0_size} bytes lacks its parameters")
            raise _Stop("bad constant bank", 13)
        self._check(cb0, cb0_size, "constant bank 0 read")
        params = ctypes.string_at(cb0 + kernel.param_base, kernel.param_size)
        fn = self.kernels.get(kernel.name)
        self.launches.append((kernel.name, grid, block))
        if fn is None:
            self._violation(f"launch of {kernel.name!r}, for which no fake kernel is registered (FakeNvrm.kernel)")
            return
        try:
            fn(params, grid, block)
        except NvFault as e:
            raise _Stop(str(e), e.xid) from e
        except Exception as e:  # noqa: BLE001 - a broken fake kernel: a graphics exception, said
            self._violation(f"fake kernel {kernel.name!r} raised {type(e).__name__}: {e}")
            raise _Stop(f"kernel {kernel.name} raised", 13) from e

    def _kernel_at(self, program: int) -> _cubin.Kernel:
        """The kernel whose code is at ``program``: one of the device's loaded kernels there, its bytes checked."""
        for lk in list(_launch._KERNELS.values()):
            if lk.program_address == program:
                n = len(lk.kernel.text)
                self._check(program, n, "code read")
                if ctypes.string_at(program, n) != lk.kernel.text:
                    self._violation(f"the code at {program:#x} is not kernel {lk.kernel.name!r}'s")
                    raise _Stop("illegal instruction", 13)
                return lk.kernel
        self._violation(f"launch of code at {program:#x}, where no loaded kernel lies")
        raise _Stop("illegal instruction", 13)

    def _copy(self, ch: _Channel, cls: int, mthd: int, v: int) -> None:
        C = pb.C8B5
        if mthd != C.LAUNCH_DMA:
            if mthd not in (C.SET_SEMAPHORE_A, C.SET_SEMAPHORE_B, C.SET_SEMAPHORE_PAYLOAD, C.SET_SEMAPHORE_PAYLOAD_UPPER,
                            C.OFFSET_IN_UPPER, C.OFFSET_IN_LOWER, C.OFFSET_OUT_UPPER, C.OFFSET_OUT_LOWER,
                            C.PITCH_IN, C.PITCH_OUT, C.LINE_LENGTH_IN, C.LINE_COUNT):  # fmt: skip
                self._violation(f"channel {ch.handle:#x}: copy method {mthd:#x} the fake does not know")
                raise _Stop("unknown copy method", 13)
            return
        s = ch.state

        def get(m: int) -> int:
            return s.get((cls, m), 0)

        transfer = v & 3
        if transfer:
            if not (v >> 7) & 1 or not (v >> 8) & 1:
                self._violation(f"channel {ch.handle:#x}: a block-linear copy (LAUNCH_DMA {v:#x}), which the fake does not model")
                raise _Stop("block-linear copy", 13)
            src = (get(C.OFFSET_IN_UPPER) & 0x1FFFFFF) << 32 | get(C.OFFSET_IN_LOWER)
            dst = (get(C.OFFSET_OUT_UPPER) & 0x1FFFFFF) << 32 | get(C.OFFSET_OUT_LOWER)
            n = get(C.LINE_LENGTH_IN)
            lines = get(C.LINE_COUNT) if (v >> 9) & 1 else 1
            pin, pout = (get(C.PITCH_IN), get(C.PITCH_OUT)) if lines > 1 else (0, 0)
            for k in range(lines):
                at_src = self._check(src + k * pin, n, "copy read")
                at_dst = self._check(dst + k * pout, n, "copy write")
                ctypes.memmove(at_dst, at_src, n)
        sem = (v >> 3) & 3
        if sem:
            addr = (get(C.SET_SEMAPHORE_A) & 0x1FFFFFF) << 32 | get(C.SET_SEMAPHORE_B)
            payload = get(C.SET_SEMAPHORE_PAYLOAD)
            two = (v >> 27) & 1
            if two:
                payload |= get(C.SET_SEMAPHORE_PAYLOAD_UPPER) << 32
            if sem == C.LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_ONE_WORD_SEMAPHORE:
                self._release_sem(addr, payload & 0xFFFFFFFF, wide=False, stamp=False)
            elif sem == C.LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_FOUR_WORD_SEMAPHORE:
                if addr % 16:
                    self._violation(f"channel {ch.handle:#x}: a four-word semaphore at {addr:#x}")
                    raise _Stop("misaligned semaphore", 13)
                self._release_sem(addr, payload, wide=True, stamp=True)
            else:
                self._violation(f"channel {ch.handle:#x}: LAUNCH_DMA semaphore type {sem}")
                raise _Stop("unknown semaphore type", 13)
        if (v >> 5) & 3 == C.LAUNCH_DMA_INTERRUPT_TYPE_NON_BLOCKING:
            self._interrupt(ch)

    def _stop_group(self, ch: _Channel, why: str, xid: int | None) -> None:
        """The channel (and its group) stops; with ``xid``, the RM writes the channel's error notifier."""
        with self._lock:
            if xid is not None:
                n = self.objects.get(ch.notifier)
                if n is not None and n.view:
                    ctypes.memmove(n.view, struct.pack("<QIHH", time.monotonic_ns(), xid, 0, 0xFFFF), 16)
            tsg = self.objects.get(ch.tsg)
            for c in tsg.children if tsg is not None else []:
                o = self.objects.get(c)
                if o is not None and o.channel is not None and o.channel.dead is None:
                    o.channel.dead = why
            ch.dead = why
        if xid is not None:
            self._interrupt(ch)  # the RM's RC handling wakes the event fds too
