"""The fake RM: driver files, objects by handle under their client and parent, the controls, OS events.

Threads: the library's callers, under ``_State._lock`` (held by the escape
dispatch in :class:`~arig.testing.fake_nvrm.FakeNvrm`).
"""

from __future__ import annotations

import ctypes
import errno
import os
import time
from typing import Any

from ...nvrm import _exec_params
from ...nvrm import _fd
from ...nvrm import _params
from ...nvrm import _push
from .state import _ENGINES, HOPPER_CLASSES, REAL, _Channel, _File, _Obj, _Refused, _State, _status

__all__ = ["Rm"]


class Rm(_State):
    """The RM's side of the fake: what ``open``, ``close`` and the RM escapes do."""

    # -- files -------------------------------------------------------------------------------
    def _open_file(self, path: str) -> int:
        self._record("open", path)
        dev = self.dev_root
        name = os.path.basename(path)
        kinds = {"nvidiactl": ("ctl", -1), "nvidia-uvm": ("uvm", -1), **{f"nvidia{i}": ("gpu", i) for i in range(len(self.buses))}}
        if os.path.dirname(path) != dev or name not in kinds:
            raise _params.DriverError(f"cannot open {path}: No such file or directory (is the NVIDIA kernel driver loaded?)", errno.ENOENT)
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
                    if o.cls == _exec_params.NV01_ROOT_CLIENT and o.fd == fd and h in self.objects:
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
            raise _params.DriverError(f"{what}: the kernel driver failed the ioctl: Invalid argument", errno.EINVAL)
        f.registered = int(arg.ctl_fd)

    def _memfd(self, o: _Obj, size: int, *, view: bool = False) -> None:
        o.size = size
        o.memfd = os.memfd_create(f"fake-nvrm-{o.handle:x}", os.MFD_CLOEXEC)
        os.ftruncate(o.memfd, size)
        if view:
            o.view = REAL.mmap(0, size, _fd.PROT_RW, _fd.MAP_SHARED, o.memfd)

    def _alloc(self, fd: int, f: _File, arg: Any, what: str) -> None:
        cls, client, parent = int(arg.hClass), int(arg.hRoot), int(arg.hObjectParent)
        params = int(arg.pAllocParms)
        status = 0
        try:
            if f.kind != "ctl":
                raise _Refused("INVALID_ARGUMENT")
            if cls == _exec_params.NV01_ROOT_CLIENT:
                arg.hObjectNew = self._new(cls, 0, 0, fd).handle
            else:
                self._obj(client, client, what)
                p = self._obj(client, parent, what)
                arg.hObjectNew = self._make(cls, p, client, fd, params, int(arg.paramsSize), what).handle
        except _Refused as e:
            self._violation(f"{what}: RM_ALLOC of class {cls:#x} refused: {_params.status_name(e.status)}")
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

        if cls == _exec_params.NV01_DEVICE_0:
            under(_exec_params.NV01_ROOT_CLIENT)
            d = self._params(_params.Nv0080Alloc, at, size, what)
            if not 0 <= d.deviceId < len(self.buses):
                raise _Refused("INVALID_ARGUMENT")
            o = self._new(cls, p.handle, client, fd)
            o.gpu = int(d.deviceId)
            return o
        if cls in (_exec_params.NV20_SUBDEVICE_0, _exec_params.NV01_MEMORY_VIRTUAL, _exec_params.FERMI_VASPACE_A, _exec_params.KEPLER_CHANNEL_GROUP_A):
            under(_exec_params.NV01_DEVICE_0)
        elif cls == _exec_params.FERMI_CONTEXT_SHARE_A:
            under(_exec_params.KEPLER_CHANNEL_GROUP_A)
        elif cls in _exec_params.USERMODE_CLASSES:
            under(_exec_params.NV20_SUBDEVICE_0)
            o = self._new(cls, p.handle, client, fd)
            self._memfd(o, _exec_params.USERMODE_MAP_BYTES, view=True)
            return o
        elif cls in (_exec_params.NV1_MEMORY_USER, _exec_params.NV01_MEMORY_SYSTEM):
            under(_exec_params.NV01_DEVICE_0)
            m = self._params(_exec_params.NvMemoryAllocationParams, at, size, what)
            if m.size <= 0 or (m.alignment and m.size % m.alignment):
                raise _Refused("INVALID_ARGUMENT")
            o = self._new(cls, p.handle, client, fd)
            self._memfd(o, int(m.size), view=cls == _exec_params.NV01_MEMORY_SYSTEM)
            return o
        elif cls in _exec_params.GPFIFO_CLASSES:
            under(_exec_params.KEPLER_CHANNEL_GROUP_A)
            return self._make_channel(cls, p, client, fd, self._params(_exec_params.NvChannelAllocParams, at, size, what), what)
        elif cls in _ENGINES:
            under(*_exec_params.GPFIFO_CLASSES)
        elif cls == _exec_params.NV01_EVENT_OS_EVENT:
            under(_exec_params.NV20_SUBDEVICE_0)
            ev = self._params(_exec_params.Nv0005AllocParameters, at, size, what)
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
        if err is None or err.cls != _exec_params.NV01_MEMORY_SYSTEM or buf is None or userd is None:
            self._violation(f"{what}: the channel's error notifier or GPFIFO memory is no memory object")
            raise _Refused("INVALID_OBJECT_BUFFER")
        ring, entries = int(cp.gpFifoOffset), int(cp.gpFifoEntries)
        userd_va = self._dma_va(userd.handle)
        if userd_va is None or not self._mapped(ring, entries * 8) or not self._mapped(userd_va + int(cp.userdOffset[0]), _exec_params.USERD_BYTES):
            self._violation(f"{what}: the GPFIFO ring or USERD is not GPU-mapped")
            raise _Refused("INVALID_ADDRESS")
        if ring >= _push.GPFIFO_ADDRESS_LIMIT or entries & (entries - 1):
            raise _Refused("INVALID_ARGUMENT")
        o = self._new(cls, tsg.handle, client, fd)
        o.channel = _Channel(o.handle, tsg.handle, self._gpu_of(tsg), ring, entries, userd_va + int(cp.userdOffset[0]), err.handle, next(self._tokens))
        return o

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
                self._violation(f"{what}: control {cmd:#x} refused: {_params.status_name(status)}")
        arg.status = status
        return []

    def _control_on(self, o: _Obj, cmd: int, at: int, size: int, what: str) -> None:
        def params(kind: Any, *on: int) -> Any:
            if o.cls not in on:
                self._violation(f"{what}: control {cmd:#x} on a {o.cls:#x}")
                raise _Refused("INVALID_OBJECT_HANDLE")
            return self._params(kind, at, size, what)

        if cmd == _params.CTRL_GPU_GET_ID_INFO_V2:
            p = params(_params.IdInfoV2, _exec_params.NV01_ROOT_CLIENT)
            ids = [0x600 + 0x100 * k for k in range(len(self.buses))]
            if p.gpuId not in ids:
                raise _Refused("INVALID_ARGUMENT")
            p.deviceInstance, p.subDeviceInstance = ids.index(p.gpuId), 0
        elif cmd == _params.CTRL_GPU_GET_NAME_STRING:
            p = params(_params.NameString, _exec_params.NV20_SUBDEVICE_0)
            text = self.name.encode()[:127]
            p.gpuNameString[: len(text)] = list(text)
        elif cmd == _params.CTRL_MC_GET_ARCH_INFO:
            p = params(_params.ArchInfo, _exec_params.NV20_SUBDEVICE_0)
            p.architecture, p.implementation = 0x180, 0
        elif cmd == _params.CTRL_GPU_GET_GID_INFO:
            p = params(_params.GidInfo, _exec_params.NV20_SUBDEVICE_0)
            uuid = self.uuids[self.objects[o.parent].gpu]  # o is a subdevice: its parent, the device, knows the GPU
            if p.flags == _exec_params.GID_FLAGS_BINARY_SHA1:
                raw = bytes.fromhex(uuid[4:].replace("-", ""))
            else:
                raw = uuid.encode() + b"\0"
            p.data[: len(raw)], p.length = list(raw), len(raw)
        elif cmd == _params.CTRL_RC_GET_WATCHDOG_INFO:
            params(_params.WatchdogInfo, _exec_params.NV20_SUBDEVICE_0).watchdogStatusFlags = self.watchdog
        elif cmd == _params.CTRL_FB_GET_INFO_V2:
            p = params(_params.FbInfoV2, _exec_params.NV20_SUBDEVICE_0)
            kib = {_params.FB_RAM_SIZE: self.memory_kib, _params.FB_HEAP_SIZE: self.memory_kib - (1 << 20),
                   _params.FB_HEAP_FREE: self.memory_kib - (1 << 20) - self._vram_kib(), _params.FB_BAR1_SIZE: 256 << 20}
            for k in range(min(p.fbInfoListSize, _params.FB_INFO_MAX)):
                p.fbInfoList[k].data = kib.get(p.fbInfoList[k].index, 0)
        elif cmd == _params.CTRL_PERF_UTIL_SAMPLES_V2:
            p = params(_params.UtilSamplesV2, _exec_params.NV20_SUBDEVICE_0)
            now = time.monotonic_ns()
            for k in range(10):
                p.samples[k].timeStamp = now - (10 - k) * 200_000_000
        elif cmd == _exec_params.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2:
            p = params(_exec_params.ClassListV2, _exec_params.NV01_DEVICE_0)
            p.numClasses = len(HOPPER_CLASSES)
            p.classList[: len(HOPPER_CLASSES)] = list(HOPPER_CLASSES)
        elif cmd == _exec_params.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN:
            p = params(_exec_params.WorkSubmitTokenParams, *_exec_params.GPFIFO_CLASSES)
            assert o.channel is not None
            p.workSubmitToken = o.channel.token
        elif cmd == _exec_params.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE:
            p = params(_exec_params.GpfifoScheduleParams, _exec_params.KEPLER_CHANNEL_GROUP_A)
            if p.bEnable:
                self._schedule(o)
        else:
            self._violation(f"{what}: unknown control {cmd:#x}")
            raise _Refused("NOT_SUPPORTED")

    def _vram_kib(self) -> int:
        return sum(o.size for o in self.objects.values() if o.cls == _exec_params.NV1_MEMORY_USER) >> 10

    def _alloc_os_event(self, fd: int, f: _File, arg: Any, what: str) -> None:
        if int(arg.fd) != fd or fd in self._os_events:
            self._violation(f"{what}: ALLOC_OS_EVENT of fd {int(arg.fd)} sent on fd {fd}")
            arg.Status = _status("INVALID_ARGUMENT")
            return
        mine = os.eventfd(0, os.EFD_CLOEXEC)  # blocking, as the driver's ctl file: see _interrupt
        os.dup2(mine, fd, inheritable=False)  # the device's fd is now the same pollable file
        self._os_events[fd] = mine
        f.kind = "event"
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
                if o.cls != _exec_params.NV1_MEMORY_USER:
                    raise _Refused("INVALID_OBJECT")
            arg.fd = os.memfd_create("fake-nvrm-dmabuf", os.MFD_CLOEXEC)
            arg.status = 0
        except _Refused as e:
            arg.status = e.status

