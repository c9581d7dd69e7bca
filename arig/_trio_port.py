"""The loop port of a trio run (``trio.run``, or anyio's trio backend).

A trio run has no loop object, no futures, no timers and no readers of file
descriptors, so this module gives the port what asyncio gives for free:

* :class:`TrioFuture` (``arig._trio_future``), a one-shot result that tasks
  wait on through ``trio.lowlevel.wait_task_rescheduled``: no task, no
  channel, no lock.  A waiter cancelled while parked cancels the future if
  it was its only waiter (as cancelling a task cancels the asyncio future it
  awaits); ``shielded()`` waits without that;
* its hub (``arig._trio_hub``): one epoll fd holding the eventfd of what
  other threads post to the run and every fd the port reads (a device's
  eventfd), read by a waiting task that leads it, else by the hub's reader
  task while the port reads any fd (trio serves one waiter per fd), else
  posts go through trio's ``run_sync_soon``: no extra thread, no polling;
* a timer task: one cancel scope whose deadline is the earliest timer,
  moved as timers come;
* a task that parks until the run ends.  trio cancels every system task
  once the main task returned; the port's other tasks are shielded from
  that, so that the shutdown jobs (``at_shutdown``: stopping the devices
  ``wait_event`` opened) still have their readers and timers; then the
  port is closed, its tasks end and the close hooks run (``on_close``).

The port is the run's identity for a device (``Device._loop``): one per
run, kept in a ``RunVar``, so it lives exactly as long as the run does.

Threads: ``post`` from any thread (an eventfd's write or ``TrioToken.run_sync_soon``,
neither of which blocks); everything else on the run's thread.  What runs on the run's
thread never raises into trio's scheduler: an exception escaping a
``run_sync_soon`` callback or a system task would crash the whole run.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import trio

from . import _env, _log
from ._errors import ArigError, describe
from ._port import LoopPort, OnClose, settle
from ._trio_future import TrioFuture
from ._trio_hub import Hub, guarded

__all__ = ["TrioPort", "TrioFuture", "current"]

_PORT: trio.lowlevel.RunVar[TrioPort] = trio.lowlevel.RunVar("arig_port")


def current() -> TrioPort | None:
    """The running trio run's port (made on first use), or None outside a trio run."""
    try:
        token = trio.lowlevel.current_trio_token()
    except RuntimeError:
        return None
    try:
        found: TrioPort = _PORT.get()
        return found
    except LookupError:
        port = TrioPort(token)
        _PORT.set(port)
        return port


class _Timer:
    """``TrioPort.call_later``'s handle."""

    __slots__ = ("fn", "args", "_cancelled")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn, self.args, self._cancelled = fn, args, False

    def cancel(self) -> None:
        self._cancelled = True
        self.fn, self.args = _nothing, ()  # hold nothing the timer would have called

    def cancelled(self) -> bool:
        return self._cancelled


class TrioPort(LoopPort):
    """The port of one trio run (see the module docstring)."""

    __slots__ = ("token", "_hub", "_post", "_new", "_closed", "_reader", "_timers", "_ids", "_scope", "_hooks", "_tasks", "_jobs")

    def __init__(self, token: trio.lowlevel.TrioToken) -> None:
        self.token = token
        self._hub = Hub(token.run_sync_soon)
        self._post = self._hub.post
        self._new = functools.partial(TrioFuture, self._hub)  # a future that may lead the hub
        self._closed = False
        self._reader: trio.CancelScope | None = None  # the hub's reader task, while any fd is read
        self._timers: list[tuple[float, int, _Timer]] = []
        self._ids = itertools.count()
        self._scope: trio.CancelScope | None = None  # the timers' sleep: its deadline is the earliest timer
        self._hooks: weakref.WeakSet[OnClose] = weakref.WeakSet()
        self._tasks: set[trio.CancelScope] = set()  # of the port's own tasks: the readers, the timers, spawned ones
        self._jobs: list[Callable[[], Awaitable[Any]]] = []  # at_shutdown's
        self._start(self._run_timers, "arig-timers")
        trio.lowlevel.spawn_system_task(self._watch_end, name="arig-run-end")

    # -- any thread ----------------------------------------------------------------------
    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._closed:
            return
        try:
            self._post(fn, args)
        except BaseException:  # noqa: BLE001 - the run finished (RunFinishedError); never into the caller's thread
            self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def running(self) -> bool:
        return not self._closed

    # -- the run's thread ----------------------------------------------------------------------
    def _start(self, fn: Callable[..., Awaitable[Any]], name: str, *args: Any) -> trio.CancelScope:
        """A system task of the port's own.  Shielded: the run's end does not stop it before the
        shutdown jobs are done (they may need the readers and timers); ``_watch_end`` does."""
        scope = trio.CancelScope(shield=True)
        self._tasks.add(scope)
        if self._closed:
            scope.cancel()
        trio.lowlevel.spawn_system_task(_within, scope, self._tasks, fn, args, name=name)
        return scope

    def add_reader(self, fd: int, fn: Callable[[], Any]) -> None:
        if self._closed:
            return
        self._hub.add(fd, fn)
        if self._reader is None:
            self._reader = self._start(self._hub.read, "arig-reader", self._hub.start_reading())

    def remove_reader(self, fd: int) -> None:
        if self._hub.remove(fd) and self._reader is not None:  # no fd is read any more: the reader ends
            self._hub.stop_reading()
            self._reader.cancel()
            self._reader = None

    def spin_selector(self) -> Any:
        # Unless ARIG_TRIO_SPIN=0, the hub's leader spins on the devices' completions before it waits
        # on the fd, where trio would block next (``arig._trio_hub``); read as each device opens.
        return self._hub if _env.TRIO_SPIN else None

    def future_factory(self) -> Callable[[], Any]:
        return self._new

    def create_future(self) -> Any:
        return self._new()

    def shield(self, fut: Any) -> Awaitable[Any]:
        return fut.shielded()  # type: ignore[no-any-return]

    async def wait_for(self, aw: Awaitable[Any], timeout: float) -> Any:
        with trio.move_on_after(timeout):
            return await aw
        raise TimeoutError

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> Any:
        fut = self._new()
        self._start(_settle_with, "arig-task", coro, fut)
        return fut

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Any:
        timer = _Timer(fn, args)
        when = trio.current_time() + delay
        heapq.heappush(self._timers, (when, next(self._ids), timer))
        if self._scope is not None and when < self._scope.deadline:
            self._scope.deadline = when
        return timer

    def on_close(self, fn: Callable[[], Any]) -> OnClose:
        hook = OnClose(fn, self.post)
        if self._closed:
            hook.fn = None
            _call_hook(fn)
        else:
            self._hooks.add(hook)  # weakly: dropping the handle cancels it
        return hook

    async def at_shutdown(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        self._jobs.append(fn)
        return None

    def report(self, context: dict[str, Any]) -> None:
        _log.logger.error("%s", context.get("message", context))

    async def _run_timers(self) -> None:
        while True:
            with trio.CancelScope(deadline=self._timers[0][0] if self._timers else float("inf")) as scope:
                self._scope = scope
                await trio.sleep_forever()
            self._scope = None
            timers, now = self._timers, trio.current_time()
            while timers and timers[0][0] <= now:
                timer = heapq.heappop(timers)[2]
                if not timer._cancelled:
                    timer._cancelled = True  # ran: a late cancel() is harmless
                    guarded(timer.fn, timer.args)

    async def _watch_end(self) -> None:
        """Park until the run ends (the main task returned: system tasks are cancelled); then run
        the shutdown jobs, close the port, end its tasks and call the close hooks."""
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                for job in self._jobs:
                    try:
                        await job()
                    except Exception as exc:  # noqa: BLE001 - one job's failure must not keep the others from running
                        _log.logger.error("arig: a shutdown job of a trio run failed: %s", describe(exc))
            self._close()

    def _close(self) -> None:
        self._closed = True
        self._hub.close()
        self._scope = None
        self._timers = []
        self._reader = None
        for scope in list(self._tasks):
            scope.cancel()
        hooks = list(self._hooks)
        self._hooks = weakref.WeakSet()
        for hook in hooks:
            fn, hook.fn = hook.fn, None
            if fn is not None:
                _call_hook(fn)


async def _within(scope: trio.CancelScope, tasks: set[trio.CancelScope], fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> None:
    try:
        with scope:
            await fn(*args)
    finally:
        tasks.discard(scope)


def _call_hook(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except BaseException:  # noqa: BLE001 - see OnClose: the hook must not raise
        pass


def _nothing(*_: Any) -> None:
    pass


async def _settle_with(coro: Coroutine[Any, Any, Any], fut: TrioFuture) -> None:
    """Run ``coro`` as a system task (no caller's cancel scope reaches it); its outcome goes to ``fut``."""
    try:
        result = await coro
    except BaseException as exc:
        if not fut.done():
            if isinstance(exc, Exception):
                fut.set_exception(exc)
            else:
                err = ArigError(f"the task ended: {describe(exc)}")
                err.__cause__ = exc
                fut.set_exception(err)
        if isinstance(exc, trio.Cancelled):
            raise  # the run ends: a system task leaves with its cancellation
        if not isinstance(exc, Exception):
            raise
        return
    settle(fut, result)

