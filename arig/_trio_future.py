"""The trio port's futures: one-shot results that the run's tasks wait on.

A waiting task parks through ``trio.lowlevel.wait_task_rescheduled`` (no task, no channel, no lock
per wait), or, where it may, leads the port's hub (``arig._trio_hub``): it waits on the hub's fd
itself, runs what became ready, and returns at once when that resolved its own future, without the
task step and the pass of trio's scheduler that a wake-up from another task costs.

Threads: the run's thread only (other threads reach a future through the hub's posts).
"""

from __future__ import annotations

from collections.abc import Awaitable, Generator
from typing import Any

import outcome
import trio

from ._errors import ArigError
from ._trio_hub import PENDING, Hub

__all__ = ["TrioFuture"]

_PENDING = PENDING
_RESULT, _ERROR, _CANCELLED = 1, 2, 3
# Bound once: a wait and a wake-up each call them, and an attribute lookup per call shows.
_current_task = trio.lowlevel.current_task
_reschedule = trio.lowlevel.reschedule
_wait_rescheduled = trio.lowlevel.wait_task_rescheduled
_SUCCEEDED = trio.lowlevel.Abort.SUCCEEDED
_Value = outcome.Value
_capture = outcome.capture


class TrioFuture:
    """A result set once on the run's thread, awaited by any number of the run's tasks.

    Its waiters are None, the one task parked on it (the usual case: a timeline's
    waiter owns its future), or a list of them.  Waiting is a generator of its own
    (no coroutine per wait), and a settled future wakes each waiter with the outcome
    it resumes with (``reschedule``); a waiter that leads the port's hub (``hub``)
    is not parked, and sees the result itself."""

    __slots__ = ("_state", "_value", "_waiters", "_hub")

    def __init__(self, hub: Hub | None = None) -> None:
        self._state = _PENDING
        self._value: Any = None
        self._waiters: Any = None
        self._hub = hub

    def done(self) -> bool:
        return self._state != _PENDING

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def set_result(self, value: Any) -> None:
        if self._state != _PENDING:
            raise ArigError("the future is already done")
        self._state, self._value = _RESULT, value
        waiters = self._waiters
        if waiters is None:
            return
        self._waiters = None
        if type(waiters) is list:
            self._wake(waiters)
            return
        hub = self._hub
        if hub is None or waiters is not hub.leader:
            _reschedule(waiters, _Value(value))  # the usual case: one parked waiter
        elif hub.parked:  # the leader, woken through the hub (else it is running: it sees the result itself)
            hub.rouse()

    def set_exception(self, exc: BaseException) -> None:
        self._settle(_ERROR, exc)

    def cancel(self) -> bool:
        if self._state != _PENDING:
            return False
        self._settle(_CANCELLED, None)
        return True

    def _settle(self, state: int, value: Any) -> None:
        """Settle as an error or a cancellation: each waiter wakes and raises what ``result`` raises."""
        if self._state != _PENDING:
            raise ArigError("the future is already done")
        self._state, self._value = state, value
        waiters = self._waiters
        if waiters is not None:
            self._waiters = None
            self._wake(waiters)

    def _wake(self, waiters: Any) -> None:
        """Wake ``waiters`` (a task, or a list) with what ``result`` returns or raises; a leader through the hub."""
        hub = self._hub
        leader = hub.leader if hub is not None else None
        for task in waiters if type(waiters) is list else (waiters,):
            if task is leader:
                hub.rouse()  # type: ignore[union-attr]
            else:
                _reschedule(task, _capture(self.result))

    def exception(self) -> BaseException | None:
        exc: BaseException | None = self._value if self._state == _ERROR else None
        return exc

    def result(self) -> Any:
        if self._state == _ERROR:
            raise self._value
        if self._state != _RESULT:
            raise ArigError("the wait for this result was cancelled" if self._state == _CANCELLED else "the result is not set yet")
        return self._value

    def __await__(self) -> Generator[Any, Any, Any]:
        return self._wait(True)

    def shielded(self) -> Awaitable[Any]:
        """Wait without cancelling the future when the waiter is cancelled (asyncio's ``shield``)."""
        return _Shielded(self)

    def _join(self, task: Any) -> None:
        waiters = self._waiters
        if waiters is None:
            self._waiters = task
        elif type(waiters) is list:
            waiters.append(task)
        else:
            self._waiters = [waiters, task]

    def _leave(self, task: Any, cancels: bool) -> None:
        """``task`` waits no more (cancelled); ``cancels``: it cancels the future if it was its only waiter."""
        waiters = self._waiters
        if waiters is task:
            self._waiters = None
        elif type(waiters) is list and task in waiters:
            waiters.remove(task)
            if not waiters:
                self._waiters = None
        if cancels and self._waiters is None and self._state == _PENDING:
            self._state = _CANCELLED  # a waiter's own future: skipped by whoever would resolve it

    def _wait(self, cancels: bool) -> Generator[Any, Any, Any]:
        if self._state != _PENDING:
            return self.result()
        task = _current_task()
        if self._waiters is None:
            self._waiters = task
        else:
            self._join(task)
        hub = self._hub
        if hub is not None and hub.leader is None and not hub.on_fd and hub.fd is not None:  # may_lead(), inlined: every wait asks
            try:
                led = yield from hub.lead(self)
            except BaseException:
                self._leave(task, cancels)
                raise
            if led:
                if self._state == _RESULT:
                    return self._value
                return self.result()

        def abort(_: Any) -> trio.lowlevel.Abort:
            self._leave(task, cancels)
            return _SUCCEEDED

        return (yield from _wait_rescheduled(abort).__await__())


class _Shielded:
    """``TrioFuture.shielded()``: an awaitable that waits without cancelling the future."""

    __slots__ = ("_fut",)

    def __init__(self, fut: TrioFuture) -> None:
        self._fut = fut

    def __await__(self) -> Generator[Any, Any, Any]:
        return self._fut._wait(False)
