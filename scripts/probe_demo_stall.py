"""Probe: what the demo's "longest event-loop stall" is made of, on the default asyncio loop.

The demo's stall meter (a ticker sleeping 1 ms at a time) reads how late the loop runs a timer.
That is late either because one callback ran long (a task step that blocked: a driver call or a
lock on the loop thread, or Python holding it that long) or because the loop ran many callbacks
in one pass before it looked at its timers (the demo's 64 tasks woken by one delivery each check
their saxpy with numpy).  This runs ``python -m arig demo`` with the loop's callbacks and passes
timed (no sampler thread, no extra GIL holder), within the meter's window, and prints: the stall,
the longest single callback (where its task resumed and where it stopped), how many callbacks
took over 1 ms, and the longest passes with the number of callbacks ready at their start.

Usage: python3 scripts/probe_demo_stall.py [--device nv:0] [--repeat 2]
"""

from __future__ import annotations

import argparse
import asyncio
import asyncio.base_events
import asyncio.events
import time
from typing import Any

import arig._stall
from arig._cli.demo import run_demo
from arig._cli.saxpy import pick_opener

_pc = time.perf_counter


class _Timed:
    """Times every callback and pass of asyncio's loop while ``on`` (the stall meter's window)."""

    def __init__(self) -> None:
        self.on = False
        self.longest = 0.0
        self.where = ""
        self.slow = 0
        self.passes: list[tuple[float, int, int]] = []  # (seconds, callbacks ready, index)

    def install(self) -> None:
        run, once = asyncio.events.Handle._run, asyncio.base_events.BaseEventLoop._run_once
        enter, leave = arig._stall.StallMeter.__aenter__, arig._stall.StallMeter.__aexit__
        timed = self

        def _run(handle: Any) -> None:
            if not timed.on:
                return run(handle)
            w0, t = _where(handle), _pc()
            run(handle)
            d = _pc() - t
            timed.slow += d > 0.001
            if d > timed.longest:
                timed.longest, timed.where = d, f"from {w0} to {_where(handle)}"
            return None

        def _once(loop: Any) -> None:
            n, t = len(loop._ready), _pc()
            once(loop)
            if timed.on:
                timed.passes.append((_pc() - t, n, len(timed.passes)))

        async def _enter(meter: Any) -> Any:
            r = await enter(meter)
            timed.on = True
            return r

        async def _leave(meter: Any, *exc: Any) -> Any:
            timed.on = False
            return await leave(meter, *exc)

        asyncio.events.Handle._run = _run  # type: ignore[method-assign]
        asyncio.base_events.BaseEventLoop._run_once = _once  # type: ignore[attr-defined]
        arig._stall.StallMeter.__aenter__ = _enter  # type: ignore[method-assign]
        arig._stall.StallMeter.__aexit__ = _leave  # type: ignore[method-assign]


def _where(handle: Any) -> str:
    """The line a task's coroutine stands at (before its step: where it resumes; after: where it waits)."""
    task = getattr(handle._callback, "__self__", None)
    frame = getattr(task.get_coro(), "cr_frame", None) if isinstance(task, asyncio.Task) else None
    return f"{frame.f_code.co_name}:{frame.f_lineno}" if frame is not None else repr(handle)[:60]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None, help="as the demo's --device (default: the first GPU, else the host)")
    p.add_argument("--repeat", type=int, default=2)
    a = p.parse_args()
    timed = _Timed()
    timed.install()
    for _ in range(a.repeat):
        timed.longest, timed.where, timed.slow, timed.passes = 0.0, "", 0, []
        r = asyncio.run(run_demo(pick_opener(a.device), progress=False))
        passes = sorted(timed.passes, reverse=True)[:5]
        print(f"{r['device']}: {r['saxpys_per_s']:.0f} saxpys/s, longest event-loop stall {r['longest_loop_stall_ms']:.2f} ms")
        print(f"  longest single callback {timed.longest * 1e3:.2f} ms ({timed.where}); callbacks over 1 ms: {timed.slow}")
        print(f"  longest passes of {len(timed.passes)}, ms (callbacks ready at the start, which pass):", ", ".join(f"{d * 1e3:.2f} ({n}, #{i})" for d, n, i in passes))


if __name__ == "__main__":
    main()
