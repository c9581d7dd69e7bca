"""The trio port's one file descriptor: what other threads post to the run, and every fd the port reads.

Why one fd, and waiters that read it: trio serves one waiter per fd (``wait_readable``), and runs
what another thread hands it (``TrioToken.run_sync_soon``) in a task of its own.  A completion that
comes through a task of the port's own (a reader of a device's eventfd, trio's entry queue) costs
that task's step and one more pass of trio's scheduler before the task waiting for it runs: about
a third of a round trip's time on the run's thread.  Here the posts' eventfd and every fd the port
reads (``add``) are in one epoll set, the hub's fd, and a task waiting on a
:class:`~arig._trio_future.TrioFuture` may *lead*: it waits on the hub's fd itself, runs what became
ready (the posts, the readers' callbacks) and returns at once when that resolved its own future.

Who reads the hub's fd (the run's thread):

* one leader at a time, a waiting task (``lead``);
* else, while the port reads any fd, the hub's reader task (``read``): each time it runs it parks
  on the hub's fd if no one leads, else it *stands by* (parks until the leader stops and no task
  leads again before trio next waits for I/O: a trio instrument's ``before_io_wait`` wakes it, and
  ends trio's wait at once where trio would block).  A waiter leads only while the reader is not
  parked on the fd (trio would refuse a second waiter), so leader and reader never wait on it
  together, and while the port reads any fd, someone waits on the hub's fd whenever trio waits
  for I/O long, or is due to run first;
* else no one: a post then hands a drain to ``run_sync_soon``.

Posts (any thread to the run's thread): a post appends, then reads whether anyone reads the hub's
fd (``leader``, ``_reader``): if so it writes the posts' eventfd, which that reader services before
it waits again; if not it hands a drain to ``run_sync_soon``.  Whoever stops reading says so and
then drains or hands a drain to ``run_sync_soon`` (a leader drains once more before it says so, so
that the drain cannot wake it: its own future's waiter, still running, see ``lead``): whatever was
appended before a post saw a reader is run by that drain or by a reader's next pass.  Either way what is posted runs once, in
the order posted, on the run's thread, and never raises into trio's scheduler (``guarded``); a
leader runs it with KeyboardInterrupt deferred, as trio's own entry queue does.

The readers' callbacks: called on the run's thread when their fd was readable in the epoll set's
poll (level-triggered: a callback must consume what made its fd readable, as with asyncio's
``add_reader``); never after ``remove`` (each is looked up as it is called).  A reader whose fd is
itself an epoll set is called on every service, ready or not: a file inside it may clear its state
when polled (the NVIDIA driver's event fd clears its pending flag on every poll), and the poll that
woke the hub (trio's, one level up) polled it already, so the hub's own poll can find it no longer
ready: its callback would be skipped and the wake lost (an NV device's completion then seen only by
its 20 ms backstop).  Such a callback reads what it watches itself (the device's words), as it does
under asyncio, where the loop's one poll is the only one.

The spin before trio blocks (unless ``ARIG_TRIO_SPIN=0``; while a device's completion is watched): a
leader about to wait on the hub's fd spins for a completion predicted near (up to SPIN_NS), as
asyncio's loops do before they block (``arig._loop.spin_before_blocking``), but only where it is
the one task of trio's pass and none is runnable, so trio would block next: trio takes a pass's
tasks out of its run queue before it runs them, so a trio instrument counts each pass's tasks
(``pass_size``; no deadline fired in it: ``exact``).  Where a pass runs several tasks (many
waiters at once) no wait spins: the run is busy, and trio's own wait for I/O serves.  A spin that finds the completion delivers it on the leader's task, as a
service would, and the leader then yields once, still leading (a task whose every wait is spun for
must not keep trio from its I/O and timers, and a leader that stopped before it yielded would send
the reader standing by back to the fd, where its next wait could neither lead nor spin): no fd is
written or polled for it, where trio's own wait for I/O would cost a registration, the poll and
the eventfd's read.  That yield is skipped where it would run nothing but the leader again (no
task runnable, no deadline due, nothing ready in trio's epoll set: a pass of trio's scheduler,
about 3 µs of the run's thread).  A spin in trio's ``before_io_wait``
instead came too late on a GPU: the empty kernel's completion was always in before it, and its
delivery needed a post to end trio's wait.

Threads: ``post`` from any thread; everything else on the run's thread.
"""

from __future__ import annotations

import collections
import os
import select
import threading
from collections.abc import Callable, Generator
from typing import Any

import trio

from . import _log
from ._errors import describe
from ._loop import DEFAULT_SPIN_US, spin_before_blocking

__all__ = ["Hub", "guarded", "PENDING"]

try:
    # The run's own scheduler (its ``reschedule`` is what the public one calls, inside a frame
    # guarded from KeyboardInterrupt).
    from trio._core._run import GLOBAL_RUN_CONTEXT as _RUN
except ImportError:  # pragma: no cover - a trio without it: the public call
    _RUN = None

#: A TrioFuture's state while it has no result (``arig._trio_future`` sets the others).
PENDING = 0

#: The spin before trio blocks, at most: every loop's (``arig.new_event_loop``'s default).
SPIN_NS = DEFAULT_SPIN_US * 1000

_current_task = trio.lowlevel.current_task
_reschedule = trio.lowlevel.reschedule
_wait_rescheduled = trio.lowlevel.wait_task_rescheduled
_wait_readable = trio.lowlevel.wait_readable
_SUCCEEDED = trio.lowlevel.Abort.SUCCEEDED
_yield = trio.lowlevel.cancel_shielded_checkpoint
# Typed here: some trio releases declare the decorator without types.
_protect: Callable[[Callable[..., Any]], Callable[..., Any]] = trio.lowlevel.enable_ki_protection


def guarded(fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """Call ``fn(*args)`` on the run's thread; an exception is logged, never raised into trio's scheduler."""
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001 - asyncio's loop logs a callback's exception the same way
        report(fn, exc)


def _nothing() -> None:
    """Handed to ``run_sync_soon`` only to end trio's wait for I/O at once."""


def report(fn: Callable[..., Any], exc: BaseException) -> None:
    """Log what callback ``fn`` raised (``guarded``'s way); never raises."""
    try:
        _log.logger.error("exception in a callback of arig's trio port, %r: %s", fn, describe(exc), exc_info=(type(exc), exc, exc.__traceback__))
    except Exception:  # noqa: BLE001 - a broken handler must not crash the run
        pass


def _is_epoll(fd: int) -> bool:
    """Is ``fd`` an epoll set (Linux names its file ``anon_inode:[eventpoll]``)?"""
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[eventpoll]"
    except OSError:
        return False


class _BeforeIOWait(trio.abc.Instrument):  # type: ignore[misc]
    """A trio instrument that calls ``fn(timeout)`` each time trio is about to wait for I/O."""

    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[[float], None]) -> None:
        self._fn = fn

    def before_io_wait(self, timeout: float) -> None:
        self._fn(timeout)


class _PassCounter(trio.abc.Instrument):  # type: ignore[misc]
    """A trio instrument that notes, once per pass of trio's scheduler, how many tasks the pass
    runs (``hub.pass_size``) and whether that is all of them (``hub.exact``).  A leader alone in
    its pass is its last task: trio takes a pass's tasks out of its run queue before it runs them,
    so an empty run queue alone does not say that none is still to run.  Counting each task's step
    instead (``before_task_step``) would cost every step of every task a call (about 0.5 µs: a
    tenth of a completion's time with 64 tasks), where this costs each pass one."""

    __slots__ = ("_hub", "_runq")

    def __init__(self, hub: Hub, runq: Any) -> None:
        self._hub = hub
        self._runq = runq

    def after_io_wait(self, timeout: float) -> None:
        hub = self._hub
        hub.pass_size = len(self._runq)
        # trio wakes the tasks whose deadlines passed after this hook, into the same pass: they
        # are not counted here, so a pass where any fires is not exact (no spin in it).
        deadlines = hub._deadlines
        hub.exact = deadlines is None or deadlines.next_deadline() > hub._clock.current_time()


class Hub:
    """The port's posts and fds behind one epoll fd (see the module docstring)."""

    __slots__ = ("_q", "_efd", "_ep", "fd", "_lock", "_run_soon", "_fns", "leader", "parked", "_reader", "on_fd", "_standby", "resume", "_fast", "_nested",
                 "_watched", "_hook", "_runq", "_counter", "pass_size", "exact", "_peek", "_deadlines", "_clock")

    def __init__(self, run_soon: Callable[..., Any]) -> None:
        """On the run's thread, inside the run."""
        self._q: collections.deque[tuple[Callable[..., Any], tuple[Any, ...]]] = collections.deque()
        self._run_soon = run_soon
        #: The posts' eventfd, until the run ends (``close``); the lock keeps a post's write from
        #: reaching its number once closed (and perhaps reused).
        self._efd: int | None = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._ep = select.epoll()
        self._ep.register(self._efd, select.EPOLLIN)
        #: The hub's fd (the epoll set's), which leaders and the reader wait on; None once closed.
        self.fd: int | None = self._ep.fileno()
        self._lock = threading.Lock()
        self._fns: dict[int, Callable[[], Any]] = {}
        self._nested: set[int] = set()  # the fds in _fns that are epoll sets: called on every service
        self.leader: Any = None  # the leading task
        self.parked = False  # the leader waits on the fd (else it is running, and services before it waits)
        self._reader: object | None = None  # the running reader task's token, while the port reads an fd
        self.on_fd = False  # the reader waits on the fd: no waiter may lead
        self._standby: Any = None  # the reader's task while it stands by for a leader
        #: ``reschedule(task, value)`` for a parked waiter: the run's own while the hub runs the
        #: posts or the readers' callbacks (there KeyboardInterrupt is deferred already, which
        #: the public call's wrapper arranges, at a cost per call, for a caller anywhere).
        self.resume: Callable[[Any, Any], None] = _reschedule
        runner = getattr(_RUN, "runner", None)
        self._fast: Callable[[Any, Any], None] = getattr(runner, "reschedule", _reschedule)
        #: The devices' completions spun on before trio blocks (``watch``), and the instrument
        #: through which trio says it is about to (while the reader runs or any is watched).
        self._watched: list[Any] = []
        self._hook: _BeforeIOWait | None = None
        #: trio's run queue, and the instrument that counts the tasks of each pass (``pass_size``),
        #: while a completion is watched; without the run's queue, no spin.
        self._runq: Any = getattr(runner, "runq", None)
        self._counter: _PassCounter | None = None
        self.pass_size = 1 << 30  # none counted yet: no spin until trio's next pass
        self.exact = False  # ``pass_size`` counts every task of this pass (no deadline fired in it)
        #: What a spin-resolved leader looks at to see whether a yield would run anything but
        #: itself (``_quiet``): trio's own epoll set, polled for readiness (a poll of the set
        #: consumes none of its events), its deadlines and clock; None: always yield.
        self._peek: Any = None
        self._deadlines: Any = getattr(runner, "deadlines", None)
        self._clock: Any = getattr(runner, "clock", None)
        trio_epoll = getattr(getattr(runner, "io_manager", None), "_epoll", None)
        if trio_epoll is not None and self._deadlines is not None and self._clock is not None and hasattr(select, "poll"):
            self._peek = select.poll()
            self._peek.register(trio_epoll.fileno(), select.POLLIN)

    # -- any thread ---------------------------------------------------------------------------
    def post(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """Any thread.  Raises what ``run_sync_soon`` raises once the run is over."""
        self._q.append((fn, args))
        if self.leader is not None or self._reader is not None:
            self._wake()
            return
        self._run_soon(self.drain)

    def _wake(self) -> None:
        with self._lock:
            if self._efd is not None:
                os.eventfd_write(self._efd, 1)

    # -- the run's thread ---------------------------------------------------------------------
    def _drain(self) -> None:
        """Run what is posted so far, in order; what is posted meanwhile waits for the next pass."""
        q = self._q
        resume, self.resume = self.resume, self._fast
        try:
            for _ in range(len(q)):
                fn, args = q.popleft()
                guarded(fn, args)
        finally:
            self.resume = resume

    # KeyboardInterrupt deferred while it runs, in a leader's task too (trio's entry queue runs protected).
    drain = _protect(_drain)

    def _service(self) -> None:
        """The hub's fd was readable: run the posts and call the readers of the fds that are ready
        (and of every nested epoll set: see the module docstring)."""
        try:
            ready = self._ep.poll(0)
        except (OSError, ValueError):  # closed meanwhile (the run ends): nothing is read any more
            return
        resume, self.resume = self.resume, self._fast
        try:
            for fd, _ in ready:
                if fd == self._efd:
                    try:
                        os.eventfd_read(fd)
                    except OSError:  # noqa: S110 - read already (a wake-up a drain served)
                        pass
                else:
                    self._call(fd)
            if self._nested:  # each nested epoll set's reader, whether or not the poll found it ready
                seen = {fd for fd, _ in ready}
                for fd in list(self._nested):
                    if fd not in seen:
                        self._call(fd)
            if self._q:
                self._drain()
        finally:
            self.resume = resume

    service = _protect(_service)

    def _call(self, fd: int) -> None:
        fn = self._fns.get(fd)  # looked up now: a callback may have removed a reader after the poll
        if fn is not None:
            guarded(fn, ())

    def add(self, fd: int, fn: Callable[[], Any]) -> None:
        """Read ``fd``: ``fn()`` each time it is readable (its owner then starts the reader, ``read``)."""
        if fd in self._fns:
            try:
                self._ep.modify(fd, select.EPOLLIN)
            except FileNotFoundError:  # the number was closed (the set forgot it) and is another file's now
                self._ep.register(fd, select.EPOLLIN)
        else:
            self._ep.register(fd, select.EPOLLIN)
        self._fns[fd] = fn
        if _is_epoll(fd):
            self._nested.add(fd)
        else:
            self._nested.discard(fd)

    def remove(self, fd: int) -> bool:
        """Read ``fd`` no more; True if no fd is read any more (its owner then stops the reader)."""
        self._nested.discard(fd)
        if self._fns.pop(fd, None) is not None:
            try:
                self._ep.unregister(fd)
            except (OSError, ValueError):  # closed already (by its owner, or the hub at the run's end)
                pass
        return not self._fns

    def watching(self) -> int:
        """How many fds are read (besides the posts' eventfd)."""
        return len(self._fns)

    def start_reading(self) -> object:
        """A reader task is about to start (its owner spawns ``read`` with this token)."""
        token = self._reader = object()
        self._hooked()
        return token

    def stop_reading(self) -> None:
        """The reader's task is cancelled (its owner cancels it after this): posts go through
        ``run_sync_soon`` unless a leader reads; what was posted meanwhile is drained there."""
        self._reader = None
        self.on_fd = False  # its wait is aborted by the cancel, which comes next
        self._hooked()
        self._hand_drain()

    def _hand_drain(self) -> None:
        """No one reads the hub's fd any more: what is posted so far runs through ``run_sync_soon``."""
        if self._q:
            try:
                self._run_soon(self.drain)
            except BaseException:  # noqa: BLE001 - the run is over (RunFinishedError): nothing runs any more
                pass

    def watch(self, c: Any) -> None:
        """Spin on ``c`` (a device's completion: ``arig._loop.Spinnable``) where a leader would
        block (``lead``)."""
        if self._runq is None:
            return  # a trio without its run's queue in reach: no spin
        self._watched.append(c)
        if self._counter is None:
            self.pass_size, self.exact = 1 << 30, False
            self._counter = _PassCounter(self, self._runq)
            trio.lowlevel.add_instrument(self._counter)

    def unwatch(self, c: Any) -> None:
        if c in self._watched:
            self._watched.remove(c)
        if not self._watched:
            self._drop_counter()

    def _drop_counter(self) -> None:
        if self._counter is not None:
            counter, self._counter = self._counter, None
            try:
                trio.lowlevel.remove_instrument(counter)
            except (KeyError, RuntimeError):  # trio dropped it, or the run is over
                pass

    def _hooked(self) -> None:
        """Hear trio's ``before_io_wait`` while the reader runs, else not."""
        want = self.fd is not None and self._reader is not None
        if want and self._hook is None:
            self._hook = _BeforeIOWait(self._before_io_wait)
            trio.lowlevel.add_instrument(self._hook)
        elif not want and self._hook is not None:
            hook, self._hook = self._hook, None
            try:
                trio.lowlevel.remove_instrument(hook)
            except (KeyError, RuntimeError):  # trio dropped it, or the run is over
                pass

    def _before_io_wait(self, timeout: float) -> None:
        """trio is about to wait for I/O (every task of its pass has run); ``timeout`` > 0: none is
        runnable, and trio would block.  The reader standing by since a leader stopped, and no
        task leads again: it goes back to the hub's fd now (where trio would block, a no-op handed
        to ``run_sync_soon`` ends trio's wait at once, so that the reader runs first).  A leader
        that stops and leads again in the same step (a task's next round trip) costs the reader no
        step and trio no pass.  Never raises (trio would drop the instrument)."""
        try:
            standby = self._standby
            if standby is not None and self.leader is None and self._reader is not None:
                self._standby = None
                _reschedule(standby)
                if timeout > 0:
                    self._run_soon(_nothing)
        except BaseException as exc:  # noqa: BLE001 - as any callback of the port's: logged, never into trio's scheduler
            report(self._before_io_wait, exc)

    def _spin(self, fut: Any) -> bool:
        """Leader, about to wait on the hub's fd: where it is the only task of trio's pass and none
        is runnable (trio would block next), spin for a watched completion predicted within SPIN_NS
        and deliver it here.  True: that resolved ``fut``.  A leader in a pass of several tasks
        does not spin (it cannot tell whether the others ran), nor in one where a deadline fired."""
        if self.pass_size > 1 or self._runq or not self.exact:
            return False
        try:
            spin_before_blocking(self._watched, SPIN_NS)
        except BaseException as exc:  # noqa: BLE001 - a failed spin only falls back to the fd
            report(self._spin, exc)
        return bool(fut._state != PENDING)

    def _quiet(self) -> bool:
        """A leader whose own spin resolved its future: would a yield now run nothing but it?
        True where no task is runnable or still to run in this pass (``_spin`` ran only where the
        leader is the pass's one task, and none was woken by a deadline in it), no deadline of trio's is due, and trio's epoll set has nothing ready (the posts' and signals' wake-ups are in it, and every fd a task waits on):
        trio's pass would then poll for I/O, find none, and run this task again, so the yield is
        skipped; anything else due, and it yields.  The hub's own fd is in trio's set only while
        someone waits on it (trio arms it per wait), so the poll never polls the devices' fds."""
        peek = self._peek
        if peek is None or self._runq or not self.exact:
            return False
        if self._deadlines.next_deadline() <= self._clock.current_time():
            return False
        return not peek.poll(0)

    def may_lead(self) -> bool:
        return self.leader is None and not self.on_fd and self.fd is not None

    def lead(self, fut: Any) -> Generator[Any, Any, bool]:
        """Lead while ``fut`` is pending: the caller's task waits on the hub's fd and services it;
        it stops leading (and drains once more, and wakes the reader standing by) on its way out,
        whatever the way.  True: ``fut`` is resolved (where the leader's own spin resolved it, the
        leader yielded once since: see ``_spin``); False: the run ends (``close``) with ``fut``
        still pending: the caller waits for it as any waiter does."""
        fd, q = self.fd, self._q
        assert fd is not None
        self.leader = _current_task()
        try:
            while True:
                if q:  # (a drain costs a call through trio's KeyboardInterrupt guard)
                    self.drain()
                if fut._state != PENDING:
                    return True
                if self._watched and self._spin(fut):
                    # Resolved by the spin without a wait: yield once all the same where anything
                    # else is due (a task whose every wait is spun for must not keep trio from its
                    # I/O and timers), still leading, so that trio's wait for I/O meanwhile does
                    # not send the reader standing by back to the fd (it would take a step, and
                    # the task's next wait could not lead, nor spin).  Where nothing is, trio's
                    # pass would only run this task again: no yield (``_quiet``).
                    if not self._quiet():
                        yield from _yield().__await__()
                    return True
                self.parked = True
                try:
                    yield from _wait_readable(fd).__await__()
                except trio.ClosedResourceError:
                    return False
                finally:
                    self.parked = False
                self.service()
        finally:
            # The last drain runs while this task still leads: one that resolves its own future
            # must not wake it (it is running; on its way out by an exception it is still the
            # future's waiter, and a wake-up would reach it parked elsewhere later).  What is
            # posted meanwhile saw a leader and only wrote the posts' eventfd: handed on below.
            if q:
                self.drain()
            # The reader standing by reads the fd again before trio next waits for I/O, unless a
            # task leads again first (``_before_io_wait``).
            self.leader = None
            if q:
                self._hand_drain()

    def rouse(self) -> None:
        """The leader's future was resolved by someone else than its service: wake it."""
        if self.parked:
            self._wake()

    async def read(self, token: object) -> None:
        """The reader task: read the hub's fd while no one leads, until ``stop_reading``."""
        try:
            while self._reader is token and self.fd is not None:
                if self.leader is not None:
                    await self._stand_by()
                    continue
                self.on_fd = True
                try:
                    await _wait_readable(self.fd)
                finally:
                    if self._reader is token:
                        self.on_fd = False
                if self._reader is not token:  # never after stop_reading: a reader removed then is not called
                    break
                self._service()
                # A task the service woke may wait again at once: let it lead.  The reader yields
                # before it waits on the fd again, for two passes at most (trio runs the tasks of a
                # pass in either order); meanwhile no one waits on the fd, but the reader is due to
                # run, so trio does not block before it looks again.
                for _ in range(2):
                    if self.leader is not None or self._reader is not token:
                        break
                    await _yield()
        except (trio.ClosedResourceError, OSError):
            pass  # the run ends (close): nothing more to read
        finally:
            if self._reader is token:  # ended otherwise than by stop_reading or close
                self._reader = None
                self._hand_drain()

    async def _stand_by(self) -> None:
        task = _current_task()
        self._standby = task

        def abort(_: Any) -> trio.lowlevel.Abort:
            if self._standby is task:
                self._standby = None
            return _SUCCEEDED

        await _wait_rescheduled(abort)

    def close(self) -> None:
        """The run ends: no one leads or reads any more, a leader parked now waits as any waiter
        does and the reader ends (``notify_closing`` wakes them), and the fds are closed (run's thread)."""
        fd, self.fd = self.fd, None
        self._peek = None  # trio closes its epoll set as the run ends
        self._reader = None  # the reader ends (its task is cancelled next) and hands nothing on
        self.on_fd = False
        self._hooked()
        with self._lock:
            efd, self._efd = self._efd, None
        if fd is not None:
            try:
                trio.lowlevel.notify_closing(fd)
            except BaseException:  # noqa: BLE001 - the run is over: nothing watches the fd
                pass
        self._fns.clear()
        self._nested.clear()
        self._ep.close()
        if efd is not None:
            os.close(efd)
        self._watched.clear()
        self._drop_counter()
