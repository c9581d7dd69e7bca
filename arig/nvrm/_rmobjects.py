"""The RM objects of the process (:class:`Process`: the control file, root client, UVM files, address
reservation) and of a GPU (:class:`Gpu`: its file, device, subdevice and, for devices, the rest).

:mod:`arig.nvrm._rm` holds the process's one :class:`Process` and says why
each lifetime is what it is.  Every call blocks in the driver: never on the
event loop; ``Process.lock`` makes first use from many threads make one of each.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any

from .._errors import OpenError
from . import _exec_params
from . import _fd
from . import _params
from ._fd import MAP_ANONYMOUS, MAP_FIXED_NOREPLACE, MAP_NORESERVE, MAP_PRIVATE, MAP_SHARED, PROT_NONE, PROT_RW
from ._rmmem import GpuMemory
from ._undo import Undo, VaAllocator, _made_or_undone, _unmapper

__all__ = ["Process", "Gpu", "ACCEPTED_RELEASES", "RESERVATIONS", "VAMODE"]

ACCEPTED_RELEASES = ("580",)  # the branches whose layouts _params and _exec_params carry
#: Where memory lies at one address for the CPU and the GPU: 384 GiB up to 2**40 (below which GPFIFO
#: segments and QMDs must lie), else the first free of three 1 GiB regions.
RESERVATIONS = ((0x60_0000_0000, 0x100_0000_0000 - 0x60_0000_0000), (0x10_0000_0000, 1 << 30), (0x18_0000_0000, 1 << 30), (0x30_0000_0000, 1 << 30))
#: The device's VA space (from the second page to just under 2**49: the GPU's 49-bit addresses) and virtual memory limit.
VASPACE_BASE, VASPACE_SIZE = 0x1000, 0x1FFFFFB000000
VIRTMEM_LIMIT = 0x1FFFFFFFFFFFF
#: Client-chosen handles of OS descriptors (RM_ALLOC_MEMORY with MEMORY_HANDLE_PROVIDED), counted up from here.
OS_DESC_HANDLE = 0xA7160001
#: NV0080 vaMode NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES: the device holds the VA spaces its
#: users make.  The device makes its own (FERMI_VASPACE_A) and its channels and UVM registrations are verified
#: with this mode; reading usage and facts needs no VA space, so one device object serves both.
VAMODE = 0


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
        if _params.release_major(self.release) not in ACCEPTED_RELEASES:
            accepted = ", ".join(f"{r}.x" for r in ACCEPTED_RELEASES)
            raise _params.DriverError(f"the NVIDIA kernel driver is release {self.release}; arig.nvrm accepts {accepted}")
        root = self.d.rm_alloc(self.ctl, 0, 0, _exec_params.NV01_ROOT_CLIENT, None, "root client")
        self.root = root
        self.undo.push("free root client", lambda: self.free(root, root, "free root client"))

    def open_devices(self) -> None:
        """UVM and the CPU=GPU address reservation: what a device needs, made once."""
        u = self.undo
        self.uvm_fd = self.open_undo(u, "uvm fd", self.d.open_uvm)
        self.uvm_fd2 = self.open_undo(u, "uvm fd 2", self.d.open_uvm)
        self.uvm(self.uvm_fd, _exec_params.UVM_INITIALIZE, _exec_params.UvmInitializeParams(flags=0), "UVM_INITIALIZE")
        try:  # CUDA's own open gets an error here too and goes on: so does arig
            self.uvm(self.uvm_fd2, _exec_params.UVM_MM_INITIALIZE, _exec_params.UvmMmInitializeParams(uvmFd=self.uvm_fd), "UVM_MM_INITIALIZE")
        except (_params.RmError, _params.DriverError):
            pass
        errors = []
        for base, size in RESERVATIONS:
            try:
                self.d.mmap(base, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE)
            except _params.DriverError as e:
                errors.append(f"{base:#x}+{size:#x}: {e}")
                continue
            u.push("munmap VA reservation", _unmapper(self.d, base, size))
            self.va = VaAllocator(base, size)
            return
        raise _params.DriverError("cannot reserve the CPU=GPU address region: " + "; ".join(errors))

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
                _made_or_undone(g.undo, g.open_device)
                g.ready = True
            return g


def _driver_release(d: _fd.Driver, ctl: int) -> str:
    """The driver's version string: asked of the driver, else read from its /proc file."""
    query = _params.VersionStr(cmd=_params.VERSION_QUERY)
    try:
        d.ioctl(ctl, _params.NV_ESC_CHECK_VERSION_STR, query, "driver version")
        found = str(query.versionString.decode("ascii", "replace")).strip()
        if found:
            return found
    except _params.DriverError:
        pass
    found = _params.release_from_proc(d.proc_version()) or ""
    if not found:
        raise _params.DriverError("cannot tell the NVIDIA kernel driver's release "
                            f"(neither the version query nor {_fd.PROC_VERSION} answered)")
    return found


class Gpu(GpuMemory):
    """One GPU's RM objects, made once for the process (never freed: the process keeps them)."""

    p: Process

    def __init__(self, proc: Process, bus: str) -> None:
        self.p = proc
        self.bus = bus
        self.undo = Undo()
        self.ready = False  # whether it has everything a device needs (Process.gpu)
        self.owner: str | None = None  # the device open on this GPU (one at a time)
        self.facts: dict[str, Any] = {}

    # -- the GPU's objects: card info .. subdevice, then (for devices) UUID .. VA space --------------
    def open_rm(self) -> None:
        """Card info, its /dev/nvidiaN, the RM device and subdevice: what reading the GPU needs."""
        p, u = self.p, self.undo
        cards = _params.CardInfoArray()
        p.d.ioctl(p.ctl, _params.NV_ESC_CARD_INFO, cards, "card info")
        card = next((c for c in cards if c.valid and _params.bus_name(c.pci_info) == self.bus.lower()), None)
        if card is None:
            raise _params.DriverError(f"the NVIDIA kernel driver does not hold GPU {self.bus} (is it bound to another driver?)")
        self.minor, self.gpu_id = int(card.minor_number), int(card.gpu_id)
        self.gpu_fd = self.open_gpu_fd(u, "gpu fd")
        info = _params.IdInfoV2(gpuId=self.gpu_id)
        p.control(p.root, _params.CTRL_GPU_GET_ID_INFO_V2, info, "GPU id info")
        self.device = p.alloc_undo(u, p.root, _exec_params.NV01_DEVICE_0, _params.Nv0080Alloc(deviceId=info.deviceInstance, hClientShare=p.root, vaMode=VAMODE), "device")
        self.subdevice = p.alloc_undo(u, self.device, _exec_params.NV20_SUBDEVICE_0, _params.Nv2080Alloc(subDeviceId=0), "subdevice")

    def open_device(self) -> None:
        """UUID, classes, UVM registration, virtual memory, usermode doorbell, VA space: what a device needs."""
        p, u = self.p, self.undo
        g = _exec_params.GidInfoBinary(flags=_exec_params.GID_FLAGS_BINARY_SHA1)
        p.control(self.subdevice, _exec_params.NV2080_CTRL_CMD_GPU_GET_GID_INFO, g, "GPU UUID (binary)")
        self.uuid = g.uuid()
        self._pick_classes()
        r = _exec_params.UvmRegisterGpuParams(rmCtrlFd=-1)
        ctypes.memmove(r.gpu_uuid, self.uuid, 16)
        p.uvm(p.uvm_fd, _exec_params.UVM_REGISTER_GPU, r, "UVM_REGISTER_GPU")

        def unregister_gpu() -> None:
            x = _exec_params.UvmUnregisterGpuParams()
            ctypes.memmove(x.gpu_uuid, self.uuid, 16)
            p.uvm(p.uvm_fd, _exec_params.UVM_UNREGISTER_GPU, x, "UVM_UNREGISTER_GPU")

        u.push("UVM unregister GPU", unregister_gpu)
        self.virtmem = p.alloc_undo(u, self.device, _exec_params.NV01_MEMORY_VIRTUAL, _exec_params.NvMemoryVirtualAllocationParams(limit=VIRTMEM_LIMIT), "virtual memory object")
        self._map_usermode()
        vp = _exec_params.NvVaspaceAllocationParameters(
            vaBase=VASPACE_BASE, vaSize=VASPACE_SIZE,
            flags=_exec_params.NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING | _exec_params.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED)  # fmt: skip
        self.vaspace = p.alloc_undo(u, self.device, _exec_params.FERMI_VASPACE_A, vp, "VA space")
        rv = _exec_params.UvmRegisterGpuVaspaceParams(rmCtrlFd=p.ctl, hClient=p.root, hVaSpace=self.vaspace)
        ctypes.memmove(rv.gpuUuid, self.uuid, 16)
        p.uvm(p.uvm_fd, _exec_params.UVM_REGISTER_GPU_VASPACE, rv, "UVM_REGISTER_GPU_VASPACE")

        def unregister_vaspace() -> None:
            x = _exec_params.UvmUnregisterGpuVaspaceParams()
            ctypes.memmove(x.gpuUuid, self.uuid, 16)
            p.uvm(p.uvm_fd, _exec_params.UVM_UNREGISTER_GPU_VASPACE, x, "UVM_UNREGISTER_GPU_VASPACE")

        u.push("UVM unregister VA space", unregister_vaspace)
        self.facts = {**self.read_facts(), "driver": p.release}

    def _pick_classes(self) -> None:
        cl = _exec_params.ClassListV2()
        self.p.control(self.device, _exec_params.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, cl, "class list")
        have = set(cl.classes())

        def pick(prefs: tuple[int, ...], what: str) -> int:
            for c in prefs:
                if c in have:
                    return c
            raise OpenError(f"GPU {self.bus} offers no {what} class arig knows ({', '.join(hex(c) for c in prefs)})")

        self.usermode_cls = pick(_exec_params.USERMODE_CLASSES, "usermode")
        self.gpfifo_cls = pick(_exec_params.GPFIFO_CLASSES, "GPFIFO")
        self.compute_cls = pick(_exec_params.COMPUTE_CLASSES, "compute")
        self.copy_cls = next((c for c in _exec_params.COPY_CLASSES if c in have), None)

    def _map_usermode(self) -> None:
        """The usermode object's page (the doorbell a channel's work-submit token is written to), mapped to the CPU."""
        p, u = self.p, self.undo
        h = p.alloc_undo(u, self.subdevice, self.usermode_cls, None, "usermode")
        fd = self.open_gpu_fd(u, "usermode fd")
        arg = _exec_params.Nvos33WithFd(params=_exec_params.Nvos33(hClient=p.root, hDevice=self.device, hMemory=h, offset=0, length=_exec_params.USERMODE_MAP_BYTES, flags=0), fd=fd)
        p.d.ioctl(p.ctl, _exec_params.NV_ESC_RM_MAP_MEMORY, arg, "map usermode")
        _params.check_status("map usermode", arg.params.status)
        linear = int(arg.params.pLinearAddress)

        def unmap_usermode() -> None:
            x = _exec_params.Nvos34(hClient=p.root, hDevice=self.device, hMemory=h, pLinearAddress=linear)
            p.d.ioctl(p.ctl, _exec_params.NV_ESC_RM_UNMAP_MEMORY, x, "unmap usermode")
            _params.check_status("unmap usermode", x.status)

        u.push("RM unmap usermode", unmap_usermode)
        self.doorbell = p.d.mmap(0, _exec_params.USERMODE_MAP_BYTES, PROT_RW, MAP_SHARED, fd)
        u.push("munmap usermode", _unmapper(p.d, self.doorbell, _exec_params.USERMODE_MAP_BYTES))

    def read_facts(self) -> dict[str, Any]:
        """The GPU's lasting facts, as :func:`arig.nvrm.describe` gives them."""
        p = self.p
        name, arch, gid, dog = _params.NameString(), _params.ArchInfo(), _params.GidInfo(), _params.WatchdogInfo()
        gid.flags = _params.GID_FLAGS_ASCII
        for what, cmd, params in (("GPU name", _params.CTRL_GPU_GET_NAME_STRING, name), ("GPU arch", _params.CTRL_MC_GET_ARCH_INFO, arch),
                                  ("GPU UUID", _params.CTRL_GPU_GET_GID_INFO, gid), ("watchdog info", _params.CTRL_RC_GET_WATCHDOG_INFO, dog)):
            p.control(self.subdevice, cmd, params, what)
        fb = _params.FbInfoV2.asking([_params.FB_RAM_SIZE, _params.FB_BAR1_SIZE])
        p.control(self.subdevice, _params.CTRL_FB_GET_INFO_V2, fb, "FB info")
        sizes = _params.fb_values(fb)
        chip, sm = _params.arch_of(arch.architecture, arch.implementation)
        running = bool(dog.watchdogStatusFlags & _params.WATCHDOG_RUNNING)
        return {
            "name": name.text(), "arch": sm, "chip": chip, "uuid": gid.text(), "bus": self.bus,
            "memory_total": sizes.get(_params.FB_RAM_SIZE, 0) * 1024, "bar1_size": sizes.get(_params.FB_BAR1_SIZE, 0) * 1024,
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
            p.d.ioctl(fd, _exec_params.NV_ESC_REGISTER_FD, _params.RegisterFd(ctl_fd=p.ctl), "register fd")
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
