"""Random interleavings of submit, wait, cancel, stop and a failing fill, from
many tasks at once, on a fresh host device per example; inline submissions
(``inline=True``: a marker, or a fill that raises inside ``submit``) among them;
under asyncio, and under trio (its port's futures, hub and cancel scopes).

Invariants at the end of every example: nothing hangs; every wait returned
or raised what the state at its call allowed; the values handed out are
exactly 1..n; work reached was done, in order per queue, at most once;
no task ended cancelled unless the test cancelled it; after stop, the
device's threads end and every kept object is released.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arig
import arig.host
from arig._worker import run_sync


class Token:
    pass


class Boom(Exception):
    pass


FAIL_KINDS = ("code", "raise", "work", "str")

# One op of one task.
submit_op = st.tuples(st.just("submit"), st.integers(0, 2), st.sampled_from([0.0, 0.0, 0.001, 0.003]), st.booleans())
submit_cancel_op = st.tuples(st.just("submit_cancel"), st.integers(0, 2), st.integers(0, 3))
wait_own_op = st.tuples(st.just("wait_own"))
wait_any_op = st.tuples(st.just("wait_any"), st.integers(0, 40))
cancel_waiter_op = st.tuples(st.just("cancel_waiter"), st.integers(0, 40), st.integers(0, 3))
sleep_op = st.tuples(st.just("sleep"), st.sampled_from([0, 0, 0.001, 0.005]))
stop_op = st.tuples(st.just("stop"))
inline_op = st.tuples(st.just("inline"), st.integers(0, 2), st.booleans())  # (queue, its fill raises)
op = st.one_of(submit_op, submit_op, submit_op, submit_cancel_op, wait_own_op, wait_any_op, cancel_waiter_op, sleep_op, stop_op, inline_op)

scenarios = st.fixed_dictionaries(
    {
        "programs": st.lists(st.lists(op, max_size=12), min_size=2, max_size=16),
        "queues": st.integers(1, 3),
        "max_pending": st.sampled_from([1, 2, 3, 8, 1024]),
        "depth": st.sampled_from([1, 2, 4096]),
        # The k-th submit call (over all tasks, in call order) uses a failing fill.
        "fail_at": st.none() | st.integers(0, 60),
        "fail_kind": st.sampled_from(FAIL_KINDS),
    }
)


@dataclass
class Record:
    executed: list[tuple[int, int]] = field(default_factory=list)  # (queue, v), appended by the workers
    lock: threading.Lock = field(default_factory=threading.Lock)
    returned: list[int] = field(default_factory=list)
    inline: list[int] = field(default_factory=list)  # values of inline markers (no work to record)
    refs: list[weakref.ref[Token]] = field(default_factory=list)
    submit_calls: int = 0
    failing_value: int | None = None
    cancels: int = 0  # sub-tasks this test cancelled (not the tasks: they keep their frames)
    problems: list[str] = field(default_factory=list)


def _work_fill(rec: Record, delay: float) -> Any:
    def fill(queue: Any, arg: Any, v: int) -> None:
        def work() -> None:
            if delay:
                time.sleep(delay)
            with rec.lock:
                rec.executed.append((queue.index, v))

        queue.enqueue(work)

    return fill


def _failing_fill(kind: str) -> Any:
    def fill(queue: Any, arg: Any, v: int) -> Any:
        if kind == "code":
            return 99
        if kind == "raise":
            raise Boom(f"fill {v}")
        if kind == "str":
            return "x"

        def work() -> None:
            raise Boom(f"work {v}")

        queue.enqueue(work)
        return None

    return fill


def _cause_matches(kind: str, cause: BaseException | None) -> bool:
    if kind == "code":
        return isinstance(cause, arig.FillError) and cause.code == 99
    if kind == "str":
        return isinstance(cause, TypeError)
    return isinstance(cause, Boom)


async def _checked_wait(dev: arig.Device, rec: Record, v: int) -> None:
    """Wait for v; record a problem unless the outcome is one the state allows."""
    submitted_at_call = dev.submitted
    lost_at_call = dev.lost
    try:
        await dev.wait(v)
    except ValueError:
        if not (v > submitted_at_call and lost_at_call is None):
            rec.problems.append(f"wait({v}) raised ValueError with {submitted_at_call} submitted, lost={lost_at_call!r}")
    except arig.DeviceLost as exc:
        if dev.lost is None or exc.__cause__ is not dev.lost:
            rec.problems.append(f"wait({v}) raised {exc!r} but dev.lost is {dev.lost!r}")
    else:
        if v > dev.reached:
            rec.problems.append(f"wait({v}) returned with reached={dev.reached}")
        with rec.lock:
            done = {x for _, x in rec.executed} | set(rec.inline)
        missing = [x for x in range(1, v + 1) if x not in done]
        if missing:
            rec.problems.append(f"wait({v}) returned before the work of {missing} ran")


async def _submit(dev: arig.Device, rec: Record, queue: int, delay: float, use_arg: bool, fail: tuple[int | None, str]) -> int | None:
    k = rec.submit_calls
    rec.submit_calls += 1
    failing = fail[0] == k
    fill = _failing_fill(fail[1]) if failing else _work_fill(rec, delay)
    token = Token()
    if not failing:
        # The failing fill's own arg stays reachable from dev.lost's traceback
        # (its frames), as any exception keeps its frames: not checked.
        rec.refs.append(weakref.ref(token))
    try:
        if use_arg:
            v = await dev.submit(fill, token, queue=queue % len(dev.queues))
        else:
            v = await dev.submit(fill, queue=queue % len(dev.queues), keep=(token,))
    except (arig.DeviceLost, arig.DeviceStopped):
        return None
    rec.returned.append(v)
    if failing:
        rec.failing_value = v
    return v


async def _inline(dev: arig.Device, rec: Record, queue: int, raises: bool) -> int | None:
    """An inline submission: a fill run inside submit that hands over a marker, or raises there."""
    ran: list[int] = []

    def fill(q: Any, arg: Any, v: int) -> int:
        ran.append(v)
        if raises:
            raise Boom(f"inline fill {v}")
        return int(q.put(None))

    try:
        v = await dev.submit(fill, queue=queue % len(dev.queues), inline=True)
    except Boom:
        if len(ran) != 1:
            rec.problems.append(f"an inline fill raised into submit after running {len(ran)} times")
        return None
    except (arig.DeviceLost, arig.DeviceStopped) as exc:
        if ran:
            rec.problems.append(f"an inline fill ran (for {ran}), then submit raised {exc!r}")
        return None
    if raises or ran != [v]:
        rec.problems.append(f"inline submit returned {v}; its fill ran for {ran} (raises={raises})")
    rec.returned.append(v)
    rec.inline.append(v)
    return v


async def _cancelled_after_asyncio(rec: Record, steps: int, fn: Any, *args: Any) -> None:
    """Run ``fn(*args)`` as a task of its own and cancel it after ``steps`` passes of the loop."""
    task = asyncio.create_task(fn(*args))
    for _ in range(steps):
        await asyncio.sleep(0)
    if task.cancel():
        rec.cancels += 1
    await asyncio.gather(task, return_exceptions=True)


async def _cancelled_after_trio(rec: Record, steps: int, fn: Any, *args: Any) -> None:
    """The same in trio's terms: a nursery whose cancel scope is cancelled."""
    async with trio.open_nursery() as n:
        n.start_soon(fn, *args)
        for _ in range(steps):
            await trio.sleep(0)
        n.cancel_scope.cancel()
    rec.cancels += 1


async def _actor(dev: arig.Device, rec: Record, program: list[tuple[Any, ...]], fail: tuple[int | None, str], trio_run: bool = False) -> None:
    cancelled_after = _cancelled_after_trio if trio_run else _cancelled_after_asyncio
    sleep = trio.sleep if trio_run else asyncio.sleep
    own: list[int] = []
    for step in program:
        kind = step[0]
        if kind == "submit":
            v = await _submit(dev, rec, step[1], step[2], step[3], fail)
            if v is not None:
                own.append(v)
        elif kind == "submit_cancel":
            await cancelled_after(rec, step[2], _submit, dev, rec, step[1], 0.0, False, fail)
        elif kind == "wait_own":
            if own:
                await _checked_wait(dev, rec, own[-1])
        elif kind == "wait_any":
            await _checked_wait(dev, rec, step[1] % (dev.submitted + 3))
        elif kind == "cancel_waiter":
            await cancelled_after(rec, step[2], _checked_wait, dev, rec, step[1] % (dev.submitted + 1))
        elif kind == "sleep":
            await sleep(step[1])
        elif kind == "stop":
            await dev.stop()
        elif kind == "inline":
            v = await _inline(dev, rec, step[1], step[2])
            if v is not None:
                own.append(v)


async def _scenario(params: dict[str, Any]) -> None:
    before = set(threading.enumerate())
    rec = Record()
    fail = (params["fail_at"], params["fail_kind"])
    dev = await arig.open(arig.host.cpu(queues=params["queues"], depth=params["depth"]), max_pending=params["max_pending"], stop_timeout=10.0)
    actors = [asyncio.create_task(_actor(dev, rec, program, fail)) for program in params["programs"]]
    results = await asyncio.gather(*actors, return_exceptions=True)
    await dev.stop()

    assert rec.problems == []
    for task, result in zip(actors, results, strict=True):
        assert not task.cancelled(), "an actor was cancelled by someone else's cancel"
        assert result is None, repr(result)
    await _check_end(dev, rec, params, before)


async def _check_end(dev: arig.Device, rec: Record, params: dict[str, Any], before: set[threading.Thread]) -> None:
    """The invariants at the end of an example (its device stopped), under asyncio or trio."""
    fail = (params["fail_at"], params["fail_kind"])
    # Values: exactly 1..n, each handed out once.
    n = dev.submitted
    assert sorted(rec.returned) == list(range(1, n + 1))

    # Loss: exactly when a failing fill was submitted, with its cause.
    if rec.failing_value is None:
        assert dev.lost is None, repr(dev.lost)
        assert dev.reached == n
    else:
        assert _cause_matches(fail[1], dev.lost), repr(dev.lost)
        assert dev.reached < rec.failing_value

    # Release: the device's threads end (first: a lost device's stop does not wait for the work
    # queued before the loss, which still runs), kept objects and args are dropped.
    mine = [t for t in threading.enumerate() if t not in before and t.name.startswith("arig-")]
    deadline = time.monotonic() + 3.0
    for t in mine:
        await run_sync(t.join, max(0.0, deadline - time.monotonic()))
    assert [t.name for t in mine if t.is_alive()] == []
    # Work: at most once each, in value order per queue, and all of it up to reached.
    with rec.lock:
        executed = list(rec.executed)
    values = [v for _, v in executed]
    assert len(values) == len(set(values)) and not set(values) & set(rec.inline)
    for q in range(params["queues"]):
        on_q = [v for qi, v in executed if qi == q]
        assert on_q == sorted(on_q)
    done = set(values) | set(rec.inline)
    assert set(range(1, dev.reached + 1)) <= done
    if rec.failing_value is None:
        assert sorted(values + rec.inline) == list(range(1, n + 1))
    else:
        assert rec.failing_value not in values
        assert set(range(1, rec.failing_value)) <= done

    gc.collect()
    assert [r for r in rec.refs if r() is not None] == []


def _run_example(params: dict[str, Any]) -> None:
    errors: list[dict[str, Any]] = []
    with asyncio.Runner() as runner:
        runner.get_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx))
        runner.run(asyncio.wait_for(_scenario(params), 30.0))
        gc.collect()
    assert errors == []


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenarios)
def test_random_interleavings(params: dict[str, Any]) -> None:
    _run_example(params)


async def _scenario_trio(params: dict[str, Any]) -> None:
    before = set(threading.enumerate())
    rec = Record()
    fail = (params["fail_at"], params["fail_kind"])
    dev = await arig.open(arig.host.cpu(queues=params["queues"], depth=params["depth"]), max_pending=params["max_pending"], stop_timeout=10.0)
    results: list[BaseException | None] = [None] * len(params["programs"])

    async def actor(i: int, program: list[tuple[Any, ...]]) -> None:
        try:
            await _actor(dev, rec, program, fail, trio_run=True)
        except Exception as exc:  # noqa: BLE001 - reported below, as gather's return_exceptions does
            results[i] = exc

    with trio.fail_after(30):
        async with trio.open_nursery() as n:
            for i, program in enumerate(params["programs"]):
                n.start_soon(actor, i, program)
        await dev.stop()
    assert rec.problems == []
    assert results == [None] * len(results)
    await _check_end(dev, rec, params, before)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(scenarios)
def test_random_interleavings_under_trio(caplog: pytest.LogCaptureFixture, params: dict[str, Any]) -> None:
    """The same interleavings in a trio run: its port's futures, hub and cancel scopes."""
    caplog.clear()
    trio.run(_scenario_trio, params)
    gc.collect()
    # What asyncio's exception handler would have been told: a callback of the port's that raised.
    assert [r.getMessage() for r in caplog.records if "callback of arig's trio port" in r.getMessage()] == []


def test_a_stop_in_the_middle_of_everything() -> None:
    """A fixed example with every op kind, a mid-way stop and a failing fill."""
    program = [
        ("submit", 0, 0.001, False),
        ("submit", 1, 0.0, True),
        ("cancel_waiter", 1, 1),
        ("wait_own",),
        ("submit_cancel", 2, 0),
        ("wait_any", 7),
        ("sleep", 0.001),
        ("submit", 2, 0.003, False),
        ("wait_own",),
    ]
    programs = [program] * 6 + [[("sleep", 0.005), ("stop",), ("submit", 0, 0.0, False)]]
    for fail_at in (None, 3):
        _run_example({"programs": programs, "queues": 3, "max_pending": 2, "depth": 2, "fail_at": fail_at, "fail_kind": "work"})


def test_work_queued_before_a_failing_fill_still_runs() -> None:
    """A 1 ms work, then a failing fill from another task on the same queue (found by hypothesis):
    the loss does not drop the work before it, which runs after the device's stop returned."""
    programs: list[list[tuple[Any, ...]]] = [[("submit", 2, 0.001, False)], [("submit_cancel", 1, 1)] * 3, []]
    _run_example({"programs": programs, "queues": 1, "max_pending": 3, "depth": 1, "fail_at": 1, "fail_kind": "code"})
