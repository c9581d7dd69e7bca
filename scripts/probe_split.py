"""Probe: where a long kernel's lateness goes, submit to kernel start or kernel end to resume.

One task on one device waits on the sweep's ``spin_stamped`` kernel (its own GPU start and end in a
slot), in a repeating pattern of lengths (``--pattern 50,50,50,10000``: each length a grid of its
own, so each has its own prediction).  Per wait it keeps the host's CLOCK_MONOTONIC at the submit
and at the resume, and the GPU's stamps.  The GPU's clock and the host's differ by an unknown
offset, so the figures are relative: for each (length, length before it) the median of

* ``start``: GPU start - submit, less the same median of the hot short waits (the first length's
  waits after one of the same length): how much later the kernel starts than when all is awake;
* ``end``: resume - GPU end, less that of the hot short waits likewise;
* ``late``: latency less the GPU length (the sweep's lateness), absolute.

The pattern interleaves the lengths, so the clocks' drift over the run cancels to first order.
``--loop uvloop|spin|asyncio``; ``--never``: each wait of 1 ms or more a grid no launch had (no prediction yet);
``--busy``: a task keeps the loop thread busy, so that it never sleeps.  Usage (GPU machine):
python3 scripts/probe_split.py [--device cuda|nv] [--pattern 50,50,50,10000] [--n 200] [--loop asyncio]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import sweep  # noqa: E402
from bench._common import run_in_loop  # noqa: E402


WATCHED = ("spin_hits", "spin_misses", "mode_turns", "host_functions", "futex_wakes", "early", "prewakes", "prewakes_again", "loop_spins")


async def _busy() -> None:
    while True:
        await asyncio.sleep(0)


async def main(kind: str, pattern: list[int], n: int, dump: float = 0.0, never: bool = False, busy: bool = False) -> None:
    if busy:
        keep = asyncio.ensure_future(_busy())  # noqa: F841 - lives as long as the run
    async with (sweep._torch_poll() if kind == "torch" else sweep._arig(kind)) as target:
        grids = {us: 1 + i for i, us in enumerate(dict.fromkeys(pattern))}
        seq = (pattern * (n // len(pattern) + 1))[:n]
        slots = await target.slots(n)
        once = target.op()
        for launch in [target.launch(us, slots, i, grids[us]) for i, us in enumerate(seq[: 4 * len(pattern)])]:
            await once(launch)  # warm-up (the same slots: overwritten below)
        # never: each wait of 1 ms or more a grid no launch of the device had (no prediction), from 1000 blocks up
        launches = [target.launch(us, slots, i, 1000 + i if never and us >= 1000 else grids[us]) for i, us in enumerate(seq)]
        mono = time.monotonic_ns
        sub = np.zeros(n, dtype=np.int64)
        res = np.zeros(n, dtype=np.int64)
        s0 = target.counters()
        each: list[dict[str, int]] = []
        for i, launch in enumerate(launches):
            sub[i] = mono()
            await once(launch)
            res[i] = mono()
            if dump:
                each.append(target.counters() or {})
        s1 = target.counters()
        st = await target.read(slots, n)
        target.free(slots)
    gs, ge = st[0::2].astype(np.int64), st[1::2].astype(np.int64)
    start, end, late = gs - sub, res - ge, ((res - sub) - (ge - gs)) / 1e3
    rows: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i in range(1, n):
        rows[(seq[i], seq[i - 1])].append(i)
    hot = rows.get((pattern[0], pattern[0])) or rows[next(iter(rows))]
    s_ref, e_ref = np.median(start[hot]), np.median(end[hot])
    print(f"{kind}: pattern {pattern}, {n} waits; offsets of the hot {pattern[0]} µs waits (start/end, raw µs incl. the clocks' offset): {s_ref / 1e3:.1f} / {e_ref / 1e3:.1f}")
    for (us, prev), idx in sorted(rows.items()):
        ix = np.array(idx)
        s = (start[ix] - s_ref) / 1e3
        e = (end[ix] - e_ref) / 1e3
        q = lambda x: " / ".join(f"{v:6.1f}" for v in np.percentile(x, [10, 50, 90]))  # noqa: E731
        print(f"  {us:>6} µs after {prev:>6} µs (n {len(ix):3d}): start +{q(s)}   end +{q(e)}   late {q(late[ix])}  (p10/p50/p90 µs)")
    if dump:
        print(f"  waits later than {dump:g} µs, with the counters' steps over each:")
        for i in range(1, n):
            if late[i] > dump:
                d = {k: each[i].get(k, 0) - each[i - 1].get(k, 0) for k in WATCHED}
                print(f"    #{i} {seq[i]} µs after {seq[i - 1]}: start +{(start[i] - s_ref) / 1e3:.1f} end +{(end[i] - e_ref) / 1e3:.1f} late {late[i]:.1f}",
                      {k: v for k, v in d.items() if v})
    if s0 and s1:
        print("  counters:", {k: s1[k] - s0.get(k, 0) for k in s1 if isinstance(s1[k], int) and s1[k] - s0.get(k, 0) and not k.endswith("_ns")})


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--device", choices=("cuda", "nv", "torch"), default="cuda")
    p.add_argument("--pattern", default="50,50,50,10000")
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--loop", default="asyncio")
    p.add_argument("--never", action="store_true", help="each wait a grid never launched before (no prediction)")
    p.add_argument("--busy", action="store_true", help="a task keeps the loop busy (sleep(0) in a loop): its thread never sleeps")
    p.add_argument("--dump", type=float, default=0.0, help="list each wait later than this (µs), with its counters")
    a = p.parse_args()
    run_in_loop(a.loop, main, a.device, [int(x) for x in a.pattern.split(",")], a.n, a.dump, a.never, a.busy)
