"""The opt-in low-latency event loop: ``arig.new_event_loop(spin_us=30)``.

Why: a completion reaches a blocked loop through its eventfd, and waking a
blocked thread costs about 10 µs more than a thread that is still running.
This loop's selector, just before it would block, spins (in C, the GIL
released) on the completion words of arig's devices opened in it, but only
while a waiter is pending and a completion is predicted within ``spin_us``
(the NAPI busy-poll idea).  Otherwise it blocks as any loop does, so it
burns no CPU while nothing is about to complete.

It is a plain ``asyncio.SelectorEventLoop`` (uvloop cannot take a custom
selector); use it as ``asyncio.run(main(), loop_factory=arig.new_event_loop)``
(Python 3.12+) or ``asyncio.Runner(loop_factory=arig.new_event_loop)``.

The spin itself (``spin_before_blocking``) is every asyncio loop's: on the
default loop and uvloop a device's completion runs it once a waiter parked
and the loop ran what was ready (``arig._native.completion``).  This selector
runs it exactly where the loop blocks, at no cost per park.  A trio run
spins (unless ``ARIG_TRIO_SPIN=0``) only on the task that leads the run's fd just
before it waits on it, where that task is the last of trio's pass and none is
runnable (``arig._trio_hub``; ``LoopPort.spins_at_park`` says why no sooner).

Everything here runs on the loop's own thread.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from typing import Any, Protocol

__all__ = ["new_event_loop", "SpinSelector"]

#: The default longest spin before the loop blocks, in microseconds.
DEFAULT_SPIN_US = 30


class Spinnable(Protocol):
    """What a device's completion offers the selector (loop thread only)."""

    def spin_due(self, now_ns: int, window_ns: int) -> bool: ...
    def spin(self, ns: int) -> bool: ...
    def deliver_spun(self) -> None: ...
    def look(self, blocking: bool) -> bool: ...


class SpinSelector(selectors.EpollSelector if hasattr(selectors, "EpollSelector") else selectors.DefaultSelector):  # type: ignore[misc]
    """A selector that spins on registered completions before it blocks.

    It also reads them at every select (``look``): a completion holds its eventfd writes from a
    park or a submission until then, so that what completes while the loop is awake is read
    there, not through the eventfd's write, poll and read."""

    #: Its select looks at every watched completion (``Spinnable.look``).
    looks = True

    def __init__(self, spin_us: int) -> None:
        super().__init__()
        self.spin_ns = int(spin_us * 1000)
        self._watched: list[Spinnable] = []
        self.spins = 0
        self.spin_hits = 0

    def watch(self, c: Spinnable) -> None:
        self._watched.append(c)

    def unwatch(self, c: Spinnable) -> None:
        if c in self._watched:
            self._watched.remove(c)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        blocking = timeout is None or timeout > 0
        for c in self._watched:
            if c.look(blocking) and blocking:
                timeout, blocking = 0, False  # it resolved futures: their tasks are ready now
        if blocking and self._watched:
            spun = spin_before_blocking(self._watched, self.spin_ns)
            if spun:
                self.spins += 1
                if spun > 1:
                    self.spin_hits += 1
                    timeout = 0  # the spin resolved futures: their tasks are ready now
        ready: list[tuple[selectors.SelectorKey, int]] = super().select(timeout)
        return ready


def spin_before_blocking(watched: list[Spinnable], spin_ns: int) -> int:
    """Loop thread, when nothing else of the loop's is ready and it would block next: spin up to
    ``spin_ns`` on the first of ``watched`` whose completion is predicted within ``spin_ns``, and
    deliver what the spin saw (``c.deliver_spun()``).
    0: nothing due, no spin; 1: spun, nothing came; 2: delivered.

    The one spin of every loop: this selector's, the one a device's completion runs on any other
    asyncio loop once the loop has run what was ready (``arig._native.completion``), and a trio
    run's leader's before it waits on the run's fd (``arig._trio_hub``)."""
    now = time.monotonic_ns()
    for c in watched:
        if c.spin_due(now, spin_ns):
            if c.spin(spin_ns):
                c.deliver_spun()  # resolves futures: their tasks are ready now
                return 2
            return 1
    return 0


def new_event_loop(spin_us: int = DEFAULT_SPIN_US) -> asyncio.AbstractEventLoop:
    """An asyncio event loop that spins up to ``spin_us`` µs for a predicted
    arig completion before it blocks (see the module docstring)."""
    if isinstance(spin_us, bool) or not isinstance(spin_us, int) or not 0 <= spin_us <= 10_000:
        from ._errors import ArigValueError

        raise ArigValueError(f"spin_us must be an int in 0..10000, got {spin_us!r}")
    return asyncio.SelectorEventLoop(SpinSelector(spin_us))


def selector_of(loop: Any) -> SpinSelector | None:
    """The loop's SpinSelector, if it is one of ours."""
    sel = getattr(loop, "_selector", None)
    return sel if isinstance(sel, SpinSelector) else None
