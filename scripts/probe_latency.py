"""Probe: one task's submit→wait round trip on CUDA (or the NV device) for a few kernel lengths,
the native core's counters (spin hits and misses, host functions, eventfd
writes), and which threads spent the CPU.  On NV, reached_at is the GPU's own
time of the release, so "seen->resumed" is the GPU's completion to the task's resumption.
Lengths and loops: ``--us 1000,10000 --loop uvloop --n 40`` (``spin`` is ``arig.new_event_loop()``); the
figures are then also latency - nominal length (p50/p90/p99/max) and the lateness seen by the native thread.
Usage (GPU machine): python3 scripts/probe_latency.py [--device nv] [--sched blocking] [--spin-us 40] [--us 0,50,200,1000] [--loop asyncio] [--n 300]"""

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


def thread_cpu() -> Counter[str]:
    """ns on CPU per thread name (schedstat), summed over threads of one name."""
    out: Counter[str] = Counter()
    loop_tid = threading.main_thread().native_id
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = "loop" if int(tid) == loop_tid else f.read().strip()
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                out[name] += int(f.read().split()[0])
        except OSError:
            pass
    return out


async def probe(spin_us: int, sched: str | None, device: str, lengths: list[int], n: int) -> None:
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
            loop = asyncio.get_running_loop()
            c0, t0 = time.process_time(), thread_cpu()
            for _ in range(n):
                t = time.perf_counter()
                v = await dev.submit(launch)
                due_seen.clear()
                if us >= 1000:  # the core's prediction of the end, read once it is made
                    loop.call_later(us / 4e6, lambda seen=due_seen: seen.append(b.completion.core.due()))
                await dev.wait(v)
                t1 = time.perf_counter()
                lat.append(t1 - t)
                r = dev.reached_at(v)
                if r is not None:
                    wake.append(t1 - r)
                    if due_seen and due_seen[0]:
                        err.append(due_seen[0] / 1e9 - r)
            cpu = (time.process_time() - c0) / n
            per = thread_cpu() - t0
            top = ", ".join(f"{k} {v / n / 1e3:.0f}" for k, v in per.most_common(5))
            late = (np.array(lat) * 1e6 - us) if us else np.array(lat) * 1e6
            q = np.percentile(late, [50, 90, 99, 100])
            print(f"{dev.name} sched={dev.facts.get('sched')} spin_us={spin_us:3d} kernel {us:5d} us: p50 {np.median(lat) * 1e6:7.1f} us  p90 {np.percentile(lat, 90) * 1e6:7.1f}"
                  f"  seen->resumed {np.median(wake) * 1e6:5.1f}  cpu/wait {cpu * 1e6:6.1f} us"
                  f"\n    late(lat-nominal) p50/p90/p99/max {q[0]:.0f}/{q[1]:.0f}/{q[2]:.0f}/{q[3]:.0f} us"
                  + (f"\n    predicted end - reached p10/p50/p90 {' / '.join(f'{x:.0f}' for x in np.percentile(np.array(err) * 1e6, [10, 50, 90]))} us" if err else "")
                  + f"\n    core: {', '.join(f'{k} {v if k in GAUGES else v - s0.get(k, 0)}' for k, v in b.completion.stats().items())}"
                  f"\n    cpu µs/op by thread: {top}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sched", default=None)
    p.add_argument("--spin-us", type=int, default=40)
    p.add_argument("--device", choices=("cuda", "nv"), default="cuda")
    p.add_argument("--us", default="0,50,200,1000", help="kernel lengths in µs, comma-separated")
    p.add_argument("--loop", choices=("asyncio", "uvloop", "spin"), default="asyncio")
    p.add_argument("--n", type=int, default=300, help="waits per length")
    a = p.parse_args()
    lengths = [int(x) for x in a.us.split(",")]
    factory = asyncio.new_event_loop
    if a.loop == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    elif a.loop == "spin":
        factory = arig.new_event_loop
    print(f"loop: {a.loop}")
    with asyncio.Runner(loop_factory=factory) as r:
        r.run(probe(a.spin_us, a.sched, a.device, lengths, a.n))


if __name__ == "__main__":
    main()
