"""On asyncio's loops, a waiter that parks on short work is spun for before the loop blocks.

A completion reaches a loop blocked in its selector through the eventfd, and the wake-up costs
tens of microseconds more than a loop that is still running.  ``arig.new_event_loop``'s selector
spins for a completion predicted near just before it blocks; asyncio's default loop and uvloop get
the same spin from the native engine: when a waiter parks (``Timeline.on_park``), a callback is
queued behind what the loop has ready then (one per pass, however many park); when it runs and
nothing else is ready (``LoopPort.others_ready``; where the loop does not say, as uvloop, only for
a lone waiter), it spins up to ``PARK_SPIN_NS`` for a completion predicted within that (or none
predicted yet: just submitted), and delivers.  A predicted end spun for in vain is not spun for
again until some progress.  From the park until that spin (or the look that ends it where it
does not spin) reads the lanes, the core writes no eventfd (``Core.hold``): a completion that
comes meanwhile is read there.

A trio run gets no spin at the park (``LoopPort.spins_at_park``).  Unless ``ARIG_TRIO_SPIN=0``, the
waiter that leads the run's fd spins before it waits on it, where it is the one task of trio's
pass and none is runnable (a trio instrument counts each pass's tasks), and yields after a spin
that resolved it where anything else is due.  A spin on every leader (tried before) kept the rest of its pass
waiting, since trio takes a pass's tasks out of its run queue before it runs them, and a waiter
resolved by its own spin went on without yielding: 64 tasks on an H100 completed at one task's rate.

Here over stand-ins of a device's completion (what the spin does is the core's ``loop_spin``,
measured on a GPU by the bench) and over FakeCuda's native core on real loops.
"""

from __future__ import annotations

import asyncio
import collections
import time
import types
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest
import trio
import trio.abc

import arig
import arig._env
import arig._loop
import arig._native
import arig.cuda
from arig._native import completion as nc
from arig._port import AsyncioPort
from arig._running import running_loop
from arig.testing import FakeCuda


class _Core:
    """The loop-side calls of a core whose next completion is predicted ``ahead_ns`` from now."""

    def __init__(self, ahead_ns: int | None, sees: bool) -> None:
        self._due = 0 if ahead_ns is None else time.monotonic_ns() + ahead_ns
        self.sees = sees
        self.spins: list[int] = []
        self.armed = 0
        self.pending = False
        self.held: list[bool] = []  # hold(True) and hold(False), in order

    def hold(self, on: bool) -> None:
        self.held.append(on)

    def due(self) -> int:
        return self._due

    def loop_spin(self, ns: int) -> bool:
        self.spins.append(ns)
        self.pending = self.sees  # what the spin saw, the next read of the lanes delivers
        return self.sees

    def arm(self) -> None:
        self.armed += 1


class _Timeline:
    waiting = True
    waiters = 1
    on_park: Any = None


class _Owner:
    def __init__(self) -> None:
        self.timeline = _Timeline()


class _Port:
    """A loop port that queues ``soon`` calls (run by the test) and says whether others are ready."""

    def __init__(self) -> None:
        self.queued: list[Any] = []
        self.others: bool | None = False

    def soon(self, fn: Any) -> None:
        self.queued.append(fn)

    def others_ready(self) -> bool | None:
        return self.others


def _completion(core: _Core) -> Any:
    c = nc.NativeCompletion.__new__(nc.NativeCompletion)
    c.core = core  # type: ignore[assignment]
    c._owner = _Owner()
    c._port = _Port()
    c.delivered = 0
    c.progress = False  # a lane moved that no spin saw: the next read of the lanes finds it

    def deliver() -> bool:
        found = c.progress or (c.core is not None and c.core.pending)
        if found:
            c.core.pending = c.progress = False
            c.delivered += 1
            c._missed_due = -1  # progress, as the real deliver notes it
        return found

    c.deliver = deliver
    c.stats_why = lambda: (c._park_ready, c._park_done, c._park_far)
    return c


def test_many_parks_queue_one_spin_behind_what_is_ready() -> None:
    c = _completion(_Core(5_000, sees=True))
    for _ in range(10):
        c._on_park()
    assert len(c._port.queued) == 1 and c.core.spins == [], "queued once, nothing spun at the park itself"
    c._port.queued.pop()()
    assert c.core.spins == [nc.PARK_SPIN_NS] and c.core.armed == 1 and c.delivered == 1
    c._on_park()
    assert len(c._port.queued) == 1, "the next park queues it again"


@pytest.mark.parametrize("ahead_ns", [None, 0, 5_000, 25_000])
def test_a_near_or_unpredicted_completion_is_spun_for_when_nothing_else_is_ready(ahead_ns: int | None) -> None:
    c = _completion(_Core(ahead_ns, sees=True))
    c._on_park()
    c._port.queued.pop()()
    assert c.core.spins == [nc.PARK_SPIN_NS] and c.delivered == 1
    assert (c._idle_spins, c._idle_spin_hits) == (1, 1)


def test_no_spin_while_the_loop_has_other_callbacks_ready() -> None:
    c = _completion(_Core(5_000, sees=True))
    c._port.others = True
    c._on_park()
    c._port.queued.pop()()
    assert c.core.spins == [] and c.delivered == 0
    assert c.stats_why() == (1, 0, 0), "counted: more was ready"


@pytest.mark.parametrize("ahead_ns", [nc.PARK_SPIN_NS + 20_000, 1_000_000])
def test_no_spin_for_a_completion_predicted_further_than_the_spin(ahead_ns: int, monkeypatch: pytest.MonkeyPatch) -> None:
    core = _Core(ahead_ns, sees=True)
    # The clock stands still at the core's making: a machine that stalls between here and the
    # spin's look must not bring the end into the window.
    monkeypatch.setattr(arig._loop, "time", types.SimpleNamespace(monotonic_ns=lambda: core._due - ahead_ns))
    c = _completion(core)
    c._on_park()
    c._port.queued.pop()()
    assert c.core.spins == [] and c.delivered == 0
    assert c.stats_why() == (0, 0, 1), "counted: nothing due within the spin"


def test_no_spin_without_a_waiter_or_once_the_device_is_closed() -> None:
    c = _completion(_Core(5_000, sees=True))
    c._owner.timeline.waiting = False
    c._on_park()
    c._port.queued.pop()()
    assert c.core.spins == []
    assert c.stats_why() == (0, 1, 0), "counted: the wait was over"
    c._owner.timeline.waiting = True
    c._on_park()
    core, c.core = c.core, None
    c._port.queued.pop()()  # the device closed meanwhile
    assert core.spins == []


def test_an_end_spun_for_in_vain_is_not_spun_for_again_until_progress() -> None:
    core = _Core(5_000, sees=False)
    c = _completion(core)
    for _ in range(3):
        c._on_park()
        c._port.queued.pop()()
    assert len(core.spins) == 1 and c.delivered == 0, "one spin for that end"
    c.progress = True
    c.deliver()  # progress
    c._on_park()
    c._port.queued.pop()()
    assert len(core.spins) == 2, "after progress the loop spins again"


def test_a_miss_while_nothing_was_predicted_waits_for_progress_too() -> None:
    core = _Core(None, sees=False)
    c = _completion(core)
    for _ in range(3):
        c._on_park()
        c._port.queued.pop()()
    assert len(core.spins) == 1


def test_a_missed_spin_in_the_predicted_window_is_not_spun_again_at_the_park() -> None:
    core = _Core(20_000, sees=False)
    c = _completion(core)
    c._spin_near()  # the window's spin (after a pre-wake) missed this end
    assert len(core.spins) == 1
    c._on_park()
    c._port.queued.pop()()
    assert len(core.spins) == 1, "the park spin does not spin for it again"


def test_the_core_is_held_from_the_park_until_the_spin_or_its_look_reads_the_lanes() -> None:
    """A hold per queued spin; a spin that ran re-armed the core itself (``loop_spin``, ``arm``),
    and every other way out releases the hold and reads the lanes (``park_looks`` where that found
    progress)."""
    hit = _completion(_Core(5_000, sees=True))
    for _ in range(3):
        hit._on_park()
    assert hit.core.held == [True], "held once, as the spin is queued once"
    hit._port.queued.pop()()
    assert hit.core.held == [True] and hit.core.armed == 1, "the spin's hit re-armed the core"

    missed = _completion(_Core(5_000, sees=False))
    missed._on_park()
    missed._port.queued.pop()()
    assert missed.core.held == [True] and missed.delivered == 0, "the core's loop_spin re-arms and reads after a miss"

    for why in ("ready", "done", "far"):
        c = _completion(_Core(1_000_000 if why == "far" else 5_000, sees=True))
        c._port.others = why == "ready"
        c._owner.timeline.waiting = why != "done"
        c._on_park()
        c.progress = True  # a completion came while held
        c._port.queued.pop()()
        assert c.core.held == [True, False] and c.delivered == 1, why
        assert c._park_looks == 1, why

    closed = _completion(_Core(5_000, sees=True))
    closed.core = None
    closed._on_park()
    assert closed._port.queued == [], "no core: nothing queued, nothing held"


def _kicks(st: dict[str, int]) -> int:
    """eventfd writes but the pre-wakes' and nudges' (they wake the loop whatever the hold)."""
    return st["eventfd_writes"] - st["prewakes"] - st["nudges"]


def test_a_completion_made_while_the_core_is_held_writes_no_eventfd_and_is_read_at_release() -> None:
    """Over FakeCuda's native core: with the hold, work that completes writes nothing to the
    device's eventfd for its completion, and releasing the hold then reading the lanes delivers it;
    without the hold the same work writes the eventfd.  (The core's pre-wakes and nudges wake the
    loop ahead of a predicted end whatever the hold: not counted.)"""

    async def main(fake: FakeCuda) -> list[tuple[int, int]]:
        out = []
        async with await arig.open(arig.cuda.gpu(0), stop_timeout=10) as dev:
            img = await dev.load(fake.image(empty=(_store, ())))
            launch = arig.cuda.Launch(img.function("empty"), 1, 1, b"")
            c = dev._backend.completion
            c._at_put = None  # the core's hold alone, set here, not the one each submission takes
            for held in (True, False):
                await dev.wait(await dev.submit(launch))  # the loop armed, nothing in flight
                # The native thread counts a write after it made it: let the last wait's settle.
                await asyncio.sleep(0.05)
                st0 = c.stats()
                c.core.hold(held)
                v = await dev.submit(launch)
                t_end = time.monotonic() + 10
                # The loop thread stays here (blocking, as no loop should: a test's look) until the
                # fake GPU wrote the value and the native thread saw it.
                while max(max(w.value if w is not None else 0, h.value) for _, w, h, _, _ in c._lanes) < v and time.monotonic() < t_end:
                    time.sleep(0.001)
                time.sleep(0.05)  # the native thread's look at the words, and its write if armed
                st1 = c.stats()
                out.append((_kicks(st1) - _kicks(st0), st1["eventfd_writes"] - st0["eventfd_writes"]))
                if held:
                    c.core.hold(False)
                    assert c.deliver() and dev.reached >= v, "released, the read delivers it"
                await dev.wait(v)
        return out

    fake = FakeCuda()
    with fake.installed():
        if arig._native.library() is None:
            pytest.skip("the native core is not in use here")
        out = asyncio.run(main(fake))
    assert out[0][0] == 0, f"held: no eventfd write for the completion ({out[0]})"
    assert out[1][1] >= 1, f"not held: the eventfd was written ({out[1]})"


async def _submitted_and_done_while_the_loop_is_busy(fake: FakeCuda) -> tuple[int, bool, bool]:
    """Submit an empty kernel over FakeCuda's native core and keep the loop thread busy until the
    fake GPU wrote its completion: the eventfd writes for it, whether the device had reached it
    before the loop's next pass, and whether it had after."""
    async with await arig.open(arig.cuda.gpu(0), stop_timeout=10) as dev:
        img = await dev.load(fake.image(empty=(_store, ())))
        launch = arig.cuda.Launch(img.function("empty"), 1, 1, b"")
        c = dev._backend.completion
        await dev.wait(await dev.submit(launch))
        await asyncio.sleep(0.05)  # that wait's writes settle (the native thread counts one after it made it)
        st0 = c.stats()
        v = await dev.submit(launch)
        t_end = time.monotonic() + 10
        while max(max(w.value if w is not None else 0, h.value) for _, w, h, _, _ in c._lanes) < v and time.monotonic() < t_end:
            time.sleep(0.001)  # the loop thread stays here (a test's look) until the fake GPU wrote it
        time.sleep(0.05)  # the native thread's look, and its write if the core were armed
        told = _kicks(c.stats()) - _kicks(st0)
        before = dev.reached >= v
        await asyncio.sleep(0)  # the next pass: the park spin (asyncio's loops) or the select's look (arig's own)
        return told, before, dev.reached >= v


def test_a_submission_holds_the_core_until_the_loop_reads_the_lanes() -> None:
    """On asyncio's default loop, over FakeCuda's native core: work submitted and done before its
    waiter parks (here: before the loop runs anything more) writes no eventfd; the park spin that
    the submission queued delivers it."""
    fake = FakeCuda()
    with fake.installed():
        if arig._native.library() is None:
            pytest.skip("the native core is not in use here")
        told, _, reached = asyncio.run(_submitted_and_done_while_the_loop_is_busy(fake))
    assert told == 0, "held from the submission: no eventfd write for the completion"
    assert reached, "the park spin the submission queued delivered it"


class _Looked:
    """A watched completion that records the selector's looks (True: where it would block)."""

    def __init__(self, delivers: bool) -> None:
        self.calls: list[bool] = []
        self.delivers = delivers

    def look(self, blocking: bool) -> bool:
        self.calls.append(blocking)
        return self.delivers

    def spin_due(self, now_ns: int, window_ns: int) -> bool:
        return False

    def spin(self, ns: int) -> bool:
        return False

    def deliver_spun(self) -> None:
        pass


def test_arigs_own_selector_looks_at_every_select_and_does_not_block_after_a_delivery(monkeypatch: pytest.MonkeyPatch) -> None:
    import selectors

    timeouts: list[float | None] = []
    monkeypatch.setattr(selectors.EpollSelector, "select", lambda self, timeout=None: timeouts.append(timeout) or [])
    sel = arig._loop.SpinSelector(30)
    try:
        idle = _Looked(delivers=False)
        sel.watch(idle)
        sel.select(0)
        sel.select(0.5)
        assert idle.calls == [False, True], "a look at each select; released where the loop would block"
        assert timeouts == [0, 0.5]
        sel.watch(_Looked(delivers=True))
        sel.select(0.5)
        assert timeouts[-1] == 0, "a look that delivered: its tasks are ready, the select does not block"
    finally:
        sel.close()


def test_on_arigs_own_loop_a_submission_holds_the_core_until_the_next_select() -> None:
    """Over FakeCuda's native core on ``arig.new_event_loop``: work submitted and done while the
    loop is busy writes no eventfd for its completion; the next select's look delivers it."""
    fake = FakeCuda()
    with fake.installed():
        if arig._native.library() is None:
            pytest.skip("the native core is not in use here")
        with asyncio.Runner(loop_factory=arig.new_event_loop) as runner:
            told, before, after = runner.run(_submitted_and_done_while_the_loop_is_busy(fake))
    assert told == 0, "held from the submission: no eventfd write for the completion"
    assert not before and after, "the next select's look delivered it"


def test_asyncios_port_says_whether_other_callbacks_are_ready() -> None:
    async def main() -> None:
        port = AsyncioPort(asyncio.get_running_loop())
        assert port.spins_at_park
        seen: list[bool] = []
        port.soon(lambda: seen.append(port.others_ready()))
        asyncio.get_running_loop().call_soon(lambda: None)  # queued after it: ready when it runs
        await asyncio.sleep(0.01)
        port.soon(lambda: seen.append(port.others_ready()))
        await asyncio.sleep(0.01)
        assert seen == [True, False]

    asyncio.run(main())


def _store(args: bytes) -> None:
    return None


async def _round_trips(fake: FakeCuda, n: int) -> dict[str, Any]:
    dev = await arig.open(arig.cuda.gpu(0), stop_timeout=10)
    try:
        img = await dev.load(fake.image(empty=(_store, ())))
        launch = arig.cuda.Launch(img.function("empty"), 1, 1, b"")
        for _ in range(n):
            await dev.wait(await dev.submit(launch))
        out = np.zeros(4, np.uint8)
        buf = await dev.alloc(4)
        await dev.upload(buf, np.arange(4, dtype=np.uint8))
        await dev.download(buf, out)
        assert out.tolist() == [0, 1, 2, 3]
        hook = dev._backend.timeline.on_park  # the park spin's queueing, the hold until a select's look, or None
        return dict(dev._backend.completion.stats(), on_park=getattr(hook, "__name__", "") == "_on_park", hook=getattr(hook, "__name__", None))
    finally:
        await dev.stop()


def test_waits_on_the_default_asyncio_loop_are_spun_for_when_they_park() -> None:
    fake = FakeCuda()
    with fake.installed():
        if arig._native.library() is None:
            pytest.skip("the native core is not in use here")
        stats = asyncio.run(_round_trips(fake, 50))
    assert stats["on_park"] and stats["idle_spins"] >= 1, stats
    assert fake.violations == []


def test_arigs_own_loop_spins_in_its_selector_not_at_the_park() -> None:
    fake = FakeCuda()
    with fake.installed():
        if arig._native.library() is None:
            pytest.skip("the native core is not in use here")
        with asyncio.Runner(loop_factory=arig.new_event_loop) as runner:
            stats = runner.run(_round_trips(fake, 20))
    assert not stats["on_park"], "no park spin where the selector spins"
    assert stats["hook"] == "_hold_until_look", "a park holds the core until the selector's next look"


@pytest.mark.parametrize("switch", [False, True])
def test_a_trio_run_spins_not_at_the_park_but_before_it_blocks_with_the_switch(switch: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arig._env, "TRIO_SPIN", switch)
    fake = FakeCuda()
    with fake.installed():
        if arig._native.library() is None:
            pytest.skip("the native core is not in use here")
        stats = trio.run(_round_trips, fake, 50)
    assert not stats["on_park"], "no spin at the park under trio"
    assert (stats["idle_spins"] >= 1) if switch else (stats["idle_spins"] == 0), stats
    assert fake.violations == []


def test_with_the_trio_spin_many_tasks_each_get_their_completions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sixteen tasks each await 15 empty kernels over FakeCuda's native core, with the spin (which
    runs only where the leader is the one task of its pass, so with sixteen tasks seldom)."""
    monkeypatch.setattr(arig._env, "TRIO_SPIN", True)

    async def main(fake: FakeCuda) -> tuple[list[int], dict[str, Any]]:
        done = [0] * 16
        async with await arig.open(arig.cuda.gpu(0), stop_timeout=10) as dev:
            img = await dev.load(fake.image(empty=(_store, ())))
            launch = arig.cuda.Launch(img.function("empty"), 1, 1, b"")

            async def task(i: int) -> None:
                for _ in range(15):
                    v = await dev.submit(launch)
                    await dev.wait(v)
                    assert dev.reached >= v
                    done[i] += 1

            with trio.fail_after(60):
                async with trio.open_nursery() as n:
                    for i in range(16):
                        n.start_soon(task, i)
            return done, dev._backend.completion.stats()

    fake = FakeCuda()
    with fake.installed():
        if arig._native.library() is None:
            pytest.skip("the native core is not in use here")
        done, _ = trio.run(main, fake)
    assert done == [15] * 16
    assert fake.violations == []


class _Device:
    """A stand-in device for the trio hub: work completes in the order submitted, one item per
    look; a spin always sees the next (it is due at once), and so does a timer every 2 ms (the
    eventfd's wake-up where no one spins).  Counts the spins and the run queue's length at each."""

    def __init__(self, port: Any) -> None:
        self.port = port
        self.pending: collections.deque[Any] = collections.deque()
        self.spins: list[int] = []
        self.on_tasks = 0  # deliveries of a spin's find, each on a task

    def submit(self) -> Any:
        fut = self.port.create_future()
        self.pending.append(fut)
        return fut

    def complete_one(self) -> None:
        while self.pending:
            fut = self.pending.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    def spin_due(self, now_ns: int, window_ns: int) -> bool:
        return bool(self.pending)

    def spin(self, ns: int) -> bool:
        assert ns <= nc.PARK_SPIN_NS
        self.spins.append(trio.lowlevel.current_statistics().tasks_runnable)
        return bool(self.pending)

    def deliver_spun(self) -> None:
        self.on_tasks += trio.lowlevel.current_task() is not None  # raises outside a task
        self.complete_one()

    async def backstop(self, period: float = 0.002) -> None:
        while True:
            await trio.sleep(period)
            self.complete_one()


async def _eight_tasks_to_400(dev: _Device, backstop: Callable[[], Awaitable[None]], on_spin: Callable[[], None]) -> list[int]:
    """Eight tasks each submit and wait in turn until 400 completions, beside ``backstop`` (which
    completes what no spin found); ``on_spin()`` before each of the device's spins.  Each task's
    count of completions."""
    spin = dev.spin

    def logged(ns: int) -> bool:
        on_spin()
        return spin(ns)

    dev.spin = logged  # type: ignore[method-assign]
    done = [0] * 8

    async def task(i: int) -> None:
        while sum(done) < 400:
            await dev.submit()
            done[i] += 1

    with trio.fail_after(20):
        async with trio.open_nursery() as n:
            n.start_soon(backstop)
            async with trio.open_nursery() as tasks:
                for i in range(8):
                    tasks.start_soon(task, i)
            n.cancel_scope.cancel()
    return done


class _Passes(trio.abc.Instrument):  # type: ignore[misc]
    """Logs trio's passes: "io" after each wait for I/O, "step" before each task step."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def after_io_wait(self, timeout: float) -> None:
        self.log.append("io")

    def before_task_step(self, task: Any) -> None:
        self.log.append("step")


def test_a_trio_spin_never_keeps_runnable_tasks_waiting() -> None:
    """Eight tasks each submit and wait in turn until 400 completions, with a spin that finds each
    completion at once: a spin on a waiter's task before its pass's other tasks had run would keep
    them waiting.  Each task finishes its share, no spin ran while a task was runnable, and none
    before the last task of its pass had run (no task step between a spin and trio's next wait for
    I/O)."""

    async def main() -> tuple[list[int], list[int], int]:
        port = running_loop()
        dev = _Device(port)
        port._hub.watch(dev)
        trio.lowlevel.add_instrument(passes)
        try:
            done = await _eight_tasks_to_400(dev, dev.backstop, lambda: passes.log.append("spin"))
        finally:
            port._hub.unwatch(dev)
            trio.lowlevel.remove_instrument(passes)
        return done, dev.spins, dev.on_tasks

    passes = _Passes()
    done, spins, on_tasks = trio.run(main)
    late = [i for i, e in enumerate(passes.log) if e == "spin" and any(x == "step" for x in passes.log[i + 1:passes.log.index("io", i) if "io" in passes.log[i:] else None])]
    assert late == [], f"{len(late)} spins ran before the last task of their pass had run"
    assert len(spins) >= 40, f"the run spun for the completions: {len(spins)} spins"
    assert on_tasks == len(spins), "each find was delivered, on the leader's task"
    assert min(done) >= 400 // 8 // 2, done
    assert max(spins) == 0, "no spin while another task was runnable"


class _Sizes(trio.abc.Instrument):  # type: ignore[misc]
    """Logs each pass's size (the run queue's length after trio's wait for I/O); the test adds each spin."""

    def __init__(self) -> None:
        self.log: list[tuple[str, int]] = []
        self.runq: Any = None

    def after_io_wait(self, timeout: float) -> None:
        self.log.append(("io", len(self.runq)))


def test_a_trio_waiter_spins_only_where_it_is_alone_in_its_pass() -> None:
    """Eight tasks each submit and wait in turn, the backstop completing one or two at a time, so
    that passes of one task and of several come: a leader spins only in a pass that runs it alone (with
    several, it cannot tell that the others ran, and a run that busy is served by trio's own wait
    for I/O), and it still spins in those."""
    from trio._core._run import GLOBAL_RUN_CONTEXT

    async def main() -> None:
        port = running_loop()
        dev = _Device(port)
        sizes.runq = GLOBAL_RUN_CONTEXT.runner.runq
        port._hub.watch(dev)
        trio.lowlevel.add_instrument(sizes)

        async def backstop() -> None:  # completes one, then two, then one...
            for k in range(1 << 30):
                await trio.sleep(0.001)
                for _ in range(1 + k % 2):
                    dev.complete_one()

        try:
            await _eight_tasks_to_400(dev, backstop, lambda: sizes.log.append(("spin", 0)))
        finally:
            port._hub.unwatch(dev)
            trio.lowlevel.remove_instrument(sizes)

    sizes = _Sizes()
    trio.run(main)
    size, spun_in = -1, []
    for what, n in sizes.log:
        if what == "io":
            size = n
        else:
            spun_in.append(size)
    assert len(spun_in) >= 8, f"the run spun for the completions: {len(spun_in)} spins"
    assert set(spun_in) == {1}, f"spins only in passes of one task: passes of {collections.Counter(spun_in)}"
    assert max(n for what, n in sizes.log if what == "io") > 1, "passes of several tasks came (the test's premise)"


def test_a_trio_waiter_resolved_by_its_own_spin_still_yields_to_timers() -> None:
    """One task's waits for 5 ms, each found by its leader's spin (it is alone: the one task of
    each pass): the waits need no fd, and a wait yields where a timer is due, so a task asleep on
    a timer wakes meanwhile (without the yield, the waits would run in one step of trio's)."""

    async def main() -> tuple[int, int, list[int]]:
        port = running_loop()
        dev = _Device(port)
        port._hub.watch(dev)
        ticks = 0
        stop = False

        async def ticker() -> None:
            nonlocal ticks
            while not stop:
                await trio.sleep(0.0002)
                ticks += 1

        waits = 0
        try:
            with trio.fail_after(20):
                async with trio.open_nursery() as n:
                    n.start_soon(ticker)
                    n.start_soon(dev.backstop)  # a wait that does not spin (a timer fired in its pass) waits for it
                    await trio.sleep(0.001)
                    t0, ticks = trio.current_time(), 0
                    while trio.current_time() - t0 < 0.005:
                        await dev.submit()
                        waits += 1
                    stop, during = True, ticks
                    n.cancel_scope.cancel()
        finally:
            port._hub.unwatch(dev)
        return during, waits, dev.spins

    ticks, waits, spins = trio.run(main)
    assert len(spins) >= waits // 2, f"the lone waiter's waits were spun for: {len(spins)} spins of {waits} waits"
    assert max(spins) == 0, "no spin while a task was runnable"
    assert ticks >= 2, f"the sleeping task woke {ticks} times during 5 ms of spun waits"


class _Steps(trio.abc.Instrument):  # type: ignore[misc]
    """Counts trio's task steps by task name."""

    def __init__(self) -> None:
        self.steps: collections.Counter[str] = collections.Counter()

    def before_task_step(self, task: Any) -> None:
        self.steps[task.name] += 1


def test_a_trio_waiter_resolved_by_its_own_spin_leaves_the_reader_standing_by() -> None:
    """One task's waits for 20 ms, each found by its leader's spin, while the port reads a device's
    fd (its reader task stands by while a task leads) and a backstop ticks every 2 ms.  Where a tick
    falls due during a wait, the leader yields after its spin still leading, so trio's wait for I/O
    then does not send the reader back to the fd: the reader takes no step, and every wait is led
    and spun for (a reader on the fd would keep the next wait from leading), except one in the pass
    where a tick's task runs too (no spin beside another task), which the backstop serves."""
    import os

    async def main() -> tuple[int, list[int], int, collections.Counter[str], int]:
        port = running_loop()
        dev = _Device(port)
        efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        port.add_reader(efd, lambda: os.eventfd_read(efd))
        port._hub.watch(dev)
        steps, passes = _Steps(), _Passes()
        ticks = 0

        async def backstop() -> None:  # as a device's: completes, and writes the device's fd
            nonlocal ticks
            while True:
                await trio.sleep(0.002)
                ticks += 1
                if dev.pending:
                    dev.complete_one()
                    os.eventfd_write(efd, 1)

        waits = 0
        try:
            with trio.fail_after(20):
                async with trio.open_nursery() as n:
                    n.start_soon(backstop)
                    for _ in range(10):  # the first waits find the reader on the fd, then lead
                        await dev.submit()
                    spun = len(dev.spins)
                    ticks = 0
                    for instrument in (steps, passes):
                        trio.lowlevel.add_instrument(instrument)
                    t0 = trio.current_time()
                    with trio.move_on_after(5):  # a wait that was not led would wait for a tick
                        while trio.current_time() - t0 < 0.02:
                            await dev.submit()
                            waits += 1
                    during = ticks
                    for instrument in (steps, passes):
                        trio.lowlevel.remove_instrument(instrument)
                    n.cancel_scope.cancel()
        finally:
            port._hub.unwatch(dev)
            port.remove_reader(efd)
            os.close(efd)
        return waits, dev.spins[spun:], during, steps.steps, passes.log.count("io")

    waits, spins, ticks, steps, io_waits = trio.run(main)
    assert ticks >= 2 and io_waits >= 2, f"ticks fell due during the waits ({ticks}), and trio waited for I/O ({io_waits} times)"
    assert steps["arig-reader"] == 0, dict(steps)
    assert len(spins) >= waits - ticks, f"every wait but one per tick was spun for: {len(spins)} spins of {waits} waits, {ticks} ticks"


def test_a_trio_waiter_resolved_by_its_own_spin_takes_no_pass_where_nothing_else_is_due() -> None:
    """One task's waits, each found by its leader's spin, with no other task, timer or fd: a yield
    would only run the leader again, so the waits take no pass of trio's (no wait for I/O) and
    their task runs on in one step; a task asleep on a timer makes each wait yield again."""

    async def main() -> tuple[int, int, int]:
        port = running_loop()
        dev = _Device(port)
        port._hub.watch(dev)
        passes = _Passes()
        try:
            with trio.fail_after(20):
                async with trio.open_nursery() as n:
                    # A wait that does not spin (where another task is in its pass) waits for the
                    # backstop, asleep until a deadline 50 ms off meanwhile.
                    n.start_soon(dev.backstop, 0.05)
                    await trio.sleep(0)
                    for _ in range(10):
                        await dev.submit()
                    trio.lowlevel.add_instrument(passes)
                    for _ in range(200):
                        await dev.submit()
                    alone = passes.log.count("io")
                    n.start_soon(trio.sleep, 30)  # another deadline, not due: nothing to yield for
                    for _ in range(10):
                        await dev.submit()
                    passes.log.clear()
                    for _ in range(200):
                        await dev.submit()
                    beside_sleeper = passes.log.count("io")
                    trio.lowlevel.remove_instrument(passes)
                    n.cancel_scope.cancel()
        finally:
            port._hub.unwatch(dev)
        return alone, beside_sleeper, len(dev.spins)

    alone, beside_sleeper, spins = trio.run(main)
    assert spins >= 380, f"the lone waiter's waits were spun for: {spins} spins"
    # A yield at each wait would be 200 passes; the backstop's timer may fire once meanwhile.
    assert alone <= 2, f"{alone} passes of trio's for 200 spun waits with nothing else due"
    assert beside_sleeper <= 2, f"{beside_sleeper} passes with tasks asleep until deadlines not due"


def test_a_task_woken_by_its_timer_runs_in_its_pass_beside_a_waiter_whose_waits_are_spun_for() -> None:
    """A task that sleeps until a deadline 20 times, and one whose every wait is found by its spin
    meanwhile: trio wakes a task whose deadline passed into the same pass as the spinning task,
    after it counted that pass's tasks, so the spinning task yields after its spin there and the
    sleeper runs in that pass (a wait that skipped its yield would keep it waiting behind the
    whole of the spinning task's step: its waits would run on until the 200,000th)."""

    async def main() -> tuple[list[float], int]:
        port = running_loop()
        dev = _Device(port)
        port._hub.watch(dev)
        late: list[float] = []
        n_waits = 0

        async def sleeper() -> None:
            for _ in range(20):
                d = trio.current_time() + 0.0005
                await trio.sleep_until(d)
                late.append(trio.current_time() - d)

        try:
            with trio.fail_after(20):
                async with trio.open_nursery() as n:
                    n.start_soon(dev.backstop, 10)  # a timer not due: only for a wait that does not spin
                    async with trio.open_nursery() as inner:
                        inner.start_soon(sleeper)
                        await trio.sleep(0)
                        await trio.sleep(0)  # the sleeper asleep: this task alone in trio's next pass
                        while len(late) < 20 and n_waits < 200_000:
                            await dev.submit()
                            n_waits += 1
                    n.cancel_scope.cancel()
        finally:
            port._hub.unwatch(dev)
        return late, n_waits

    late, n_waits = trio.run(main)
    assert len(late) == 20 and n_waits < 200_000, f"the sleeper woke {len(late)} times in {n_waits} waits"
    assert max(late) < 0.1, f"the sleeper ran {max(late) * 1e3:.1f} ms after its deadline"


@pytest.mark.parametrize("what", ["fd", "run_sync_soon"])
def test_a_trio_waiter_whose_every_wait_is_spun_for_lets_ready_io_run(what: str) -> None:
    """One task whose every wait is found by its spin, and another task waiting for I/O that a
    thread makes ready meanwhile (data on a socket it waits on, or a ``run_sync_soon`` from the
    thread): the spinning task's next wait yields, and the other task runs while it goes on (a
    wait that never yielded would keep it waiting until the spinning task stopped)."""
    import socket
    import threading

    async def main() -> tuple[int, bool]:
        port = running_loop()
        dev = _Device(port)
        port._hub.watch(dev)
        a, b = socket.socketpair()
        a.setblocking(False)
        b.setblocking(False)
        ran = trio.Event()
        token = trio.lowlevel.current_trio_token()

        def woke() -> None:
            ran.set()
            dev.complete_one()  # for a wait that did not spin (this task was in its pass)

        async def io_task() -> None:
            if what == "fd":
                await trio.lowlevel.wait_readable(a)
                woke()

        def poke() -> None:
            time.sleep(0.005)
            if what == "fd":
                b.send(b"x")
            else:
                token.run_sync_soon(woke)

        n_waits = 0
        try:
            with trio.fail_after(20):
                async with trio.open_nursery() as n:
                    n.start_soon(io_task)
                    n.start_soon(dev.backstop, 10)  # a timer not due before the I/O
                    await trio.sleep(0.001)  # the I/O task is parked on its fd
                    for _ in range(10):
                        await dev.submit()
                    threading.Thread(target=poke, daemon=True).start()
                    while not ran.is_set() and n_waits < 200_000:
                        await dev.submit()
                        n_waits += 1
                    n.cancel_scope.cancel()
        finally:
            port._hub.unwatch(dev)
            a.close()
            b.close()
        return n_waits, ran.is_set()

    n_waits, ran = trio.run(main)
    assert ran and n_waits < 200_000, f"the I/O task ran while the waits went on ({n_waits} waits)"


def test_a_trio_waiter_is_not_kept_from_its_result_by_a_task_that_never_blocks() -> None:
    """A task that never blocks stays runnable: trio never blocks while it is, so nothing spins, and
    the waiter gets its result when it comes (a wait until no task is runnable would keep it waiting
    for as long as that task runs); alone again, the run spins before it blocks."""

    async def main() -> tuple[list[int], list[int]]:
        port = running_loop()
        dev = _Device(port)
        dev.spin = lambda ns: dev.spins.append(trio.lowlevel.current_statistics().tasks_runnable) or False  # type: ignore[method-assign]
        port._hub.watch(dev)
        stop = False

        async def busy() -> None:
            while not stop:
                await trio.lowlevel.checkpoint()

        try:
            async with trio.open_nursery() as n:
                n.start_soon(busy)
                fut = dev.submit()  # due: a spin would look for it
                port.call_later(0.02, dev.complete_one)
                with trio.fail_after(2):
                    await fut
                stop = True
            beside = list(dev.spins)
            fut = dev.submit()  # alone now: the run spins (in vain) before it blocks
            port.call_later(0.02, dev.complete_one)
            with trio.fail_after(2):
                await fut
        finally:
            port._hub.unwatch(dev)
        return beside, dev.spins

    beside, spins = trio.run(main)
    assert beside == [], "no spin while a task was runnable"
    assert spins and max(spins) == 0, spins


@pytest.mark.parametrize("waiters", [1, 2, 64])
def test_a_loop_that_does_not_say_what_is_ready_spins_for_a_lone_waiter_only(waiters: int) -> None:
    c = _completion(_Core(5_000, sees=True))
    c._port.others = None  # uvloop
    c._owner.timeline.waiters = waiters
    c._on_park()
    c._port.queued.pop()()
    assert len(c.core.spins) == (1 if waiters == 1 else 0)
    assert c.stats_why() == ((0, 0, 0) if waiters == 1 else (1, 0, 0))


def test_waits_on_uvloop_are_spun_for_a_lone_waiter() -> None:
    uvloop = pytest.importorskip("uvloop")
    fake = FakeCuda()
    with fake.installed():
        if arig._native.library() is None:
            pytest.skip("the native core is not in use here")
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            assert AsyncioPort(runner.get_loop()).others_ready() is None, "uvloop does not say what is ready"
            stats = runner.run(_round_trips(fake, 50))
    assert stats["on_park"] and stats["idle_spins"] >= 1, stats
