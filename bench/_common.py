"""What every benchmark shares: sizes, fills, the latency and concurrency loops, error capture."""

from __future__ import annotations

import asyncio
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

# arig's loop-stall meter has no public name (only the benchmarks measure the loop this
# way); it is imported here alone and the benchmarks take it from this module.
from arig._stall import StallMeter

from ._stats import summarize, windows_rate

__all__ = [
    "Config",
    "StallMeter",
    "Op",
    "launch_fill",
    "graph_fill",
    "host_noop_fill",
    "latency_block",
    "concurrency_level",
    "guarded",
    "aguarded",
    "error_record",
    "log",
    "TASKS",
    "KERNEL_US",
    "LOOPS",
    "LoopUnavailable",
    "Starved",
    "loop_factory",
    "loop_name",
    "loop_versions",
    "run_in_loop",
]

#: Kernel lengths of benchmark 1 (0 = the ``empty`` kernel).
KERNEL_US = (0, 50, 200, 1000)
#: Task counts of the concurrency sweep.
TASKS = (1, 4, 16, 64, 256, 1024)

#: An operation the loops time: one submit (or launch) and the wait for it.
#: It may return a float (seconds from the driver's report to the resumed
#: coroutine) or None.
Op = Callable[[], Awaitable[Any]]


@dataclass
class Config:
    """Sizes of a run: ``quick`` makes CI-sized runs (seconds)."""

    quick: bool = False
    notes: list[str] = field(default_factory=list)
    #: ``time.perf_counter()`` past which the run's ``--max-seconds`` watchdog ends it (None: no
    #: limit): a benchmark that can size itself reads ``left()`` instead of being cut off.
    deadline: float | None = None

    def pick(self, full: Any, quick: Any) -> Any:
        return quick if self.quick else full

    def left(self) -> float:
        """Seconds until the deadline (infinite without one)."""
        return float("inf") if self.deadline is None else self.deadline - time.perf_counter()


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- fills ---------------------------------------------------------------------


def launch_fill(stream: int, launch: Any, v: int) -> int:
    """A Python fill launching a prepared ``arig.cuda.Launch``."""
    return launch(stream)


def graph_fill(stream: int, graph: Any, v: int) -> int:
    """A Python fill launching an ``arig.cuda_abi.Graph``."""
    return graph.launch(stream)


def _nothing() -> None:
    return None


def host_noop_fill(queue: Any, arg: Any, v: int) -> None:
    """The host device's 0 µs work: a no-op on the host queue's worker."""
    queue.enqueue(_nothing)


# -- event loops ---------------------------------------------------------------------

#: The event loops a method can run on: the name used in results -> what it is.
LOOPS = {
    "asyncio": "asyncio.new_event_loop() (the default SelectorEventLoop)",
    "uvloop": "uvloop.new_event_loop()",
    "spin": "arig.new_event_loop() (spins on arig's completion words before blocking, while a completion is predicted)",
}


class LoopUnavailable(Exception):
    """The event loop asked for cannot be made here (uvloop missing, no ``arig.new_event_loop``)."""


def loop_factory(kind: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """The factory of a fresh event loop of ``kind`` (a key of ``LOOPS``); raises ``LoopUnavailable``."""
    if kind == "asyncio":
        return asyncio.new_event_loop
    if kind == "uvloop":
        try:
            import uvloop
        except ImportError as exc:
            raise LoopUnavailable(f"uvloop not importable: {exc}") from None
        return uvloop.new_event_loop
    if kind == "spin":
        import arig

        factory = getattr(arig, "new_event_loop", None)
        if not callable(factory):
            raise LoopUnavailable("arig.new_event_loop does not exist in this arig")
        return factory
    raise ValueError(f"unknown event loop kind {kind!r}: choose from {', '.join(LOOPS)}")


def run_in_loop(kind: str, coro_fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    """``coro_fn(*args)`` run to completion in a fresh event loop of ``kind``, closed afterwards."""
    factory = loop_factory(kind)
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro_fn(*args))  # type: ignore[arg-type]


def loop_name(loop: asyncio.AbstractEventLoop | None = None) -> str:
    """The running loop's class, as ``module.Class``."""
    loop = loop or asyncio.get_running_loop()
    t = type(loop)
    return f"{t.__module__}.{t.__qualname__}"


def loop_versions() -> dict[str, Any]:
    """Which loops this process can make: uvloop's version, whether ``arig.new_event_loop`` exists."""
    out: dict[str, Any] = {}
    try:
        import uvloop

        out["uvloop"] = getattr(uvloop, "__version__", "?")
    except ImportError as exc:
        out["uvloop"] = f"unavailable: {exc}"
    import arig

    out["arig.new_event_loop"] = callable(getattr(arig, "new_event_loop", None))
    return out


# -- error capture -------------------------------------------------------------------


def error_record(exc: BaseException) -> dict[str, Any]:
    return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=8)}


def guarded(out: dict[str, Any], key: str, fn: Callable[[], Any]) -> Any:
    """``out[key] = fn()``; on failure ``out[key]`` records the error (nothing raises)."""
    try:
        out[key] = fn()
    except Exception as exc:  # noqa: BLE001 - one failure must not end the run
        log(f"  {key}: {type(exc).__name__}: {exc}")
        out[key] = error_record(exc)
    return out[key]


async def aguarded(out: dict[str, Any], key: str, coro: Awaitable[Any], timeout: float | None = None) -> Any:
    """``out[key] = await coro`` (bounded by ``timeout``); on failure ``out[key]`` records the error."""
    try:
        out[key] = await (asyncio.wait_for(coro, timeout) if timeout else coro)
    except Exception as exc:  # noqa: BLE001
        log(f"  {key}: {type(exc).__name__}: {exc}")
        out[key] = error_record(exc)
    return out[key]


# -- the loops ---------------------------------------------------------------------


async def latency_block(op: Op, n: int) -> dict[str, Any]:
    """Run ``op`` ``n`` times from one task: each latency, and the process CPU per op.

    CPU is ``time.process_time()`` (every thread of the process) over the
    block, divided by ``n``: what one completion costs the machine, the
    launch included.
    """
    lat: list[float] = []
    resume: list[float] = []
    pc = time.perf_counter
    c0, w0 = time.process_time(), pc()
    for _ in range(n):
        t = pc()
        r = await op()
        lat.append(pc() - t)
        if r is not None:
            resume.append(r)
    c1, w1 = time.process_time(), pc()
    return {"lat": lat, "resume": resume, "cpu_per_op": (c1 - c0) / n, "wall_per_op": (w1 - w0) / n}


class Starved(RuntimeError):
    """A concurrency level whose tasks did not share the loop: one ran its ops without ever
    yielding (each op's work done by its first look), so the others and the measurement waited
    for it.  Its completions are one task's, not a concurrent rate."""


async def concurrency_level(make_op: Callable[[int], Op], tasks: int, warm: float, duration: float, windows: int = 10) -> dict[str, Any]:
    """``tasks`` tasks, each running its op in a loop for ``warm + duration`` seconds.

    Figures cover the ``duration`` after the warm-up: completions per second
    (the median over ``windows`` slices, with their spread), latency of each
    op that started in it, the event loop's longest stall (``StallMeter``)
    and the process CPU per completion.  Raises ``Starved`` where one task made
    nearly all of the window's completions: a task that never yields keeps every
    other task (and the stall meter, and the CPU reading) from running, and what
    it counts is not a rate of ``tasks`` tasks.
    """
    pc = time.perf_counter
    ops = [make_op(k) for k in range(tasks)]
    lat: list[float] = []
    done: list[float] = []
    t0 = pc()
    t_warm, t_end = t0 + warm, t0 + warm + duration

    mine = [0] * tasks  # each task's completions in the window

    async def worker(k: int, op: Op) -> None:
        while True:
            t = pc()
            if t >= t_end:
                return
            await op()
            t1 = pc()
            if t >= t_warm:
                lat.append(t1 - t)
            if t_warm <= t1 < t_end:
                done.append(t1)
                mine[k] += 1

    loop = asyncio.get_running_loop()
    workers = [loop.create_task(worker(k, op)) for k, op in enumerate(ops)]
    try:
        await asyncio.sleep(max(0.0, t_warm - pc()))
        c0 = time.process_time()
        async with StallMeter() as meter:
            await asyncio.sleep(max(0.0, t_end - pc()))
        c1 = time.process_time()
        await asyncio.gather(*workers)
    finally:
        for w in workers:
            w.cancel()
    n = len(done)
    if tasks > 1 and n and max(mine) > 0.9 * n:
        raise Starved(f"one task of {tasks} made {max(mine)} of the window's {n} completions: its ops never yielded, and it ran alone")
    rates = windows_rate(done, t_warm, t_end, windows)
    return {
        "tasks": tasks,
        "completions": n,
        "seconds": duration,
        "completions_per_s": n / duration,
        "completions_per_s_windows": summarize(rates),
        "latency_us": summarize(lat, 1e6),
        "longest_stall_ms": meter.longest * 1e3,
        "stall_ticks": meter.ticks,
        "cpu_us_per_completion": (c1 - c0) / n * 1e6 if n else None,
    }
