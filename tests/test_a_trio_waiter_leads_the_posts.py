"""A task waiting on a trio port's future may lead the port's posts (waits for the port's eventfd
itself and runs what other threads posted): whatever way its wait ends (its result posted, set by
another task or a timer, its cancellation, the run's end), nothing posted is lost or run twice, a
cancelled leader cancels its own future only, and the next waiter leads again; no waiter leads
while the port reads a device's fd."""

from __future__ import annotations

import os
import threading
from typing import Any

import trio

from arig._running import running_loop


def _posting_thread(port: Any, items: list[Any], n: int) -> threading.Thread:
    def posts() -> None:
        for i in range(n):
            port.post(items.append, i)

    return threading.Thread(target=posts)


def test_a_waiter_leads_and_its_result_posted_from_a_thread_ends_its_wait() -> None:
    async def main() -> None:
        port = running_loop()
        fut = port.create_future()
        led: list[Any] = []
        port.call_later(0.01, lambda: led.append(port._posts.leader))
        threading.Timer(0.03, port.post, (fut.set_result, 7)).start()
        with trio.fail_after(5):
            assert await fut == 7
        assert led == [trio.lowlevel.current_task()], "the waiter led the posts while it waited"
        assert port._posts.leader is None, "a wait that ended leads no more"

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
                    assert fut.cancelled() and port._posts.leader is None
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
            assert port._posts.leader is not None, "one of them leads"
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
            assert port._posts.leader is not None
            port._posts.close()  # what the run's end does: the eventfd is closed under the leader
            await trio.sleep(0.01)
            assert port._posts.leader is None and not fut.done()
            fut.set_result(3)
        assert got == [3]
        assert not port._posts.may_lead()

    trio.run(main)


def test_no_waiter_leads_while_the_port_reads_a_devices_fd() -> None:
    async def main() -> None:
        port = running_loop()
        r, w = os.pipe()
        try:
            port.add_reader(r, lambda: None)
            fut = port.create_future()
            threading.Timer(0.02, port.post, (fut.set_result, 1)).start()
            leaders: list[Any] = []
            port.call_later(0.01, lambda: leaders.append(port._posts.leader))
            with trio.fail_after(5):
                assert await fut == 1
            assert leaders == [None]
            port.remove_reader(r)
            assert port._posts.may_lead()
        finally:
            os.close(r)
            os.close(w)

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
