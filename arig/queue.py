"""Queues: the ordered lanes of a device that fills enqueue work on.

Driver-neutral: a backend whose queues speak more (another library's
stream protocol, a driver's own objects) makes them of a subclass of
:class:`Queue` (``Backend.queue_type``) or of :class:`AdoptedQueue` (its
``adopt``), kept in that backend's package.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Queue", "AdoptedQueue"]


class Queue:
    """One queue of a device: ``dev.queues[k]``, lane ``k`` of its timeline.

    ``handle`` is what the queue's fills receive as their ``queue``: the
    driver's own queue (each device's documentation says what it is).  Work
    of one queue runs in submit order; queues of one device run
    independently, and a device value is reached once every work up to it
    has completed on every queue.
    """

    __slots__ = ("device", "index", "handle")

    def __init__(self, device: str, index: int, handle: Any) -> None:
        self.device = device
        self.index = index
        self.handle = handle

    def __repr__(self) -> str:
        return f"<arig.Queue {self.device}[{self.index}]>"


class AdoptedQueue(Queue):
    """A queue made by ``dev.adopt(stream)`` from a stream another library owns.

    ``handle`` is that stream's handle; ``index`` the lane of the device's
    timeline that the values of its submissions are signalled on.  A
    submission runs its fill with that stream, then orders the device's
    value after everything the stream had been given (how is the device's).
    ``source`` (the stream object) stays referenced while the device is open.
    """

    __slots__ = ("source",)

    def __init__(self, device: str, index: int, handle: int, source: Any) -> None:
        super().__init__(device, index, handle)
        self.source = source

    def __repr__(self) -> str:
        return f"<arig.AdoptedQueue {self.device} stream 0x{self.handle:x}>"
