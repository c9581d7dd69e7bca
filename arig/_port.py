"""The loop port: the one way another thread reaches a device's event loop.

Why one object: a device's threads (its submit thread, the native core's
loop side, a CUDA host function's Python twin, a finalizer) all hand work to
the loop, and each hand-off must be safe from any thread, never raise into
that thread (a driver callback must not see a Python error) and do nothing
once the loop is closed.  Written once here, that guard cannot drift, and a
second event-loop library needs a second port, not changes in every backend.

A port also owns what the device registers with its loop (readers of file
descriptors, timers, futures), so the engine and the backends never call the
loop's own methods.  ``port_of(loop)`` makes a port of a loop.

Two libraries run a device: asyncio (any asyncio loop) and trio (``trio.run``,
anyio's trio backend; ``arig._trio_port``).  A device is bound to what it was
opened in: ``arig._running.running_loop()`` names it (the asyncio loop, or the trio run's
port, which is that run's identity).  trio is imported only where a trio run
is the one running: an asyncio program never imports it.

Threads: ``post``, ``closed`` and ``running`` from any thread; everything else
on the loop's thread.
"""

from __future__ import annotations

import asyncio
import collections
import selectors
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from ._errors import ArigError

__all__ = ["LoopPort", "AsyncioPort", "port_of", "OnClose", "settle", "settle_error"]

#: The delay of the timer that tells a loop's close (``AsyncioPort.on_close``): never due.
_NEVER = 10.0**9

#: What setting a done future raises: asyncio's, and the trio port's futures' (``ArigError``).
_DONE = (asyncio.InvalidStateError, ArigError)


def settle(fut: Any, value: Any) -> bool:
    """Set ``fut``'s result unless it is done (loop thread); True if this set it.

    Why not ``if not fut.done(): fut.set_result(value)`` alone: a Python signal handler runs
    between any two bytecodes of the loop's thread, and asyncio's for Ctrl-C cancels the main
    task, and with it the future that task awaits, so a future seen pending can be done by the
    set.  Raised out of a delivery, that would lose the delivery's other waiters."""
    if fut.done():
        return False
    try:
        fut.set_result(value)
    except _DONE:
        return False
    return True


def settle_error(fut: Any, exc: BaseException) -> bool:
    """``settle`` for an exception."""
    if fut.done():
        return False
    try:
        fut.set_exception(exc)
    except _DONE:
        return False
    return True


class LoopPort:
    """What a device needs of its event loop (see the module docstring)."""

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` soon on the loop's thread.  Any thread; never raises;
        dropped once the loop is closed (nothing runs there any more)."""
        raise NotImplementedError

    def add_reader(self, fd: int, fn: Callable[[], Any]) -> None:
        """Call ``fn()`` on the loop each time ``fd`` is readable."""
        raise NotImplementedError

    def remove_reader(self, fd: int) -> None:
        """Stop watching ``fd``; harmless once the loop is closed, or twice."""
        raise NotImplementedError

    def create_future(self) -> Any:
        """A future of this loop: ``done``, ``set_result``, ``set_exception``, ``exception``, awaitable.
        Awaiting it directly, a cancelled waiter cancels it (its own future)."""
        raise NotImplementedError

    def future_factory(self) -> Callable[[], Any]:
        """``create_future`` itself, for a caller that makes one per wait (no call in between)."""
        raise NotImplementedError

    def shield(self, fut: Any) -> Awaitable[Any]:
        """Wait for ``fut`` (shared by several waiters): a cancelled waiter leaves it pending."""
        raise NotImplementedError

    async def wait_for(self, aw: Awaitable[Any], timeout: float) -> Any:
        """``await aw``, or ``TimeoutError`` (``aw`` cancelled) after ``timeout`` seconds."""
        raise NotImplementedError

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` as a task of the loop's own, out of reach of the caller's cancellation;
        its outcome goes to the returned future (``shield`` it to wait)."""
        raise NotImplementedError

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Any:
        """Call ``fn(*args)`` on the loop after ``delay`` seconds; the handle's ``cancel()`` prevents it."""
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        raise NotImplementedError

    def running(self) -> bool:
        """Does the loop still run (any thread)?"""
        raise NotImplementedError

    def running_check(self) -> Callable[[], bool]:
        """``running`` itself, for a check on every call."""
        return self.running

    @property
    def debug(self) -> bool:
        """Record where devices were opened (asyncio's debug mode)."""
        return False

    def report(self, context: dict[str, Any]) -> None:
        """Say ``context["message"]`` as the loop says an unhandled error (asyncio's exception handler)."""
        raise NotImplementedError

    def on_close(self, fn: Callable[[], Any]) -> OnClose:
        """Call ``fn()`` once the loop is closed (or collected), from whatever thread closes it,
        unless the returned handle is cancelled first.  ``fn`` must not raise."""
        raise NotImplementedError

    def spin_selector(self) -> Any:
        """What spins on a device's completions before the loop blocks (``watch``/``unwatch`` a
        device's completion): the low-latency loop's selector (``arig.new_event_loop``); a trio
        run's hub, whose leader spins before it waits on the run's fd where it is the one task of
        trio's pass (unless ``ARIG_TRIO_SPIN=0``); None where the loop does not (a device then
        spins once its waiter parks, where ``spins_at_park``: ``soon`` and ``others_ready``)."""
        return None

    #: Does a device spin on its completions once a waiter parked and the loop ran what was ready
    #: (``arig._native.completion``)?  asyncio's loops: yes.  A trio run: no.  There the spin would
    #: run on a task (the one that reads the port's fd) whatever the rest of trio's pass, and a
    #: waiter whose own spin resolved it would go on without yielding to trio's scheduler: the
    #: run's other tasks then waited behind it (64 tasks on an H100 completed at one task's rate,
    #: 0.38x asyncio's).  A trio run spins, where it does, only as the one task of its pass, and
    #: yields after where anything else is due (``spin_selector``).
    spins_at_park = False

    def soon(self, fn: Callable[[], Any]) -> None:
        """Loop thread: call ``fn()`` on the loop once it has run what is ready now."""
        raise NotImplementedError

    def others_ready(self) -> bool | None:
        """Loop thread: has the loop callbacks ready to run now, beside the caller?  None where
        the loop does not say (uvloop)."""
        return None

    async def at_shutdown(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        """Await ``fn()`` when the loop shuts down, while it still runs (``asyncio.run``'s end, a
        trio run's end).  Keep the returned object referenced as long as the job should stay."""
        raise NotImplementedError


class AsyncioPort(LoopPort):
    """The port of an asyncio loop: the default loop, uvloop, ``arig.new_event_loop``."""

    __slots__ = ("loop", "_post", "_closed", "_ready")

    spins_at_park = True

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._post = loop.call_soon_threadsafe
        self._closed = loop.is_closed
        # asyncio's own loops keep their ready callbacks in ``_ready`` (a deque, since Python 3.4);
        # uvloop keeps its in C, out of reach.
        ready = getattr(loop, "_ready", None)
        self._ready: Any = ready if isinstance(ready, collections.deque) else None

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._closed():
            return
        try:
            self._post(fn, *args)
        except RuntimeError:  # the loop closed between the check and the call
            pass
        except BaseException:  # noqa: BLE001 - never into a driver's or a finalizer's thread
            pass

    def add_reader(self, fd: int, fn: Callable[[], Any]) -> None:
        self.loop.add_reader(fd, fn)

    def soon(self, fn: Callable[[], Any]) -> None:
        self.loop.call_soon(fn)

    def others_ready(self) -> bool | None:
        return None if self._ready is None else bool(self._ready)

    def remove_reader(self, fd: int) -> None:
        try:
            self.loop.remove_reader(fd)
        except (RuntimeError, ValueError):  # the loop is closed
            pass

    def create_future(self) -> asyncio.Future[Any]:
        return self.loop.create_future()

    def future_factory(self) -> Callable[[], Any]:
        return self.loop.create_future

    def shield(self, fut: Any) -> Awaitable[Any]:
        return asyncio.shield(fut)

    async def wait_for(self, aw: Awaitable[Any], timeout: float) -> Any:
        return await asyncio.wait_for(aw, timeout)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return self.loop.create_task(coro)

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> asyncio.TimerHandle:
        return self.loop.call_later(delay, fn, *args)

    @property
    def closed(self) -> bool:
        return self._closed()

    def running(self) -> bool:
        return self.loop.is_running()

    def running_check(self) -> Callable[[], bool]:
        return self.loop.is_running

    @property
    def debug(self) -> bool:
        return self.loop.get_debug()

    def report(self, context: dict[str, Any]) -> None:
        self.loop.call_exception_handler(context)

    def on_close(self, fn: Callable[[], Any]) -> OnClose:
        # asyncio has no close hook, but a closing loop drops every timer it holds: a timer
        # that is never due carries an object whose collection is the signal.  The handle
        # refers to the timer weakly: only the loop may keep it alive.
        hook = OnClose(fn, self.post)
        hook._timer = weakref.ref(self.loop.call_later(_NEVER, _never_called, _Signal(hook)))
        return hook

    async def at_shutdown(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        # An async generator parked at its yield: ``loop.shutdown_asyncgens()`` (``asyncio.run``
        # does it) closes it, and its finally awaits the job.  The loop refers to it weakly.
        keeper = _keeper(fn)
        await keeper.__anext__()
        return keeper

    def spin_selector(self) -> Any:
        from ._loop import SpinSelector

        # Only a SelectorEventLoop has one; arig's own loop is one of those, made with ours.
        sel = getattr(self.loop, "_selector", None) if isinstance(self.loop, asyncio.SelectorEventLoop) else None
        return sel if isinstance(sel, SpinSelector) and isinstance(sel, selectors.BaseSelector) else None


def port_of(loop: Any) -> LoopPort:
    """A port of ``loop`` (an asyncio loop, or a port already: a trio run's).  Loop thread.

    An asyncio port holds no state of its own beyond the loop, so each user may have its
    own: a cache keyed by the loop would keep every loop alive (the port refers to it)."""
    if isinstance(loop, LoopPort):
        return loop
    return AsyncioPort(loop)


class OnClose:
    """``LoopPort.on_close``'s handle: ``cancel()`` (loop thread) and ``fn`` is never called.
    Dropping the handle cancels it too (from any thread, through the port)."""

    __slots__ = ("fn", "_timer", "_post", "__weakref__")

    def __init__(self, fn: Callable[[], Any], post: Callable[..., None]) -> None:
        self.fn: Callable[[], Any] | None = fn
        self._timer: weakref.ref[asyncio.TimerHandle] | None = None
        self._post = post

    def cancel(self) -> None:
        self.fn = None  # first: cancelling the timer drops the signal, which then calls nothing
        timer = self._timer() if self._timer is not None else None
        if timer is not None:
            timer.cancel()

    def __del__(self) -> None:
        # Its owner was collected without cancelling it: the loop need not keep the timer.
        timer = self._timer() if self._timer is not None else None
        if timer is not None and not timer.cancelled():
            self._post(timer.cancel)


class _Signal:
    """Held by the never-due timer only; its collection means the loop dropped the timer."""

    __slots__ = ("hook",)

    def __init__(self, hook: OnClose) -> None:
        self.hook = weakref.ref(hook)

    def __del__(self) -> None:
        hook = self.hook()
        fn = hook.fn if hook is not None else None
        if fn is not None:
            hook.fn = None  # type: ignore[union-attr]
            try:
                fn()
            except BaseException:  # noqa: BLE001 - a collector's thread must not see it
                pass


async def _keeper(fn: Callable[[], Awaitable[Any]]) -> Any:
    try:
        yield None
    finally:
        await fn()


def _never_called(signal: _Signal) -> None:
    """The never-due timer's callback (due only after ``_NEVER`` seconds)."""
