"""The fake driver's state and the records it keeps: files, RM objects, channels, and what each module of it shares.

Threads: the caller's (every driver call the library makes) and one fake GPU
thread per scheduled channel; ``_State._lock`` guards everything they share.
"""

from __future__ import annotations

import bisect
import itertools
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ...nvrm import _exec_params
from ...nvrm import _fd
from ...nvrm import _params
from ...nvrm import _qmd

__all__ = ["NvFault", "Call", "KernelFn", "UUID_TEXT", "uuid_text", "HOPPER_CLASSES", "REAL"]

#: ``fn(params, grid, block)``: a fake kernel, called with its parameter bytes (from constant bank 0).
KernelFn = Callable[[bytes, tuple[int, int, int], tuple[int, int, int]], Any]

#: The machine's own mmap/munmap, for the pages the fake itself maps (memory objects, the GPU's view).
REAL = _fd.Driver()

_handles = itertools.count(0xCF000001)  # unique across fakes: a stale handle never matches
_cookies = itertools.count(0x7F5A_0000_0000, 0x10000)

UUID_TEXT = "GPU-7cc9fa83-3b2e-3e5a-008a-f824f2af7a22"  # GPU 0's


def uuid_text(gpu: int) -> str:
    """GPU ``gpu``'s UUID: one of its own for each GPU, as on a machine (arig, and UVM, tell GPUs apart by it)."""
    head, _, tail = UUID_TEXT.rpartition("-")
    return f"{head}-{(int(tail, 16) + gpu) % (1 << 48):012x}"


#: The classes an H200's RM lists (those arig looks for, and a few it does not).
HOPPER_CLASSES = (_exec_params.NV01_ROOT_CLIENT, _exec_params.NV01_DEVICE_0, _exec_params.NV20_SUBDEVICE_0, _exec_params.NV01_MEMORY_SYSTEM, _exec_params.NV1_MEMORY_USER,
                  _exec_params.NV01_MEMORY_VIRTUAL, _exec_params.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, _exec_params.NV01_EVENT_OS_EVENT, _exec_params.FERMI_CONTEXT_SHARE_A,
                  _exec_params.FERMI_VASPACE_A, _exec_params.KEPLER_CHANNEL_GROUP_A, _exec_params.TURING_USERMODE_A, _exec_params.AMPERE_USERMODE_A, _exec_params.HOPPER_USERMODE_A,
                  _exec_params.VOLTA_CHANNEL_GPFIFO_A, _exec_params.AMPERE_CHANNEL_GPFIFO_A, _exec_params.HOPPER_CHANNEL_GPFIFO_A, _exec_params.HOPPER_COMPUTE_A,
                  _exec_params.HOPPER_DMA_COPY_A, _exec_params.GT200_DEBUGGER)  # fmt: skip
_MEMORY = (_exec_params.NV01_MEMORY_SYSTEM, _exec_params.NV1_MEMORY_USER, _exec_params.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR)
_ENGINES = (*_exec_params.COMPUTE_CLASSES, *_exec_params.COPY_CLASSES)


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
    return _params._ERR_NAMES.index(name) + 1


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


def _bits(data: bytes, name: str) -> int:
    hi, lo = _qmd.FIELDS[name][:2]
    return (int.from_bytes(data, "little") >> lo) & ((1 << (hi - lo + 1)) - 1)



class _State:
    """What every part of the fake shares, and the bookkeeping on it."""

    def __init__(self, gpus: int = 1, *, release: str = "580.159.04", name: str = "NVIDIA H200",
                 memory_kib: int = 147_221_504, acquire_timeout: float = 10.0, uuids: Sequence[str] | None = None) -> None:
        self.buses = [f"0000:{0x06 + i:02x}:00.0" for i in range(gpus)]
        # Each GPU's UUID ("GPU-" and 32 hex digits in 8-4-4-4-12): uuid_text's unless given.
        self.uuids = [uuid_text(i) for i in range(gpus)] if uuids is None else list(uuids)
        if len(self.uuids) != gpus:
            raise ValueError(f"{gpus} GPUs need {gpus} UUIDs, got {len(self.uuids)}")
        self.release, self.name, self.memory_kib, self.acquire_timeout = release, name, memory_kib, acquire_timeout
        self.watchdog = 0x5  # not running: hang_ms 30000
        self.log: list[Call] = []
        self.violations: list[str] = []
        self.launches: list[tuple[str, tuple[int, int, int], tuple[int, int, int]]] = []
        self.interrupts = 0  # event fd writes made (NON_STALL_INTERRUPT, copy-engine interrupts, RC errors)
        self.interrupts_unheard = 0  # interrupts on an event fd made non-blocking: the driver wakes no poller of those
        self.kernels: dict[str, KernelFn] = {}
        self.objects: dict[int, _Obj] = {}
        self.files: dict[int, _File] = {}
        self.uvm: set[tuple[Any, ...]] = set()
        self.root = ""
        self.dev_root = ""  # the driver files' directory, while installed
        self.driver: _fd.Driver | None = None  # the fake driver, while installed
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

    def _gpu_of(self, o: _Obj) -> int:
        while o.cls != _exec_params.NV01_DEVICE_0 and o.parent in self.objects and o.parent != o.handle:
            o = self.objects[o.parent]
        return o.gpu

    def _dma_va(self, h: int) -> int | None:
        return next((va for va, (_end, hh) in self._gpu_maps.items() if hh == h), None)

    def _release(self, o: _Obj) -> None:
        if o.channel is not None:
            o.channel.stop.set()
        if o.view:
            try:
                REAL.munmap(o.view, o.size)
            except _params.DriverError:
                pass
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

    def _drop_gpu_map(self, va: int) -> None:
        del self._gpu_maps[va]
        self._alias.pop(va, None)
        self._gpu_starts.remove(va)


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

    def _schedule(self, tsg: _Obj) -> None:
        """Start the fake GPU of the group's channels (the GPU interpreter's)."""
        raise NotImplementedError
