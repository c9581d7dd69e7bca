"""Back-pressure: ``max_pending`` bounds the submissions waiting for the submit
thread, a full host queue blocks its fill, and cancelling a waiting submit
leaves no hole in the values."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import arig
import arig.host
from arig._submit import SubmitThread


def _noop(queue: Any, arg: Any, v: int) -> None:
    return None


def _blocker(gate: threading.Event) -> Any:
    def fill(queue: Any, arg: Any, v: int) -> None:
        gate.wait(10.0)

    return fill


def _gapless(values: list[int], n: int) -> bool:
    return sorted(values) == list(range(1, n + 1))


@pytest.mark.asyncio
@pytest.mark.parametrize("limit", [1, 2, 4, 16])
async def test_submit_waits_once_max_pending_submissions_wait(limit: int) -> None:
    gate = threading.Event()
    async with await arig.open(arig.host.cpu(), max_pending=limit) as dev:
        try:
            assert await dev.submit(_blocker(gate)) == 1
            tasks = [asyncio.create_task(dev.submit(_noop)) for _ in range(3 * limit + 2)]
            await asyncio.sleep(0.2)
            accepted = [t for t in tasks if t.done()]
            # The blocked fill itself may count as pending: at most `limit` more.
            assert limit - 1 <= len(accepted) <= limit
            assert dev.submitted == 1 + len(accepted)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(dev.submit(_noop), 0.1)
            # Timing out one waiting submit took nothing from the others.
            assert not any(t.done() for t in tasks if t not in accepted)
            assert dev.submitted == 1 + len(accepted)
        finally:
            gate.set()
        values = await asyncio.wait_for(asyncio.gather(*tasks), 10.0)
        assert _gapless([1, *values], len(tasks) + 1)
        assert dev.submitted == len(tasks) + 1
        await dev.wait(dev.submitted)


@pytest.mark.asyncio
async def test_one_task_submitting_in_a_loop_is_held_back() -> None:
    gate = threading.Event()
    returned: list[int] = []

    async def producer() -> None:
        for _ in range(20):
            returned.append(await dev.submit(_noop))

    async with await arig.open(arig.host.cpu(), max_pending=3) as dev:
        try:
            await dev.submit(_blocker(gate))
            task = asyncio.create_task(producer())
            await asyncio.sleep(0.2)
            assert not task.done()
            assert 2 <= len(returned) <= 3
        finally:
            gate.set()
        await asyncio.wait_for(task, 10.0)
        assert returned == list(range(2, 22))


@pytest.mark.asyncio
async def test_cancelling_waiting_submits_leaves_no_hole() -> None:
    gate = threading.Event()
    async with await arig.open(arig.host.cpu(queues=2), max_pending=2) as dev:
        try:
            await dev.submit(_blocker(gate))
            tasks = [asyncio.create_task(dev.submit(_noop, queue=i % 2)) for i in range(10)]
            await asyncio.sleep(0.1)
            waiting = [t for t in tasks if not t.done()]
            assert len(waiting) >= 8
            cancelled = waiting[::3]
            for t in cancelled:
                t.cancel()
            await asyncio.sleep(0.05)
            # Only the cancelled ones ended.
            assert all(t.cancelled() for t in cancelled)
            assert not any(t.done() for t in waiting if t not in cancelled)
        finally:
            gate.set()
        results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 10.0)
        values = [r for r in results if isinstance(r, int)]
        assert [t for t in tasks if t.cancelled()] == cancelled
        assert len(values) == len(tasks) - len(cancelled)
        assert dev.submitted == 1 + len(values)
        assert _gapless([1, *values], dev.submitted)
        await dev.wait(dev.submitted)


@pytest.mark.asyncio
async def test_cancel_racing_the_release_leaves_no_hole() -> None:
    async with await arig.open(arig.host.cpu(), max_pending=1) as dev:
        returned = []
        cancelled = 0
        for round_ in range(20):
            gate = threading.Event()
            try:
                returned.append(await dev.submit(_blocker(gate)))
                tasks = [asyncio.create_task(dev.submit(_noop)) for _ in range(4)]
                await asyncio.sleep(0.01)
            finally:
                gate.set()
            # Cancel while room is appearing: each task ends with a value or cancelled.
            for _ in range(round_ % 3):
                await asyncio.sleep(0)
            tasks[round_ % 4].cancel()
            for r in await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 10.0):
                if isinstance(r, int):
                    returned.append(r)
                else:
                    assert isinstance(r, asyncio.CancelledError)
                    cancelled += 1
            assert cancelled <= round_ + 1
            await dev.wait(dev.submitted)
        assert dev.submitted == len(returned)
        assert _gapless(returned, dev.submitted)


@pytest.mark.asyncio
async def test_many_producers_through_one_slot() -> None:
    # A stress test of the hand-off between the loop and the submit thread.
    async with await arig.open(arig.host.cpu(queues=2), max_pending=1) as dev:

        async def producer(k: int) -> list[int]:
            return [await dev.submit(_noop, queue=k % 2) for _ in range(60)]

        per_task = await asyncio.wait_for(asyncio.gather(*(producer(k) for k in range(8))), 30.0)
        values = [v for vs in per_task for v in vs]
        for vs in per_task:
            assert vs == sorted(vs)
        assert _gapless(values, 480)
        await dev.wait(480)


@pytest.mark.asyncio
async def test_lost_wakeup_between_two_room_waiters() -> None:
    """White-box: a waiter that re-waits must not be stranded when another
    waiter, woken by the same wake-up, leaves ``wait_space`` later.

    The interleaving: B and A wait for room; a spurious wake-up wakes both;
    B finds no room and waits again; the submit thread takes an item
    (``_taken += 1``); A finds that room and leaves; only then does the
    thread look at ``_space_wanted``.  B must still be woken once the thread
    takes the next item.
    """
    loop = asyncio.get_running_loop()
    st = SubmitThread(loop, "WHITEBOX", 1)  # never started: this test plays the thread
    st._put = 1  # one submission pending: full

    full = st.full
    woken = False
    taken_early = False

    def thread_takes_first_half() -> None:
        st._taken += 1

    def thread_takes_second_half() -> None:
        if st._space_wanted:
            st._post(st.wake_space)

    def full_hook() -> bool:
        nonlocal taken_early
        if woken and not taken_early and asyncio.current_task() is a:
            taken_early = True
            thread_takes_first_half()  # the thread runs between B's and A's steps
        return full()

    st.full = full_hook  # type: ignore[method-assign]
    order: list[str] = []

    def check() -> None:
        pass

    async def waiter(name: str) -> None:
        await st.wait_space(check)
        st._put += 1  # what submit does next
        order.append(name)
        if name == "A":
            thread_takes_second_half()

    b = asyncio.create_task(waiter("B"))
    await asyncio.sleep(0)
    a = asyncio.create_task(waiter("A"))
    for _ in range(3):
        await asyncio.sleep(0)
    assert not a.done() and not b.done()
    woken = True
    st.wake_space()  # e.g. from a stop or loss that was then not final
    for _ in range(5):
        await asyncio.sleep(0)
    assert taken_early
    assert order == ["A"]
    assert st.full()
    # The thread takes A's submission: room for B.
    thread_takes_first_half()
    thread_takes_second_half()
    try:
        await asyncio.wait_for(asyncio.shield(b), 1.0)
    finally:
        b.cancel()
        await asyncio.gather(b, return_exceptions=True)
    assert order == ["A", "B"]


# -- a full host queue ------------------------------------------------------------------


@pytest.mark.asyncio
async def test_full_host_queue_blocks_its_fill() -> None:
    gate = threading.Event()
    enqueued = 0
    ran: list[int] = []
    called: list[int] = []

    def occupy(q: Any, a: Any, v: int) -> None:
        q.enqueue(gate.wait, 10.0)

    def many(q: Any, a: Any, v: int) -> None:
        nonlocal enqueued
        for i in range(6):
            q.enqueue(ran.append, i)
            enqueued += 1

    def later(q: Any, a: Any, v: int) -> None:
        called.append(v)

    async with await arig.open(arig.host.cpu(depth=2)) as dev:
        try:
            await dev.submit(occupy)
            await asyncio.sleep(0.05)  # the worker has taken it and is busy
            await dev.submit(many)
            v3 = await dev.submit(later)
            await asyncio.sleep(0.2)
            assert enqueued <= 2, "enqueue did not block on a full queue"
            assert called == [], "the next fill ran while the submit thread was blocked"
            assert ran == []
            assert dev.reached == 0
            # The event loop is not blocked meanwhile.
            await asyncio.sleep(0.01)
        finally:
            gate.set()
        await asyncio.wait_for(dev.wait(v3), 10.0)
        assert enqueued == 6
        assert ran == list(range(6))
        assert called == [v3]
