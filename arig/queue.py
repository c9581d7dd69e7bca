"""Queues: the ordered lanes of a device that fills enqueue work on."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

__all__ = ["Queue", "AdoptedQueue"]


class Queue:
    """One queue of a device: ``dev.queues[k]``.

    ``handle`` is what the queue's fills receive as their ``queue``: the
    CUstream as an int on a CUDA device, the host queue object on the host
    device.  Work of one queue runs in submit order; queues of one device
    run independently, and a device value is reached once every work up to
    it has completed on every queue.

    A CUDA device's queues speak cuda.core's stream protocol
    (``__cuda_stream__``), so other libraries can launch on them, e.g.
    ``torch.cuda.ExternalStream(q.handle)`` or ``cupy.cuda.ExternalStream(q.handle)``.
    """

    __slots__ = ("device", "index", "handle")

    def __init__(self, device: str, index: int, handle: Any) -> None:
        self.device = device
        self.index = index
        self.handle = handle

    @property
    def __cuda_stream__(self) -> Callable[[], tuple[int, int]]:
        """``q.__cuda_stream__()`` is ``(0, CUstream)`` (protocol version 0); absent on non-CUDA queues."""
        h = self.handle
        if type(h) is not int:
            raise AttributeError("__cuda_stream__")  # hasattr() is how consumers ask
        return lambda: (0, h)

    def __repr__(self) -> str:
        return f"<arig.Queue {self.device}[{self.index}]>"


class AdoptedQueue(Queue):
    """A queue made by ``dev.adopt(stream)`` from a stream another library owns.

    ``handle`` is that stream.  A submission on it runs its fill with that
    stream, then makes the device's join lane (``index``) wait for everything
    the stream had been given (an event recorded on it), and signals the
    value on the join lane: the user's stream itself gets no arig work but
    the event record.  ``source`` (the stream object) stays referenced while
    the device is open; ``slot`` holds the join event, made on first use by
    the thread that enqueues.
    """

    __slots__ = ("source", "slot")

    def __init__(self, device: str, index: int, handle: int, source: Any) -> None:
        super().__init__(device, index, handle)
        self.source = source
        self.slot = ctypes.c_void_p(0)

    def __repr__(self) -> str:
        return f"<arig.AdoptedQueue {self.device} stream 0x{self.handle:x}>"
