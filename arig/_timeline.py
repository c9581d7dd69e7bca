"""A device's timeline: values, the futures that wait on them, and loss.

Rule: everything here that touches a future runs on the event-loop thread.
The only entry points other threads may call are :meth:`Timeline.report`
and :meth:`Timeline.fail_threadsafe`; both only store a number or an
exception and schedule :meth:`_deliver` through the loop's port
(``arig._port``), which is guarded against a closed loop and never raises
into the caller's thread (a CUDA host function or a worker thread must never
see a Python error).
"""

from __future__ import annotations

import bisect
import collections
import heapq
import itertools
import time
from typing import Any

from . import _log
from ._errors import DeviceLost, describe
from ._port import port_of, settle, settle_error

__all__ = ["Timeline"]

#: How many (value, time) pairs ``reached_at`` remembers.
HISTORY = 1 << 16


class Timeline:
    """Values 1, 2, 3, ... of one device, and who waits for them.

    A *lane* is one ordered line of completions, named by its index: a queue
    of the device (``dev.queues[k]`` is lane ``k``) or a lane the device adds
    for itself (a CUDA device's join lane).  A value is reached once it and
    every value before it have completed, each on the lane it was assigned."""

    def __init__(self, loop: Any, name: str, nlanes: int) -> None:
        self._loop = loop  # an asyncio loop, or a trio run's port (arig._running.running_loop)
        port = port_of(loop)
        self._call_soon = port.post
        self._new_future = port.future_factory()  # asyncio's loop.create_future itself: no call in between
        self._name = name
        # Written by reporting threads, read by the loop (a list item store is
        # atomic under the GIL); per lane, the highest value it completed.
        self._completed = [0] * nlanes
        self._report_time = 0.0
        self._scheduled = False
        # Loop-side state.
        self.assigned = 0  # highest value handed out
        self.reached = 0
        self.last_progress = time.monotonic()
        self.progress_time = 0.0  # last note_progress
        self._order: collections.deque[tuple[int, int]] = collections.deque()
        self._multi = nlanes > 1
        self._heap: list[tuple[int, int, Any]] = []  # (value, order, future) of each waiter
        self._ids = itertools.count()
        self._kept: collections.deque[tuple[int, Any]] = collections.deque()
        # (value, fn, arg): calls waiting for a value (stream-ordered frees, arig._memory.Ledger).
        # Appended from any thread, run and popped by the loop only; values roughly in order
        # (one appended late waits behind a larger one: later, never earlier).
        self._due: collections.deque[tuple[int, Any, Any]] = collections.deque()
        # Lists, not deques: bisect indexes them (a deque's middle costs O(n) per index).
        self._hist_v: list[int] = []
        self._hist_t: list[float] = []
        self.cause: BaseException | None = None
        self.lost: DeviceLost | None = None
        self.told = 0  # waiters and later calls the loss was raised to (did anyone hear of it?)
        self._on_fail: list[Any] = []
        # (value, order, fn): another device's work held until a value here (``arig._after``);
        # a heap of its own, not ``_due``, so no later value ahead of it can delay it.
        self._calls: list[tuple[int, int, Any]] = []
        #: Called (loop thread) each time a waiter parks: the native engine's spin before the loop
        #: blocks, on a loop that does not spin by itself (``arig._native.completion``); else None.
        self.on_park: Any = None

    # -- loop thread -------------------------------------------------------
    @property
    def lanes(self) -> int:
        return len(self._completed)

    def add_lane(self) -> int:
        """One more lane (a CUDA device's join lane, on first use); its index.

        A one-lane timeline orders nothing: its values outstanding so far, all
        on lane 0, go into the order now."""
        if not self._multi:
            self._order.extend((v, 0) for v in range(self.reached + 1, self.assigned + 1))
            self._multi = True
        self._completed.append(0)
        return len(self._completed) - 1

    def assign(self, lane: int, keep: Any) -> int:
        """Hand out the next value for work on lane ``lane``; keep ``keep`` alive until it is reached."""
        self.assigned += 1
        v = self.assigned
        if self.reached == v - 1:
            self.last_progress = time.monotonic()  # a pending period starts now
        if self._multi:
            self._order.append((v, lane))
        if keep is not None:
            self._kept.append((v, keep))
        return v

    async def wait(self, v: int) -> None:
        while True:
            if v <= self.reached:
                return
            if self.cause is not None:
                self.told += 1
                raise DeviceLost(self._name, self.cause)  # a new one: see Device._check_usable
            # One future per waiter: cancelling a waiter cancels its own future
            # only, and no shield doubles the cost of the await.
            fut = self._new_future()
            heapq.heappush(self._heap, (v, next(self._ids), fut))
            if self.on_park is not None:
                self.on_park()
            spin = await fut
            if spin is None:
                return
            try:
                spin()  # woken ahead of its value (spin_hint): look for it on this task, then wait again if need be
            except Exception as exc:  # noqa: BLE001 - a broken watch loses the device: every waiter hears the same
                self.fail(exc)

    def spin_hint(self, spin: Any) -> bool:
        """Wake the first waiter (of the lowest value) ahead of its value, to call ``spin()`` on its
        own task before it waits again (loop thread).  False: no one waits.

        Why: a completion's watch that wakes the loop shortly before a predicted end spins there
        for it.  Spun from the loop's callback, what the word's arrival then runs (the delivery,
        the loop's next pass, the waiter's task step) runs on a CPU that sat idle for the length of
        the work, its caches cold: tens of microseconds on a VM after a few milliseconds asleep.
        Spun from the waiter's own task, that task step and most of the delivery run before the
        word comes, and the waiter returns from the spin straight into its caller.  Whatever the
        spin delivers (or fails) the waiter finds on its next look; a spin that raises fails the
        timeline, so every waiter hears the same."""
        heap = self._heap
        while heap:
            if settle(heapq.heappop(heap)[2], spin):  # a cancelled waiter's future is skipped
                return True
        return False

    @property
    def waiting(self) -> bool:
        """Does any waiter wait (loop thread)?"""
        return bool(self._heap)

    @property
    def waiters(self) -> int:
        """How many waiters wait, at most (loop thread; a cancelled one counts until a delivery skips it)."""
        return len(self._heap)

    def reached_at(self, v: int) -> float | None:
        """``time.perf_counter()`` at which ``v`` was seen reached, or None if unknown."""
        if v > self.reached or not self._hist_v:
            return None
        i = bisect.bisect_left(self._hist_v, v)
        return self._hist_t[i] if i < len(self._hist_v) else None

    def fail(self, cause: BaseException, level: int | None = None) -> None:
        """Lose the timeline: every pending and later wait raises DeviceLost.

        The loss is logged once, at ``level``; by default at ERROR when no
        task waits for a value (nothing else would tell anyone), else at
        WARNING (the waiters are told).
        """
        if self.lost is not None:
            return
        self.cause = cause
        self.lost = DeviceLost(self._name, cause)
        heap, self._heap = self._heap, []
        waiting = 0
        for _, _, fut in heap:
            if settle_error(fut, DeviceLost(self._name, cause)):
                waiting += 1
                fut.exception()  # retrieved: no "never retrieved" log if every waiter was cancelled
        self.told += waiting
        for cb in self._on_fail:
            cb()
        calls, self._calls = self._calls, []
        for _, _, fn in calls:
            fn(cause)
        _log.lost(self._name, cause, waiting, level)

    def forget_waiters(self) -> None:
        """Drop every waiter's future unresolved: the loop closed, and nothing runs them any more.

        Resolving them would schedule their callbacks on that closed loop.  Their tasks,
        no longer referenced by the timeline (which the device's threads keep), can be
        collected, and with them the device a waiting task holds.  Any thread, once the
        loop is closed (nothing else touches the futures then)."""
        self._heap = []
        self._calls = []

    def release_kept(self) -> None:
        """Drop every kept object and waiting call (at stop, once no work can still use them)."""
        self._kept.clear()
        self._due.clear()

    def on_fail(self, cb: Any) -> None:
        """Call ``cb()`` on the loop once the timeline is lost."""
        self._on_fail.append(cb)

    def _deliver(self) -> None:
        self._scheduled = False  # before reading _completed: see report()
        if self.lost is not None:
            return  # a lost timeline stays where it was: a value failed to its waiters never becomes reached
        if self._multi:
            order, completed, r = self._order, self._completed, self.reached
            while order and completed[order[0][1]] >= order[0][0]:
                r = order.popleft()[0]
        else:
            r = min(self._completed[0], self.assigned)
        if r <= self.reached:
            return
        self.reached = r
        self.last_progress = time.monotonic()
        self._hist_v.append(r)
        t = self._report_time
        if self._hist_t and t < self._hist_t[-1]:
            t = self._hist_t[-1]  # one clock for every lane: never earlier than a value before it
        self._hist_t.append(t)
        if len(self._hist_v) >= 2 * HISTORY:  # forget the older half: amortized O(1)
            del self._hist_v[:HISTORY], self._hist_t[:HISTORY]
        kept = self._kept
        while kept and kept[0][0] <= r:
            kept.popleft()
        if self._due:
            self._run_due()
        heap = self._heap
        while heap and heap[0][0] <= r:
            settle(heapq.heappop(heap)[2], None)  # a cancelled waiter's future is skipped
        if self._calls:
            self._run_calls(r)

    def call_when(self, v: int, fn: Any) -> None:
        """Call ``fn(None)`` once ``v`` is reached, or ``fn(cause)`` once the timeline is lost (loop thread).

        At once if either is so already.  ``fn`` must not raise: it runs inside a delivery."""
        if self.cause is not None:
            fn(self.cause)
        elif v <= self.reached:
            fn(None)
        else:
            heapq.heappush(self._calls, (v, next(self._ids), fn))

    def _run_calls(self, r: int) -> None:
        calls = self._calls
        while calls and calls[0][0] <= r and self.lost is None:
            heapq.heappop(calls)[2](None)

    def _run_due(self) -> None:
        """Run the waiting calls whose value is reached (loop thread); never while lost."""
        due, r = self._due, self.reached
        while due and due[0][0] <= r and self.lost is None:
            _, fn, arg = due.popleft()
            try:
                fn(arg)
            except Exception as exc:  # noqa: BLE001 - a free that cannot be posted must not stop the deliveries
                _log.fallback(f"{self._name}: a call waiting for value {r} failed: {describe(exc)}")

    # -- any thread ---------------------------------------------------------
    def when_reached(self, v: int, fn: Any, arg: Any) -> None:
        """Call ``fn(arg)`` on the loop once ``v`` is reached; never if the timeline is lost.  Any thread."""
        self._due.append((v, fn, arg))
        if self.reached >= v:  # reached meanwhile (another thread's call): the delivery may have passed
            self._call_soon(self._run_due)

    def report(self, lane: int, v: int, t: float | None = None) -> None:
        """Lane ``lane`` completed its work up to value ``v``.  Any thread; never raises."""
        try:
            if v > self._completed[lane]:
                self._completed[lane] = v
            self._report_time = time.perf_counter() if t is None else t
            # Written before the check; _deliver clears the flag before reading,
            # so a report is never left undelivered.
            if not self._scheduled:
                self._scheduled = True
                self._call_soon(self._deliver)
        except BaseException:  # noqa: BLE001 - must never escape into a driver thread
            pass

    def note_progress(self, lane: int, v: int) -> None:
        """Lane ``lane`` completed ``v``, told without a delivery (any thread):
        the hang watchdog sees the progress; waiters hear at the next report."""
        if v > self._completed[lane]:
            self._completed[lane] = v
        self.progress_time = time.monotonic()

    def report_local(self, lane: int, v: int, t: float | None = None) -> None:
        """``report`` from the loop thread itself: deliver now, no hop."""
        if v > self._completed[lane]:
            self._completed[lane] = v
        self._report_time = time.perf_counter() if t is None else t
        self._deliver()

    def fail_threadsafe(self, cause: BaseException) -> None:
        """Lose the timeline from any thread.  Never raises."""
        self._call_soon(self.fail, cause)
