"""The process's one RM client and the GPUs' RM objects: blocking calls, never on the event loop.

Every call goes through :data:`arig.nvrm._fd.driver` (the process's view of
the kernel driver's files), so a fake driver stands in for all of it.  The
device's calls, classes, flags and order are those verified on an H200 at
driver 580.159.04 (``scripts/nv_probe.py`` runs the same functions step by
step).  Three lifetimes, each made with an undo list and freed in reverse
order on every path:

* **the process** (:func:`client`, :func:`process`): ``/dev/nvidiactl``, the
  driver's release (checked) and the RM root client, made by the first call
  that needs the driver; then, by the first device open, the two
  ``/dev/nvidia-uvm`` files (UVM_INITIALIZE, UVM_MM_INITIALIZE) and the
  reservation of the addresses where memory lies at one address for the CPU
  and the GPU (:data:`RESERVATIONS`).  Kept for the process.
* **a GPU** (:meth:`Process.rm_gpu`, :meth:`Process.gpu`): its
  ``/dev/nvidiaN`` and RM device and subdevice, which reading its usage and
  facts needs; then, by the GPU's first device open, its UUID, class choice,
  UVM registration, virtual memory object, usermode doorbell page and VA
  space (+ UVM registration).  Kept for the process and shared by every
  caller and thread, so repeated reads cost only their ioctls.
* **a device** (:class:`Channel`, :class:`Mem`, :meth:`Gpu.os_event`): a
  channel group with its context share and two GPFIFO channels
  (:class:`Gpfifo`: the compute one and the copy one, each with its error
  notifier, GPFIFO ring and USERD, engine object, work-submit token and UVM
  registration), then its schedule; memory; the OS event fd.

Keeping ``/dev/nvidiaN`` open matters beyond reuse: the RM lets a process make
a GPU's device object only while the process holds that file open, and the
driver keeps the GPU initialized while it is open, as persistence mode does.
After a fork the child cannot use the parent's client (the RM ties a client
to the process that made it), so the child lets go of its copies of the files
and makes its own client on first use.

Every refusal of the RM raises :class:`~arig.nvrm.RmError` naming the call
and the status; a kernel-level ioctl failure raises
:class:`~arig.nvrm.DriverError`.  Any thread but the event loop's may call
anything here; the locks make first use from many threads make one of each.
"""

from __future__ import annotations

import bisect
import ctypes
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._errors import ArigValueError, OpenError, describe
from . import _fd
from . import _exec_params as E
from . import _params as P
from ._fd import MAP_ANONYMOUS, MAP_FIXED, MAP_FIXED_NOREPLACE, MAP_NORESERVE, MAP_PRIVATE, MAP_SHARED, PROT_NONE, PROT_READ, PROT_RW

__all__ = ["Undo", "VaAllocator", "Process", "Gpu", "Mem", "Gpfifo", "Channel", "process", "client", "reset",
           "read_usage", "read_facts", "ACCEPTED_RELEASES", "RESERVATIONS", "PAGE_2M", "PAGE_4K",
           "PROT_NONE", "PROT_READ", "PROT_RW", "MAP_SHARED", "MAP_PRIVATE", "MAP_FIXED", "MAP_ANONYMOUS",
           "MAP_NORESERVE", "MAP_FIXED_NOREPLACE"]

MIB = 1 << 20
PAGE_2M = 2 * MIB
PAGE_4K = 4096

ACCEPTED_RELEASES = ("580",)  # the branches whose layouts _params and _exec_params carry
#: Where memory lies at one address for the CPU and the GPU: 384 GiB up to 2**40 (below which GPFIFO
#: segments and QMDs must lie), else the first free of three 1 GiB regions.
RESERVATIONS = ((0x60_0000_0000, 0x100_0000_0000 - 0x60_0000_0000), (0x10_0000_0000, 1 << 30), (0x18_0000_0000, 1 << 30), (0x30_0000_0000, 1 << 30))
#: The device's VA space (all of the GPU's 49-bit addresses above the first page) and virtual memory limit.
VASPACE_BASE, VASPACE_SIZE = 0x1000, 0x1FFFFFB000000
VIRTMEM_LIMIT = 0x1FFFFFFFFFFFF
GPFIFO_ENTRIES = 0x10000
CHANNEL_UVM_BYTES = 64 * MIB  # UVM_REGISTER_CHANNEL's reserved range
NOTIFIER_BYTES = 2 * MIB
#: Client-chosen handles of OS descriptors (RM_ALLOC_MEMORY with MEMORY_HANDLE_PROVIDED), counted up from here.
OS_DESC_HANDLE = 0xA7160001
#: NV0080 vaMode NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES: the device holds the VA spaces its
#: users make.  The device makes its own (FERMI_VASPACE_A) and its channels and UVM registrations are verified
#: with this mode; reading usage and facts needs no VA space, so one device object serves both.
VAMODE = 0


def round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def _mmap(addr: int, size: int, prot: int, flags: int, fd: int = -1) -> int:
    """:meth:`arig.nvrm._fd.Driver.mmap` of the process's driver."""
    return _fd.driver.mmap(addr, size, prot, flags, fd)


def _munmap(addr: int, size: int) -> None:
    _fd.driver.munmap(addr, size)


def _rereserve(d: _fd.Driver, va: int, size: int) -> None:
    """Back to a PROT_NONE reservation: the region stays the process's until the reservation ends."""
    d.mmap(va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED)


# --- undo lists and addresses (pure) ---------------------------------------------------


class Undo:
    """What was made, as ``(what, free)`` steps, freed in reverse order."""

    __slots__ = ("steps",)

    def __init__(self) -> None:
        self.steps: list[tuple[str, Callable[[], None]]] = []

    def push(self, what: str, fn: Callable[[], None]) -> None:
        self.steps.append((what, fn))

    def unwind(self) -> list[str]:
        """Run every step, last first; every step runs even after a failure.  The failures, as text."""
        return self.unwind_to(0)

    def unwind_to(self, mark: int) -> list[str]:
        """``unwind`` of the steps pushed since ``len(undo)`` was ``mark``."""
        failures: list[str] = []
        while len(self.steps) > mark:
            what, fn = self.steps.pop()
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - keep freeing the rest
                failures.append(f"{what}: {describe(e)}")
        return failures

    def __len__(self) -> int:
        return len(self.steps)


class VaAllocator:
    """First-fit ranges of ``[base, base + size)``, aligned; freed ranges merge with their neighbours.  Thread-safe."""

    def __init__(self, base: int, size: int) -> None:
        self.base, self.size = base, size
        self._free: list[tuple[int, int]] = [(base, size)]  # (start, length), sorted by start
        self._used: dict[int, int] = {}
        self._lock = threading.Lock()

    def alloc(self, size: int, align: int = PAGE_2M) -> int:
        if size <= 0 or align <= 0 or align & (align - 1):
            raise ArigValueError(f"bad allocation of {size} bytes aligned {align}")
        with self._lock:
            for i, (start, length) in enumerate(self._free):
                at = round_up(start, align)
                if at + size <= start + length:
                    pieces = [(s, n) for s, n in ((start, at - start), (at + size, start + length - at - size)) if n > 0]
                    self._free[i : i + 1] = pieces
                    self._used[at] = size
                    return at
        raise P.DriverError(f"the process's CPU=GPU address reservation ({self.size >> 20} MiB at {self.base:#x}) has no room for {size} bytes")

    def free(self, at: int) -> None:
        with self._lock:
            size = self._used.pop(at)
            i = bisect.bisect_left(self._free, (at, 0))
            self._free.insert(i, (at, size))
            # merge with the next, then the previous
            if i + 1 < len(self._free) and at + size == self._free[i + 1][0]:
                self._free[i] = (at, size + self._free[i + 1][1])
                del self._free[i + 1]
            if i > 0 and self._free[i - 1][0] + self._free[i - 1][1] == at:
                self._free[i - 1] = (self._free[i - 1][0], self._free[i - 1][1] + self._free[i][1])
                del self._free[i]

    @property
    def used(self) -> int:
        return sum(self._used.values())


# --- the process -----------------------------------------------------------------------


class Process:
    """The process's control file and RM root client; for devices, also its UVM files and address reservation."""

    def __init__(self, d: _fd.Driver | None = None) -> None:
        self.d = _fd.driver if d is None else d  # the driver it was made through, for all its calls
        self.undo = Undo()
        self.ctl = -1
        self.root = 0
        self.uvm_fd = self.uvm_fd2 = -1
        self.release = ""
        self.va: VaAllocator | None = None  # the reservation: made by the first device open
        self.gpus: dict[str, Gpu] = {}
        self.files: list[int] = []  # every fd it and its GPUs hold, for a forked child to let go of
        self.lock = threading.Lock()
        self._next_handle = OS_DESC_HANDLE

    # -- RM and UVM calls -----------------------------------------------------------
    def alloc(self, parent: int, cls: int, params: Any, what: str) -> int:
        return self.d.rm_alloc(self.ctl, self.root, parent, cls, params, what)

    def free(self, parent: int, h: int, what: str = "RM free") -> None:
        self.d.rm_free(self.ctl, self.root, parent, h, what)

    def alloc_undo(self, undo: Undo, parent: int, cls: int, params: Any, what: str) -> int:
        h = self.alloc(parent, cls, params, what)
        undo.push(f"free {what}", lambda: self.free(parent, h, f"free {what}"))
        return h

    def control(self, obj: int, cmd: int, params: Any, what: str) -> None:
        self.d.rm_control(self.ctl, self.root, obj, cmd, params, what)

    def uvm(self, fd: int, nr: int, params: Any, what: str) -> None:
        self.d.uvm(fd, nr, params, what)

    def os_desc_handle(self) -> int:
        with self.lock:
            h, self._next_handle = self._next_handle, self._next_handle + 1
            return h

    def open_undo(self, undo: Undo, what: str, opener: Callable[[], int]) -> int:
        """A driver file from ``opener``, closed by ``undo`` (and let go of by a forked child)."""
        fd = opener()
        self.files.append(fd)

        def close() -> None:
            self.files.remove(fd)
            self.d.close(fd)

        undo.push(f"close {what}", close)
        return fd

    # -- making it -------------------------------------------------------------------
    def open_client(self) -> None:
        """The control file, the checked release and the root client: what every use needs."""
        self.ctl = self.open_undo(self.undo, "ctl fd", self.d.open_ctl)
        self.release = _driver_release(self.d, self.ctl)
        if P.release_major(self.release) not in ACCEPTED_RELEASES:
            accepted = ", ".join(f"{r}.x" for r in ACCEPTED_RELEASES)
            raise P.DriverError(f"the NVIDIA kernel driver is release {self.release}; arig.nvrm accepts {accepted}")
        root = self.d.rm_alloc(self.ctl, 0, 0, E.NV01_ROOT_CLIENT, None, "root client")
        self.root = root
        self.undo.push("free root client", lambda: self.free(root, root, "free root client"))

    def open_devices(self) -> None:
        """UVM and the CPU=GPU address reservation: what a device needs, made once."""
        u = self.undo
        self.uvm_fd = self.open_undo(u, "uvm fd", self.d.open_uvm)
        self.uvm_fd2 = self.open_undo(u, "uvm fd 2", self.d.open_uvm)
        self.uvm(self.uvm_fd, E.UVM_INITIALIZE, E.UvmInitializeParams(flags=0), "UVM_INITIALIZE")
        try:  # CUDA's own open gets an error here too and goes on: so does arig
            self.uvm(self.uvm_fd2, E.UVM_MM_INITIALIZE, E.UvmMmInitializeParams(uvmFd=self.uvm_fd), "UVM_MM_INITIALIZE")
        except (P.RmError, P.DriverError):
            pass
        errors = []
        for base, size in RESERVATIONS:
            try:
                self.d.mmap(base, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE)
            except P.DriverError as e:
                errors.append(f"{base:#x}+{size:#x}: {e}")
                continue
            u.push("munmap VA reservation", _unmapper(self.d, base, size))
            self.va = VaAllocator(base, size)
            return
        raise P.DriverError("cannot reserve the CPU=GPU address region: " + "; ".join(errors))

    def rm_gpu(self, bus: str) -> Gpu:
        """The GPU at ``bus`` with its RM device and subdevice (what reading it needs), made on first use."""
        found = self.gpus.get(bus)
        if found is not None:
            return found
        with self.lock:
            return self._rm_gpu(bus)

    def _rm_gpu(self, bus: str) -> Gpu:
        found = self.gpus.get(bus)
        if found is None:
            g = Gpu(self, bus)
            _made_or_undone(g.undo, g.open_rm)
            found = self.gpus[bus] = g
        return found

    def gpu(self, bus: str) -> Gpu:
        """The GPU at ``bus`` with everything a device needs, made by its first open and kept."""
        with self.lock:
            g = self._rm_gpu(bus)
            if not g.ready:
                mark = len(g.undo)
                try:
                    g.open_device()
                except BaseException:
                    g.undo.unwind_to(mark)
                    raise
                g.ready = True
            return g


def _unmapper(d: _fd.Driver, addr: int, size: int) -> Callable[[], None]:
    return lambda: d.munmap(addr, size)


def _made_or_undone(undo: Undo, make: Callable[[], None]) -> None:
    try:
        make()
    except BaseException:
        undo.unwind()
        raise


def _driver_release(d: _fd.Driver, ctl: int) -> str:
    """The driver's version string: asked of the driver, else read from its /proc file."""
    query = P.VersionStr(cmd=P.VERSION_QUERY)
    try:
        d.ioctl(ctl, P.NV_ESC_CHECK_VERSION_STR, query, "driver version")
        found = str(query.versionString.decode("ascii", "replace")).strip()
        if found:
            return found
    except P.DriverError:
        pass
    found = P.release_from_proc(d.proc_version()) or ""
    if not found:
        raise P.DriverError("cannot tell the NVIDIA kernel driver's release "
                            f"(neither the version query nor {_fd.PROC_VERSION} answered)")
    return found


_lock = threading.Lock()
_process: Process | None = None


def _current() -> Process:
    """The process's client (``_lock`` held), made on first use; a failure is undone and retried next call.

    A client made through another driver than the process's now is not this
    driver's: a new one is made (a fake driver installed for a test)."""
    global _process
    if _process is None or _process.d is not _fd.driver:
        p = Process()
        _made_or_undone(p.undo, p.open_client)
        _process = p
    return _process


def client() -> Process:
    """The process's RM client, as reading usage and facts needs it."""
    found = _process
    if found is not None and found.d is _fd.driver:
        return found
    with _lock:
        return _current()


def process() -> Process:
    """The process's RM client with UVM and the address reservation, as a device needs it."""
    with _lock:
        p = _current()
        if p.va is None:
            mark = len(p.undo)
            try:
                p.open_devices()
            except BaseException:
                p.undo.unwind_to(mark)
                raise
        return p


def reset() -> list[str]:
    """Free the process's client and everything it made, and forget it (for tests, with no device open).

    What failed to free, as text."""
    global _process
    with _lock:
        p, _process = _process, None
    if p is None:
        return []
    failures = [f for g in list(p.gpus.values()) for f in g.undo.unwind()]
    return failures + p.undo.unwind()


def _forget_in_child() -> None:
    # Another thread may have held the lock at the fork; the child gets a new
    # one.  Closing the inherited files only drops the child's references: the
    # driver frees nothing until the parent closes them too.
    global _process, _lock
    _lock = threading.Lock()
    inherited, _process = _process, None
    if inherited is not None:
        for fd in inherited.files:
            inherited.d.close(fd)
        inherited.files.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def read_usage(bus: str, window: float) -> P.Usage:
    """The usage of the GPU at ``bus`` (the caller has checked it is active)."""
    p = client()
    gpu = p.rm_gpu(bus)
    fb = P.FbInfoV2.asking([P.FB_RAM_SIZE, P.FB_HEAP_FREE])
    p.control(gpu.subdevice, P.CTRL_FB_GET_INFO_V2, fb, "FB info")
    util: P.UtilSamplesV2 | None = P.UtilSamplesV2.asking()
    try:
        p.control(gpu.subdevice, P.CTRL_PERF_UTIL_SAMPLES_V2, util, "utilization samples")
    except P.RmError as e:
        if e.status_name != "NV_ERR_NOT_SUPPORTED":
            raise
        util = None  # this GPU's RM takes no samples: busy is None
    return P.usage_of(fb, util, window)


def read_facts(bus: str) -> dict[str, object]:
    """The lasting facts of the GPU at ``bus``."""
    return client().rm_gpu(bus).read_facts()


# --- memory ----------------------------------------------------------------------------


@dataclass
class Mem:
    """An RM memory object where it lies: the GPU (= CPU, where mapped) address, size, handle, and its undo list."""

    what: str
    handle: int
    va: int
    size: int
    cpu: bool
    undo: Undo

    def free(self) -> list[str]:
        return self.undo.unwind()

    def u32(self, offset: int) -> ctypes.c_uint32:
        return ctypes.c_uint32.from_address(self.va + offset)

    def u64(self, offset: int) -> ctypes.c_uint64:
        return ctypes.c_uint64.from_address(self.va + offset)

    def write(self, offset: int, data: bytes | bytearray) -> None:
        ctypes.memmove(self.va + offset, bytes(data), len(data))


class Gpu:
    """One GPU's RM objects, made once for the process (never freed: the process keeps them)."""

    def __init__(self, proc: Process, bus: str) -> None:
        self.p = proc
        self.bus = bus
        self.undo = Undo()
        self.ready = False  # whether it has everything a device needs (Process.gpu)
        self.owner: str | None = None  # the device open on this GPU (one at a time)
        self.facts: dict[str, Any] = {}

    def export_dmabuf(self, mem: Mem, offset: int, size: int) -> int:
        """A new dma-buf fd of ``size`` bytes at ``offset`` in ``mem``'s RM object (vidmem of this GPU;
        page-aligned).  The dma-buf holds the object until its last reference goes."""
        arg = E.ExportToDmabufFd(fd=-1, hClient=self.p.root, totalObjects=1, numObjects=1, index=0, totalSize=size)
        arg.handles[0], arg.offsets[0], arg.sizes[0] = mem.handle, offset, size
        self.p.d.ioctl(self.gpu_fd, E.NV_ESC_EXPORT_TO_DMABUF_FD, arg, f"export {mem.what} to a dma-buf")
        P.check_status(f"export {mem.what} to a dma-buf", arg.status)
        return int(arg.fd)

    # -- the GPU's objects: card info .. subdevice, then (for devices) UUID .. VA space --------------
    def open_rm(self) -> None:
        """Card info, its /dev/nvidiaN, the RM device and subdevice: what reading the GPU needs."""
        p, u = self.p, self.undo
        cards = P.CardInfoArray()
        p.d.ioctl(p.ctl, P.NV_ESC_CARD_INFO, cards, "card info")
        card = next((c for c in cards if c.valid and P.bus_name(c.pci_info) == self.bus.lower()), None)
        if card is None:
            raise P.DriverError(f"the NVIDIA kernel driver does not hold GPU {self.bus} (is it bound to another driver?)")
        self.minor, self.gpu_id = int(card.minor_number), int(card.gpu_id)
        self.gpu_fd = self.open_gpu_fd(u, "gpu fd")
        info = P.IdInfoV2(gpuId=self.gpu_id)
        p.control(p.root, P.CTRL_GPU_GET_ID_INFO_V2, info, "GPU id info")
        self.device = p.alloc_undo(u, p.root, E.NV01_DEVICE_0, P.Nv0080Alloc(deviceId=info.deviceInstance, hClientShare=p.root, vaMode=VAMODE), "device")
        self.subdevice = p.alloc_undo(u, self.device, E.NV20_SUBDEVICE_0, P.Nv2080Alloc(subDeviceId=0), "subdevice")

    def open_device(self) -> None:
        """UUID, classes, UVM registration, virtual memory, usermode doorbell, VA space: what a device needs."""
        p, u = self.p, self.undo
        g = E.GidInfoBinary(flags=E.GID_FLAGS_BINARY_SHA1)
        p.control(self.subdevice, E.NV2080_CTRL_CMD_GPU_GET_GID_INFO, g, "GPU UUID (binary)")
        self.uuid = g.uuid()
        self._pick_classes()
        r = E.UvmRegisterGpuParams(rmCtrlFd=-1)
        ctypes.memmove(r.gpu_uuid, self.uuid, 16)
        p.uvm(p.uvm_fd, E.UVM_REGISTER_GPU, r, "UVM_REGISTER_GPU")

        def unregister_gpu() -> None:
            x = E.UvmUnregisterGpuParams()
            ctypes.memmove(x.gpu_uuid, self.uuid, 16)
            p.uvm(p.uvm_fd, E.UVM_UNREGISTER_GPU, x, "UVM_UNREGISTER_GPU")

        u.push("UVM unregister GPU", unregister_gpu)
        self.virtmem = p.alloc_undo(u, self.device, E.NV01_MEMORY_VIRTUAL, E.NvMemoryVirtualAllocationParams(limit=VIRTMEM_LIMIT), "virtual memory object")
        self._map_usermode()
        vp = E.NvVaspaceAllocationParameters(
            vaBase=VASPACE_BASE, vaSize=VASPACE_SIZE,
            flags=E.NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING | E.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED)  # fmt: skip
        self.vaspace = p.alloc_undo(u, self.device, E.FERMI_VASPACE_A, vp, "VA space")
        rv = E.UvmRegisterGpuVaspaceParams(rmCtrlFd=p.ctl, hClient=p.root, hVaSpace=self.vaspace)
        ctypes.memmove(rv.gpuUuid, self.uuid, 16)
        p.uvm(p.uvm_fd, E.UVM_REGISTER_GPU_VASPACE, rv, "UVM_REGISTER_GPU_VASPACE")

        def unregister_vaspace() -> None:
            x = E.UvmUnregisterGpuVaspaceParams()
            ctypes.memmove(x.gpuUuid, self.uuid, 16)
            p.uvm(p.uvm_fd, E.UVM_UNREGISTER_GPU_VASPACE, x, "UVM_UNREGISTER_GPU_VASPACE")

        u.push("UVM unregister VA space", unregister_vaspace)
        self.facts = {**self.read_facts(), "driver": p.release}

    def _pick_classes(self) -> None:
        cl = E.ClassListV2()
        self.p.control(self.device, E.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, cl, "class list")
        have = set(cl.classes())

        def pick(prefs: tuple[int, ...], what: str) -> int:
            for c in prefs:
                if c in have:
                    return c
            raise OpenError(f"GPU {self.bus} offers no {what} class arig knows ({', '.join(hex(c) for c in prefs)})")

        self.usermode_cls = pick(E.USERMODE_CLASSES, "usermode")
        self.gpfifo_cls = pick(E.GPFIFO_CLASSES, "GPFIFO")
        self.compute_cls = pick(E.COMPUTE_CLASSES, "compute")
        self.copy_cls = next((c for c in E.COPY_CLASSES if c in have), None)

    def _map_usermode(self) -> None:
        """The usermode object's page (the doorbell a channel's work-submit token is written to), mapped to the CPU."""
        p, u = self.p, self.undo
        h = p.alloc_undo(u, self.subdevice, self.usermode_cls, None, "usermode")
        fd = self.open_gpu_fd(u, "usermode fd")
        arg = E.Nvos33WithFd(params=E.Nvos33(hClient=p.root, hDevice=self.device, hMemory=h, offset=0, length=E.USERMODE_MAP_BYTES, flags=0), fd=fd)
        p.d.ioctl(p.ctl, E.NV_ESC_RM_MAP_MEMORY, arg, "map usermode")
        P.check_status("map usermode", arg.params.status)
        linear = int(arg.params.pLinearAddress)

        def unmap_usermode() -> None:
            x = E.Nvos34(hClient=p.root, hDevice=self.device, hMemory=h, pLinearAddress=linear)
            p.d.ioctl(p.ctl, E.NV_ESC_RM_UNMAP_MEMORY, x, "unmap usermode")
            P.check_status("unmap usermode", x.status)

        u.push("RM unmap usermode", unmap_usermode)
        self.doorbell = p.d.mmap(0, E.USERMODE_MAP_BYTES, PROT_RW, MAP_SHARED, fd)
        u.push("munmap usermode", _unmapper(p.d, self.doorbell, E.USERMODE_MAP_BYTES))

    def read_facts(self) -> dict[str, Any]:
        """The GPU's lasting facts, as :func:`arig.nvrm.describe` gives them."""
        p = self.p
        name, arch, gid, dog = P.NameString(), P.ArchInfo(), P.GidInfo(), P.WatchdogInfo()
        gid.flags = P.GID_FLAGS_ASCII
        for what, cmd, params in (("GPU name", P.CTRL_GPU_GET_NAME_STRING, name), ("GPU arch", P.CTRL_MC_GET_ARCH_INFO, arch),
                                  ("GPU UUID", P.CTRL_GPU_GET_GID_INFO, gid), ("watchdog info", P.CTRL_RC_GET_WATCHDOG_INFO, dog)):
            p.control(self.subdevice, cmd, params, what)
        fb = P.FbInfoV2.asking([P.FB_RAM_SIZE, P.FB_BAR1_SIZE])
        p.control(self.subdevice, P.CTRL_FB_GET_INFO_V2, fb, "FB info")
        sizes = P.fb_values(fb)
        chip, sm = P.arch_of(arch.architecture, arch.implementation)
        running = bool(dog.watchdogStatusFlags & P.WATCHDOG_RUNNING)
        return {
            "name": name.text(), "arch": sm, "chip": chip, "uuid": gid.text(), "bus": self.bus,
            "memory_total": sizes.get(P.FB_RAM_SIZE, 0) * 1024, "bar1_size": sizes.get(P.FB_BAR1_SIZE, 0) * 1024,
            # The RM's watchdog ends work that holds the GPU too long; where it
            # does not run (no display), arig itself gives up after 30 s.
            "hang_ms": None if running else 30_000,
        }  # fmt: skip

    def open_gpu_fd(self, undo: Undo | None = None, what: str = "gpu fd") -> int:
        """A fresh /dev/nvidiaN registered to the ctl fd: the RM maps one object to the CPU per such file.

        With ``undo``, the undo list closes it and a forked child lets go of it."""
        p = self.p
        fd = p.open_undo(undo, what, lambda: p.d.open_gpu(self.minor)) if undo is not None else p.d.open_gpu(self.minor)
        try:
            # Makes later work on this file count as the client's; once per file.
            p.d.ioctl(fd, E.NV_ESC_REGISTER_FD, P.RegisterFd(ctl_fd=p.ctl), "register fd")
        except BaseException:
            if undo is None:
                p.d.close(fd)
            raise
        return fd

    # -- claiming: one device per GPU at a time ------------------------------------------
    def claim(self, name: str) -> None:
        with self.p.lock:
            if self.owner is not None:
                raise OpenError(f"cannot open {name}: GPU {self.bus} is already open as device {self.owner}; stop that device first (one device per GPU at a time)")
            self.owner = name

    def unclaim(self) -> None:
        with self.p.lock:
            self.owner = None

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
        p.uvm(p.uvm_fd, E.UVM_CREATE_EXTERNAL_RANGE, E.UvmCreateExternalRangeParams(base=va, length=size), f"UVM external range for {what}")
        undo.push(f"UVM free {what}", lambda: p.uvm(p.uvm_fd, E.UVM_FREE, E.UvmFreeParams(base=va, length=size), f"UVM free {what}"))
        flags = (E.field(*E.NVOS46_FLAGS_DMA_OFFSET_FIXED, E.NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE)
                 | E.field(*E.NVOS46_FLAGS_PAGE_SIZE, E.NVOS46_FLAGS_PAGE_SIZE_4KB)
                 | E.field(*E.NVOS46_FLAGS_CACHE_SNOOP, E.NVOS46_FLAGS_CACHE_SNOOP_ENABLE))  # fmt: skip
        d = E.Nvos46(hClient=p.root, hDevice=self.device, hDma=self.virtmem, hMemory=handle, offset=0, length=size, flags=flags, dmaOffset=va)
        p.d.ioctl(p.ctl, E.NV_ESC_RM_MAP_MEMORY_DMA, d, f"map {what} DMA")
        P.check_status(f"map {what} DMA", d.status)

        def unmap_dma() -> None:
            x = E.Nvos47(hClient=p.root, hDevice=self.device, hDma=self.virtmem, hMemory=handle, dmaOffset=va, size=size)
            p.d.ioctl(p.ctl, E.NV_ESC_RM_UNMAP_MEMORY_DMA, x, f"unmap {what} DMA")
            P.check_status(f"unmap {what} DMA", x.status)

        undo.push(f"unmap DMA {what}", unmap_dma)
        m = E.UvmMapExternalAllocationParams(base=va, length=size, offset=0, gpuAttributesCount=1, rmCtrlFd=p.ctl, hClient=p.root, hMemory=handle)
        ctypes.memmove(m.perGpuAttributes[0].gpuUuid, self.uuid, 16)
        m.perGpuAttributes[0].gpuMappingType = E.UVM_GPU_MAPPING_TYPE_READ_WRITE_ATOMIC
        p.uvm(p.uvm_fd, E.UVM_MAP_EXTERNAL_ALLOCATION, m, f"UVM map {what}")

    def _cpu_map(self, undo: Undo, handle: int, va: int, size: int, *, sysmem: bool, what: str) -> int:
        """RM_MAP_MEMORY on a fresh fd, then mmap that fd at ``va`` (0: anywhere; write-combined for VRAM).  The address."""
        p = self.p
        fd = p.d.open_ctl() if sysmem else self.open_gpu_fd()
        undo.push(f"close map fd of {what}", lambda: p.d.close(fd))
        flags = 0 if sysmem else E.field(*E.NVOS33_FLAGS_CACHING_TYPE, E.NVOS33_FLAGS_CACHING_TYPE_WRITECOMBINED)
        arg = E.Nvos33WithFd(params=E.Nvos33(hClient=p.root, hDevice=self.device, hMemory=handle, offset=0, length=size, flags=flags), fd=fd)
        p.d.ioctl(p.ctl, E.NV_ESC_RM_MAP_MEMORY, arg, f"map {what} to the CPU")
        P.check_status(f"map {what} to the CPU", arg.params.status)
        linear = int(arg.params.pLinearAddress)

        def unmap_rm() -> None:
            x = E.Nvos34(hClient=p.root, hDevice=self.device, hMemory=handle, pLinearAddress=linear)
            p.d.ioctl(p.ctl, E.NV_ESC_RM_UNMAP_MEMORY, x, f"unmap {what} from the CPU")
            P.check_status(f"unmap {what} from the CPU", x.status)

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
            phys = E.NVOS32_ATTR_PHYSICALITY_CONTIGUOUS if contiguous else E.NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS
            params = E.NvMemoryAllocationParams(
                owner=p.root, type=E.NVOS32_TYPE_IMAGE, flags=E.VRAM_ALLOC_FLAGS, format=E.VRAM_FORMAT,
                attr=E.field(*E.NVOS32_ATTR_PHYSICALITY, phys) | E.field(*E.NVOS32_ATTR_PAGE_SIZE, E.NVOS32_ATTR_PAGE_SIZE_HUGE),
                attr2=(E.field(*E.NVOS32_ATTR2_ZBC, E.NVOS32_ATTR2_ZBC_PREFER_NO_ZBC)
                       | E.field(*E.NVOS32_ATTR2_GPU_CACHEABLE, E.NVOS32_ATTR2_GPU_CACHEABLE_YES)
                       | E.field(*E.NVOS32_ATTR2_PAGE_SIZE_HUGE, E.NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB)),
                size=size, alignment=PAGE_2M)  # fmt: skip
            h = p.alloc_undo(undo, self.device, E.NV1_MEMORY_USER, params, f"VRAM {what}")
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
            params = E.NvMemoryAllocationParams(
                owner=p.root, type=E.NVOS32_TYPE_IMAGE, format=E.VRAM_FORMAT,
                flags=(E.NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT | E.NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE
                       | E.NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED | E.NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED),
                attr=(E.field(*E.NVOS32_ATTR_LOCATION, E.NVOS32_ATTR_LOCATION_PCI)
                      | E.field(*E.NVOS32_ATTR_PHYSICALITY, E.NVOS32_ATTR_PHYSICALITY_NONCONTIGUOUS)
                      | E.field(*E.NVOS32_ATTR_PAGE_SIZE, E.NVOS32_ATTR_PAGE_SIZE_4KB)
                      | E.field(*E.NVOS32_ATTR_COHERENCY, E.NVOS32_ATTR_COHERENCY_UNCACHED)),
                attr2=(E.field(*E.NVOS32_ATTR2_ZBC, E.NVOS32_ATTR2_ZBC_PREFER_NO_ZBC)
                       | E.field(*E.NVOS32_ATTR2_GPU_CACHEABLE, E.NVOS32_ATTR2_GPU_CACHEABLE_NO)),
                size=size, alignment=PAGE_4K)  # fmt: skip
            h = p.alloc_undo(undo, self.device, E.NV01_MEMORY_SYSTEM, params, f"sysmem {what}")
            mem = Mem(what, h, 0, size, False, undo)
            if cpu:
                try:
                    sub = Undo()
                    mem.va = self._cpu_map(sub, h, 0, size, sysmem=True, what=what)
                    mem.cpu = True
                    undo.steps.extend(sub.steps)
                except (P.RmError, P.DriverError):
                    sub.unwind()  # not mapped: the notifier is then not read (the caller says so)
        except BaseException:
            undo.unwind()
            raise
        return mem

    def host(self, what: str, size: int) -> Mem:
        """Host memory: anonymous shared pages at a chosen address, made an RM OS descriptor, GPU-mapped there."""
        p, undo = self.p, Undo()
        try:
            size = round_up(size, PAGE_4K)
            va = self._va(undo, size, PAGE_4K)
            p.d.mmap(va, size, PROT_RW, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED)
            undo.push(f"munmap host {what}", lambda: _rereserve(p.d, va, size))
            ctypes.memset(va, 0, size)
            flags = (E.field(*E.NVOS02_FLAGS_PHYSICALITY, E.NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS)
                     | E.field(*E.NVOS02_FLAGS_LOCATION, E.NVOS02_FLAGS_LOCATION_PCI)
                     | E.field(*E.NVOS02_FLAGS_COHERENCY, E.NVOS02_FLAGS_COHERENCY_CACHED)
                     | E.field(*E.NVOS02_FLAGS_MAPPING, E.NVOS02_FLAGS_MAPPING_NO_MAP))  # fmt: skip
            arg = E.Nvos02WithFd(params=E.Nvos02(hRoot=p.root, hObjectParent=self.device, hObjectNew=p.os_desc_handle(),
                                                 hClass=E.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, flags=flags, pMemory=va, limit=size - 1), fd=-1)  # fmt: skip
            p.d.ioctl(self.gpu_fd, E.NV_ESC_RM_ALLOC_MEMORY, arg, f"OS descriptor {what}")
            P.check_status(f"OS descriptor {what}", arg.params.status)
            h = int(arg.params.hObjectNew)
            dev = self.device
            undo.push(f"free OS descriptor {what}", lambda: p.free(dev, h, f"free OS descriptor {what}"))
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
        file system that tracks dirty pages since Linux 6.5, a lack of memory) is ``P.PinRefused``: it
        would be refused again.  A lack of the RM's memory or of GPU addresses is ``RmError``."""
        p, undo = self.p, Undo()
        start = address - address % PAGE_4K
        n = round_up(address + size, PAGE_4K) - start
        try:
            flags = (E.field(*E.NVOS02_FLAGS_PHYSICALITY, E.NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS)
                     | E.field(*E.NVOS02_FLAGS_LOCATION, E.NVOS02_FLAGS_LOCATION_PCI)
                     | E.field(*E.NVOS02_FLAGS_COHERENCY, E.NVOS02_FLAGS_COHERENCY_CACHED)
                     | E.field(*E.NVOS02_FLAGS_MAPPING, E.NVOS02_FLAGS_MAPPING_NO_MAP))  # fmt: skip
            arg = E.Nvos02WithFd(params=E.Nvos02(hRoot=p.root, hObjectParent=self.device, hObjectNew=p.os_desc_handle(),
                                                 hClass=E.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, flags=flags, pMemory=start, limit=n - 1), fd=-1)  # fmt: skip
            p.d.ioctl(self.gpu_fd, E.NV_ESC_RM_ALLOC_MEMORY, arg, f"OS descriptor {what}")
            if arg.params.status:
                raise P.PinRefused(
                    f"the kernel driver will not pin the {n // PAGE_4K} page(s) at {start:#x} for the GPU "
                    f"({P.status_name(arg.params.status)}): pages not mapped or not writable, a shared mapping of a file "
                    "on a file system that tracks dirty pages (ext4, xfs: Linux 6.5 and later refuse those), or no memory to pin"
                )
            h = int(arg.params.hObjectNew)
            dev = self.device
            undo.push(f"free OS descriptor {what}", lambda: p.free(dev, h, f"free OS descriptor {what}"))
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
            arg = E.AllocOsEvent(hClient=p.root, hDevice=self.device, fd=ev)
            p.d.ioctl(ev, E.NV_ESC_ALLOC_OS_EVENT, arg, "alloc OS event")
            P.check_status("alloc OS event", arg.Status)

            def free_os_event() -> None:
                f = E.FreeOsEvent(hClient=p.root, hDevice=self.device, fd=ev)
                p.d.ioctl(ev, E.NV_ESC_FREE_OS_EVENT, f, "free OS event")
                P.check_status("free OS event", f.Status)

            undo.push("free OS event", free_os_event)
            notify = E.NV2080_NOTIFIERS_FIFO_EVENT_MTHD | E.NV01_EVENT_NONSTALL_INTR | E.NV01_EVENT_WITHOUT_EVENT_DATA | E.NV01_EVENT_SUBDEVICE_SPECIFIC
            p.alloc_undo(undo, self.subdevice, E.NV01_EVENT_OS_EVENT,
                         E.Nv0005AllocParameters(hParentClient=p.root, hSrcResource=self.subdevice, hClass=E.NV01_EVENT_OS_EVENT, notifyIndex=notify, data=ev),
                         "OS event object")  # fmt: skip
        except BaseException:
            undo.unwind_to(mark)
            p.d.close(ev)
            raise
        return ev


#: RC error codes (the Xid of the kernel log) a channel's error notifier may hold: those a kernel causes.
XID = {
    13: "graphics engine exception (a kernel trapped, or an illegal instruction or a misaligned address)",
    31: "MMU fault: a kernel touched an illegal address (unmapped, or without the access it needed)",
    43: "the GPU stopped processing the channel",
    45: "the channel was torn down (preemptive cleanup after an earlier error)",
    109: "context switch timeout (the work held the GPU too long)",
}


class Gpfifo:
    """One GPFIFO channel of a group: error notifier, ring + USERD, engine object, work-submit token, UVM registration.

    The compute and the copy channel are made alike; the undo steps go to
    ``undo`` (the group's), so the group frees each in reverse order."""

    def __init__(self, gpu: Gpu, tsg: int, ctxshare: int, engine_cls: int, what: str, undo: Undo) -> None:
        g, p, u = gpu, gpu.p, undo
        self.what = what
        pre = "" if what == "compute" else f"{what} "
        self.notifier = g.sysmem_uncached(f"{pre}notifier", NOTIFIER_BYTES, cpu=True)
        notifier = self.notifier
        u.push(f"free {pre}notifier", lambda: _raise_failures(notifier.free()))
        self.ring = g.vram(f"{pre}gpfifo", GPFIFO_ENTRIES * 8 + E.USERD_BYTES, contiguous=True)
        ring = self.ring
        u.push(f"free {pre}gpfifo", lambda: _raise_failures(ring.free()))
        self.entries = GPFIFO_ENTRIES
        self.userd_offset = GPFIFO_ENTRIES * 8
        cp = E.NvChannelAllocParams(hObjectError=self.notifier.handle, hObjectBuffer=self.ring.handle, gpFifoOffset=self.ring.va,
                                    gpFifoEntries=GPFIFO_ENTRIES, hContextShare=ctxshare)  # fmt: skip
        cp.hUserdMemory[0] = self.ring.handle
        cp.userdOffset[0] = self.userd_offset
        self.channel = ch = p.alloc_undo(u, tsg, g.gpfifo_cls, cp, f"{pre}channel")
        self.engine = p.alloc_undo(u, ch, engine_cls, None, f"{what} object")
        t = E.WorkSubmitTokenParams()
        p.control(ch, E.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, t, f"{pre}work submit token")
        self.token = int(t.workSubmitToken)
        va = p.va
        assert va is not None
        base = va.alloc(CHANNEL_UVM_BYTES, PAGE_2M)
        u.push(f"free {pre}channel VA range", lambda: va.free(base))
        r = E.UvmRegisterChannelParams(rmCtrlFd=p.ctl, hClient=p.root, hChannel=ch, base=base, length=CHANNEL_UVM_BYTES)
        ctypes.memmove(r.gpuUuid, g.uuid, 16)
        p.uvm(p.uvm_fd, E.UVM_REGISTER_CHANNEL, r, f"UVM_REGISTER_CHANNEL ({what})")

        def unregister() -> None:
            x = E.UvmUnregisterChannelParams(hClient=p.root, hChannel=ch)
            ctypes.memmove(x.gpuUuid, g.uuid, 16)
            p.uvm(p.uvm_fd, E.UVM_UNREGISTER_CHANNEL, x, f"UVM_UNREGISTER_CHANNEL ({what})")

        u.push(f"UVM unregister {pre}channel", unregister)
        self.notifier_base = b""
        self.note_base()

    def note_base(self) -> None:
        """What the notifier holds before any error: a change from it is the channel's error."""
        self.notifier_base = ctypes.string_at(self.notifier.va, 16) if self.notifier.cpu else b""

    def error(self) -> str | None:
        """The channel's error as the RM wrote it into the notifier (NvNotification 0), or None.

        ``info32`` is the RC error code, which is the Xid the kernel log shows (an illegal
        address in a kernel: Xid 31, an MMU fault, on the H200)."""
        if not self.notifier.cpu:
            return None
        now = ctypes.string_at(self.notifier.va, 16)
        if now == self.notifier_base:
            return None
        ts, info32, info16, status = int.from_bytes(now[0:8], "little"), int.from_bytes(now[8:12], "little"), int.from_bytes(now[12:14], "little"), int.from_bytes(now[14:16], "little")
        what = XID.get(info32, "see NVIDIA's Xid catalogue")
        return f"the RM ended the {self.what} channel with Xid {info32}: {what} (error notifier info16={info16:#x} status={status:#x}, GPU time {ts})"


class Channel:
    """A channel group (GRAPHICS) with its context share, a compute GPFIFO channel and, with ``copy``, a copy one, then its schedule.

    The copy channel sits in the compute channel's group and context share:
    both are made and registered with UVM before the group is scheduled once
    (scheduling the group first, then adding a channel, fails).  Its
    engine object (``gpu.copy_cls``, HOPPER_DMA_COPY_A on the H200) is bound
    to subchannel 4 by the channel's first pushbuffer.  The compute channel's
    parts are also this object's attributes (``ring``, ``token``, ...)."""

    def __init__(self, gpu: Gpu, *, copy: bool = False) -> None:
        self.gpu = gpu
        self.undo = Undo()
        self.copy: Gpfifo | None = None
        try:
            self._make(copy)
        except BaseException:
            self.undo.unwind()
            raise

    def _make(self, copy: bool) -> None:
        g, p, u = self.gpu, self.gpu.p, self.undo
        self.tsg = p.alloc_undo(u, g.device, E.KEPLER_CHANNEL_GROUP_A, E.NvChannelGroupAllocationParameters(engineType=E.NV2080_ENGINE_TYPE_GRAPHICS), "channel group")
        self.ctxshare = p.alloc_undo(u, self.tsg, E.FERMI_CONTEXT_SHARE_A,
                                     E.NvCtxshareAllocationParameters(hVASpace=g.vaspace, flags=E.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC), "context share")  # fmt: skip
        self.fifo = f = Gpfifo(g, self.tsg, self.ctxshare, g.compute_cls, "compute", u)
        self.notifier, self.ring, self.entries, self.userd_offset = f.notifier, f.ring, f.entries, f.userd_offset
        self.channel, self.compute, self.token = f.channel, f.engine, f.token
        if copy:
            if g.copy_cls is None:
                raise OpenError(f"GPU {g.bus} offers no copy engine class arig knows ({', '.join(hex(c) for c in E.COPY_CLASSES)})")
            self.copy = Gpfifo(g, self.tsg, self.ctxshare, g.copy_cls, "copy", u)
        p.control(self.tsg, E.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, E.GpfifoScheduleParams(bEnable=1), "schedule channel group")
        for x in self.fifos():
            x.note_base()

    def fifos(self) -> list[Gpfifo]:
        return [self.fifo] if self.copy is None else [self.fifo, self.copy]

    def error(self) -> str | None:
        """The first error the RM wrote into a notifier of the group's channels, or None."""
        for x in self.fifos():
            err = x.error()
            if err is not None:
                return err
        return None

    def free(self) -> list[str]:
        return self.undo.unwind()


def _raise_failures(failures: list[str]) -> None:
    if failures:
        raise P.DriverError("; ".join(failures))
