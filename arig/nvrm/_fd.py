"""The kernel driver's files as one object, :data:`driver`: every open, ioctl, mmap and UVM call of arig.nvrm.

Everything :mod:`arig.nvrm._rm` asks of ``/dev/nvidiactl``, ``/dev/nvidiaN``
and ``/dev/nvidia-uvm`` goes through the :class:`Driver` held in
:data:`driver`; nothing else in the package opens, ioctls or maps a driver
file.  So a test stands in for the whole kernel driver by swapping that one
object for a subclass that overrides the primitives (:meth:`Driver.open_file`,
:meth:`~Driver.close`, :meth:`~Driver.ioctl`, :meth:`~Driver.uvm_ioctl`,
:meth:`~Driver.mmap`, :meth:`~Driver.munmap`, :meth:`~Driver.proc_version`);
the RM calls built on them (:meth:`~Driver.rm_alloc`, :meth:`~Driver.rm_control`,
:meth:`~Driver.rm_free`, :meth:`~Driver.uvm`) are then the fake's too.

What it sends is built by :mod:`arig.nvrm._params` and
:mod:`arig.nvrm._exec_params`; every failure leaves it as an
:class:`~arig.nvrm._params.DriverError` (the kernel refused) or an
:class:`~arig.nvrm._params.RmError` (the RM refused), never a bare OSError.

Threads: any but the event loop's, since every call blocks in the kernel.
``fcntl.ioctl`` releases the GIL around the system call and the driver
serializes what needs serializing itself, so calls may run from many threads
at once as long as each passes its own buffers.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno as _errno
import fcntl
import mmap as _mmap
import os

from arig.nvrm import _params

__all__ = ["Driver", "driver", "open_file", "close", "ioctl", "rm_alloc", "rm_control", "rm_free",
           "PROT_NONE", "PROT_READ", "PROT_RW", "MAP_SHARED", "MAP_PRIVATE", "MAP_FIXED", "MAP_ANONYMOUS",
           "MAP_NORESERVE", "MAP_FIXED_NOREPLACE"]

_Buffer = ctypes.Structure | ctypes.Array  # type: ignore[type-arg]

PROT_NONE, PROT_READ, PROT_RW = 0, _mmap.PROT_READ, _mmap.PROT_READ | _mmap.PROT_WRITE
MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS = 0x01, 0x02, 0x10, 0x20
MAP_NORESERVE, MAP_FIXED_NOREPLACE = 0x4000, 0x100000

# Python's mmap module maps only anywhere; the driver's memory must lie at chosen addresses.
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_MAP_FAILED = ctypes.c_void_p(-1).value

PROC_VERSION = "/proc/driver/nvidia/version"


#: Where Linux lists the machine's PCI functions (``arig.nvrm._sysfs`` reads the GPUs there).
PCI_ROOT = "/sys/bus/pci"


class Driver:
    """The NVIDIA kernel driver's files under ``dev_root``, and the calls on them; the PCI tree
    under ``pci_root`` that says which GPUs there are (read by ``arig.nvrm._sysfs``).

    One object for everything the NV stack reaches of the machine, so that a fake replaces
    exactly this one."""

    def __init__(self, dev_root: str = "/dev", pci_root: str = PCI_ROOT) -> None:
        self.dev_root = dev_root
        self.pci_root = pci_root

    # -- primitives: what a fake driver overrides ---------------------------------------
    def open_file(self, path: str) -> int:
        """Open a driver file read-write, close-on-exec (blocking: poll on it must wait), or raise DriverError.

        The message names the file, since "no such file" for /dev/nvidiactl
        means the driver is not loaded, which is the usual cause.
        """
        try:
            return os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except OSError as e:
            hint = " (is the NVIDIA kernel driver loaded?)" if e.errno == _errno.ENOENT else ""
            raise _params.DriverError(f"cannot open {path}: {e.strerror}{hint}", e.errno) from e

    def close(self, fd: int) -> None:
        """Close ``fd``, ignoring a failure: nothing useful can follow one."""
        try:
            os.close(fd)
        except OSError:
            pass

    def ioctl(self, fd: int, nr: int, arg: _Buffer, what: str) -> None:
        """Send RM escape ``nr`` with ``arg`` in place; OSError becomes DriverError.

        A payload over the 14-bit size field goes through NV_ESC_IOCTL_XFER_CMD,
        which carries the real number, size and a pointer to ``arg``.
        """
        size = ctypes.sizeof(arg)
        try:
            if size <= _params.MAX_IOCTL_SIZE:
                fcntl.ioctl(fd, _params.iowr(nr, size), arg, True)
            else:
                xfer = _params.XferCmd(cmd=nr, size=size, ptr=ctypes.addressof(arg))
                fcntl.ioctl(fd, _params.iowr(_params.NV_ESC_IOCTL_XFER_CMD, ctypes.sizeof(xfer)), xfer, True)
        except OSError as e:
            raise _params.DriverError(f"{what}: the kernel driver failed the ioctl: {e.strerror}", e.errno) from e

    def uvm_ioctl(self, fd: int, nr: int, params: _Buffer, what: str) -> None:
        """Send UVM ioctl ``nr`` (a plain number: UVM's carry no size) with ``params`` in place."""
        try:
            fcntl.ioctl(fd, nr, params, True)
        except OSError as e:
            raise _params.DriverError(f"{what}: uvm ioctl {nr} failed: {e.strerror}", e.errno) from e

    def mmap(self, addr: int, size: int, prot: int, flags: int, fd: int = -1) -> int:
        """libc mmap at ``addr`` (0: anywhere); the address, which is ``addr`` where one was asked."""
        got = _libc.mmap(addr, size, prot, flags, fd, 0)
        if got in (None, _MAP_FAILED):
            err = ctypes.get_errno()
            raise _params.DriverError(f"mmap({addr:#x}, {size:#x}): {os.strerror(err)}", err)
        if addr and got != addr:
            _libc.munmap(got, size)
            raise _params.DriverError(f"mmap gave {got:#x}, not the asked {addr:#x}")
        return int(got)

    def munmap(self, addr: int, size: int) -> None:
        if _libc.munmap(addr, size) != 0:
            err = ctypes.get_errno()
            raise _params.DriverError(f"munmap({addr:#x}, {size:#x}): {os.strerror(err)}", err)

    def proc_version(self) -> str:
        """The driver's /proc version text, or "" where it cannot be read."""
        try:
            with open(PROC_VERSION, encoding="ascii", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    # -- built on them ----------------------------------------------------------------
    def open_ctl(self) -> int:
        return self.open_file(os.path.join(self.dev_root, "nvidiactl"))

    def open_gpu(self, minor: int) -> int:
        return self.open_file(os.path.join(self.dev_root, f"nvidia{minor}"))

    def open_uvm(self) -> int:
        return self.open_file(os.path.join(self.dev_root, "nvidia-uvm"))

    def rm_alloc(self, ctl: int, client: int, parent: int, cls: int, params: _Buffer | None, what: str) -> int:
        """Make an RM object of class ``cls`` under ``parent``; its handle.

        The handle is left for the RM to pick (0), so the process's handles
        never clash with those other libraries in the process pick.
        """
        arg = _params.Nvos21(hRoot=client, hObjectParent=parent, hClass=cls)
        if params is not None:
            arg.pAllocParms = ctypes.addressof(params)
            arg.paramsSize = ctypes.sizeof(params)
        self.ioctl(ctl, _params.NV_ESC_RM_ALLOC, arg, what)
        _params.check_status(what, arg.status)
        return int(arg.hObjectNew)

    def rm_control(self, ctl: int, client: int, obj: int, cmd: int, params: _Buffer, what: str = "") -> None:
        """Run control ``cmd`` on ``obj``, filling ``params`` in place."""
        what = what or f"RM control 0x{cmd:08X}"
        arg = _params.Nvos54(hClient=client, hObject=obj, cmd=cmd, params=ctypes.addressof(params), paramsSize=ctypes.sizeof(params))
        self.ioctl(ctl, _params.NV_ESC_RM_CONTROL, arg, what)
        _params.check_status(what, arg.status)

    def rm_free(self, ctl: int, client: int, parent: int, obj: int, what: str = "RM free") -> None:
        """Free an RM object and everything under it."""
        arg = _params.Nvos00(hRoot=client, hObjectParent=parent, hObjectOld=obj)
        self.ioctl(ctl, _params.NV_ESC_RM_FREE, arg, what)
        _params.check_status(what, arg.status)

    def uvm(self, fd: int, nr: int, params: _Buffer, what: str) -> None:
        """A UVM ioctl whose status (``rmStatus``) is the RM's: a refusal is RmError."""
        self.uvm_ioctl(fd, nr, params, what)
        _params.check_status(what, params.rmStatus)  # type: ignore[union-attr]


#: The driver every call of arig.nvrm goes through; a fake driver replaces this one object.
driver = Driver()


def open_file(path: str) -> int:
    return driver.open_file(path)


def close(fd: int) -> None:
    driver.close(fd)


def ioctl(fd: int, nr: int, arg: _Buffer, what: str) -> None:
    driver.ioctl(fd, nr, arg, what)


def rm_alloc(ctl: int, client: int, parent: int, cls: int, params: _Buffer | None, what: str) -> int:
    return driver.rm_alloc(ctl, client, parent, cls, params, what)


def rm_control(ctl: int, client: int, obj: int, cmd: int, params: _Buffer) -> None:
    driver.rm_control(ctl, client, obj, cmd, params)


def rm_free(ctl: int, client: int, parent: int, obj: int) -> None:
    """:meth:`Driver.rm_free`, its errors swallowed: for the way out of a failure, whose first error is the one to report."""
    try:
        driver.rm_free(ctl, client, parent, obj)
    except (_params.DriverError, _params.RmError):
        pass
