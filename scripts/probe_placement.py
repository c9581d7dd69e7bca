"""Probe: does where the kernel places the loop thread and the native thread decide the 64-task rate?

64 tasks each awaiting an empty kernel keep two threads busy: the loop thread (every task step,
every submit) and the device's native thread (every launch, and its short spins for the next push
and for the completion).  The bench's 64-task rate on the default loop has differed by up to 2x
between runs and between rows of one run on the same VM.  One suspect is placement: on a VM whose
vCPUs are hyperthreads, the two threads may share a physical core (and its execution units), or
not, as the scheduler happens to place them.

Per round (a fraction of a second of 64 tasks, after a warm-up): completions/s, each thread's CPU per
completion, and where they ran.  Modes, alternating: ``free`` (the scheduler's placement, sampled:
on sibling hyperthreads or not), ``apart`` (the two pinned to CPUs of different physical cores),
``siblings`` (pinned to the two hyperthreads of one core, where the machine has them), ``shared``
(both pinned to one CPU).  The machine's topology is printed first.

Usage (GPU machine): python3 scripts/probe_placement.py [--device cuda] [--rounds 3] [--seconds 0.5] [--lib asyncio,trio]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import arig  # noqa: E402
from bench.sweep import ArigTarget, _image, _opener  # noqa: E402


def siblings(cpu: int) -> list[int]:
    """The logical CPUs of cpu's physical core (cpu alone where the machine does not say)."""
    try:
        text = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read_text().strip()
    except OSError:
        return [cpu]
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def native_tid() -> int:
    for tid in os.listdir("/proc/self/task"):
        try:
            if Path(f"/proc/self/task/{tid}/comm").read_text().strip() == "arig-native":
                return int(tid)
        except OSError:
            pass
    raise RuntimeError("no arig-native thread: the native core is not running (ARIG_PURE?)")


def last_cpu(tid: int) -> int:
    """The CPU tid last ran on (field 39 of its stat)."""
    stat = Path(f"/proc/self/task/{tid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[36])


def thread_cpu_ns(tid: int) -> int:
    return int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[0])


def plan(mode: str, cpus: list[int]) -> tuple[set[int], set[int]] | None:
    """CPU sets for (loop, native) in mode, or None where the machine cannot place them so."""
    if mode == "free":
        return set(cpus), set(cpus)
    if mode == "shared":
        return {cpus[0]}, {cpus[0]}
    for c in cpus:
        sib = [s for s in siblings(c) if s != c and s in cpus]
        if mode == "siblings" and sib:
            return {c}, {sib[0]}
        if mode == "apart":
            other = [d for d in cpus if d not in siblings(c)]
            if other:
                return {c}, {other[0]}
    return None


async def rounds(kind: str, modes: list[str], n_rounds: int, seconds: float) -> None:
    import sniffio

    lib = sniffio.current_async_library()
    cpus = sorted(os.sched_getaffinity(0))
    loop_tid = threading.get_native_id()
    async with await arig.open(_opener(kind), stop_timeout=10) as dev:
        t = ArigTarget(dev, await dev.load(_image(kind)), kind)
        work, submit, wait = t.empty, dev.submit, dev.wait
        ntid = native_tid()
        done, stop = [0], [0.0]
        seen: list[tuple[int, int]] = []

        async def task(k: int) -> None:
            while time.perf_counter() < stop[0]:
                await wait(await submit(work))
                done[0] += 1
                if k == 0 and done[0] % 2000 < 64:
                    seen.append((last_cpu(loop_tid), last_cpu(ntid)))

        async def run(s: float) -> tuple[int, float]:
            done[0] = 0
            stop[0] = time.perf_counter() + s
            t0 = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for k in range(64):
                    tg.start_soon(task, k)
            return done[0], time.perf_counter() - t0

        await run(0.2)  # warm-up
        for r in range(n_rounds):
            for mode in modes:
                p = plan(mode, cpus)
                if p is None:
                    print(f"{kind}/{lib:7s} round {r} {mode:8s}: not possible on this machine", flush=True)
                    continue
                os.sched_setaffinity(loop_tid, p[0])
                os.sched_setaffinity(ntid, p[1])
                seen.clear()
                await run(0.05)  # settle where the threads now are
                seen.clear()
                l0, n0 = thread_cpu_ns(loop_tid), thread_cpu_ns(ntid)
                n, w = await run(seconds)
                lc, nc = (thread_cpu_ns(loop_tid) - l0) / n / 1e3, (thread_cpu_ns(ntid) - n0) / n / 1e3
                sib = sum(1 for a, b in seen if a != b and b in siblings(a))
                same = sum(1 for a, b in seen if a == b)
                where = f"samples {len(seen)}: siblings {sib}, same CPU {same}, apart {len(seen) - sib - same}; e.g. loop {seen[0][0]} native {seen[0][1]}" if seen else ""
                print(f"{kind}/{lib:7s} round {r} {mode:8s}: {n / w:9.0f} completions/s  loop {lc:5.1f} µs/c  native {nc:5.1f} µs/c  {where}", flush=True)
        os.sched_setaffinity(loop_tid, set(cpus))
        os.sched_setaffinity(ntid, set(cpus))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--lib", default="asyncio,trio")
    ap.add_argument("--modes", default="free,apart,siblings,shared")
    a = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    cores = {tuple(siblings(c)) for c in cpus}
    model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name")), "?")
    print(f"{len(cpus)} CPUs on {len(cores)} physical cores; siblings of CPU {cpus[0]}: {siblings(cpus[0])}; model: {model}")
    for lib in a.lib.split(","):
        anyio.run(rounds, a.device, a.modes.split(","), a.rounds, a.seconds, backend=lib)


if __name__ == "__main__":
    main()
