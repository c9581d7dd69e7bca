"""arig: an asyncio-native GPU device runtime.

``await arig.open(opener)`` makes a device; ``await dev.submit(fill, arg)``
hands it work and returns the work's timeline value; ``await dev.wait(v)``
returns once that work has completed.  See the README for the concepts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import host
from ._errors import (
    ArigError,
    ArigKeyError,
    ArigTypeError,
    ArigValueError,
    DeviceHang,
    DeviceLost,
    DeviceStopped,
    FillError,
    OpenError,
    WrongLoopError,
)
from ._fill import Fill
from ._loop import new_event_loop
from ._memory import Buffer, Image
from .device import Device, open
from .queue import Queue

if TYPE_CHECKING:  # imported lazily at run time: see __getattr__
    from . import cuda, cuda_abi, nvrm

__all__ = [
    "ArigError",
    "ArigKeyError",
    "ArigTypeError",
    "ArigValueError",
    "Buffer",
    "Device",
    "DeviceHang",
    "DeviceLost",
    "DeviceStopped",
    "Fill",
    "FillError",
    "Image",
    "OpenError",
    "Queue",
    "WrongLoopError",
    "cuda",
    "cuda_abi",
    "host",
    "nvrm",
    "new_event_loop",
    "open",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # The GPU paths import lazily: `import arig` works on any machine, and
    # loads neither libcuda nor the kernel driver until asked.
    if name in ("cuda", "cuda_abi", "nvrm"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'arig' has no attribute {name!r}")
