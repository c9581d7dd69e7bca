"""Queues: the ordered lanes of a device that fills enqueue work on."""

from __future__ import annotations

from typing import Any

__all__ = ["Queue"]


class Queue:
    """One queue of a device: ``dev.queues[k]``.

    ``handle`` is what the queue's fills receive as their ``queue``: the
    CUstream as an int on a CUDA device, the host queue object on the host
    device.  Work of one queue runs in submit order; queues of one device
    run independently, and a device value is reached once every work up to
    it has completed on every queue.
    """

    __slots__ = ("device", "index", "handle")

    def __init__(self, device: str, index: int, handle: Any) -> None:
        self.device = device
        self.index = index
        self.handle = handle

    def __repr__(self) -> str:
        return f"<arig.Queue {self.device}[{self.index}]>"
