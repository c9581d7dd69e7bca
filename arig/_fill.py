"""The types of the work ``Device.submit`` and ``Device.run`` take, for type checkers.

``Fill`` is the shape of a Python fill, ``fill(queue, arg, v) -> int | None``:
called on the device's submit thread with the driver's queue (each device's
documentation says what it is: a ``HostQueue``, a ``CUstream``, an NV
queue), the submission's ``arg`` and its timeline value ``v``; it enqueues
work and returns ``None`` or ``0``, or a driver's error code.  A protocol, so
that any callable of that shape is one (a function, a lambda, an object with
``__call__``, a ctypes function pointer of prototype ``arig.cuda_abi.FILL``)
and ``mypy --strict`` refuses a fill of another shape at the ``submit`` call.

``Work`` is everything ``submit`` takes as its fill: a ``Fill``, a prepared
launch (``arig.cuda.Launch``, ``arig.nvrm.Launch``), a graph
(``arig.cuda_abi.Graph``, described here by its shape: the core names no
backend's classes), a C fill's integer address, or ``None`` (no work).  Only
types: nothing here runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeAlias

from ._launchspec import LaunchSpec

__all__ = ["Fill", "Work"]


class Fill(Protocol):
    """A Python fill: ``fill(queue, arg, v)`` enqueues the work of value ``v`` and returns
    ``None``, ``0`` or a driver's error code (see the module's docstring)."""

    def __call__(self, queue: Any, arg: Any, v: int, /) -> int | None: ...


class _Graph(Protocol):
    """``arig.cuda_abi.Graph``, by its shape."""

    @property
    def handle(self) -> int: ...

    @property
    def nodes(self) -> Sequence[int]: ...


Work: TypeAlias = Fill | LaunchSpec | _Graph | int | None
