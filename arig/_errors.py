"""arig's one exception tree.

Every error arig raises on purpose descends from :class:`ArigError`.  Misuse
errors also inherit the matching built-in, so ``except ValueError`` keeps
working for callers that do not know arig.
"""

from __future__ import annotations

__all__ = [
    "ArigError",
    "OpenError",
    "DeviceLost",
    "DeviceStopped",
    "DeviceHang",
    "ArigValueError",
    "ArigTypeError",
    "FillError",
]


class ArigError(Exception):
    """Root of every error arig raises on purpose."""


class OpenError(ArigError):
    """An opener could not make its device; the message says why."""


class DeviceStopped(ArigError):
    """The device was stopped: it takes no more work."""


class DeviceLost(ArigError):
    """The device failed and takes no more work.

    Every pending and later wait and every later submit raises this, with the
    failure that lost the device chained as ``__cause__`` and named in the
    message.  The same failure is kept in ``Device.lost``.
    """

    def __init__(self, device: str, cause: BaseException) -> None:
        super().__init__(f"device {device} lost: {type(cause).__name__}: {cause}")
        self.device = device
        self.__cause__ = cause

    @property
    def cause(self) -> BaseException:
        assert self.__cause__ is not None
        return self.__cause__


class DeviceHang(ArigError):
    """Work was pending and the device made no progress for ``hang_ms``."""


class ArigValueError(ArigError, ValueError):
    """Bad input: a value out of range or of the wrong shape."""


class ArigTypeError(ArigError, TypeError):
    """Bad input: an object of the wrong type."""


class FillError(ArigError):
    """A fill returned a nonzero code: the device is lost with this as cause."""

    def __init__(self, code: int, detail: str = "") -> None:
        self.code = code
        super().__init__(f"fill returned {code}" + (f" ({detail})" if detail else ""))
