"""The bench's concurrency levels (``bench._common.concurrency_level``) are rates of many tasks
sharing the loop.  An op that never yields (a busy poll whose work is done by its first look) keeps
the others, the stall meter and the CPU reading from running: what it counts is one task's rate,
which the bench once reported as the busy poll's 64-task rate, with a stall of 0 ms and 0.01 µs of
CPU per completion.  Such a level is refused (``Starved``), and the torch interop table says so
where its rate would be, while the one-task figures stand."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from bench._common import Starved, concurrency_level
from bench.report import table


def _spin_op(us: float, yields: bool) -> Callable[[int], Callable[[], Awaitable[None]]]:
    """An op that spins ``us`` on the loop thread; ``yields``: then yields once, as a poll that
    found its work done still should."""

    def make(_k: int) -> Callable[[], Awaitable[None]]:
        async def op() -> None:
            end = time.perf_counter() + us * 1e-6
            while time.perf_counter() < end:
                pass
            if yields:
                await asyncio.sleep(0)

        return op

    return make


def test_a_level_whose_ops_never_yield_is_refused() -> None:
    async def main() -> None:
        with pytest.raises(Starved, match="never yielded"):
            await concurrency_level(_spin_op(20, yields=False), 8, 0.05, 0.2)

    asyncio.run(main())


def test_a_level_whose_ops_yield_is_measured_with_every_task_taking_turns() -> None:
    async def main() -> dict[str, Any]:
        return await concurrency_level(_spin_op(20, yields=True), 8, 0.05, 0.2)

    r = asyncio.run(main())
    assert r["completions"] > 0 and r["stall_ticks"] > 0 and r["cpu_us_per_completion"] > 0
    # Every task took turns: latency is about 8 ops' spins, not one's (and never the whole window).
    assert r["latency_us"]["median"] > 4 * 20 and r["latency_us"]["max"] < 0.1e6


def test_the_interop_table_names_a_refused_level_where_its_rate_would_be() -> None:
    ok = {"latency_us": {"median": 40.0, "p99": 80.0}, "cpu_us_per_wait": 80.0,
          "tasks_64": {"completions_per_s": 30_000.0, "latency_us": {"p99": 2000.0}, "cpu_us_per_completion": 50.0}}
    starved = {"latency_us": {"median": 30.0, "p99": 60.0}, "cpu_us_per_wait": 30.0,
               "tasks_64": {"tasks": 64, "error": "Starved: one task of 64 made 61041 of the window's 61041 completions"}}
    text = table({"benchmarks": {"interop": {"work": "torch x.add_(1)", "methods": {"arig_adopt": ok, "torch_poll": starved},
                                             "loops": {"uvloop": {"arig_adopt": ok, "torch_poll": starved}}}}})
    rows = [line for line in text.splitlines() if line.startswith("| torch_poll") or line.startswith("| uvloop")]
    assert rows and all("starved" in line for line in rows)
    assert any("30.0" in line for line in rows if line.startswith("| torch_poll"))  # its one-task p50 stands
