"""The trio port's futures: one-shot results that the run's tasks wait on.

A waiting task parks in trio's own trap (what ``trio.lowlevel.wait_task_rescheduled`` yields: no
task, no channel, no lock per wait), or, where it may, leads the port's hub (``arig._trio_hub``):
it waits on the hub's fd itself, runs what became ready, and returns at once when that resolved its
own future, without the task step and the pass of trio's scheduler that a wake-up from another task
costs.

Why the trap itself, not the public coroutine: under many tasks the run's thread is the limit, and
each completion costs one wake-up of a parked task.  Through the public calls a wake-up allocates an
``outcome.Value``, a coroutine and its unwrapping; here a waiter is woken with its future itself,
and reads the result from it: 6.2 against 3.7 µs of the run's thread per wake-up, asyncio's own
being 2.3 (``scripts/loop_floor.py``'s measure).  The trap and the run's ``reschedule`` are trio's
private names, stable since trio's first releases; where they are missing the public calls are used
(``FAST``), and the waiter is woken the same way (the future is its own outcome: ``unwrap``).

Threads: the run's thread only (other threads reach a future through the hub's posts).
"""

from __future__ import annotations

from collections.abc import Awaitable, Generator
from typing import Any

import trio

from ._errors import ArigError
from ._trio_hub import PENDING, Hub

__all__ = ["TrioFuture", "FAST"]

try:
    # The message a parked task yields to trio's scheduler (what wait_task_rescheduled yields).
    from trio._core._traps import WaitTaskRescheduled as _Trap
except ImportError:  # pragma: no cover - a trio without it: the public calls
    _Trap = None
#: Whether waiters park in trio's trap directly (else through ``wait_task_rescheduled``).
FAST = _Trap is not None
_new = object.__new__


def _plain_traps() -> bool:
    """Can a trap be made without its class's ``__init__``?  trio's trap is a frozen attrs class,
    whose ``__init__`` sets its one field through ``object.__setattr__`` (0.6 µs, a tenth of a
    wake-up's cost on the run's thread); an instance with that field put in its ``__dict__`` is
    the same message to the scheduler, which reads ``abort_func`` alone, for half of that.
    Checked once: where the class keeps no ``__dict__`` (or compares otherwise) its ``__init__`` is used."""
    if _Trap is None:
        return False
    try:
        trap = _new(_Trap)
        trap.__dict__["abort_func"] = _plain_traps
        return bool(trap.abort_func is _plain_traps and trap == _Trap(_plain_traps))
    except Exception:  # noqa: BLE001 - any surprise: the class's own __init__
        return False


_PLAIN = _plain_traps()

_PENDING = PENDING
_RESULT, _ERROR, _CANCELLED = 1, 2, 3
# Bound once: a wait and a wake-up each call them, and an attribute lookup per call shows.
_current_task = trio.lowlevel.current_task
_reschedule = trio.lowlevel.reschedule
_wait_rescheduled = trio.lowlevel.wait_task_rescheduled
_SUCCEEDED = trio.lowlevel.Abort.SUCCEEDED


class TrioFuture:
    """A result set once on the run's thread, awaited by any number of the run's tasks.

    Its waiters are None, the one task parked on it (the usual case: a timeline's
    waiter owns its future), or a list of them.  Waiting is a generator of its own
    (no coroutine per wait), and a settled future wakes each waiter with itself
    (``reschedule``), from which the waiter reads the result (``unwrap``, as from
    an ``outcome``); a waiter that leads the port's hub (``hub``) is not parked,
    and sees the result itself."""

    __slots__ = ("_state", "_value", "_waiters", "_hub", "_first")

    def __init__(self, hub: Hub | None = None) -> None:
        self._state = _PENDING
        self._value: Any = None
        self._waiters: Any = None
        self._hub = hub
        self._first: Any = None  # the first task to wait, while it waits

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
        if hub is None:
            _reschedule(waiters, self)
        elif waiters is not hub.leader:
            hub.resume(waiters, self)  # the usual case: one parked waiter
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
        resume = hub.resume if hub is not None else _reschedule
        for task in waiters if type(waiters) is list else (waiters,):
            if task is leader:
                hub.rouse()  # type: ignore[union-attr]
            else:
                resume(task, self)

    def exception(self) -> BaseException | None:
        exc: BaseException | None = self._value if self._state == _ERROR else None
        return exc

    def result(self) -> Any:
        if self._state == _ERROR:
            raise self._value
        if self._state != _RESULT:
            raise ArigError("the wait for this result was cancelled" if self._state == _CANCELLED else "the result is not set yet")
        return self._value

    #: What a parked waiter is woken with is the future itself: it unwraps as an ``outcome`` does.
    unwrap = result

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

    def _abort_first(self, _: Any) -> trio.lowlevel.Abort:
        """The first waiter is cancelled while parked (its wait cancels the future)."""
        self._leave(self._first, True)
        return _SUCCEEDED

    def _wait(self, cancels: bool) -> Generator[Any, Any, Any]:
        if self._state != _PENDING:
            return self.result()
        task = _current_task()
        if self._waiters is None:
            self._waiters = self._first = task
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

        if cancels and task is self._first:
            abort = self._abort_first  # a bound method: no closure per wait
        else:

            def abort(_: Any) -> trio.lowlevel.Abort:
                self._leave(task, cancels)
                return _SUCCEEDED

        if _Trap is None:
            return (yield from _wait_rescheduled(abort).__await__())
        if _PLAIN:
            trap = _new(_Trap)
            trap.__dict__["abort_func"] = abort
        else:
            trap = _Trap(abort)
        woken = yield trap
        if woken is self:  # set: trio resumes a cancelled or interrupted wait with an outcome instead
            if self._state == _RESULT:
                return self._value
            return self.result()
        return woken.unwrap()


class _Shielded:
    """``TrioFuture.shielded()``: an awaitable that waits without cancelling the future."""

    __slots__ = ("_fut",)

    def __init__(self, fut: TrioFuture) -> None:
        self._fut = fut

    def __await__(self) -> Generator[Any, Any, Any]:
        return self._fut._wait(False)
