"""An NV device's driver event fd, and the loop's reads of the device's memory that it starts.

Why one object: the fd is made on the submit thread at open, watched on the
loop, and may be closed only once the loop no longer watches it (a closed
number can be reused by the next open file under the loop's selector); and
before the submit thread frees the words the loop reads (the timeline
words, the error notifier), the loop must have stopped reading them.  Both
ends of that lifetime cross the two threads, so they are written once here.

The fd merges wakes and carries no identity: the words are the only truth.
``nvidia_poll`` clears the driver's pending flag on every poll, so the fd
is registered once (:meth:`DriverEvents.watch`) and the words are read in the
callback, after the selector's poll re-armed it.

The loop is never handed the driver's fd itself, but an epoll fd of this
object's that holds it: ``nvidia_poll`` registers a poller only on a file
without ``O_NONBLOCK``, and some loops set that flag on every fd they are given
(uvloop's libuv does, in ``uv_poll_init``), after which the interrupt wakes no
one and a completion is seen only when something else looks.  The fd stays
blocking here, inside an epoll set that no loop can change.

Threads: ``watch``, ``detach`` and the callbacks on the loop; ``quiesce``
and ``close`` on the submit thread (``quiesce`` posts to the loop, through
its port, and waits for it, bounded).
"""

from __future__ import annotations

import select
import threading
from collections.abc import Callable

from .._port import LoopPort, port_of
from .._running import running_loop
from . import _fd, _rm

__all__ = ["DriverEvents", "QUIESCE_S"]

#: How long close waits for the loop to stop reading the device's memory before freeing it.
QUIESCE_S = 2.0


class DriverEvents:
    """The driver's event fd of one device (``gpu.os_event``), which this object closes, once.

    ``stop_reads()`` (loop thread) stops every other read of the device's memory
    the loop makes (the native core's loop side)."""

    def __init__(self, gpu: _rm.Gpu, undo: _rm.Undo, stop_reads: Callable[[], None]) -> None:
        self.fd = gpu.os_event(undo)
        self._stop_reads = stop_reads
        self._port: LoopPort | None = None
        self._watched = False
        self._epoll: select.epoll | None = None  # the loop's fd: holds self.fd (see the module docstring)
        self._closing = False
        self._quiet = threading.Event()
        self._fd_lock = threading.Lock()  # the fd is closed once, by whichever thread comes first

    # -- loop thread ---------------------------------------------------------------------
    def watch(self, on_wake: Callable[[], None]) -> None:
        self._port = port_of(running_loop())
        ep = self._epoll = select.epoll()
        try:
            ep.register(self.fd, select.EPOLLIN)  # level-triggered: a wake is never lost between two looks

            def ready() -> None:
                ep.poll(0)  # the driver's flag is clear again before the words are read
                on_wake()

            self._port.add_reader(ep.fileno(), ready)
        except BaseException:
            self._epoll = None
            ep.close()
            raise
        self._watched = True

    @property
    def loop_fd(self) -> int:
        """The fd the loop reads (-1 while not watched): an epoll set holding the driver's fd."""
        return self._epoll.fileno() if self._epoll is not None else -1

    def _unwatch(self) -> None:
        self._stop_reads()
        if self._watched and self._port is not None and self._epoll is not None:
            self._port.remove_reader(self._epoll.fileno())
            self._epoll.close()  # before the driver's fd closes: the loop's number is never reused under it
            self._epoll = None
            self._watched = False

    def _quiesce(self) -> None:
        self._unwatch()
        self._quiet.set()

    def detach(self) -> None:
        """The loop reads nothing of the device any more; once the device is closed, the fd goes too."""
        self._unwatch()
        if self._closing:
            self._close_fd()  # after the reader is gone: the number is never reused under the loop

    # -- the submit thread ----------------------------------------------------------------
    def quiesce(self) -> None:
        """Make sure the loop reads none of the device's memory (bounded wait: a loop that does not run reads nothing)."""
        port = self._port
        if port is None or port.closed or not port.running():
            return
        port.post(self._quiesce)
        self._quiet.wait(QUIESCE_S)

    def close(self) -> None:
        """At close or a failed open: close the fd now if the loop does not watch it, else once ``detach`` ran."""
        self._closing = True
        if not self._watched or self._port is None or self._port.closed:
            self._close_fd()
        else:
            self._port.post(self.detach)  # a device never stopped is closed without Device.stop's detach

    def _close_fd(self) -> None:
        """The fd's one close (``_rm.Gpu.os_event`` leaves it to the device), through the driver seam."""
        with self._fd_lock:
            fd, self.fd = self.fd, -1
        if fd >= 0:
            _fd.close(fd)
