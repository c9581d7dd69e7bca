"""The trio port's futures, and its posts: what another thread hands to the run.

Why a channel of the port's own rather than ``TrioToken.run_sync_soon`` alone: trio
runs what is handed to it in a task of its own (its entry queue), so every wake-up
from another thread costs a task step and a pass of the scheduler before the task
that waits for it runs: about a third of a round trip's time on the run's thread.
Here, a task waiting on a :class:`TrioFuture` may *lead* the posts: it waits for the
port's eventfd itself (``wait_readable``), runs what was posted when it is readable,
and returns at once when that resolved its own future.  One task leads at a time;
while none does, a post goes through ``run_sync_soon`` as before.  Either way what is
posted runs once, in the order posted, on the run's thread, and never raises into
trio's scheduler (``_guarded``); a leader runs it with KeyboardInterrupt deferred, as
trio's own entry queue does.

Only while the port reads no file descriptor of a device (a native core's eventfd,
``TrioPort.add_reader``) does a waiter lead: a device's completions then come through
posts (the host device, the pure engine), whereas a reader's come through its own
task, which would have to wake the leader through the eventfd.

Why it holds (a post on another thread, the leader on the run's): a post appends,
then reads ``leader``: set, it writes the eventfd, which the leader reads before it
waits again; unset, it hands a drain to ``run_sync_soon``.  A leader that stops
leading unsets ``leader`` first and then drains: whatever was appended before the
post read ``leader`` set is run by that drain or by the leader's next pass.

Threads: ``Posts.post`` from any thread; everything else on the run's thread.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Awaitable, Callable, Generator
from typing import Any

import outcome
import trio

from . import _log
from ._errors import ArigError, describe

__all__ = ["TrioFuture", "Posts", "guarded"]

_PENDING, _RESULT, _ERROR, _CANCELLED = range(4)
# Bound once: a wait and a wake-up each call them, and an attribute lookup per call shows.
_current_task = trio.lowlevel.current_task
_reschedule = trio.lowlevel.reschedule
_wait_rescheduled = trio.lowlevel.wait_task_rescheduled
_wait_readable = trio.lowlevel.wait_readable
_SUCCEEDED = trio.lowlevel.Abort.SUCCEEDED
_Value = outcome.Value
_capture = outcome.capture
# Typed here: some trio releases declare the decorator without types.
_protect: Callable[[Callable[..., Any]], Callable[..., Any]] = trio.lowlevel.enable_ki_protection


def guarded(fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """Call ``fn(*args)`` on the run's thread; an exception is logged, never raised into trio's scheduler."""
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001 - asyncio's loop logs a callback's exception the same way
        try:
            _log.logger.error("exception in a callback of arig's trio port, %r: %s", fn, describe(exc), exc_info=(type(exc), exc, exc.__traceback__))
        except Exception:  # noqa: BLE001 - a broken handler must not crash the run
            pass


class Posts:
    """The port's posts (see the module docstring): ``post`` from any thread."""

    __slots__ = ("_q", "_efd", "_lock", "_run_soon", "leader", "parked", "lead_ok")

    def __init__(self, run_soon: Callable[..., Any]) -> None:
        self._q: collections.deque[tuple[Callable[..., Any], tuple[Any, ...]]] = collections.deque()
        self._run_soon = run_soon
        #: The eventfd a leader waits on, until the run ends (``close``); the lock keeps a post's
        #: write from reaching its number once closed (and perhaps reused).
        self._efd: int | None = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._lock = threading.Lock()
        self.leader: Any = None  # the leading task
        self.parked = False  # the leader waits in wait_readable (else it is running, and drains before it waits)
        self.lead_ok = True  # may a waiter lead (the port reads no device's fd, and is open)?

    def post(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """Any thread.  Raises what ``run_sync_soon`` raises once the run is over."""
        self._q.append((fn, args))
        if self.leader is not None:
            self._wake()
            return
        self._run_soon(self.drain)

    def _wake(self) -> None:
        with self._lock:
            if self._efd is not None:
                os.eventfd_write(self._efd, 1)

    def _drain(self) -> None:
        """Run what is posted so far, in order (run's thread); what is posted meanwhile waits for the next pass."""
        q = self._q
        for _ in range(len(q)):
            fn, args = q.popleft()
            guarded(fn, args)

    # KeyboardInterrupt deferred while it runs, in a leader's task too (trio's entry queue runs protected).
    drain = _protect(_drain)

    def rouse(self) -> None:
        """The leader's future was resolved by someone else than its drain: wake it."""
        if self.parked:
            self._wake()

    def may_lead(self) -> bool:
        return self.leader is None and self.lead_ok  # lead_ok is False once the eventfd is closed

    def lead(self, fut: TrioFuture) -> Generator[Any, Any, bool]:
        """Lead while ``fut`` is pending: the caller's task waits on the eventfd and drains; it
        stops leading (and drains once more) on its way out, whatever the way.  False: the run
        ends (``close``) with ``fut`` still pending: the caller waits for it as any waiter does."""
        efd, q = self._efd, self._q
        assert efd is not None
        self.leader = _current_task()
        try:
            while True:
                if q:  # (a drain costs a call through trio's KeyboardInterrupt guard)
                    self.drain()
                if fut._state != _PENDING:
                    return True
                self.parked = True
                try:
                    yield from _wait_readable(efd).__await__()
                except trio.ClosedResourceError:
                    return False
                finally:
                    self.parked = False
                try:
                    os.eventfd_read(efd)
                except OSError:  # noqa: S110 - read already (a wake-up the last drain served)
                    pass
        finally:
            self.leader = None
            if q:
                self.drain()

    def close(self) -> None:
        """The run ends: no waiter leads any more, a leader parked now waits as any waiter does
        (``notify_closing`` wakes it), and the eventfd is closed (run's thread)."""
        self.lead_ok = False
        with self._lock:
            efd, self._efd = self._efd, None
        if efd is not None:
            try:
                trio.lowlevel.notify_closing(efd)
            except BaseException:  # noqa: BLE001 - the run is over: nothing watches the fd
                pass
            os.close(efd)


class TrioFuture:
    """A result set once on the run's thread, awaited by any number of the run's tasks.

    Its waiters are None, the one task parked on it (the usual case: a timeline's
    waiter owns its future), or a list of them.  Waiting is a generator of its own
    (no coroutine per wait), and a settled future wakes each waiter with the outcome
    it resumes with (``reschedule``); a waiter that leads the port's posts (``posts``)
    is not parked, and sees the result itself."""

    __slots__ = ("_state", "_value", "_waiters", "_posts")

    def __init__(self, posts: Posts | None = None) -> None:
        self._state = _PENDING
        self._value: Any = None
        self._waiters: Any = None
        self._posts = posts

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
        posts = self._posts
        if type(waiters) is not list and (posts is None or waiters is not posts.leader):
            _reschedule(waiters, _Value(value))  # the usual case: one parked waiter
        else:
            self._wake(waiters)

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
        """Wake ``waiters`` (a task, or a list) with what ``result`` returns or raises; a leader through the posts."""
        posts = self._posts
        leader = posts.leader if posts is not None else None
        for task in waiters if type(waiters) is list else (waiters,):
            if task is leader:
                posts.rouse()  # type: ignore[union-attr]
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
        posts = self._posts
        if posts is not None and posts.leader is None and posts.lead_ok:  # may_lead(), inlined: every wait asks
            try:
                led = yield from posts.lead(self)
            except BaseException:
                self._leave(task, cancels)
                raise
            if led:
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
