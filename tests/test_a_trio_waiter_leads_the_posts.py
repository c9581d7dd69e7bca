"""A task waiting on a trio port's future may lead the port's posts (waits for the port's eventfd
itself and runs what other threads posted): whatever way its wait ends (its result posted, set by
another task or a timer, its cancellation, the run's end), nothing posted is lost or run twice, a
cancelled leader cancels its own future only, and the next waiter leads again; a leader reads the
port's device fds too, and the port's reader task reads them while no one leads."""

from __future__ import annotations

import os
import random
import threading
import time
from typing import Any

import pytest
import trio
import trio.abc
import trio.testing

from arig._running import running_loop


def _posting_thread(port: Any, items: list[Any], n: int) -> threading.Thread:
    def posts() -> None:
        for i in range(n):
            port.post(items.append, i)

    return threading.Thread(target=posts)


async def _written_soon(fd: int, fut: Any) -> Any:
    """Write ``fd`` from another thread in 20 ms; what ``fut`` resolves to (within 5 s)."""
    threading.Timer(0.02, os.eventfd_write, (fd, 1)).start()
    with trio.fail_after(5):
        return await fut


def test_a_waiter_leads_and_its_result_posted_from_a_thread_ends_its_wait() -> None:
    async def main() -> None:
        port = running_loop()
        fut = port.create_future()
        led: list[Any] = []
        port.call_later(0.01, lambda: led.append(port._hub.leader))
        threading.Timer(0.03, port.post, (fut.set_result, 7)).start()
        with trio.fail_after(5):
            assert await fut == 7
        assert led == [trio.lowlevel.current_task()], "the waiter led the posts while it waited"
        assert port._hub.leader is None, "a wait that ended leads no more"

    trio.run(main)


def test_every_post_runs_once_in_order_whoever_leads_and_however_the_waits_end() -> None:
    async def main() -> None:
        port = running_loop()
        items: list[int] = []
        t = _posting_thread(port, items, 20_000)
        t.start()
        results = 0
        with trio.fail_after(20):
            while t.is_alive() or len(items) < 20_000:
                fut = port.create_future()
                if results % 3 == 0:
                    port.post(fut.set_result, 1)  # resolved by a post: its own drain
                elif results % 3 == 1:
                    port.call_later(0, fut.set_result, 1)  # resolved by a timer: the leader is woken
                else:
                    with trio.move_on_after(0):  # cancelled: a leader cancels its own future
                        await fut
                    assert fut.cancelled() and port._hub.leader is None
                    results += 1
                    continue
                assert await fut == 1
                results += 1
        t.join()
        await trio.sleep(0.01)
        assert items == list(range(20_000)), "each post ran once, in the order posted"

    trio.run(main)


def test_a_future_of_several_waiters_wakes_the_leader_and_the_parked_ones() -> None:
    async def main() -> None:
        port = running_loop()
        fut = port.create_future()
        got: list[Any] = []

        async def waits() -> None:
            got.append(await port.shield(fut))

        async with trio.open_nursery() as n:
            for _ in range(3):
                n.start_soon(waits)
            await trio.sleep(0.01)
            assert port._hub.leader is not None, "one of them leads"
            threading.Thread(target=port.post, args=(fut.set_result, "x")).start()
        assert got == ["x", "x", "x"]

    trio.run(main)


def test_a_leader_parked_when_the_posts_close_waits_on_and_gets_its_result() -> None:
    async def main() -> None:
        port = running_loop()
        fut = port.create_future()
        got: list[Any] = []

        async def waits() -> None:
            got.append(await fut)

        async with trio.open_nursery() as n:
            n.start_soon(waits)
            await trio.sleep(0.01)
            assert port._hub.leader is not None
            port._hub.close()  # what the run's end does: the eventfd is closed under the leader
            await trio.sleep(0.01)
            assert port._hub.leader is None and not fut.done()
            fut.set_result(3)
        assert got == [3]
        assert not port._hub.may_lead()

    trio.run(main)


def test_a_waiter_reads_a_devices_fd_in_its_own_task_and_the_reader_task_reads_it_when_no_one_waits() -> None:
    async def main() -> None:
        port = running_loop()
        efd = os.eventfd(0, os.EFD_NONBLOCK)
        fut = port.create_future()
        callers: list[Any] = []

        def ready() -> None:
            os.eventfd_read(efd)
            callers.append(trio.lowlevel.current_task())
            if not fut.done():
                fut.set_result("fd")

        try:
            port.add_reader(efd, ready)
            await trio.sleep(0.01)  # the reader task parks on the hub's fd: the next waiter cannot lead yet
            assert await _written_soon(efd, fut) == "fd"
            assert callers[-1].name == "arig-reader", "no one led: the reader task read the fd"
            fut = port.create_future()  # the reader task runs on its next turn: this waiter leads now
            assert await _written_soon(efd, fut) == "fd"
            assert callers[-1] is trio.lowlevel.current_task(), "the waiter ran the fd's callback in its own task"
            await trio.sleep(0)  # the reader task, woken by the leader's end, reads the fd again
            os.eventfd_write(efd, 1)
            with trio.fail_after(5):
                while len(callers) < 3:
                    await trio.sleep(0.001)
            assert callers[-1] is not trio.lowlevel.current_task(), "with no waiter, the reader task read the fd"
            port.remove_reader(efd)
            assert port._hub.may_lead()
        finally:
            os.close(efd)

    trio.run(main)


class _ReaderSteps(trio.abc.Instrument):  # type: ignore[misc]
    def __init__(self) -> None:
        self.steps = 0

    def before_task_step(self, task: Any) -> None:
        if task.name == "arig-reader":
            self.steps += 1


def test_a_waiter_that_leads_again_in_the_same_step_costs_the_reader_task_no_step() -> None:
    """One task's round trips (the leader stops and, in the same step, waits again): the reader
    task stands by throughout; trio runs it only when the task stops leading for good."""

    async def main() -> None:
        port = running_loop()
        efd = os.eventfd(0, os.EFD_NONBLOCK)
        box: list[Any] = []

        def ready() -> None:
            os.eventfd_read(efd)
            box[0].set_result(None)

        steps = _ReaderSteps()
        try:
            port.add_reader(efd, ready)
            await trio.sleep(0.01)  # the reader parks on the hub's fd
            box.append(port.create_future())
            await _written_soon(efd, box[0])  # read by the reader; the reader stands by after its turn
            trio.lowlevel.add_instrument(steps)
            for _ in range(20):
                box[0] = port.create_future()
                threading.Thread(target=os.eventfd_write, args=(efd, 1)).start()
                with trio.fail_after(5):
                    await box[0]
            assert steps.steps <= 1, f"the reader task ran {steps.steps} steps in 20 round trips of one leader"
            box[0] = port.create_future()
            await trio.sleep(0.01)  # the leader stopped for good: the reader reads the fd again
            assert port._hub.on_fd, "the reader waits on the hub's fd again"
            os.eventfd_write(efd, 1)
            with trio.fail_after(5):
                while not box[0].done():
                    await trio.sleep(0.001)
        finally:
            trio.lowlevel.remove_instrument(steps)
            port.remove_reader(efd)
            os.close(efd)

    trio.run(main)


def test_a_post_or_a_devices_fd_written_after_the_last_leader_stops_reaches_a_run_that_waits_long() -> None:
    """The last leader stops while the reader stands by, and the run then only waits (a long sleep,
    an Event): trio would block; the reader is back on the hub's fd first, so a post and an fd's
    write from another thread still end those waits."""

    async def main() -> None:
        port = running_loop()
        efd = os.eventfd(0, os.EFD_NONBLOCK)
        seen = trio.Event()

        def ready() -> None:
            os.eventfd_read(efd)
            seen.set()

        try:
            port.add_reader(efd, ready)
            await trio.sleep(0.01)
            for how in ("post", "fd"):
                for _ in range(2):  # the reader reads the first; the second waiter leads (the reader yields)
                    fut = port.create_future()
                    # Resolved by a post: a leader's own drain, so no other task is runnable after it.
                    threading.Timer(0.005, port.post, (fut.set_result, 1)).start()
                    assert await fut == 1
                assert not port._hub.on_fd and port._hub.leader is None, "the reader stands by"
                got = trio.Event()
                if how == "post":
                    threading.Timer(0.02, port.post, (got.set,)).start()
                else:
                    seen = trio.Event()
                    got = seen
                    threading.Timer(0.02, os.eventfd_write, (efd, 1)).start()
                with trio.fail_after(5):
                    await got.wait()
        finally:
            port.remove_reader(efd)
            os.close(efd)

    trio.run(main)


def test_every_write_of_a_devices_fd_and_every_post_reaches_the_waiters_whoever_reads_it() -> None:
    """A thread completes values 1..N through an eventfd (as a native core does) and posts; 16 tasks
    wait for their values, some cancelled: every value is delivered, in order, none lost."""
    n = 3000

    async def main() -> None:
        port = running_loop()
        efd = os.eventfd(0, os.EFD_NONBLOCK)
        done = [0]  # written by the thread, read by the callback
        delivered = [0]
        waiting: dict[int, Any] = {}
        posted: list[int] = []

        def ready() -> None:
            try:
                os.eventfd_read(efd)
            except BlockingIOError:
                return
            r = done[0]
            for v in range(delivered[0] + 1, r + 1):
                f = waiting.pop(v, None)
                if f is not None and not f.done():
                    f.set_result(v)
            delivered[0] = max(delivered[0], r)

        def completes() -> None:
            for v in range(1, n + 1):
                done[0] = v
                os.eventfd_write(efd, 1)
                if v % 7 == 0:
                    port.post(posted.append, v)
                if v % 50 == 0:
                    time.sleep(0.0005)

        async def waiter(k: int) -> None:
            for v in range(k, n + 1, 16):
                if v <= delivered[0]:
                    continue
                f = waiting[v] = port.create_future()
                if v % 11 == 0:
                    with trio.move_on_after(0):
                        await f
                    continue
                assert await f == v

        try:
            port.add_reader(efd, ready)
            t = threading.Thread(target=completes)
            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    for k in range(1, 17):
                        nursery.start_soon(waiter, k)
                    await trio.sleep(0)
                    t.start()
                    await trio.to_thread.run_sync(t.join)
                    while delivered[0] < n:
                        await trio.sleep(0.001)
            assert posted == list(range(7, n + 1, 7)), "each post ran once, in order"
            port.remove_reader(efd)
        finally:
            os.close(efd)

    trio.run(main)


def test_a_leader_whose_future_a_timer_or_another_task_resolves_wakes_at_once() -> None:
    async def main() -> None:
        port = running_loop()
        fut = port.create_future()
        port.call_later(0.01, fut.set_result, "timer")  # nothing is posted meanwhile: only the eventfd wakes the leader
        with trio.fail_after(2):
            assert await fut == "timer"
        fut = port.create_future()

        async def sets() -> None:
            await trio.sleep(0.01)
            fut.set_exception(KeyError("task"))

        async with trio.open_nursery() as n:
            n.start_soon(sets)
            with trio.fail_after(2):
                try:
                    await fut
                except KeyError as exc:
                    assert exc.args == ("task",)
                else:
                    raise AssertionError("the exception set by another task reaches the leader")

    trio.run(main)


def test_what_a_leaders_last_drain_posts_runs_though_no_one_leads_after_it() -> None:
    async def main() -> None:
        port = running_loop()
        fut = port.create_future()
        ran: list[str] = []

        def in_the_leaders_drain() -> None:
            port.post(ran.append, "posted while leading")  # after this pass of the drain
            fut.set_result(None)  # the leader stops leading once this pass ends

        threading.Timer(0.01, port.post, (in_the_leaders_drain,)).start()
        with trio.fail_after(2):
            await fut
        await trio.sleep(0.01)  # no one waits, so no one leads
        assert ran == ["posted while leading"]

    trio.run(main)


def test_a_leader_cancelled_with_its_own_result_posted_is_not_woken_by_it_later() -> None:
    """The leader's last drain runs its own future's result while the leader, cancelled, is on its
    way out: that must not wake the task (it is running), or the wake-up reaches it parked in a
    later wait and ends that early (under trio's I/O wait: an internal error of trio's)."""

    async def main() -> None:
        port = running_loop()
        hub = port._hub
        fut = port.create_future()
        scope = trio.CancelScope()
        slept: list[float] = []

        async def waiter() -> None:
            with scope:
                await fut  # leads: parked on the hub's fd
            t0 = trio.current_time()
            await trio.sleep(0.05)
            slept.append(trio.current_time() - t0)

        async with trio.open_nursery() as n:
            n.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            assert hub.leader is not None and hub.parked
            hub._q.append((fut.set_result, (1,)))  # posted, its eventfd write not yet seen
            scope.cancel()
        assert fut.done() and fut.result() == 1, "the post ran"
        assert slept and slept[0] >= 0.049, f"the later sleep was ended early: {slept}"

    trio.run(main)


@pytest.mark.parametrize("seed", range(8))
def test_random_waits_posts_cancels_and_sleeps_never_wake_a_task_out_of_turn(seed: int) -> None:
    """Sixteen tasks each wait 60 times for a future resolved by a post from another thread, a
    post from the run's own, a timer, or nothing, under a random deadline, and sometimes sleep
    after: every run ends (trio raises no internal error) and no sleep ends early (a wake-up meant
    for an earlier wait reached none)."""
    early: list[tuple[int, float, float]] = []
    timers: list[threading.Timer] = []

    async def main() -> None:
        port = running_loop()

        def resolve(fut: Any, value: int) -> None:
            if not fut.done():
                fut.set_result(value)

        async def worker(i: int) -> None:
            r = random.Random(seed * 1000 + i)
            for _ in range(60):
                fut = port.create_future()
                how = r.random()
                if how < 0.4:
                    timers.append(threading.Timer(r.random() * 0.0005, port.post, (resolve, fut, 1)))
                    timers[-1].start()
                elif how < 0.6:
                    port.call_later(r.random() * 0.0005, resolve, fut, 2)
                elif how < 0.7:
                    port.post(resolve, fut, 3)
                with trio.move_on_after(r.random() * 0.0008):
                    await fut
                if r.random() < 0.3:
                    d = r.random() * 0.002
                    t0 = trio.current_time()
                    await trio.sleep(d)
                    if trio.current_time() - t0 < d * 0.99:
                        early.append((i, d, trio.current_time() - t0))
                else:
                    await trio.lowlevel.checkpoint()

        with trio.fail_after(30):
            async with trio.open_nursery() as n:
                for i in range(16):
                    n.start_soon(worker, i)
        for t in timers:
            t.join()

    trio.run(main)
    assert early == []


def test_a_reader_that_raises_is_logged_and_the_run_and_the_other_readers_go_on(caplog: Any) -> None:
    async def main() -> None:
        port = running_loop()
        bad, good = os.eventfd(0, os.EFD_NONBLOCK), os.eventfd(0, os.EFD_NONBLOCK)
        fut = port.create_future()

        def raises() -> None:
            os.eventfd_read(bad)
            raise ZeroDivisionError("a broken reader")

        def resolves() -> None:
            os.eventfd_read(good)
            fut.set_result("good")

        try:
            port.add_reader(bad, raises)
            port.add_reader(good, resolves)
            os.eventfd_write(bad, 1)
            assert await _written_soon(good, fut) == "good"
        finally:
            port.remove_reader(bad)
            port.remove_reader(good)
            os.close(bad)
            os.close(good)

    with caplog.at_level("ERROR", logger="arig"):
        trio.run(main)
    assert any("a broken reader" in r.getMessage() and "raises" in r.getMessage() for r in caplog.records), caplog.text


def test_a_reader_added_again_for_a_number_closed_and_reused_is_called() -> None:
    async def main() -> None:
        port = running_loop()
        first = os.eventfd(0, os.EFD_NONBLOCK)
        port.add_reader(first, lambda: None)
        os.close(first)  # closed without remove_reader: the epoll set forgets it
        second = os.eventfd(0, os.EFD_NONBLOCK)
        assert second == first, "the lowest free number is reused"
        fut = port.create_future()

        def ready() -> None:
            os.eventfd_read(second)
            if not fut.done():
                fut.set_result("again")

        try:
            port.add_reader(second, ready)
            assert await _written_soon(second, fut) == "again"
        finally:
            port.remove_reader(second)
            os.close(second)

    trio.run(main)


def test_posts_and_a_devices_fd_at_the_runs_end_end_the_run_cleanly() -> None:
    ran: list[int] = []

    async def main() -> None:
        port = running_loop()
        efd = os.eventfd(0, os.EFD_NONBLOCK)
        port.add_reader(efd, lambda: os.eventfd_read(efd))
        port.on_close(lambda: os.close(efd))
        await trio.sleep(0.01)  # the reader waits on the hub's fd
        t = threading.Thread(target=lambda: [port.post(ran.append, i) for i in range(1000)])
        t.start()
        t.join()
        os.eventfd_write(efd, 1)  # the run ends with posts and a readable fd pending

    trio.run(main)
    assert ran == list(range(len(ran))), "what ran, ran once and in order"
