"""submit and wait on the host device: where and how fills are called, the
values they get, what wait waits for, keep/arg lifetimes and cancelled waiters."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref
from typing import Any

import pytest

import arig
import arig.host


class Token:
    """Something weak-referenceable to pass as ``arg`` or in ``keep``."""


def _noop(queue: Any, arg: Any, v: int) -> None:
    return None


# -- how fills are called ------------------------------------------------------------


@pytest.mark.asyncio
async def test_fills_run_on_one_submit_thread_in_order_with_their_arguments() -> None:
    loop_thread = threading.get_ident()
    calls: list[tuple[int, str, Any, Any, int]] = []

    def fill(queue: Any, arg: Any, v: int) -> None:
        calls.append((threading.get_ident(), threading.current_thread().name, queue, arg, v))

    async with await arig.open(arig.host.cpu(queues=3)) as dev:
        expected = []
        for i in range(30):
            k = (i * 7) % 3
            arg = ("arg", i)
            v = await dev.submit(fill, arg, queue=k)
            expected.append((dev.queues[k].handle, arg, v))
        await dev.wait(30)
    assert len(calls) == 30
    idents = {c[0] for c in calls}
    assert len(idents) == 1, "every fill of a device runs on the same thread"
    assert loop_thread not in idents, "fills never run on the event-loop thread"
    assert calls[0][1].startswith("arig-submit-")
    assert [c[4] for c in calls] == list(range(1, 31)), "fills are called in submit order"
    for (_, _, queue, arg, v), (exp_queue, exp_arg, exp_v) in zip(calls, expected, strict=True):
        assert queue is exp_queue
        assert arg is exp_arg
        assert v == exp_v


@pytest.mark.asyncio
async def test_fills_of_a_device_never_overlap() -> None:
    active = 0
    most = 0
    lock = threading.Lock()

    def fill(queue: Any, arg: Any, v: int) -> None:
        nonlocal active, most
        with lock:
            active += 1
            most = max(most, active)
        time.sleep(0.002)
        with lock:
            active -= 1

    async with await arig.open(arig.host.cpu(queues=2)) as dev:
        values = await asyncio.gather(*(dev.submit(fill, queue=i % 2) for i in range(40)))
        await dev.wait(max(values))
    assert most == 1
    assert sorted(values) == list(range(1, 41))


@pytest.mark.asyncio
async def test_fill_gets_queue_selected_by_queue_object() -> None:
    seen: list[Any] = []
    async with await arig.open(arig.host.cpu(queues=2)) as dev:
        await dev.submit(lambda q, a, v: seen.append(q), queue=dev.queues[1])
        await dev.submit(lambda q, a, v: seen.append(q), queue=dev.queues[0])
        await dev.wait(2)
        assert seen == [dev.queues[1].handle, dev.queues[0].handle]


@pytest.mark.asyncio
async def test_fill_returning_zero_succeeds() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        v = await dev.submit(lambda q, a, v: 0)
        await dev.wait(v)
        assert dev.lost is None
        assert dev.reached == v


@pytest.mark.asyncio
async def test_misuse_of_submit_raises_and_assigns_no_value() -> None:
    async with await arig.open(arig.host.cpu(queues=2)) as dev, await arig.open(arig.host.cpu()) as other:
        with pytest.raises(TypeError):
            await dev.submit(42)
        with pytest.raises(ValueError):
            await dev.submit(_noop, queue=2)
        with pytest.raises(ValueError):
            await dev.submit(_noop, queue=-1)
        with pytest.raises(TypeError):
            await dev.submit(_noop, queue="0")
        with pytest.raises(TypeError):
            await dev.submit(_noop, queue=1.0)
        with pytest.raises(ValueError):
            await dev.submit(_noop, queue=other.queues[0])
        assert dev.submitted == 0
        assert await dev.submit(_noop, queue=1) == 1


# -- values ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_values_are_gapless_across_queues() -> None:
    async with await arig.open(arig.host.cpu(queues=3)) as dev:
        values = []
        for i in range(50):
            values.append(await dev.submit(_noop, queue=i % 3))
        values += await asyncio.gather(*(dev.submit(_noop, queue=i % 3) for i in range(50)))
        assert values[:50] == list(range(1, 51))
        assert sorted(values) == list(range(1, 101))
        assert dev.submitted == 100
        await dev.wait(100)
        assert dev.reached == 100


@pytest.mark.asyncio
async def test_run_returns_the_value_once_reached() -> None:
    done = []
    async with await arig.open(arig.host.cpu()) as dev:
        v = await dev.run(lambda q, a, v: q.enqueue(lambda: (time.sleep(0.05), done.append(v))))
        assert v == 1
        assert done == [1]
        assert dev.reached >= 1


# -- what wait waits for -----------------------------------------------------------------


@pytest.mark.asyncio
async def test_wait_covers_every_earlier_value_on_every_queue() -> None:
    log: list[str] = []

    def slow(q: Any, a: Any, v: int) -> None:
        q.enqueue(lambda: (time.sleep(0.3), log.append(f"slow{v}")))

    def fast(q: Any, a: Any, v: int) -> None:
        q.enqueue(lambda: log.append(f"fast{v}"))

    async with await arig.open(arig.host.cpu(queues=2)) as dev:
        v_slow = await dev.submit(slow, queue=1)
        v_fast = await dev.submit(fast, queue=0)
        assert (v_slow, v_fast) == (1, 2)
        await dev.wait(v_fast)
        assert "slow1" in log, "wait(2) returned before the work of value 1 completed"
        assert "fast2" in log
        assert dev.reached >= 2


@pytest.mark.asyncio
async def test_queues_run_independently() -> None:
    # Queue 1's work waits for queue 0's later work: this completes only if
    # queue 0 is not held behind queue 1.
    go = threading.Event()
    outcome: list[bool] = []

    def waits(q: Any, a: Any, v: int) -> None:
        q.enqueue(lambda: outcome.append(go.wait(5.0)))

    def sets(q: Any, a: Any, v: int) -> None:
        q.enqueue(go.set)

    async with await arig.open(arig.host.cpu(queues=2)) as dev:
        v1 = await dev.submit(waits, queue=1)
        v2 = await dev.submit(sets, queue=0)
        await dev.wait(v2)
        assert v1 < v2
        assert outcome == [True]


@pytest.mark.asyncio
async def test_reached_is_monotone_and_ends_at_the_last_value() -> None:
    def work(q: Any, a: Any, v: int) -> None:
        q.enqueue(time.sleep, 0.001 * (v % 3))

    async with await arig.open(arig.host.cpu(queues=3)) as dev:
        samples = [dev.reached]
        for i in range(60):
            await dev.submit(work, queue=i % 3)
            samples.append(dev.reached)
        while dev.reached < 60:
            await asyncio.sleep(0.001)
            samples.append(dev.reached)
        await dev.wait(60)
        samples.append(dev.reached)
    assert samples == sorted(samples)
    assert samples[-1] == 60
    assert all(0 <= s <= 60 for s in samples)


@pytest.mark.asyncio
async def test_wait_checks_its_argument() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        await dev.wait(0)
        with pytest.raises(ValueError) as info:
            await dev.wait(1)
        assert isinstance(info.value, arig.ArigError)
        v = await dev.submit(_noop)
        await dev.wait(v)
        with pytest.raises(ValueError):
            await dev.wait(v + 1)
        for bad in (1.0, "1", None, True):
            with pytest.raises(TypeError):
                await dev.wait(bad)  # type: ignore[arg-type]
        await dev.wait(0)


@pytest.mark.asyncio
async def test_reached_at_is_none_before_and_a_time_after() -> None:
    gate = threading.Event()
    async with await arig.open(arig.host.cpu()) as dev:
        assert dev.reached_at(1) is None
        try:
            v = await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0))
            await asyncio.sleep(0.05)
            assert dev.reached_at(v) is None
            t_before = time.perf_counter()
        finally:
            gate.set()
        await dev.wait(v)
        t = dev.reached_at(v)
        assert isinstance(t, float)
        assert t_before <= t <= time.perf_counter()
        v2 = await dev.submit(_noop)
        await dev.wait(v2)
        t2 = dev.reached_at(v2)
        assert isinstance(t2, float) and t <= t2
        assert dev.reached_at(0) is None or isinstance(dev.reached_at(0), float)
        with pytest.raises(TypeError):
            dev.reached_at(1.0)  # type: ignore[arg-type]


# -- keep and arg lifetimes ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_keep_is_held_until_the_value_is_reached() -> None:
    gate = threading.Event()
    async with await arig.open(arig.host.cpu()) as dev:
        kept = Token()
        ref = weakref.ref(kept)
        try:
            v = await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0), keep=(kept,))
            del kept
            await asyncio.sleep(0.05)
            gc.collect()
            assert ref() is not None, "keep was dropped while its work was pending"
        finally:
            gate.set()
        await dev.wait(v)
        gc.collect()
        assert ref() is None, "keep outlived its work"


@pytest.mark.asyncio
async def test_keep_may_be_any_object() -> None:
    gate = threading.Event()
    async with await arig.open(arig.host.cpu()) as dev:
        kept = Token()
        ref = weakref.ref(kept)
        try:
            v = await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0), keep=kept)
            del kept
            gc.collect()
            assert ref() is not None
        finally:
            gate.set()
        await dev.wait(v)
        gc.collect()
        assert ref() is None


@pytest.mark.asyncio
async def test_arg_is_held_until_the_value_is_reached_then_dropped() -> None:
    gate = threading.Event()
    async with await arig.open(arig.host.cpu()) as dev:
        arg = Token()
        ref = weakref.ref(arg)
        try:
            v = await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0), arg)
            del arg
            await asyncio.sleep(0.05)
            gc.collect()
            assert ref() is not None, "arg was dropped while its work was pending"
        finally:
            gate.set()
        await dev.wait(v)
        await asyncio.sleep(0.05)  # let the submit thread go idle again
        gc.collect()
        assert ref() is None, "arg outlived its work"


# -- cancelled waiters -------------------------------------------------------------------


@pytest.mark.asyncio
async def test_cancelling_one_waiter_leaves_the_work_and_other_waiters() -> None:
    gate = threading.Event()
    ran: list[int] = []
    async with await arig.open(arig.host.cpu()) as dev:
        try:
            v = await dev.submit(lambda q, a, v: q.enqueue(lambda: (gate.wait(5.0), ran.append(v))))
            a = asyncio.create_task(dev.wait(v))
            b = asyncio.create_task(dev.wait(v))
            await asyncio.sleep(0.02)
            a.cancel()
            await asyncio.gather(a, return_exceptions=True)
            assert a.cancelled()
            assert not b.done()
        finally:
            gate.set()
        await asyncio.wait_for(b, 5.0)
        assert b.result() is None
        assert ran == [v]
        assert dev.lost is None
        # A later waiter on the same value returns too.
        await dev.wait(v)


@pytest.mark.asyncio
async def test_cancelling_every_waiter_then_waiting_again() -> None:
    gate = threading.Event()
    async with await arig.open(arig.host.cpu()) as dev:
        try:
            v = await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0))
            waiters = [asyncio.create_task(dev.wait(v)) for _ in range(3)]
            await asyncio.sleep(0.02)
            for w in waiters:
                w.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)
            assert all(w.cancelled() for w in waiters)
            late = asyncio.create_task(dev.wait(v))
            await asyncio.sleep(0.02)
            assert not late.done()
        finally:
            gate.set()
        await asyncio.wait_for(late, 5.0)
        assert dev.reached >= v


@pytest.mark.asyncio
async def test_waiters_on_different_values_wake_in_value_order_never_early() -> None:
    # The device may report several values at once, so a waiter may wake
    # late, but never before its work and every earlier work completed.
    gates = [threading.Event() for _ in range(3)]
    woke: list[int] = []
    async with await arig.open(arig.host.cpu()) as dev:
        try:
            values = [await dev.submit(lambda q, a, v: q.enqueue(a.wait, 5.0), g) for g in gates]
            assert values == [1, 2, 3]

            async def waiter(v: int) -> None:
                await dev.wait(v)
                woke.append(v)

            tasks = {v: asyncio.create_task(waiter(v)) for v in reversed(values)}
            await asyncio.sleep(0.02)
            gates[0].set()
            await asyncio.sleep(0.1)
            assert woke in ([], [1])
            assert not tasks[2].done() and not tasks[3].done()
            gates[2].set()  # work 3 may run, but work 2 has not: nothing past 1 may wake
            await asyncio.sleep(0.1)
            assert woke in ([], [1])
            assert not tasks[2].done() and not tasks[3].done()
        finally:
            for g in gates:
                g.set()
        await asyncio.wait_for(asyncio.gather(*tasks.values()), 5.0)
        assert woke == [1, 2, 3]
