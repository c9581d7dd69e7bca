"""Idle: what an open device costs while nothing is pending.

Per case: open the device in a fresh event loop, submit and wait a few
empty kernels (``dev.submit(launch)``, the native fast path; on the host
device a no-op fill), let the last completion settle, then ``await
asyncio.sleep(S)`` with nothing pending (S = 1 s; quick 0.5 s) and report

* ``process_cpu_pct``: ``time.process_time()`` (every thread) over that
  sleep, as % of one core;
* ``threads``: per thread of the process, its CPU over the sleep from
  ``/proc/self/task/*/stat`` (utime + stime, clock ticks of
  ``SC_CLK_TCK``: 10 ms at 100 Hz) and, where the kernel has it, from
  ``/proc/self/task/*/schedstat`` (ns); ``threads_on_cpu`` lists the ones
  whose CPU moved.

Cases: ``cuda`` (asyncio default loop; its figure is the goal's), ``cuda_uvloop``,
``cuda_spinloop`` (``arig.new_event_loop()``: must not spin with nothing
predicted) where those loops exist, and ``host`` (``arig.host.cpu()``; runs on
any machine).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

from ._common import Config, LoopUnavailable, error_record, host_noop_fill, launch_fill, log, loop_factory, loop_name, run_in_loop

__all__ = ["run", "CASES", "thread_cpu"]

#: case -> (device, loop)
CASES = {
    "cuda": ("cuda", "asyncio"),
    "cuda_uvloop": ("cuda", "uvloop"),
    "cuda_spinloop": ("cuda", "spin"),
    "host": ("host", "asyncio"),
}

KERNELS = 20


def run(cfg: Config) -> dict[str, Any]:
    sleep_s = cfg.pick(1.0, 0.5)
    out: dict[str, Any] = {"sleep_s": sleep_s, "kernels_before": KERNELS, "clk_tck": _clk_tck(), "cases": {}}
    gpus, why = _gpus()
    for case, (device, loop) in CASES.items():
        if device == "cuda" and not gpus:
            out["cases"][case] = {"skipped": f"no CUDA GPU here{': ' + why if why else ''}"}
            continue
        try:
            loop_factory(loop)
        except LoopUnavailable as exc:
            out["cases"][case] = {"skipped": f"loop {loop!r}: {exc}"}
            continue
        try:
            r = run_in_loop(loop, _bounded, device, sleep_s)
        except Exception as exc:  # noqa: BLE001
            r = error_record(exc)
            log(f"  idle {case}: {r['error']}")
        else:
            busy = ", ".join(f"{t['name']} {_ms(t):.1f} ms" for t in r["threads"] if t["name"] in r["threads_on_cpu"]) or "none"
            log(f"  idle {case}: process CPU {r['process_cpu_pct']:.2f} % of a core over {r['seconds']:.2f} s; threads on CPU: {busy}")
        r["loop"] = loop
        out["cases"][case] = r
    return out


def _ms(t: dict[str, Any]) -> float:
    """A thread's CPU over the sleep: schedstat's ns where the kernel has them, else stat's ticks."""
    return float(t["sched_ms"] if t["sched_ms"] is not None else t["cpu_ms"])


def _gpus() -> tuple[int, str | None]:
    try:
        import arig.cuda

        return arig.cuda.count(), None
    except Exception as exc:  # noqa: BLE001
        return 0, f"{type(exc).__name__}: {exc}"


def _clk_tck() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):
        return 100


def thread_cpu() -> dict[int, dict[str, Any]]:
    """tid -> {comm, ticks (utime + stime), sched_ns (or None)} for every thread of this process."""
    out: dict[int, dict[str, Any]] = {}
    base = Path("/proc/self/task")
    try:
        tids = [int(t) for t in os.listdir(base)]
    except OSError:
        return out
    for tid in tids:
        d = base / str(tid)
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.find("(") + 1 : stat.rfind(")")]
        rest = stat[stat.rfind(")") + 2 :].split()  # rest[0] is field 3 (state): field N is rest[N - 3]
        try:
            ticks = int(rest[11]) + int(rest[12])  # utime (14) + stime (15)
        except (IndexError, ValueError):
            continue
        sched: int | None
        try:
            sched = int((d / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            sched = None
        out[tid] = {"comm": comm, "ticks": ticks, "sched_ns": sched}
    return out


async def _bounded(device: str, sleep_s: float) -> dict[str, Any]:
    return await asyncio.wait_for(_measure(device, sleep_s), 60 + sleep_s)


async def _measure(device: str, sleep_s: float) -> dict[str, Any]:
    import arig

    r: dict[str, Any] = {}
    if device == "cuda":
        from ._methods import gpu_facts, open_arig

        async with open_arig() as a:
            r["completion"] = gpu_facts(a.dev).get("completion")
            launch = a.launch_for(0)
            try:
                await asyncio.wait_for(a.dev.wait(await a.dev.submit(launch)), 10)
                r["kernels"] = "dev.submit(launch)"
                for _ in range(KERNELS - 1):
                    await a.dev.wait(await a.dev.submit(launch))
            except (TypeError, arig.ArigTypeError) as exc:  # this arig takes no Launch as a fill: a Python fill
                r["kernels"] = f"dev.submit(launch_fill, launch): a Python fill (dev.submit(launch) refused: {exc})"
                for _ in range(KERNELS):
                    await a.dev.wait(await a.dev.submit(launch_fill, launch))
            r.update(await _sleep(sleep_s))
    else:
        import arig.host

        async with await arig.open(arig.host.cpu(), stop_timeout=10) as dev:
            r["completion"] = dev.facts.get("completion")
            r["kernels"] = "dev.submit(no-op fill)"
            for _ in range(KERNELS):
                await dev.wait(await dev.submit(host_noop_fill))
            r.update(await _sleep(sleep_s))
    return r


async def _sleep(sleep_s: float) -> dict[str, Any]:
    await asyncio.sleep(0.05)  # the last completion's wake-ups settle
    names = {t.native_id: t.name for t in threading.enumerate()}
    tck = _clk_tck()
    t0 = thread_cpu()
    c0, w0 = time.process_time(), time.perf_counter()
    await asyncio.sleep(sleep_s)
    c1, w1 = time.process_time(), time.perf_counter()
    t1 = thread_cpu()
    names.update({t.native_id: t.name for t in threading.enumerate()})
    wall = w1 - w0
    threads = []
    for tid, b in t1.items():
        a = t0.get(tid)
        ticks = b["ticks"] - (a["ticks"] if a else 0)
        sched = None if b["sched_ns"] is None or (a and a["sched_ns"] is None) else b["sched_ns"] - (a["sched_ns"] if a else 0)
        threads.append({"tid": tid, "comm": b["comm"], "name": names.get(tid, b["comm"]), "new": a is None,
                        "cpu_ms": ticks * 1000.0 / tck, "sched_ms": None if sched is None else sched / 1e6})
    threads.sort(key=lambda t: (-_ms(t), t["tid"]))
    on_cpu = [t["name"] for t in threads if t["cpu_ms"] > 0 or (t["sched_ms"] or 0) > 0.5]
    return {
        "loop_class": loop_name(),
        "seconds": wall,
        "process_cpu_pct": (c1 - c0) / wall * 100.0,
        "process_cpu_ms": (c1 - c0) * 1e3,
        "thread_count": len(threads),
        "threads_on_cpu": on_cpu,
        "max_thread_cpu_pct": max((_ms(t) / 1e3 / wall * 100.0 for t in threads), default=0.0),
        "threads": threads,
    }
