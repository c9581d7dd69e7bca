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

import ctypes
import os
import threading

from .._errors import OpenError
from . import _fd
from . import _exec_params
from . import _params
from ._fd import MAP_ANONYMOUS, MAP_FIXED, MAP_FIXED_NOREPLACE, MAP_NORESERVE, MAP_PRIVATE, MAP_SHARED, PROT_NONE, PROT_READ, PROT_RW
from ._rmobjects import ACCEPTED_RELEASES, RESERVATIONS, VAMODE, Gpu, Process
from ._undo import MIB, PAGE_2M, PAGE_4K, Mem, Undo, VaAllocator, _made_or_undone, round_up

__all__ = ["Undo", "VaAllocator", "Process", "Gpu", "Mem", "Gpfifo", "Channel", "process", "client", "reset",
           "read_usage", "read_facts", "round_up", "ACCEPTED_RELEASES", "RESERVATIONS", "VAMODE", "PAGE_2M", "PAGE_4K",
           "GPFIFO_ENTRIES", "PROT_NONE", "PROT_READ", "PROT_RW", "MAP_SHARED", "MAP_PRIVATE", "MAP_FIXED",
           "MAP_ANONYMOUS", "MAP_NORESERVE", "MAP_FIXED_NOREPLACE"]

GPFIFO_ENTRIES = 0x10000
CHANNEL_UVM_BYTES = 64 * MIB  # UVM_REGISTER_CHANNEL's reserved range
NOTIFIER_BYTES = 2 * MIB


def _mmap(addr: int, size: int, prot: int, flags: int, fd: int = -1) -> int:
    """:meth:`arig.nvrm._fd.Driver.mmap` of the process's driver."""
    return _fd.driver.mmap(addr, size, prot, flags, fd)


def _munmap(addr: int, size: int) -> None:
    _fd.driver.munmap(addr, size)


_lock = threading.Lock()
_process: Process | None = None  # the client of the driver in _fd.driver
_aside: list[Process] = []  # clients of other drivers, kept while another is in _fd.driver


def _current() -> Process:
    """The process's client (``_lock`` held), made on first use; a failure is undone and retried next call.

    A client belongs to the driver it was made through: while another driver
    is the process's (a fake one, for a test), that client is set aside, and
    it is the process's again once its driver is."""
    global _process
    if _process is not None and _process.d is _fd.driver:
        return _process
    if _process is not None:
        _aside.append(_process)
        _process = None
    back = next((q for q in _aside if q.d is _fd.driver), None)
    if back is not None:
        _aside.remove(back)
    else:
        back = Process()
        _made_or_undone(back.undo, back.open_client)
    _process = back
    return back


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
            _made_or_undone(p.undo, p.open_devices)
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
    inherited = [*_aside, *([_process] if _process is not None else [])]
    _process = None
    _aside.clear()
    for q in inherited:
        for fd in q.files:
            q.d.close(fd)
        q.files.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def read_usage(bus: str, window: float) -> _params.Usage:
    """The usage of the GPU at ``bus`` (the caller has checked it is active)."""
    p = client()
    gpu = p.rm_gpu(bus)
    fb = _params.FbInfoV2.asking([_params.FB_RAM_SIZE, _params.FB_HEAP_FREE])
    p.control(gpu.subdevice, _params.CTRL_FB_GET_INFO_V2, fb, "FB info")
    util: _params.UtilSamplesV2 | None = _params.UtilSamplesV2.asking()
    try:
        p.control(gpu.subdevice, _params.CTRL_PERF_UTIL_SAMPLES_V2, util, "utilization samples")
    except _params.RmError as e:
        if e.status_name != "NV_ERR_NOT_SUPPORTED":
            raise
        util = None  # this GPU's RM takes no samples: busy is None
    return _params.usage_of(fb, util, window)


def read_facts(bus: str) -> dict[str, object]:
    """The lasting facts of the GPU at ``bus``."""
    return client().rm_gpu(bus).read_facts()


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
        self.ring = g.vram(f"{pre}gpfifo", GPFIFO_ENTRIES * 8 + _exec_params.USERD_BYTES, contiguous=True)
        ring = self.ring
        u.push(f"free {pre}gpfifo", lambda: _raise_failures(ring.free()))
        self.entries = GPFIFO_ENTRIES
        self.userd_offset = GPFIFO_ENTRIES * 8
        cp = _exec_params.NvChannelAllocParams(hObjectError=self.notifier.handle, hObjectBuffer=self.ring.handle, gpFifoOffset=self.ring.va,
                                    gpFifoEntries=GPFIFO_ENTRIES, hContextShare=ctxshare)  # fmt: skip
        cp.hUserdMemory[0] = self.ring.handle
        cp.userdOffset[0] = self.userd_offset
        self.channel = ch = p.alloc_undo(u, tsg, g.gpfifo_cls, cp, f"{pre}channel")
        self.engine = p.alloc_undo(u, ch, engine_cls, None, f"{what} object")
        t = _exec_params.WorkSubmitTokenParams()
        p.control(ch, _exec_params.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, t, f"{pre}work submit token")
        self.token = int(t.workSubmitToken)
        va = p.va
        assert va is not None
        base = va.alloc(CHANNEL_UVM_BYTES, PAGE_2M)
        u.push(f"free {pre}channel VA range", lambda: va.free(base))
        r = _exec_params.UvmRegisterChannelParams(rmCtrlFd=p.ctl, hClient=p.root, hChannel=ch, base=base, length=CHANNEL_UVM_BYTES)
        ctypes.memmove(r.gpuUuid, g.uuid, 16)
        p.uvm(p.uvm_fd, _exec_params.UVM_REGISTER_CHANNEL, r, f"UVM_REGISTER_CHANNEL ({what})")

        def unregister() -> None:
            x = _exec_params.UvmUnregisterChannelParams(hClient=p.root, hChannel=ch)
            ctypes.memmove(x.gpuUuid, g.uuid, 16)
            p.uvm(p.uvm_fd, _exec_params.UVM_UNREGISTER_CHANNEL, x, f"UVM_UNREGISTER_CHANNEL ({what})")

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
        self.tsg = p.alloc_undo(u, g.device, _exec_params.KEPLER_CHANNEL_GROUP_A, _exec_params.NvChannelGroupAllocationParameters(engineType=_exec_params.NV2080_ENGINE_TYPE_GRAPHICS), "channel group")
        self.ctxshare = p.alloc_undo(u, self.tsg, _exec_params.FERMI_CONTEXT_SHARE_A,
                                     _exec_params.NvCtxshareAllocationParameters(hVASpace=g.vaspace, flags=_exec_params.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC), "context share")  # fmt: skip
        self.fifo = f = Gpfifo(g, self.tsg, self.ctxshare, g.compute_cls, "compute", u)
        self.notifier, self.ring, self.entries, self.userd_offset = f.notifier, f.ring, f.entries, f.userd_offset
        self.channel, self.compute, self.token = f.channel, f.engine, f.token
        if copy:
            if g.copy_cls is None:
                raise OpenError(f"GPU {g.bus} offers no copy engine class arig knows ({', '.join(hex(c) for c in _exec_params.COPY_CLASSES)})")
            self.copy = Gpfifo(g, self.tsg, self.ctxshare, g.copy_cls, "copy", u)
        p.control(self.tsg, _exec_params.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, _exec_params.GpfifoScheduleParams(bEnable=1), "schedule channel group")
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
        raise _params.DriverError("; ".join(failures))
