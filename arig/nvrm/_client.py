"""The process's client of the NVIDIA kernel driver, and the GPUs' RM objects.

The first call that needs the driver opens ``/dev/nvidiactl``, checks the
driver's release and makes the RM's root client.  The first call about a GPU
opens its ``/dev/nvidiaN`` and makes the GPU's RM device and subdevice.  All
of it stays for the process and is shared by every caller and thread, so
repeated reads cost only their ioctls and leak nothing.

Keeping ``/dev/nvidiaN`` open matters beyond reuse: the RM lets a process
make a GPU's device object only while the process holds that file open, and
the driver keeps the GPU initialized while it is open, as persistence mode
does.  Unbinding the GPU or unloading the driver waits for the process.

After a fork the child cannot use the parent's RM client (the RM ties a
client to the process that made it), so the child forgets it and makes its
own on first use.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from arig.nvrm import _fd
from arig.nvrm import _params as P

__all__ = ["DEV_ROOT", "ACCEPTED_RELEASES", "Client", "Gpu", "client", "reset",
           "read_usage", "read_facts"]

DEV_ROOT = "/dev"
PROC_VERSION = "/proc/driver/nvidia/version"
ACCEPTED_RELEASES = ("580",)  # the branches whose layouts _params carries


@dataclass(frozen=True)
class Gpu:
    """One GPU's objects in the RM, made once for the process."""

    bus: str
    minor: int
    gpu_id: int
    fd: int
    device: int
    subdevice: int


class Client:
    """The control file, the RM root client and the GPUs made under it."""

    def __init__(self, ctl: int, root: int, release: str) -> None:
        self.ctl = ctl
        self.root = root
        self.release = release
        self._gpus: dict[str, Gpu] = {}
        self._lock = threading.Lock()

    def control(self, obj: int, cmd: int, params: Any) -> None:
        """Run RM control ``cmd`` on ``obj``; ``params`` is filled in place."""
        _fd.rm_control(self.ctl, self.root, obj, cmd, params)

    def gpu(self, bus: str) -> Gpu:
        """The objects of the GPU at ``bus``, made on first use."""
        found = self._gpus.get(bus)
        if found is not None:
            return found
        with self._lock:
            found = self._gpus.get(bus)
            if found is None:
                found = self._gpus[bus] = self._make_gpu(bus)
            return found

    def _card(self, bus: str) -> P.CardInfo:
        cards = P.CardInfoArray()
        _fd.ioctl(self.ctl, P.NV_ESC_CARD_INFO, cards, "card info")
        for card in cards:
            if card.valid and P.bus_name(card.pci_info) == bus.lower():
                return card
        raise P.DriverError(f"the NVIDIA kernel driver does not hold GPU {bus} "
                            "(is it bound to another driver?)")

    def _make_gpu(self, bus: str) -> Gpu:
        card = self._card(bus)
        fd = _fd.open_file(os.path.join(DEV_ROOT, f"nvidia{card.minor_number}"))
        try:
            # Makes later work on this file count as the client's; once per file.
            _fd.ioctl(fd, P.NV_ESC_REGISTER_FD, P.RegisterFd(ctl_fd=self.ctl),
                      f"register /dev/nvidia{card.minor_number}")
            info = P.IdInfoV2(gpuId=card.gpu_id)
            self.control(self.root, P.CTRL_GPU_GET_ID_INFO_V2, info)
            device = self._make_device(info.deviceInstance, bus)
            return Gpu(bus=bus, minor=int(card.minor_number), gpu_id=int(card.gpu_id),
                       fd=fd, device=device[0], subdevice=device[1])
        except BaseException:
            _fd.close(fd)
            raise

    def _make_device(self, instance: int, bus: str) -> tuple[int, int]:
        # Multiple VA spaces: the mode a later open that makes its own address
        # space needs, so these objects can be shared with it.
        params = P.Nv0080Alloc(deviceId=instance, hClientShare=self.root,
                               vaMode=P.VAMODE_MULTIPLE_VASPACES)
        device = _fd.rm_alloc(self.ctl, self.root, self.root, P.NV01_DEVICE_0, params,
                              f"make the RM device of GPU {bus}")
        try:
            subdevice = _fd.rm_alloc(self.ctl, self.root, device, P.NV20_SUBDEVICE_0,
                                     P.Nv2080Alloc(subDeviceId=0),
                                     f"make the RM subdevice of GPU {bus}")
        except BaseException:
            _fd.rm_free(self.ctl, self.root, self.root, device)
            raise
        return device, subdevice

    def close_files(self) -> None:
        """Close every file this client holds (the RM frees what was made)."""
        for gpu in self._gpus.values():
            _fd.close(gpu.fd)
        self._gpus.clear()
        _fd.close(self.ctl)


def _driver_release(ctl: int) -> str:
    """The driver's version string: asked of the driver, else read from /proc."""
    query = P.VersionStr(cmd=P.VERSION_QUERY)
    try:
        _fd.ioctl(ctl, P.NV_ESC_CHECK_VERSION_STR, query, "driver version query")
        found = str(query.versionString.decode("ascii", "replace")).strip()
        if found:
            return found
    except P.DriverError:
        pass
    try:
        with open(PROC_VERSION, encoding="ascii", errors="replace") as f:
            found = P.release_from_proc(f.read()) or ""
    except OSError:
        found = ""
    if not found:
        raise P.DriverError("cannot tell the NVIDIA kernel driver's release "
                            f"(neither the version query nor {PROC_VERSION} answered)")
    return found


def _check_release(release: str) -> None:
    if P.release_major(release) not in ACCEPTED_RELEASES:
        accepted = ", ".join(f"{r}.x" for r in ACCEPTED_RELEASES)
        raise P.DriverError(f"the NVIDIA kernel driver is release {release}; "
                            f"arig.nvrm accepts {accepted}")


def _open_client() -> Client:
    ctl = _fd.open_file(os.path.join(DEV_ROOT, "nvidiactl"))
    try:
        release = _driver_release(ctl)
        _check_release(release)
        root = _fd.rm_alloc(ctl, 0, 0, P.NV01_ROOT_CLIENT, None, "make the RM client")
    except BaseException:
        _fd.close(ctl)
        raise
    return Client(ctl, root, release)


_lock = threading.Lock()
_client: Client | None = None


def client() -> Client:
    """The process's client, made on first use; a failure is retried next call."""
    global _client
    found = _client
    if found is not None:
        return found
    with _lock:
        if _client is None:
            _client = _open_client()
        return _client


def reset() -> None:
    """Close and forget the process's client (for tests; the RM frees it all)."""
    global _client
    with _lock:
        if _client is not None:
            _client.close_files()
            _client = None


def _forget_in_child() -> None:
    # Another thread may have held the lock at the fork; the child gets a new
    # one.  Closing the inherited files only drops the child's references: the
    # driver frees nothing until the parent closes them too.
    global _client, _lock
    _lock = threading.Lock()
    inherited, _client = _client, None
    if inherited is not None:
        inherited.close_files()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def _kib_sizes(gpu: Gpu, c: Client) -> dict[int, int]:
    fb = P.FbInfoV2.asking([P.FB_RAM_SIZE, P.FB_BAR1_SIZE])
    c.control(gpu.subdevice, P.CTRL_FB_GET_INFO_V2, fb)
    return P.fb_values(fb)


def read_usage(bus: str, window: float) -> P.Usage:
    """The usage of the GPU at ``bus`` (the caller has checked it is active)."""
    c = client()
    gpu = c.gpu(bus)
    fb = P.FbInfoV2.asking([P.FB_RAM_SIZE, P.FB_HEAP_FREE])
    c.control(gpu.subdevice, P.CTRL_FB_GET_INFO_V2, fb)
    util: P.UtilSamplesV2 | None = P.UtilSamplesV2.asking()
    try:
        c.control(gpu.subdevice, P.CTRL_PERF_UTIL_SAMPLES_V2, util)
    except P.RmError as e:
        if e.status_name != "NV_ERR_NOT_SUPPORTED":
            raise
        util = None  # this GPU's RM takes no samples: busy is None
    return P.usage_of(fb, util, window)


def read_facts(bus: str) -> dict[str, object]:
    """The lasting facts of the GPU at ``bus``."""
    c = client()
    gpu = c.gpu(bus)
    name, arch, gid, dog = P.NameString(), P.ArchInfo(), P.GidInfo(), P.WatchdogInfo()
    gid.flags = P.GID_FLAGS_ASCII
    for cmd, params in ((P.CTRL_GPU_GET_NAME_STRING, name), (P.CTRL_MC_GET_ARCH_INFO, arch),
                        (P.CTRL_GPU_GET_GID_INFO, gid), (P.CTRL_RC_GET_WATCHDOG_INFO, dog)):
        c.control(gpu.subdevice, cmd, params)
    sizes = _kib_sizes(gpu, c)
    chip, sm = P.arch_of(arch.architecture, arch.implementation)
    running = bool(dog.watchdogStatusFlags & P.WATCHDOG_RUNNING)
    return {
        "name": name.text(), "arch": sm, "chip": chip, "uuid": gid.text(), "bus": bus,
        "memory_total": sizes.get(P.FB_RAM_SIZE, 0) * 1024,
        "bar1_size": sizes.get(P.FB_BAR1_SIZE, 0) * 1024,
        # The RM's watchdog ends work that holds the GPU too long; where it
        # does not run (no display), arig itself gives up after 30 s.
        "hang_ms": None if running else 30_000,
    }

