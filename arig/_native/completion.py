"""The loop side of a device's native core (``core.c``): shared by the CUDA and NV devices.

The loop pushes prepared items (launches, graph launches, C fills, copies,
marks, joins) into the core's ring; the core's own thread runs them without
the GIL, has each burst's last value written into the lane's word (by the
GPU, or by a host function), watches the words, and writes the device's
eventfd while the loop is armed.  Python fills keep their place in the ring:
the core stops at them and opens a gate for the device's Python submit
thread (``py_begin``/``py_end``, :meth:`NativeCompletion.call_fill`).

A device subclasses :class:`NativeCompletion` (``cuda._completion.CudaNativeCompletion``,
``nvrm._nvq.NvCompletion``) with an ``__init__`` that makes its core
(``_start``), the exception of a fault code (``_error``) and the check of a
Python fill's result (``_fill_result``).  Whether a device gets this engine
at all is ``arig._engine``'s decision.

Threads: ``attach``, ``detach``, ``on_wake``, ``deliver``, ``put`` and
``abort`` run on the event loop and call no driver function; ``call_fill``,
``stop_thread`` and ``close`` run on the device's Python submit thread, and the core it
stops is freed on the loop (``_free_core``).
"""

from __future__ import annotations

import os
import time
from typing import Any

from .._memory import never_free
from .._errors import ArigError, FillError
from .._port import port_of, settle
from .._backend import fill_result
from .._loop import DEFAULT_SPIN_US, spin_before_blocking
from . import PY, PY_FAILED, Core

__all__ = ["NativeCompletion", "IDLE_SPIN_NS"]

#: How long the native thread waits, spinning, for the next submission once nothing is in flight, at
#: least: a task that awaited a completion usually submits again within this, and then needs no
#: wake-up.  The core lengthens it (to 150 us at most) where the next submission usually comes later.
IDLE_SPIN_NS = 50_000

#: The loop's spin in a predicted window: the core wakes the loop ahead of a long work's predicted
#: end (by as long as the loop takes to wake); if a waiter is pending and that end is at most
#: LOOP_SPIN_AHEAD_NS away, the loop spins on the words until it comes, at most LOOP_SPIN_PAST_NS
#: past it and LOOP_SPIN_MAX_NS in all.  A loop blocked in its selector takes tens of microseconds
#: to wake (more after its CPU sat idle for a millisecond); one that spins sees the word at once.
LOOP_SPIN_AHEAD_NS = 150_000
LOOP_SPIN_PAST_NS = 30_000
LOOP_SPIN_MAX_NS = 200_000

#: The loop's lead: from its wake-up (``on_wake``) to its spin in the window it takes a delivery
#: that finds nothing, a pass of the loop and the waiter's task step (``Timeline.spin_hint``), all
#: on caches gone cold while it slept: tens of microseconds after milliseconds asleep.  The loop
#: learns how long (a moving mean, weight LEAD_WEIGHT per spin) and tells the core, whose pre-wakes
#: then come that much earlier; it tells again once the figure moved by LEAD_TELL_NS.
LEAD_WEIGHT = 0.2
LEAD_TELL_NS = 2_000

#: The spin before the loop blocks, on a loop that has no spinning selector (asyncio's default
#: loop, uvloop): once a waiter parks and the loop has run what was ready then, if nothing else is
#: ready and a completion is predicted within PARK_SPIN_NS (or none is predicted yet: just
#: submitted), the loop spins on the words for at most PARK_SPIN_NS, as ``arig.new_event_loop``'s
#: selector does before it blocks.  Short work (an empty kernel: a few microseconds of GPU time) is
#: then seen as the GPU writes its word, not ~10-20 µs later through the eventfd and a wake-up of a
#: blocked loop, which also costs more CPU than the spin.  Long work is predicted far: no spin.
#: Where the loop does not say whether more is ready (uvloop), it spins only for a lone waiter.
#: The same bound as ``arig.new_event_loop``'s default.
PARK_SPIN_NS = DEFAULT_SPIN_US * 1000


class NativeCompletion:
    """The loop side of a device's native core (see the module docstring); a device subclasses it
    for its ``__init__`` (which makes the core), its faults' exceptions and its fills' results."""

    name = "native"
    # The loop's own counters of its spin window (loop thread only; stats() reports them).
    _woke_empty = _woke_far = _loop_spins = _loop_spin_hits = 0
    _far_ns = 0  # summed: how far the predicted end was when the loop woke too early to spin
    _woke_at = 0  # CLOCK_MONOTONIC ns of the loop's last wake-up (on_wake)
    _lead = 0.0  # the loop's lead to its spin (LEAD_WEIGHT), and what the core was told of it
    _lead_told = 0
    # The spin before the loop blocks (spin_due, spin: any loop's): how many, how many saw progress;
    # the predicted end last asked about, and one a spin already missed (not spun for again until
    # some progress: a miss while none was predicted, 0, waits for progress too).
    _idle_spins = _idle_spin_hits = 0
    # Park spins that did not spin, by why: the loop had more ready (or, uvloop, more tasks wait),
    # the wait was over already, or nothing was due within the spin (far, or missed already).
    _park_ready = _park_done = _park_far = 0
    _park_looks = 0  # park spins that did not spin but found progress in their look (made while held)
    _due_asked = 0
    _missed_due = -1
    _park_queued = False  # a park spin is queued on the loop (PARK_SPIN_NS)
    #: What a submission (``put``) calls, as a waiter's park does: the park spin's queueing
    #: (asyncio's default loop and uvloop) or the hold until the selector's next look
    #: (``arig.new_event_loop``); None: nothing (trio).
    _at_put: Any = None
    _held = False  # held until the selector's next look (look)

    def _start(self, owner: Any, n: int, memops: bool, make: Any, join: bool) -> None:
        """Make and start the core (``make(eventfd)``); ``join``: its last lane is the join lane."""
        self._owner = owner  # the backend: its name, timeline and submit thread
        self._n = n
        self._memops = memops
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.core: Core | None = None
        self._reader = False
        self._efd_free = False
        try:
            self.core = make(self._efd)
            self.core.loop_window(LOOP_SPIN_AHEAD_NS)
            self.core.start()
        except BaseException:
            self.close(idle=True)
            raise
        core = self.core
        self._ptr = core.ptr
        self._push = core.push_fn
        self._arm = core._arm
        self._tail = core.tail
        self._fault = core.fault_word
        lanes = list(zip(range(self._n), core.words if memops else [None] * self._n, core.hwords, core.time_values, core.times))
        # The last lane is the join lane: read once something was joined there (add_join_lane).
        self._lanes = lanes[:-1] if join else lanes
        self._join: tuple[Any, ...] | None = lanes[-1] if join else None
        self._pushed = 0  # items pushed (the ring's head, as the loop counts it)
        self._port: Any = None
        self._selector: Any = None
        self._space: list[Any] = []  # futures of submits waiting for room
        self._limit = core.cap
        self._lost_told = False

    @property
    def open(self) -> bool:
        return self.core is not None

    @property
    def description(self) -> str:
        return "native core"

    # -- loop thread ---------------------------------------------------------------
    def attach(self, loop: Any, limit: int) -> None:
        """At open: read the core's eventfd on ``loop``; at most ``limit`` items outstanding (``detach`` undoes it)."""
        port = self._port = port_of(loop)
        self._limit = min(limit, self.core.cap if self.core else limit)
        port.add_reader(self._efd, self.on_wake)
        self._reader = True
        self._selector = port.spin_selector()
        if self._selector is not None:
            self._selector.watch(self)
            if getattr(self._selector, "looks", False):  # it reads the lanes at every select (look)
                self._owner.timeline.on_park = self._at_put = self._hold_until_look
        elif port.spins_at_park:
            self._owner.timeline.on_park = self._on_park  # the loop spins not by itself: spin once a waiter parks
            self._at_put = self._on_park  # ... and holds the core from each submission on (put)

    def add_join_lane(self) -> None:
        """Loop thread: deliver the join lane's progress too (its timeline lane exists now)."""
        if self._join is not None:
            self._lanes.append(self._join)
            self._join = None

    def full(self) -> bool:
        return self._pushed - self._tail.value >= self._limit

    async def wait_space(self, check: Any) -> None:
        while self.full():
            check()
            fut = self._port.create_future()  # one per waiter: cancelling one cancels no other
            self._space.append(fut)
            assert self.core is not None
            self.core.want_space()
            if not self.full():  # re-check after announcing: the core writes the eventfd only after it
                break
            await fut

    def wake_space(self) -> None:
        waiters, self._space = self._space, []
        for fut in waiters:
            settle(fut, None)

    def forget_space(self) -> None:
        """The loop closed: drop the futures of submits waiting for room (any thread)."""
        self._space = []

    def put(self, qi: int, item: tuple[Any, ...], v: int) -> None:
        """Loop thread: hand a prepared item to the core (a Python fill also to the submit thread)."""
        kind = item[0]
        if kind == PY:
            self._owner.submit_thread.put_fill(qi, item[1], item[2], v)
            rc = self._push(self._ptr, kind | qi << 8, v, item[3], 0, 0)  # a: 1 for a gated fill
        else:
            rc = self._push(self._ptr, kind | qi << 8, v, item[1], item[2], item[3])
        if rc:  # the ring is full: full() bounds submissions below its size
            raise RuntimeError("arig: the native ring overflowed")
        self._pushed += 1
        hook = self._at_put
        if hook is not None:
            # A submission's waiter usually parks in the same task step; short work (a marker)
            # can complete before it does: hold the core (and queue the park spin) now.
            hook()

    def on_wake(self) -> None:
        """The eventfd is readable: re-arm, then read every lane and resolve in one batch."""
        self._woke_at = time.monotonic_ns()
        try:
            os.read(self._efd, 8)
        except (BlockingIOError, OSError):
            pass
        if self.core is not None:
            self._held = False
            self._arm(self._ptr)
            if not self.deliver() and self._owner.timeline.waiting:
                self._spin_window()

    def _spin_window(self) -> None:
        """Woken with nothing to deliver (the core's wake ahead of a predicted end): spin on the
        words while that end is near (see LOOP_SPIN_AHEAD_NS), then deliver what came."""
        core = self.core
        assert core is not None
        due = core.due()
        if not due:
            return
        self._woke_empty += 1
        left = due - time.monotonic_ns()
        if left > LOOP_SPIN_AHEAD_NS:
            self._woke_far += 1
            self._far_ns += left
            return  # woken early: the core tells the completion as usual
        # The first waiter spins on its own task (Timeline.spin_hint says why); where none is
        # left to (every waiter cancelled meanwhile), the loop spins here.
        if not self._owner.timeline.spin_hint(self._spin_near):
            self._spin_near()

    def _spin_near(self) -> None:
        """Loop thread (a waiter's task, or the loop's callback): spin on the words while the
        predicted end is near (see LOOP_SPIN_AHEAD_NS), then deliver what came.  Never raises."""
        core = self.core
        if core is None:
            return
        now = time.monotonic_ns()
        due = core.due()
        left = due - now
        if not due or left > LOOP_SPIN_AHEAD_NS:
            return  # delivered meanwhile, or the end now predicted is further away: the core tells
        if self._woke_at:
            took = min(now - self._woke_at, LOOP_SPIN_MAX_NS)  # a sample past this is no wake-up's (the core caps its lead lower)
            lead = self._lead = self._lead + LEAD_WEIGHT * (took - self._lead)
            if abs(lead - self._lead_told) > LEAD_TELL_NS:
                self._lead_told = int(lead)
                core.loop_lead(self._lead_told)
        self._loop_spins += 1
        if core.loop_spin(min(max(left, 0) + LOOP_SPIN_PAST_NS, LOOP_SPIN_MAX_NS)):
            self._loop_spin_hits += 1
            self.deliver_spun()
        else:
            self._missed_due = due  # past it now: the loop spins for this end no more (spin_due)

    def deliver(self) -> bool:
        """Loop thread: report every lane's progress (one batch), then any fault.  True: progress."""
        tl = self._owner.timeline
        seen = self.core.seen if self.core is not None else None
        if seen is None:
            return False
        progressed = False
        for q, word, hword, tv, t in self._lanes:
            v = hword.value
            if word is not None:
                w = word.value
                if w > v:
                    v = w
            if v > seen[q]:
                seen[q] = v
                # The core's time of this value (read after the value it is of: it is
                # written first), or now where the loop read the word before the core did.
                stamped = tv.value >= v
                ns = t.value if stamped else self._release_time(q)
                tl.report_local(q, v, ns * 1e-9 if ns else None)
                progressed = True
                self._missed_due = -1
        if self._fault.value and not self._lost_told:
            self._fault_found()
        if self._space and not self.full():
            self.wake_space()
        return progressed

    def _fault_found(self) -> None:
        assert self.core is not None
        f = self.core.fault()
        if f is None:
            return
        self._lost_told = True
        code, lane, v = f
        tl = self._owner.timeline
        if code not in (PY_FAILED, -2) and tl.lost is None:  # Python reported its own error, or the loop lost it
            tl.fail(self._error(code, lane, v))

    def _release_time(self, lane: int) -> int:
        """CLOCK_MONOTONIC ns of a lane's completion the core has not stamped yet (0: unknown: now)."""
        return 0

    def _error(self, code: int, lane: int, v: int) -> BaseException:
        """The exception of the failure the core found (its code, lane and value): the device's to say."""
        return ArigError(f"work on lane {lane} of {self._owner.name}, value {v} or earlier, failed with code {code} (found by the native core)")

    def abort(self) -> None:
        """The device is lost (loop thread): the core runs nothing more."""
        if self.core is not None:
            self._lost_told = True
            self.core.abort()

    # -- the spin before the loop blocks (loop thread): arig._loop.spin_before_blocking ---------
    def spin_due(self, now_ns: int, window_ns: int) -> bool:
        """Is a waiter pending and a completion predicted within ``window_ns`` (and not spun for
        in vain already)?"""
        if self.core is None or not self._owner.timeline.waiting:
            return False
        due = self._due_asked = self.core.due()  # 0: nothing predicted yet (just submitted); the spin ends once it is, if past the window
        return due - now_ns < window_ns and due != self._missed_due

    def spin(self, ns: int) -> bool:
        if self.core is None:
            return False
        self._held = False  # the core's loop_spin re-arms it (or deliver_spun does, after a hit)
        self._idle_spins += 1
        if self.core.loop_spin(ns):
            self._idle_spin_hits += 1
            return True
        self._missed_due = self._due_asked
        return False

    def _on_park(self) -> None:
        """A waiter parks (loop thread, ``Timeline.wait``), or work is submitted (``put``): queue the
        park spin (PARK_SPIN_NS) behind what the loop has ready now, once.  Until it runs, the core writes no eventfd (``hold``):
        the loop is awake and reads the lanes there before it can block, so a completion that
        comes meanwhile (short work, a marker: often before the loop has run what was ready) costs
        no eventfd write, poll and read, and is not queued behind the spin as the eventfd's
        callback (which kept the spin from spinning: more was ready)."""
        core = self.core
        if not self._park_queued and self._port is not None and core is not None:
            self._port.soon(self._park_spin)
            self._park_queued = True
            core.hold(True)

    def _park_spin(self) -> None:
        """The loop ran what was ready when a waiter parked: unless more is ready, spin before it
        blocks (PARK_SPIN_NS); where it does not spin, release the hold and read the lanes.
        Never raises."""
        self._park_queued = False
        core = self.core
        if core is None:
            return
        others = self._port.others_ready()
        if others or (others is None and self._owner.timeline.waiters > 1):
            # The loop does not block now (whoever parks next queues the spin again); or a loop
            # that does not say (uvloop), and more tasks wait: some may be ready behind the spin.
            self._park_ready += 1
        elif not self._owner.timeline.waiting:
            self._park_done += 1  # delivered already
        else:
            spun = spin_before_blocking([self], PARK_SPIN_NS)
            if spun:
                return  # the spin re-armed the core (a hit: through deliver_spun) and read the lanes after
            self._park_far += 1
        core.hold(False)  # re-armed with a full barrier: what comes after this is written to the eventfd
        if self.deliver():
            self._park_looks += 1

    def _hold_until_look(self) -> None:
        """A waiter parks or work is submitted, on a loop whose selector reads the lanes at every
        select (``look``): hold the core's eventfd writes until the select where the loop would
        block, as the park spin's queueing does on the other asyncio loops."""
        core = self.core
        if not self._held and core is not None:
            self._held = True
            core.hold(True)

    def look(self, blocking: bool) -> bool:
        """The selector's select (loop thread): while the core is held, read the lanes; where the
        loop would block (``blocking``), release the hold first (a re-arm with a full barrier:
        what comes after it is written to the eventfd).  True: progress delivered."""
        if not self._held:
            return False
        core = self.core
        if core is None or blocking:
            self._held = False
            if core is None:
                return False
            core.hold(False)
        return self.deliver()

    def deliver_spun(self) -> None:
        if self.core is not None:
            self.core.arm()  # the spin left the loop disarmed
            self.deliver()

    def detach(self) -> None:
        if self._selector is not None:
            self._selector.unwatch(self)
            self._selector = None
        if self._owner.timeline.on_park in (self._on_park, self._hold_until_look):
            self._owner.timeline.on_park = None
        self._at_put = None
        if self._reader:
            self._port.remove_reader(self._efd)
            self._reader = False
        if self._efd_free and self._efd >= 0:
            os.close(self._efd)
            self._efd = -1

    # -- the Python submit thread ---------------------------------------------------------
    def call_fill(self, queue: Any, fill: Any, arg: Any, v: int) -> None:
        """Submit thread: a Python fill, at its place in the core's ring (the gate), given ``queue``
        (a CUDA stream handle, an NV queue)."""
        core = self.core
        assert core is not None
        if not core.py_begin(v):
            return  # lost or stopping: the core skipped this value
        try:
            self._fill_result(fill(queue, arg, v), v)
        except BaseException:
            core.py_end(v, PY_FAILED)
            raise
        core.py_end(v, 0)

    def _fill_result(self, r: Any, v: int) -> None:
        """Raise for a Python fill's result that is not success (None or 0): the device names its codes."""
        if r is not None:
            fill_result(r, v, _fill_error)

    def lanes(self) -> None:
        """None: the core reports completions by itself, the pure engine has no lanes to run."""
        return None

    def stop_thread(self) -> None:
        """Stop the native thread (submit thread, at close): nothing is launched after this."""
        if self.core is not None:
            self.core.stop()

    def stats(self) -> dict[str, int]:
        """The core's counters and gauges, then the loop's: woken ahead of a completion with a
        prediction (``loop_woke_empty``), of those too early to spin (``loop_woke_far``, and how far
        in all: ``loop_far_ns``), spins in the window and those that saw the completion, and spins
        before the loop blocks and those that saw progress (``idle_spins``, ``idle_spin_hits``), and
        the park spins that did not spin, by why: more was ready (``park_ready``), the wait was over
        (``park_done``), nothing was due within the spin (``park_far``), and those that found progress
        in the look that released the core's hold (``park_looks``)."""
        out = self.core.stats() if self.core is not None else {}
        out.update(loop_woke_empty=self._woke_empty, loop_woke_far=self._woke_far, loop_far_ns=self._far_ns,
                   loop_spins=self._loop_spins, loop_spin_hits=self._loop_spin_hits, loop_lead_ns=self._lead_told,
                   idle_spins=self._idle_spins, idle_spin_hits=self._idle_spin_hits,
                   park_ready=self._park_ready, park_done=self._park_done, park_far=self._park_far, park_looks=self._park_looks)
        return out

    def close(self, idle: bool) -> None:
        """Free the core and the eventfd, or keep them forever where a host
        function may still run (``idle`` False: a stream still has work)."""
        core, self.core = self.core, None
        if core is not None:
            core.stop()
            if idle:
                self._free_core(core)
            else:
                never_free(core)
        if not idle:
            never_free(self._efd)  # a host function may still write it: never reused
        elif not self._reader and self._efd >= 0:
            os.close(self._efd)
            self._efd = -1
        else:
            self._efd_free = True  # closed by detach, once the loop no longer reads it
        if self._reader and self._port is not None:
            # A device never stopped (collected) is closed without Device.stop's detach:
            # the loop drops the reader itself.  Harmless twice: detach is idempotent.
            self._port.post(self.detach)

    def _free_core(self, core: Core) -> None:
        """Submit thread: free the stopped core on the loop's thread, after whatever the loop runs
        now.  The loop may be inside one of its calls that read the core's memory: a spin in the
        window releases the GIL for up to LOOP_SPIN_MAX_NS, and a core freed meanwhile would be
        read after its free.  Where the loop is closed, or the device never reached it, nothing
        runs there any more: freed here.  (A loop that closes between the look and the post
        drops the call: that core is never freed, and never read.)"""
        port = self._port
        if port is None or port.closed:
            core.destroy()
        else:
            port.post(core.destroy)


def _fill_error(code: int, v: int) -> BaseException:
    return FillError(code)

