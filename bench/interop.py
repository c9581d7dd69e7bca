"""Awaiting a PyTorch stream: arig's adopted stream and wait_event against the usual ways.

The work is PyTorch's own: a small in-place op (``x.add_(1)`` on 4 KiB) on
a ``torch.cuda.Stream``, then one of

* ``arig_adopt``: ``q = dev.adopt(stream)`` once, then ``await dev.wait(await dev.submit(None, queue=q))``;
* ``arig_wait_event``: ``ev.record(stream); await arig.cuda.wait_event(ev, device=dev)``;
* ``torch_executor``: ``ev.record(stream); await loop.run_in_executor(None, ev.synchronize)``;
* ``torch_poll``: ``ev.record(stream); while not ev.query(): await asyncio.sleep(0)``.

One task (latency, CPU per wait), then 64 tasks each with a stream of its
own (completions/s, p99, CPU per completion).  At 64 tasks the busy poll
yields once before its first query: where torch's launch takes longer on the
host than its kernel on the GPU, the first query finds the work done, a poll
that only yields while it waits never yields, and one task runs alone while
the other 63 wait (seen on an H100's VM: one task's rate, a stall meter that
never ran).  ``bench._common.concurrency_level`` refuses such a level.  Ratios are each method's
over ``arig_adopt``, from this run.  All four run on asyncio's default loop;
then ``arig_adopt`` and ``torch_poll`` run again on uvloop and on
``arig.new_event_loop()`` (``loops``), each beside the other on that loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import arig
import arig.cuda

from ._common import Config, LoopUnavailable, Starved, concurrency_level, error_record, latency_block, log, loop_factory, run_in_loop
from ._stats import ratio, summarize

__all__ = ["run"]

METHODS = ("arig_adopt", "arig_wait_event", "torch_executor", "torch_poll")
#: The other loops, and the methods run on each (arig's adopted stream beside busy polling).
OTHER_LOOPS = ("uvloop", "spin")
LOOP_METHODS = ("arig_adopt", "torch_poll")
TASKS = 64


def _maker(method: str, dev: Any, torch: Any, many: bool = False) -> Callable[[int], Callable[[], Awaitable[None]]]:
    """Per task: its stream and tensor, and the op (enqueue torch work, then await it).
    ``many``: the op runs beside others (the busy poll then yields at least once per op)."""

    def make(_k: int) -> Callable[[], Awaitable[None]]:
        s = torch.cuda.Stream()
        x = torch.zeros(1024, device="cuda")
        ev = torch.cuda.Event()
        loop = asyncio.get_running_loop()
        if method == "arig_adopt":
            q = dev.adopt(s)

            async def op() -> None:
                with torch.cuda.stream(s):
                    x.add_(1.0)
                await dev.wait(await dev.submit(None, queue=q))

        elif method == "arig_wait_event":

            async def op() -> None:
                with torch.cuda.stream(s):
                    x.add_(1.0)
                ev.record(s)
                await arig.cuda.wait_event(ev, device=dev)

        elif method == "torch_executor":

            async def op() -> None:
                with torch.cuda.stream(s):
                    x.add_(1.0)
                ev.record(s)
                await loop.run_in_executor(None, ev.synchronize)

        else:

            async def op() -> None:
                with torch.cuda.stream(s):
                    x.add_(1.0)
                ev.record(s)
                if many:
                    await asyncio.sleep(0)  # the other tasks' turn, however soon the work is done
                while not ev.query():
                    await asyncio.sleep(0)

        return op

    return make


async def _method(method: str, cfg: Config, torch: Any) -> dict[str, Any]:
    dev = await arig.open(arig.cuda.gpu(0))
    try:
        make = _maker(method, dev, torch)
        op = make(0)
        await latency_block(op, 50)  # warm-up: torch's kernels loaded, arig's estimates learned
        c0 = _counters(dev)
        one = await latency_block(op, cfg.pick(600, 60))
        c1 = _counters(dev)
        try:
            many = await asyncio.wait_for(concurrency_level(_maker(method, dev, torch, many=True), TASKS, cfg.pick(0.5, 0.2), cfg.pick(2.0, 0.5)), 120)
        except Starved as exc:  # the one-task figures stand; this level has none
            many = {"tasks": TASKS, **error_record(exc)}
    finally:
        await dev.stop()
    torch.cuda.synchronize()
    out: dict[str, Any] = {
        "latency_us": summarize(one["lat"], 1e6),
        "cpu_us_per_wait": one["cpu_per_op"] * 1e6,
        f"tasks_{TASKS}": many,
    }
    if method.startswith("arig") and c0 is not None and c1 is not None:
        n = len(one["lat"])
        out["per_wait_one_task"] = {k: (c1[k] - c0[k]) / n for k in COUNTED if k in c0 and k in c1}
    return out


#: The native core's counters reported per wait of the one-task block (how each completion was
#: seen: by the core's spin, after a host function, after an eventfd write to a sleeping loop).
COUNTED = ("eventfd_writes", "host_functions", "futex_wakes", "spin_hits", "spin_misses", "early", "prewakes", "queries", "idle_spins", "idle_spin_hits", "park_ready", "park_done", "park_far", "park_looks")


def _counters(dev: Any) -> dict[str, int] | None:
    """The native core's counters (None on the pure engine): no public accessor exists, so this
    reads the backend's completion object, as ``bench.sweep`` does."""
    stats = getattr(getattr(getattr(dev, "_backend", None), "completion", None), "stats", None)
    return dict(stats()) if callable(stats) else None


def _log_method(where: str, method: str, r: dict[str, Any]) -> None:
    if "error" not in r:
        m = r[f"tasks_{TASKS}"]
        many = (f"{m['completions_per_s']:.0f}/s p99 {m['latency_us'].get('p99', 0):.0f} us cpu {m['cpu_us_per_completion'] or 0:.1f} us"
                if "error" not in m else m["error"])
        log(f"  interop {where}{method}: p50 {r['latency_us']['median']:.1f} us, cpu/wait {r['cpu_us_per_wait']:.1f} us; {TASKS} tasks {many}")
    else:
        log(f"  interop {where}{method}: {r['error']}")


def _on_loops(cfg: Config, torch: Any) -> dict[str, Any]:
    """``LOOP_METHODS`` on each of ``OTHER_LOOPS``, a fresh loop and device each: {loop: {method: result}},
    and each loop's p50 and rate of ``arig_adopt`` over ``torch_poll``'s."""
    out: dict[str, Any] = {}
    for kind in OTHER_LOOPS:
        try:
            loop_factory(kind)
        except LoopUnavailable as exc:
            out[kind] = error_record(exc)
            continue
        rows: dict[str, Any] = {}
        for method in LOOP_METHODS:
            try:
                rows[method] = run_in_loop(kind, _method, method, cfg, torch)
            except Exception as exc:  # noqa: BLE001 - one method's failure is reported, the others still run
                rows[method] = error_record(exc)
            _log_method(f"{kind} ", method, rows[method])
        a, p = rows.get("arig_adopt", {}), rows.get("torch_poll", {})
        if "error" not in a and "error" not in p:
            rows["adopt_over_poll"] = {
                "p50": ratio(a["latency_us"], p["latency_us"]),
                "completions_per_s": ratio(a[f"tasks_{TASKS}"].get("completions_per_s"), p[f"tasks_{TASKS}"].get("completions_per_s")),
            }
        out[kind] = rows
    return out


def run(cfg: Config) -> dict[str, Any]:
    try:
        import torch
    except ImportError as exc:
        return error_record(exc)
    if not torch.cuda.is_available():
        return {"error": "torch sees no CUDA GPU"}
    out: dict[str, Any] = {"work": "torch x.add_(1) on a 4 KiB tensor, on a torch.cuda.Stream per task", "torch": torch.__version__, "methods": {}}
    for method in METHODS:
        try:
            r = asyncio.run(_method(method, cfg, torch))
        except Exception as exc:  # noqa: BLE001 - one method's failure is reported, the others still run
            r = error_record(exc)
        out["methods"][method] = r
        _log_method("", method, r)
    base = out["methods"].get("arig_adopt", {})
    if "error" not in base:
        for r in out["methods"].values():
            if "error" in r:
                continue
            m, b = r[f"tasks_{TASKS}"], base[f"tasks_{TASKS}"]
            r["vs_arig_adopt"] = {
                "p50": ratio(r["latency_us"], base["latency_us"]),
                "cpu_per_wait": ratio(r["cpu_us_per_wait"], base["cpu_us_per_wait"]),
                "completions_per_s": ratio(m.get("completions_per_s"), b.get("completions_per_s")),
                "p99": ratio(m.get("latency_us", {}).get("p99"), b.get("latency_us", {}).get("p99")),
                "cpu_per_completion": ratio(m.get("cpu_us_per_completion"), b.get("cpu_us_per_completion")),
            }
    out["loops"] = _on_loops(cfg, torch)
    return out
