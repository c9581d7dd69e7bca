"""Benchmark 7: the host device (``arig.host.cpu()``), so every machine has a figure.

* ``latency``: one task, ``v = await dev.submit(fill); await dev.wait(v)``
  where the fill enqueues a no-op on the host queue (the 0 µs kernel of
  benchmark 1): latency per completion and process CPU per completion.
* ``concurrency``: benchmark 2's sweep (1 … 1024 tasks) of the same op:
  completions/s, latency, longest event-loop stall.
"""

from __future__ import annotations

import asyncio
from typing import Any

import arig
import arig.host

from ._common import TASKS, Config, aguarded, concurrency_level, host_noop_fill, latency_block, log
from ._stats import summarize

__all__ = ["run"]


def run(cfg: Config) -> dict[str, Any]:
    return asyncio.run(_run(cfg))


async def _run(cfg: Config) -> dict[str, Any]:
    out: dict[str, Any] = {"device": "HOST", "what": "fill = queue.enqueue(no-op); v = await dev.submit(fill); await dev.wait(v)"}
    async with await arig.open(arig.host.cpu(), stop_timeout=10) as dev:
        out["facts"] = {k: v for k, v in dev.facts.items() if isinstance(v, (int, float, str, type(None)))}

        async def op() -> float | None:
            v = await dev.submit(host_noop_fill)
            await dev.wait(v)
            return None

        await aguarded(out, "latency", _latency(cfg, op), timeout=120)
        await aguarded(out, "concurrency", _sweep(cfg, dev), timeout=120)
    return out


async def _latency(cfg: Config, op: Any) -> dict[str, Any]:
    rounds, n = cfg.pick((5, 2000), (2, 250))
    await latency_block(op, cfg.pick(500, 50))  # warm-up, discarded
    lat: list[float] = []
    cpu: list[float] = []
    for _ in range(rounds):
        b = await latency_block(op, n)
        lat += b["lat"]
        cpu.append(b["cpu_per_op"])
    log(f"  host latency: median {summarize(lat, 1e6)['median']:.1f} us")
    return {"kernel_us": 0, "latency_us": summarize(lat, 1e6), "cpu_us_per_wait": summarize(cpu, 1e6), "blocks": rounds, "per_block": n}


async def _sweep(cfg: Config, dev: arig.Device) -> list[dict[str, Any]]:
    warm, duration = cfg.pick((0.2, 0.8), (0.03, 0.12))

    def make_op(_: int) -> Any:
        async def op() -> None:
            v = await dev.submit(host_noop_fill)
            await dev.wait(v)

        return op

    levels = []
    for tasks in TASKS:
        r = await concurrency_level(make_op, tasks, warm, duration)
        log(f"  host {tasks:5d} tasks: {r['completions_per_s']:9.0f}/s, p99 {r['latency_us'].get('p99', 0):8.0f} us, stall {r['longest_stall_ms']:.2f} ms")
        levels.append(r)
    return levels
