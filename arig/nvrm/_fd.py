"""The thin shell of the kernel-driver path: open, ioctl, close.

This is the only module that touches a file descriptor.  Everything it sends
is built by :mod:`arig.nvrm._params`, and every failure leaves it as an
:class:`~arig.nvrm._params.DriverError` (the kernel refused) or an
:class:`~arig.nvrm._params.RmError` (the RM refused), never a bare OSError.

``fcntl.ioctl`` releases the GIL around the system call, and the driver
serializes what needs serializing itself, so the calls here may run from many
threads at once as long as each passes its own buffers.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import fcntl
import os

from arig.nvrm import _params as P

__all__ = ["open_file", "close", "ioctl", "rm_alloc", "rm_control", "rm_free"]

_Buffer = ctypes.Structure | ctypes.Array  # type: ignore[type-arg]


def open_file(path: str) -> int:
    """Open a driver file read-write, close-on-exec, or raise DriverError.

    The message names the file, since "no such file" for /dev/nvidiactl
    means the driver is not loaded, which is the usual cause.
    """
    try:
        return os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        hint = " (is the NVIDIA kernel driver loaded?)" if e.errno == _errno.ENOENT else ""
        raise P.DriverError(f"cannot open {path}: {e.strerror}{hint}", e.errno) from e


def close(fd: int) -> None:
    """Close ``fd``, ignoring a failure: nothing useful can follow one."""
    try:
        os.close(fd)
    except OSError:
        pass


def ioctl(fd: int, nr: int, arg: _Buffer, what: str) -> None:
    """Send escape ``nr`` with ``arg`` in place; OSError becomes DriverError.

    A payload over the 14-bit size field goes through NV_ESC_IOCTL_XFER_CMD,
    which carries the real number, size and a pointer to ``arg``.
    """
    size = ctypes.sizeof(arg)
    try:
        if size <= P.MAX_IOCTL_SIZE:
            fcntl.ioctl(fd, P.iowr(nr, size), arg, True)
        else:
            xfer = P.XferCmd(cmd=nr, size=size, ptr=ctypes.addressof(arg))
            fcntl.ioctl(fd, P.iowr(P.NV_ESC_IOCTL_XFER_CMD, ctypes.sizeof(xfer)), xfer, True)
    except OSError as e:
        raise P.DriverError(f"{what}: the kernel driver failed the ioctl: {e.strerror}",
                          e.errno) from e


def rm_alloc(ctl: int, client: int, parent: int, cls: int,
             params: _Buffer | None, what: str) -> int:
    """Make an RM object of class ``cls`` under ``parent``; its handle.

    The handle is left for the RM to pick (0), so the process's handles
    never clash with those other libraries in the process pick.
    """
    arg = P.Nvos21(hRoot=client, hObjectParent=parent, hClass=cls)
    if params is not None:
        arg.pAllocParms = ctypes.addressof(params)
        arg.paramsSize = ctypes.sizeof(params)
    ioctl(ctl, P.NV_ESC_RM_ALLOC, arg, what)
    P.check_status(what, arg.status)
    return int(arg.hObjectNew)


def rm_control(ctl: int, client: int, obj: int, cmd: int, params: _Buffer) -> None:
    """Run control ``cmd`` on ``obj``, filling ``params`` in place."""
    what = f"RM control 0x{cmd:08X}"
    arg = P.Nvos54(hClient=client, hObject=obj, cmd=cmd,
                   params=ctypes.addressof(params), paramsSize=ctypes.sizeof(params))
    ioctl(ctl, P.NV_ESC_RM_CONTROL, arg, what)
    P.check_status(what, arg.status)


def rm_free(ctl: int, client: int, parent: int, obj: int) -> None:
    """Free an RM object (and everything under it); errors are swallowed.

    Freeing happens only on the way out of a failure, where the first error
    is the one worth reporting.
    """
    arg = P.Nvos00(hRoot=client, hObjectParent=parent, hObjectOld=obj)
    try:
        ioctl(ctl, P.NV_ESC_RM_FREE, arg, "RM free")
    except P.DriverError:
        pass

