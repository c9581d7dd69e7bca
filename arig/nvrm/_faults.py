"""What the native core's NV failure codes mean as exceptions, and the channel's own error.

The core's NV functions return, and its fault word holds, one of a few
negative codes (``arig._native.NV_ERRORS`` says what each means).  Two places
meet them: a queue method a Python fill called (the code is raised into the
fill) and the fault the core found while it ran the device's work (the code
becomes the cause of the device's loss).  Both turn codes into exceptions
here, so one code always reads the same.

Pure: no driver call; any thread.
"""

from __future__ import annotations

from .. import _native
from .._errors import ArigError, ArigValueError, DeviceHang, DeviceStopped, FillError

__all__ = ["NvChannelError", "CHANNEL", "TIMEOUT", "HALTED", "call_error", "fault_error"]

#: The codes with an exception of their own (nv_channel.h's NVE_CHANNEL, NVE_TIMEOUT, NVE_HALTED).
CHANNEL, TIMEOUT, HALTED = -100, -101, -102


class NvChannelError(ArigError):
    """The RM reported an error of the device's channel (a fault the GPU's work made): the device is lost."""


def _meaning(code: int) -> str:
    return _native.NV_ERRORS.get(code, f"error {code}")


def call_error(code: int, what: str, channel_error: str | None) -> BaseException:
    """The exception of a queue call (``what``) that returned ``code``: raised into the fill that called it.

    ``channel_error`` is the channel's error notifier as read now (None: unchanged)."""
    if code == CHANNEL:
        return NvChannelError(channel_error or f"{what}: {_meaning(code)}")
    if code == TIMEOUT:
        return DeviceHang(f"{what}: {_meaning(code)}")
    if code == HALTED:
        return DeviceStopped(f"{what}: {_meaning(code)}")
    return ArigValueError(f"{what}: {_meaning(code)}")


def fault_error(code: int, where: str, channel_error: str | None) -> BaseException:
    """The cause of the device's loss when the core's fault word holds ``code`` for the work ``where`` names.

    A code the core does not define is a compiled fill's own result."""
    if code == CHANNEL:
        return NvChannelError(f"{channel_error or _meaning(code)} ({where})")
    if code == TIMEOUT:
        return DeviceHang(f"{where}: {_meaning(code)}")
    if code in _native.NV_ERRORS:
        return FillError(code, f"{where}: {_meaning(code)}")
    return FillError(code, f"C fill of {where} returned {code}")
