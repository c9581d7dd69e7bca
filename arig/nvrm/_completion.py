"""The native core under an NV device: the loop side the CUDA device also uses, with NV queues as lanes.

The core releases each burst's last value into the queue's timeline word
(the GPU's semaphore release, with its GPU time), watches the words, and
when its bounded spin gives up submits a NON_STALL_INTERRUPT after the
value, which wakes the driver's event fd that the device reads on the loop
(:meth:`NvCompletion.deliver`): the driver's event ends every wait the
watch does not.

Threads: as :mod:`arig._native.completion` says.
"""

from __future__ import annotations

from typing import Any

from .. import _native
from .._native.completion import IDLE_SPIN_NS, NativeCompletion
from . import _faults
from ._queue import NvQueue

__all__ = ["NvCompletion"]


class NvCompletion(NativeCompletion):
    """The native core of an NV device (see the module docstring)."""

    def __init__(self, owner: Any, queues: list[NvQueue], spin_us: int) -> None:
        ptrs = [q.ptr for q in queues]

        def make(efd: int) -> _native.Core:
            words = [q.timeline_address for q in queues]
            return _native.Core(None, 0, ptrs, words, [0] * len(ptrs), True, efd, spin_ns=spin_us * 1000, idle_ns=IDLE_SPIN_NS if spin_us else 0)

        self._start(owner, len(queues), True, make, join=False)

    @property
    def description(self) -> str:
        return "native core: GPU-released timeline words (with GPU time), bounded spin, NON_STALL_INTERRUPT backstop on the driver's event fd"

    def _release_time(self, lane: int) -> int:
        """The GPU's time of the lane's last release (the native thread has not looked yet)."""
        core = self.core
        return core.gpu_time(lane) if core is not None else 0

    def _error(self, code: int, lane: int, v: int) -> BaseException:
        where = f"the {'copy' if lane else 'compute'} queue of {self._owner.name}, value {v} or earlier"
        return _faults.fault_error(code, where, self._owner.channel_error())
