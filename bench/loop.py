"""Benchmark 4: event-loop responsiveness while graphs are made and pinned memory is allocated.

During each action another task keeps submitting empty kernels through
arig (``v = await dev.submit(...); await dev.wait(v)`` in a loop), and a
``StallMeter`` measures the event loop's longest stall.  Per action:
longest stall, the action's own duration, and the submitter's worst and
p99 latency (the driver lock taken by an instantiate shows there: the
submit thread waits, the loop should not).

* ``graph_async``: ``await record.graph_async([Kernel(empty)] * N)`` (a worker thread).
* ``graph_on_loop``: ``record.graph([Kernel(empty)] * N)`` called directly in
  the coroutine: the baseline (research measured 73-106 ms for N = 10k).
* ``pinned_arig``: ``await dev.alloc(256 MiB, kind="pinned")`` x 8, then
  close them and wait until the frees ran (the submit thread does both).
* ``pinned_on_loop``: the same sizes through ctypes ``cuMemHostAlloc`` /
  ``cuMemFreeHost`` called directly in the coroutine: the baseline.

Each figure is the median over repetitions, with p99 and IQR; ratios are
baseline over arig from this run.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ._common import Config, StallMeter, error_record, log
from ._cuda import get_raw
from ._methods import open_arig
from ._stats import ratio, summarize

__all__ = ["run"]


def run(cfg: Config) -> dict[str, Any]:
    return asyncio.run(_run(cfg))


def _nop_fill(stream: int, arg: Any, v: int) -> int:
    return 0


async def _with_submitter(a: Any, action: Callable[[], Awaitable[None]]) -> dict[str, Any]:
    pc = time.perf_counter
    lat: list[float] = []
    stop = False
    op = a.make_op(0)

    async def submitter() -> None:
        while not stop:
            t = pc()
            await op()
            lat.append(pc() - t)

    task = asyncio.get_running_loop().create_task(submitter())
    try:
        await asyncio.sleep(0.02)
        lat.clear()
        async with StallMeter() as meter:
            t0 = pc()
            await action()
            dt = pc() - t0
            # Let the meter's ticker wake once more: a stall that ends right
            # before the meter closes is only measured when the ticker runs.
            await asyncio.sleep(0.005)
        stop = True
        await asyncio.wait_for(task, 30)
    finally:
        task.cancel()
    s = summarize(lat, 1e6)
    return {"stall_ms": meter.longest * 1e3, "action_ms": dt * 1e3, "submitter_max_us": s.get("max"), "submitter_p99_us": s.get("p99"),
            "submitter_completions": s.get("n", 0), "submitter_completions_per_s": s.get("n", 0) / dt if dt > 0 else None}


def _aggregate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "reps": len(runs),
        "longest_stall_ms": summarize([r["stall_ms"] for r in runs]),
        "action_ms": summarize([r["action_ms"] for r in runs]),
        "submitter_max_us": summarize([r["submitter_max_us"] for r in runs if r["submitter_max_us"] is not None]),
        "submitter_completions_per_s": summarize([r["submitter_completions_per_s"] for r in runs if r["submitter_completions_per_s"]]),
        "runs": runs,
    }


async def _repeat(a: Any, reps: int, action: Callable[[], Awaitable[None]]) -> dict[str, Any]:
    runs = []
    for _ in range(reps):
        runs.append(await asyncio.wait_for(_with_submitter(a, action), 120))
        gc.collect()
    return _aggregate(runs)


async def _run(cfg: Config) -> dict[str, Any]:
    import arig.cuda_abi as abi

    sizes = (1000, 10000)
    reps = {1000: cfg.pick(5, 1), 10000: cfg.pick(3, 1)}
    pinned_n, pinned_bytes = cfg.pick((8, 256 << 20), (2, 64 << 20))
    pinned_reps = cfg.pick(2, 1)
    out: dict[str, Any] = {"graphs": {}, "pinned": {"buffers": pinned_n, "bytes_each": pinned_bytes}}
    raw = get_raw()
    async with open_arig() as a:
        rec = a.dev.capability(abi.KEY)
        await a.make_op(0)()  # warm
        for n in sizes:
            kernels = [abi.Kernel(a.funcs["empty"], 1, 1)] * n
            res: dict[str, Any] = {}

            async def in_thread(kernels: list[Any] = kernels) -> None:
                g = await rec.graph_async(kernels)
                del g

            async def on_loop(kernels: list[Any] = kernels) -> None:
                g = rec.graph(kernels)  # blocks the loop thread: the baseline
                del g

            for mode, action in (("graph_async", in_thread), ("graph_on_loop", on_loop)):
                try:
                    res[mode] = await _repeat(a, reps[n], action)
                    log(f"  {mode} N={n}: stall {res[mode]['longest_stall_ms']['median']:.2f} ms, build {res[mode]['action_ms']['median']:.1f} ms")
                except Exception as exc:  # noqa: BLE001
                    res[mode] = error_record(exc)
            res["stall_on_loop_over_async"] = _ratio(res, "graph_on_loop", "graph_async")
            out["graphs"][str(n)] = res

        async def pinned_arig() -> None:
            bufs = [await a.dev.alloc(pinned_bytes, kind="pinned") for _ in range(pinned_n)]
            for b in bufs:
                b.close()
            del bufs
            await a.dev.run(_nop_fill)  # the frees were posted before this fill: they ran

        async def pinned_loop() -> None:
            ps = [raw.host_alloc(pinned_bytes) for _ in range(pinned_n)]  # blocks the loop thread: the baseline
            for p in ps:
                raw.host_free(p)

        for mode, action in (("pinned_arig", pinned_arig), ("pinned_on_loop", pinned_loop)):
            try:
                out["pinned"][mode] = await _repeat(a, pinned_reps, action)
                log(f"  {mode}: stall {out['pinned'][mode]['longest_stall_ms']['median']:.2f} ms, took {out['pinned'][mode]['action_ms']['median']:.0f} ms")
            except Exception as exc:  # noqa: BLE001
                out["pinned"][mode] = error_record(exc)
        out["pinned"]["stall_on_loop_over_arig"] = _ratio(out["pinned"], "pinned_on_loop", "pinned_arig")
    return out


def _ratio(res: dict[str, Any], base: str, ours: str) -> float | None:
    try:
        return ratio(res[base]["longest_stall_ms"], res[ours]["longest_stall_ms"])
    except (KeyError, TypeError):
        return None
