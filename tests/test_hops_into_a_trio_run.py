"""The trio port's guarantees, which every device under trio stands on: a hop from another thread
runs on the run's thread and never raises into its caller (also once the run is over); a callback
that raises is logged and the run goes on; timers run in deadline order, a cancelled one never;
a future's waiter cancelled alone cancels it, a shielded waiter leaves it pending for the others."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
import trio

from arig._running import running_loop
from arig._trio_port import TrioFuture, TrioPort


def test_a_post_runs_on_the_runs_thread_and_is_dropped_once_the_run_is_over(caplog: pytest.LogCaptureFixture) -> None:
    ran: list[tuple[str, int]] = []

    async def main() -> TrioPort:
        port = running_loop()
        done = trio.Event()

        def from_a_thread() -> None:
            port.post(lambda: 1 / 0)  # raises on the run's thread: logged, the run goes on
            port.post(lambda tag: ran.append((tag, threading.get_ident())), "posted")
            port.post(done.set)

        threading.Thread(target=from_a_thread).start()
        with trio.fail_after(5):
            await done.wait()
        assert ran == [("posted", threading.get_ident())]
        return port

    with caplog.at_level(logging.ERROR, logger="arig"):
        port = trio.run(main)
    assert any("ZeroDivisionError" in r.getMessage() for r in caplog.records)
    assert port.closed and not port.running()
    port.post(ran.append, ("late", 0))  # the run is over: dropped, no error
    assert ran == [("posted", threading.get_ident())]


def test_timers_run_in_deadline_order_and_a_cancelled_one_never() -> None:
    order: list[str] = []

    async def main() -> None:
        port = running_loop()
        port.call_later(0.03, order.append, "third")
        port.call_later(0.01, order.append, "first")  # added later, due sooner: the sleep is cut short
        port.call_later(0.02, order.append, "cancelled").cancel()
        port.call_later(0.02, order.append, "second")
        await trio.sleep(0.06)

    trio.run(main)
    assert order == ["first", "second", "third"]


def test_a_futures_only_waiter_cancelled_cancels_it_and_a_shielded_one_does_not() -> None:
    async def main() -> None:
        own, shared = TrioFuture(), TrioFuture()
        with trio.move_on_after(0.01):
            await own
        assert own.done() and own.cancelled()
        got: list[Any] = []

        async def waits() -> None:
            got.append(await shared.shielded())

        async with trio.open_nursery() as n:
            with trio.move_on_after(0.01):
                await shared.shielded()
            assert not shared.done(), "a shielded waiter leaves the future to the others"
            n.start_soon(waits)
            await trio.sleep(0.01)
            shared.set_result(42)
        assert got == [42] and shared.result() == 42
        failed = TrioFuture()
        failed.set_exception(ValueError("x"))
        assert isinstance(failed.exception(), ValueError)
        with pytest.raises(ValueError):
            await failed

    trio.run(main)
