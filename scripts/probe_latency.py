"""Probe: one task's submit→wait round trip on CUDA (or the NV device) for a few kernel lengths,
the native core's counters (spin hits and misses, host functions, eventfd
writes), and which threads spent the CPU.  On NV, reached_at is the GPU's own
time of the release, so "seen->resumed" is the GPU's completion to the task's resumption.
Lengths and loops: ``--us 1000,10000 --loop uvloop --n 40`` (``spin`` is ``arig.new_event_loop()``,
``trio`` a ``trio.run``, where the loop's side is the trio port's); the
figures are then also latency - nominal length (p50/p90/p99/max) and the lateness seen by the native thread.
For work of 1 ms or more the probe reads the core's prediction once per wait, from a timer at a
quarter of the length: one more wake-up of the loop per wait, counted in its CPU and in its times
on a CPU (``bench``'s sweep has no such timer).
``--trace`` also times, per wait, the loop's side of the completion: how far ahead of the predicted
end the loop last woke, how the completion reached it (its own spin in the window, or the eventfd),
the word seen by that spin (or the wake-up that delivered it) after the GPU's stamp of the end, and
the task resumed after that.
Usage (GPU machine): python3 scripts/probe_latency.py [--device nv] [--sched blocking] [--spin-us 40] [--us 0,50,200,1000] [--loop asyncio] [--n 300] [--trace]"""

from __future__ import annotations

import argparse
import asyncio
import os
import threading
import time
from pathlib import Path
from collections import Counter

import numpy as np

import arig
from arig.cuda import Launch, pack
from arig.cuda import shipped_image
from arig._native import GAUGES
from arig._running import running_loop

SHOWN_AS_IS = (*GAUGES, "loop_lead_ns")  # figures, not counters: shown as they are, not as deltas


def thread_cpu(field: int = 0) -> Counter[str]:
    """Per thread name, summed over threads of one name, a field of schedstat: 0 ns on CPU, 2 the
    times it was put on a CPU (each wake-up from a sleep is one, as is each return after preemption)."""
    out: Counter[str] = Counter()
    loop_tid = threading.main_thread().native_id
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = "loop" if int(tid) == loop_tid else f.read().strip()
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                out[name] += int(f.read().split()[field])
        except OSError:
            pass
    return out


class Trace:
    """Wraps a native completion's ``deliver`` and ``_spin_window`` (instance attributes: on_wake
    looks them up per call) to time the loop's side of each wait (CLOCK_MONOTONIC, ns)."""

    def __init__(self, comp) -> None:
        self.events: list[tuple] = []
        deliver, window, core = comp.deliver, comp._spin_window, comp.core
        ev = self.events

        def traced_deliver() -> bool:
            t = time.monotonic_ns()
            r = deliver()
            ev.append(("deliver", t, r, core.due(), time.monotonic_ns()))
            return r

        def traced_window() -> None:
            e = ["window", time.monotonic_ns(), None, core.due(), 0]
            ev.append(e)  # before the deliver its spin may call
            window()
            e[4] = time.monotonic_ns()

        comp.deliver, comp._spin_window = traced_deliver, traced_window
        self.rows: list[tuple[float, ...]] = []

    def wait_done(self, resumed_ns: int, reached: float | None) -> None:
        """One wait ended: its breakdown (NaN where unknown)."""
        nan = float("nan")
        ev, self.events[:] = list(self.events), []
        final = next((i for i, e in enumerate(ev) if e[0] == "deliver" and e[2]), None)
        if final is None or reached is None:
            return
        t_final = ev[final][1]
        spun = final > 0 and ev[final - 1][0] == "window"
        wakes = [e for e in ev[:final] if e[0] == "deliver"]
        # The last wake-up before the delivery: the one whose spin saw it, else the last that found nothing.
        last = ev[final - 1] if spun else (wakes[-1] if wakes else None)
        ahead = (last[3] - last[1]) / 1e3 if last is not None and last[3] else nan
        spin = (t_final - last[1]) / 1e3 if spun and last is not None else nan
        r_ns = reached * 1e9
        out = ev[final - 1][4] if spun else ev[final][4]  # the spin window (or the deliver) returned to the loop
        self.rows.append((1.0 if spun else 0.0, len(wakes) + (0 if spun else 1), ahead, (t_final - r_ns) / 1e3, (resumed_ns - t_final) / 1e3, spin,
                          (ev[final][4] - t_final) / 1e3, (resumed_ns - out) / 1e3))

    def report(self) -> str:
        if not self.rows:
            return "    trace: no rows"
        a = np.array(self.rows)
        def pct(col: int) -> str:
            x = a[:, col][~np.isnan(a[:, col])]
            return " / ".join(f"{v:.0f}" for v in np.percentile(x, [10, 50, 90])) if len(x) else "-"
        return (f"    trace ({len(a)} waits): by the loop's spin {int(a[:, 0].sum())}, by the eventfd {int(len(a) - a[:, 0].sum())}; wake-ups per wait p50 {np.median(a[:, 1]):.0f}"
                f"\n      last wake ahead of the predicted end p10/p50/p90 {pct(2)} us; delivered after the GPU's stamp {pct(3)} us; task resumed after delivery {pct(4)} us; the loop's spin {pct(5)} us"
                f"\n      the delivery's own time {pct(6)} us; task resumed after the loop's callback returned {pct(7)} us")


async def _busy() -> None:
    """Keep the loop thread busy (never asleep in its selector): the same waits on a thread whose CPU never idles."""
    while True:
        await asyncio.sleep(0)


async def probe(spin_us: int, sched: str | None, device: str, lengths: list[int], n: int, trace: bool = False, busy: bool = False) -> None:
    if busy:
        keep_busy = asyncio.ensure_future(_busy())  # noqa: F841,RUF006 - lives as long as the run
    if device == "nv":
        from arig import nvrm

        opener, L = nvrm.gpu(0), nvrm.Launch
    else:
        opener, L = arig.cuda.gpu(0, spin_us=spin_us, sched=sched), Launch
    async with await arig.open(opener) as dev:
        cubin = os.path.join(os.path.dirname(arig.__file__), "kernels", "kernels.cubin")  # NV takes sm_90 cubins, not fatbins
        img = await dev.load(Path(cubin).read_bytes() if device == "nv" else shipped_image())
        b = dev._backend
        for us in lengths:
            launch = L(img.function("empty"), 1, 1) if us == 0 else L(img.function("spin"), 1, 1, pack(np.uint64(us * 1000)))
            for _ in range(50 if us < 1000 else 5):
                await dev.wait(await dev.submit(launch))
            s0 = b.completion.stats()
            lat, wake, err = [], [], []
            due_seen: list[int] = []
            loop = running_loop()  # asyncio's loop, or the trio run's port: both have call_later
            tr = Trace(b.completion) if trace else None
            c0, t0, w0 = time.process_time(), thread_cpu(), thread_cpu(2)
            for _ in range(n):
                t = time.perf_counter()
                v = await dev.submit(launch)
                due_seen.clear()
                if us >= 1000:  # the core's prediction of the end, read once it is made
                    loop.call_later(us / 4e6, lambda seen=due_seen: seen.append(b.completion.core.due()))
                await dev.wait(v)
                t1 = time.perf_counter()
                if tr is not None:
                    tr.wait_done(time.monotonic_ns(), dev.reached_at(v))
                lat.append(t1 - t)
                r = dev.reached_at(v)
                if r is not None:
                    wake.append(t1 - r)
                    if due_seen and due_seen[0]:
                        err.append(due_seen[0] / 1e9 - r)
            cpu = (time.process_time() - c0) / n
            per, woke = thread_cpu() - t0, thread_cpu(2) - w0
            top = ", ".join(f"{k} {v / n / 1e3:.0f}" for k, v in per.most_common(5))
            wakes = ", ".join(f"{k} {woke[k] / n:.1f}" for k, _ in per.most_common(5))
            late = (np.array(lat) * 1e6 - us) if us else np.array(lat) * 1e6
            q = np.percentile(late, [50, 90, 99, 100])
            print(f"{dev.name} sched={dev.facts.get('sched')} spin_us={spin_us:3d} kernel {us:5d} us: p50 {np.median(lat) * 1e6:7.1f} us  p90 {np.percentile(lat, 90) * 1e6:7.1f}"
                  f"  seen->resumed {np.median(wake) * 1e6:5.1f}  cpu/wait {cpu * 1e6:6.1f} us"
                  f"\n    late(lat-nominal) p50/p90/p99/max {q[0]:.0f}/{q[1]:.0f}/{q[2]:.0f}/{q[3]:.0f} us"
                  + (f"\n    predicted end - reached p10/p50/p90 {' / '.join(f'{x:.0f}' for x in np.percentile(np.array(err) * 1e6, [10, 50, 90]))} us" if err else "")
                  + f"\n    core: {', '.join(f'{k} {v if k in SHOWN_AS_IS else v - s0.get(k, 0)}' for k, v in b.completion.stats().items())}"
                  f"\n    cpu µs/op by thread: {top}"
                  f"\n    times on a CPU per op by thread: {wakes}" + (f"\n{tr.report()}" if tr is not None else ""), flush=True)
            if tr is not None:
                del b.completion.deliver, b.completion._spin_window


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sched", default=None)
    p.add_argument("--spin-us", type=int, default=40)
    p.add_argument("--device", choices=("cuda", "nv"), default="cuda")
    p.add_argument("--us", default="0,50,200,1000", help="kernel lengths in µs, comma-separated")
    p.add_argument("--loop", choices=("asyncio", "uvloop", "spin", "trio"), default="asyncio")
    p.add_argument("--n", type=int, default=300, help="waits per length")
    p.add_argument("--trace", action="store_true", help="time the loop's side of each wait (see the docstring)")
    p.add_argument("--busy", action="store_true", help="a task keeps the loop busy (sleep(0) in a loop) while it waits")
    a = p.parse_args()
    lengths = [int(x) for x in a.us.split(",")]
    if a.loop == "trio":
        import trio

        if a.busy:
            p.error("--busy is for asyncio's loops")
        print("loop: trio")
        trio.run(probe, a.spin_us, a.sched, a.device, lengths, a.n, a.trace, a.busy)
        return
    factory = asyncio.new_event_loop
    if a.loop == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    elif a.loop == "spin":
        factory = arig.new_event_loop
    print(f"loop: {a.loop}")
    with asyncio.Runner(loop_factory=factory) as r:
        r.run(probe(a.spin_us, a.sched, a.device, lengths, a.n, a.trace, a.busy))


if __name__ == "__main__":
    main()
