"""The pure-Python engine: one lane state machine, and one watcher loop, over declared lane operations.

A device on this engine (every host device; a CUDA device under
``ARIG_PURE=1`` or without the native core) runs its items on the Python
submit thread.  What to do when is decided here, once, for every device
kind; how one lane does a thing on its hardware is the kind's own, behind
the protocols below (the shape of the native core's ``struct lane_ops``):

* :class:`Lane`: ``note`` (progress after each item; ``notes`` says whether
  it does anything) and ``signal`` (have the lane report its value once its
  work so far has completed).  The host
  device's queues (``arig.host.HostQueue``) report from their own worker;
  a CUDA pure lane (``arig.cuda._completion``) is also a :class:`Watched`
  lane;
* :class:`Watched`: what a watcher thread needs of a lane whose completion
  nobody reports for it: ``thread_start``, ``wait`` (for the backstop's
  post, bounded), ``reached``, ``check_fault`` and ``halt``.

:class:`Bursts` runs on the submit thread: each item on its lane, a note
after it, and the last value of each lane signalled at the end of a burst:
when the queue went empty, after :data:`BURST` items, before a control and
at stop.  Signalling once per burst rather than per item keeps a stream of
small submissions from paying a host function (or a worker wake-up) each;
signalling whenever the submit thread has nothing else to do keeps a lone
submission's latency at one signal.

:class:`Watcher` runs one thread per :class:`Watched` lane: it waits for the
backstop's post with a timeout, reports any new value, and after a stretch
without progress while work is outstanding asks the lane for a fault (a
faulted stream never posts).

Threads: :class:`Bursts` is the submit thread's only; a :class:`Watcher` is
started and stopped by the submit thread or the loop (thread creation and a
bounded join), and its loop runs on its own thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

__all__ = ["BURST", "FAULT_POLL", "Bursts", "Lane", "Watched", "Watcher"]

#: Signal at least once per this many items, even while more are waiting: the loop hears of
#: a long stream of submissions as it goes, not only once the stream ends.
BURST = 32

#: Seconds a watcher waits for a post before it looks again, and without progress while work is
#: outstanding, before it asks the lane for a fault.
FAULT_POLL = 0.02


class Lane(Protocol):
    """One lane's operations for :class:`Bursts`; submit thread, each may raise to lose the device."""

    #: Does ``note`` do anything (host: only under a hang watchdog)?  Where no lane of a device
    #: notes, :class:`Bursts` calls none: an item then costs the submit thread one call less.
    notes: bool

    def note(self, v: int) -> None:
        """``v`` follows the lane's work so far: progress between signals (the hang watchdog's)."""

    def signal(self, v: int) -> None:
        """Have the timeline told of ``v`` once the lane's work so far has completed."""


class Watched(Protocol):
    """A lane a :class:`Watcher` watches (every member but ``halt`` runs on the watcher's thread)."""

    #: The lane's index: what the watcher reports values under.
    qi: int
    #: The last value signalled (written by the submit thread): work is outstanding past what was seen.
    signalled: int

    def thread_start(self) -> None:
        """The watcher thread's first act (CUDA: make the context current)."""

    def wait(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for the backstop's post; True when it posted."""

    def reached(self, posted: bool) -> int:
        """The value the lane's work has reached as far as this wake-up tells (0: nothing known)."""

    def check_fault(self) -> BaseException | None:
        """The lane's error, None while it is healthy (busy or idle)."""

    def halt(self) -> None:
        """End the watcher's current wait (any thread)."""


class Bursts:
    """The pure engine's lane state machine on the submit thread (see the module docstring).

    ``run_item(qi, fill, arg, v)`` runs one item on lane ``qi`` (the backend's ``call_fill``);
    ``lost()`` says whether the device is lost (then nothing is signalled); ``lose(exc)`` loses it.
    The submit thread tells it what happens: :meth:`run`, :meth:`idle`,
    :meth:`before_control` and :meth:`stop`; it decides when to signal.
    """

    __slots__ = ("pending", "run", "run_item", "_lanes", "_count", "_lost", "_lose")

    def __init__(
        self,
        run_item: Callable[[int, Any, Any, int], None],
        lanes: Sequence[Lane],
        lost: Callable[[], bool],
        lose: Callable[[BaseException], None],
    ) -> None:
        #: Lane -> last value run but not yet signalled (the submit thread only reads it): while it is
        #: not empty, the submit thread must call :meth:`idle` once its queue is empty.
        self.pending: dict[int, int] = {}
        self.run_item = run_item
        self._lanes = lanes
        self._count = 0  # items taken in this burst
        self._lost, self._lose = lost, lose
        #: ``run(qi, fill, arg, v)``: run an item on lane ``qi`` and note its progress; a burst ends
        #: at :data:`BURST` items.  Raises what the lane raised.  The submit thread skips items once
        #: the device is lost (they are not counted: nothing is signalled after a loss anyway).
        self.run: Callable[[int, Any, Any, int], None] = self._run_noted if any(lane.notes for lane in lanes) else self._run

    def _run_noted(self, qi: int, fill: Any, arg: Any, v: int) -> None:
        self.run_item(qi, fill, arg, v)
        self._lanes[qi].note(v)
        self._ran(qi, v)

    def _run(self, qi: int, fill: Any, arg: Any, v: int) -> None:
        # _ran inlined: on a device whose lanes do not note (the host device without a watchdog)
        # this is the submit thread's whole cost per item, where one more call would show.
        self.run_item(qi, fill, arg, v)
        self.pending[qi] = v
        self._count += 1
        if self._count >= BURST:
            self._end()

    def _ran(self, qi: int, v: int) -> None:
        self.pending[qi] = v
        self._count += 1
        if self._count >= BURST:
            self._end()

    def idle(self) -> None:
        """The submit thread's queue went empty: what ran so far is the burst."""
        self._end()

    def before_control(self) -> None:
        """A control runs next: it may wait for, or free, what the values so far cover."""
        self._end()

    def stop(self) -> None:
        """The submit thread ends: nothing will follow to signal the last values."""
        self._end()

    def _end(self) -> None:
        self._count = 0
        pending = self.pending
        if not pending:
            return
        if not self._lost():
            try:
                lanes = self._lanes
                for qi, v in pending.items():
                    lanes[qi].signal(v)
            except BaseException as exc:  # noqa: BLE001 - loses the device
                self._lose(exc)
        pending.clear()


class Watcher:
    """A thread that reports one :class:`Watched` lane's completions (see the module docstring)."""

    def __init__(self, lane: Watched, name: str, report: Callable[[int, int], None], fail: Callable[[BaseException], None]) -> None:
        self._lane = lane
        self._report, self._fail = report, fail
        self._closing = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """End the thread (bounded: a lane whose driver call hangs is left behind)."""
        self._closing = True
        self._lane.halt()
        if self._thread.ident is not None:
            self._thread.join(timeout=2.0)

    def _run(self) -> None:
        lane = self._lane
        lane.thread_start()
        seen = 0
        while True:
            # Always the short period: nothing but the backstop posts (a post is a completion
            # where the lane has no word of its own), so new work is noticed by looking again.
            posted = lane.wait(FAULT_POLL)
            if self._closing:
                return
            v = lane.reached(posted)
            if v > seen:
                seen = v
                self._report(lane.qi, v)
            elif not posted and seen < lane.signalled:
                err = lane.check_fault()
                if err is not None:
                    self._fail(err)
                    return
