"""Probe: this machine's wake frontier, how late an event loop asleep in its selector can see a moment
come, and at what CPU, when another thread wakes it a given lead ahead of that moment (no GPU needed).

Any completion watch that leaves the loop thread asleep while the GPU works ends the same way: some
thread (arig's native thread; libcuda's) learns or predicts the end, writes the loop's eventfd, and
the loop wakes, reads it and resumes the waiter.  A loop woken at the end is late by its wake-up (on
a VM, after a millisecond asleep: a vCPU gone idle); one woken ``lead`` ahead spins until the end,
on time only where it woke within the lead, and pays the lead in CPU.  This measures that trade with
everything else taken out: the end is a moment on CLOCK_MONOTONIC, not a GPU word (a spinning thread
sees a GPU's store within a microsecond, so the two differ by that), the waker is a plain thread
that sleeps with 1 µs timer slack until ``end - lead`` and writes the eventfd, and the woken loop's
reader spins until the end, then resolves the waiter's future.

Per length and lead: the waiter's lateness (its task resumed, less the end) p50 / p90 / p99, how
often the loop woke after the end (the lead was too short), the CPU per wait of the loop thread
(its thread time across the wait: selector, reader, spin, task step) and of the waker, and how late
the waker's own sleep ended (p50: a late waker, not a slow loop).  The row
``busy`` is the waiter spinning on the clock itself (a busy poll: a whole core, no lateness but its
own step).  arig's figures for the same lengths (``bench``'s sweep, ``scripts/probe_latency.py``)
sit on or off this frontier; a goal below it is out of reach of any design that lets the loop sleep.

Usage: python3 scripts/probe_wake_frontier.py [--us 1000,10000] [--leads 0,10,20,40,80,160,320]
       [--n 200] [--loop asyncio,uvloop] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import queue
import statistics
import threading
import time
from typing import Any

CLOCK_MONOTONIC, TIMER_ABSTIME, PR_SET_TIMERSLACK = 1, 1, 29
_libc = ctypes.CDLL(None, use_errno=True)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


#: A sleep of milliseconds on a VM ends late by a varying amount; one from a CPU just awake ends a
#: few microseconds late.  So a sleep longer than twice this ends this much early and sleeps again.
LAST_SLEEP_NS = 300_000


def sleep_until(at: int) -> None:
    ts = _Timespec(at // 1_000_000_000, at % 1_000_000_000)
    _libc.clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, ctypes.byref(ts), None)


class Waker:
    """A thread that sleeps until each moment it is given, then writes the eventfd (ctypes calls: the
    GIL is released while it sleeps and writes)."""

    def __init__(self, efd: int) -> None:
        self.efd = efd
        self.q: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self.cpu_ns = 0
        self.late: list[float] = []  # how late its own sleeps ended, µs
        self.th = threading.Thread(target=self._run, name="waker", daemon=True)
        self.th.start()

    def _run(self) -> None:
        _libc.prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0)  # as arig's native thread: sleeps end ~1 µs late, not ~55
        one = ctypes.c_uint64(1)
        while (at := self.q.get()) is not None:
            c = time.thread_time_ns()
            if at - time.monotonic_ns() > 2 * LAST_SLEEP_NS:  # as arig's native thread: the last stretch slept again
                sleep_until(at - LAST_SLEEP_NS)
            sleep_until(at)
            self.late.append((time.monotonic_ns() - at) / 1e3)
            _libc.write(self.efd, ctypes.byref(one), 8)
            self.cpu_ns += time.thread_time_ns() - c

    def close(self) -> None:
        self.q.put(None)
        self.th.join()


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


async def row(length_ns: int, lead_ns: int | None, n: int) -> dict[str, Any]:
    """n waits of length_ns, the loop woken lead_ns ahead (None: the waiter spins on the clock)."""
    loop = asyncio.get_running_loop()
    late: list[float] = []
    woke_after = 0
    loop_cpu = 0
    efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    waker = Waker(efd)
    box: dict[str, Any] = {}

    def on_readable() -> None:
        nonlocal woke_after
        os.read(efd, 8)
        end = box["end"]
        if time.monotonic_ns() > end and box["record"]:
            woke_after += 1
        while time.monotonic_ns() < end:  # woken ahead: spin to the end (the loop's spin in its window)
            pass
        box["fut"].set_result(None)

    loop.add_reader(efd, on_readable)
    try:
        for i in range(n + 5):  # the first five warm up, unrecorded
            c = time.thread_time_ns()
            end = time.monotonic_ns() + length_ns
            if lead_ns is None:
                while time.monotonic_ns() < end:
                    pass
                await asyncio.sleep(0)  # a task step, as a poller's await of a done future
            else:
                box["end"], box["fut"], box["record"] = end, loop.create_future(), i >= 5
                waker.q.put(end - lead_ns)
                await box["fut"]
            t = time.monotonic_ns()
            if i >= 5:
                late.append((t - end) / 1e3)
                loop_cpu += time.thread_time_ns() - c
    finally:
        loop.remove_reader(efd)
        waker.close()
        os.close(efd)
    return {
        "length_us": length_ns / 1e3, "lead_us": None if lead_ns is None else lead_ns / 1e3, "n": n,
        "p50": statistics.median(late), "p90": pct(late, 0.9), "p99": pct(late, 0.99), "max": max(late),
        "woke_after_end": woke_after / n,
        "loop_cpu_us": loop_cpu / n / 1e3, "waker_cpu_us": waker.cpu_ns / (n + 5) / 1e3,
        "waker_sleep_late_p50_us": statistics.median(waker.late[5:]) if len(waker.late) > 5 else 0.0,
    }


async def main(lengths: list[int], leads: list[int], n: int, loop_name: str) -> list[dict[str, Any]]:
    rows = []
    print(f"\nloop: {loop_name}")
    print(f"{'length':>8} {'lead':>6}  {'p50':>7} {'p90':>7} {'p99':>7} {'max':>7}  {'woke late':>9}  {'loop CPU':>8} {'waker CPU':>9} {'all CPU':>8} {'waker late':>10}  (µs; woke late: the share of waits)")
    for us in lengths:
        m = max(20, min(n, int(2_000_000 / us)))  # about 2 s a row at most
        for lead in [*leads, None]:
            r = await row(us * 1000, None if lead is None else lead * 1000, m if lead is not None else max(10, m // 4))
            r["loop"] = loop_name
            rows.append(r)
            name = "busy" if lead is None else f"{lead}"
            print(f"{us:>6}us {name:>6}  {r['p50']:7.1f} {r['p90']:7.1f} {r['p99']:7.1f} {r['max']:7.1f}  {r['woke_after_end']:9.2f}  "
                  f"{r['loop_cpu_us']:8.1f} {r['waker_cpu_us']:9.1f} {r['loop_cpu_us'] + r['waker_cpu_us']:8.1f} {r['waker_sleep_late_p50_us']:10.1f}", flush=True)
    return rows


def run_on(loop_name: str, *args: Any) -> list[dict[str, Any]]:
    if loop_name == "uvloop":
        try:
            import uvloop
        except ImportError:
            print("\nloop: uvloop: not installed, skipped")
            return []
        return uvloop.run(main(*args, loop_name))  # type: ignore[no-any-return]
    return asyncio.run(main(*args, loop_name))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--us", default="1000,10000", help="lengths of the waits, µs")
    p.add_argument("--leads", default="0,10,20,40,80,160,320", help="how far ahead of the end the loop is woken, µs")
    p.add_argument("--n", type=int, default=200, help="waits per row at most (fewer for long waits: about 2 s a row)")
    p.add_argument("--loop", default="asyncio,uvloop")
    p.add_argument("--json", default="")
    a = p.parse_args()
    print(f"cpu: {os.cpu_count()} cores; the waker sleeps with 1 µs timer slack; lateness = the waiter resumed - the end")
    out = []
    for name in a.loop.split(","):
        out += run_on(name, [int(x) for x in a.us.split(",")], [int(x) for x in a.leads.split(",")], a.n)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
