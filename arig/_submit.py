"""The device's submit thread: the one thread that calls fills and drivers.

Why a thread of its own: a fill may block (a full CUDA stream blocks
``cuLaunchKernel``), and libcuda's lock can stall any call for tens of
milliseconds while a graph instantiates.  None of that may run on the event
loop, so every driver call of a device goes through this thread, in order.

Hand-off is a ``queue.SimpleQueue`` (a C queue: ``put`` never blocks the
loop).  Back-pressure counts submissions not yet taken by the thread: the
loop side increments ``_put``, the thread increments ``_taken``; when the
difference reaches the limit the loop sets ``_space_wanted`` and re-checks,
and the thread checks that flag after every increment (set-then-check on
both sides, so no wake-up is lost).

The thread runs items but does not decide when their values are signalled:
on the pure engine that is ``arig._pure.Bursts``' job (told when the queue
runs dry, when a control comes and at stop); an engine that signals by
itself (the native core) only has its Python fills run here, each at its
gate (``Backend.call_fill``).
"""

from __future__ import annotations

import queue as _queue
import threading
from collections.abc import Callable
from typing import Any

from . import _log
from ._errors import ArigError, DeviceLost, DeviceStopped, OpenError, describe
from ._port import port_of, settle, settle_error
from ._pure import Bursts

__all__ = ["SubmitThread", "Control"]

_STOP = object()


class _Gate:
    """What runs items for a backend whose engine signals by itself (the native core): each item is
    a Python fill that the engine waits for at its place (``call_fill``, the gate), and there is
    never anything to signal."""

    __slots__ = ("run", "pending")

    def __init__(self, call_fill: Callable[[int, Any, Any, int], None]) -> None:
        self.run = call_fill
        self.pending: dict[int, int] = {}  # always empty: the engine signals by itself

    def idle(self) -> None:
        pass

    def before_control(self) -> None:
        pass

    def stop(self) -> None:
        pass


class Control:
    """A driver call to run on the submit thread; its result goes to a loop future."""

    __slots__ = ("fn", "args", "future", "when_lost")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], future: Any, when_lost: bool) -> None:
        self.fn, self.args, self.future, self.when_lost = fn, args, future, when_lost


class SubmitThread:
    """Calls ``make()`` on its own thread, then fills and controls in order."""

    def __init__(self, loop: Any, name: str, limit: int) -> None:
        self._loop = loop  # an asyncio loop, or a trio run's port (arig._running.running_loop)
        port = self._port = port_of(loop)
        self._post = port.post
        self._new_future = port.future_factory()  # asyncio's loop.create_future itself
        self._q: _queue.SimpleQueue[Any] = _queue.SimpleQueue()
        self._limit = limit
        self._put = 0
        self._taken = 0
        self._space_wanted = False
        self._space: Any = None
        self._name = name
        self.failed = False  # set by the thread (or the loop) once the device is lost
        self.cause: BaseException | None = None
        self.backend: Any = None
        self.timeline: Any = None
        self._thread = threading.Thread(target=self._run, name=f"arig-submit-{name}", daemon=True)
        self._opened: Any = port.create_future()
        self._finished: Any = port.create_future()
        self._make: Callable[[], Any] | None = None

    # -- loop thread -------------------------------------------------------
    async def start(self, make: Callable[[], Any]) -> Any:
        """Run ``make()`` on the new thread and return the backend it made."""
        self._make = make
        self._thread.start()
        return await self._port.shield(self._opened)

    def begin(self, timeline: Any) -> None:
        """Let the thread run fills, reporting to ``timeline``."""
        self.timeline = timeline
        self._q.put(None)  # wakes the thread out of its wait for begin

    def full(self) -> bool:
        return self._put - self._taken >= self._limit

    async def wait_space(self, check: Callable[[], None]) -> None:
        """Wait until fewer than ``limit`` submissions wait; ``check`` raises if the device ended."""
        while self.full():
            check()
            if self._space is None or self._space.done():
                self._space = self._new_future()
            self._space_wanted = True
            if not self.full():  # re-check after announcing: see the module docstring
                break
            # shield: the future is shared; cancelling one waiter must not cancel the others.
            await self._port.shield(self._space)

    def wake_space(self) -> None:
        """Wake tasks waiting for room (they re-check and may raise)."""
        # Only the wake-up clears the flag: every task it wakes re-announces
        # before waiting again, so no waiter is left without one.
        self._space_wanted = False
        if self._space is not None and not self._space.done():
            self._space.set_result(None)

    def forget_space(self) -> None:
        """The loop closed: drop the future tasks wait on for room (resolving it would schedule
        their callbacks on that loop), so that those tasks, and the device they hold, can go."""
        self._space = None

    def put_fill(self, qi: int, fill: Any, arg: Any, v: int) -> None:
        self._put += 1
        self._q.put((qi, fill, arg, v))

    def put(self, qi: int, item: tuple[Any, Any], v: int) -> None:
        """``put_fill`` of a ``Backend.prepare`` item."""
        self.put_fill(qi, item[0], item[1], v)

    def put_control(self, fn: Callable[..., Any], *args: Any, when_lost: bool = False) -> Any:
        fut = self._new_future()
        self._q.put(Control(fn, args, fut, when_lost))
        return fut

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the submit thread, even once the device is lost.  Any thread."""
        self._q.put(Control(fn, args, None, True))

    def put_stop(self) -> None:
        self._q.put(_STOP)

    def abandon_open(self) -> None:
        """The open was cancelled while ``make()`` runs: the thread closes what it makes, and a
        later failure of ``make()`` counts as heard (asyncio would report it as never retrieved)."""
        self.put_stop()
        retrieve = getattr(self._opened, "add_done_callback", None)  # asyncio's futures; trio's report nothing
        if retrieve is not None:
            retrieve(_retrieved)

    async def finished(self) -> None:
        await self._port.shield(self._finished)

    def abandon(self) -> None:
        """Finalizer path: ask the thread to release everything and end."""
        self.failed = True
        self._q.put(_STOP)

    # -- submit thread -------------------------------------------------------
    def _run(self) -> None:
        loop = self._loop
        try:
            assert self._make is not None
            backend = self._make()
        except BaseException as exc:  # noqa: BLE001 - reported to open()
            # Made an OpenError here: a KeyboardInterrupt or StopIteration set
            # on a loop future would end the user's loop, or never be set.
            err = exc if isinstance(exc, OpenError) else OpenError(f"cannot open {self._name}: {describe(exc)}")
            if err is not exc:
                err.__cause__ = exc
            self._post(_set_exception, self._opened, err)
            self._post(settle, self._finished, None)
            return
        self.backend = backend
        self._post(settle, self._opened, backend)
        if self._q.get() is _STOP:  # begin() sends None; a stop here means open was abandoned
            self._close(backend)
            return
        try:
            self._loop_fills(backend)
        finally:
            self._close(backend)
        del loop

    def _loop_fills(self, backend: Any) -> None:
        q = self._q
        engine = self._engine_of(backend)
        run, pending = engine.run, engine.pending
        while True:
            if pending:  # values wait for their signal: learn at once when the queue runs dry
                try:
                    item = q.get_nowait()
                except _queue.Empty:
                    engine.idle()
                    continue
            else:
                item = q.get()
            if item is _STOP:
                engine.stop()
                return
            if item is None:
                continue
            if type(item) is Control:
                engine.before_control()
                self._control(item)
                continue
            qi, fill, arg, v = item
            if not self.failed:
                try:
                    run(qi, fill, arg, v)
                except BaseException as exc:  # noqa: BLE001 - loses the device
                    self.lose(exc)
            item = fill = arg = None  # hold no fill or arg while idle: the timeline keeps them
            self._taken += 1
            if self._space_wanted:
                self._post(self.wake_space)

    def _engine_of(self, backend: Any) -> Bursts | _Gate:
        """The pure engine over the backend's lanes, or the gate of an engine that signals by itself."""
        lanes = backend.lanes()
        if lanes is None:
            return _Gate(backend.call_fill)
        return Bursts(backend.call_fill, lanes, self._lost, self.lose)

    def _lost(self) -> bool:
        return self.failed

    def _control(self, item: Control) -> None:
        if self.failed and not item.when_lost:
            if item.future is not None:
                lost = DeviceLost(self._name, self.cause) if self.cause is not None else DeviceStopped("device stopped")
                self._post(_set_exception, item.future, lost)
            return
        try:
            result = item.fn(*item.args)
        except BaseException as exc:  # noqa: BLE001 - goes to the awaiting task
            if item.future is not None:
                self._post(_set_exception, item.future, exc)
            return
        if item.future is not None:
            self._post(settle, item.future, result)

    def lose(self, exc: BaseException) -> None:
        """The device is lost (submit thread): skip what follows and tell the timeline."""
        self.failed = True
        if self.cause is None:
            self.cause = exc
        if self.timeline is not None:
            self.timeline.fail_threadsafe(exc)

    def _close(self, backend: Any) -> None:
        # Drain what is left so no control future stays pending forever.
        while True:
            try:
                item = self._q.get_nowait()
            except _queue.Empty:
                break
            if type(item) is Control and item.future is not None:
                self._post(_set_exception, item.future, DeviceStopped("device stopped"))
        try:
            backend.close()
        except BaseException as exc:  # noqa: BLE001 - close must not leave stop() hanging
            _log.close_failed(self._name, exc)
        ledger = getattr(backend, "ledger", None)
        if ledger is not None:
            ledger.end()  # its buffers read as closed even where no stop runs (a device collected)
        self._post(settle, self._finished, None)


def _retrieved(fut: Any) -> None:
    if not fut.cancelled():
        fut.exception()


def _set_exception(fut: Any, exc: BaseException) -> None:
    if not fut.done():
        if isinstance(exc, StopIteration) or not isinstance(exc, Exception):
            # A future refuses StopIteration, and a task awaiting a
            # KeyboardInterrupt or SystemExit raises it out of the loop: what
            # happened on another thread must reach the awaiting task only.
            wrapped = ArigError(describe(exc))
            wrapped.__cause__ = exc
            exc = wrapped
        settle_error(fut, exc)
