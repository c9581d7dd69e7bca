"""Probe: how the CUDA device's long-work watch (``ARIG_CUDA_BACKSTOP``, read at import) does on
the parts of ``bench``'s length sweep that it shapes, in a fraction of the sweep's time: one task
on asyncio at a few lengths (lateness p50 / p99 and CPU per wait of all threads), the first waits
of work never seen before, and a shortened mixed tail (by length, with the core's counters).  The same code as ``bench/sweep.py``
(its ``measure``: lateness is latency less the kernel's own GPU length).  Run it once per setting
in the same call to compare them: ``ARIG_CUDA_BACKSTOP=poll python3 scripts/probe_watch.py``.

Usage (GPU machine): python3 scripts/probe_watch.py [--device cuda] [--us 1000,10000,50000] [--n 40] [--tail 2000] [--json out.json] [--tune 0,500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import sweep  # noqa: E402
from bench._lateness import NEVER_SEEN_US, tail_lengths, tail_summary, TAIL_SEED  # noqa: E402


async def main(kind: str, lengths: list[int], n: int, tail: int, tune: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"backstop": os.environ.get("ARIG_CUDA_BACKSTOP", "(default)"), "rows": {}}
    async with sweep._arig(kind) as target:
        if tune:  # an experiment: the core's watch retuned while its thread runs (two plain ints it rereads)
            early, poll_us = (int(x) for x in tune.split(","))
            target.dev._backend.completion.core.tune(bool(early), poll_us * 1000)
            out["backstop"] += f", tuned: early backstop {bool(early)}, naps of {poll_us} µs"
        out["completion"] = target.dev.facts.get("completion")
        for us in lengths:
            await sweep.measure(target, [us] * 32)  # as bench's WARM: a length the work stopped taking fades
            m = await sweep.measure(target, [us] * n)
            row = sweep._figures(m, [us] * n)
            out["rows"][str(us)] = {"lateness_us": row["lateness_us"], "cpu_us_per_wait": row.get("cpu_us_per_wait"), "counters": row.get("counters")}
        # work never seen before: a grid no launch of this device had, each sample
        base, per = 1000, {}
        for us in NEVER_SEEN_US:
            grids = list(range(base, base + 12))
            base += 12
            m = await sweep.measure(target, [us] * 12, grids)
            fig = sweep._figures(m, [us] * 12)
            per[str(us)] = {**fig["lateness_us"], "cpu": fig.get("cpu_us_per_wait")}
        out["never_seen"] = per
        if tail:
            await sweep.measure(target, tail_lengths(200, seed=TAIL_SEED + 1))
            lengths_t = tail_lengths(tail)
            m = await sweep.measure(target, lengths_t)
            t = tail_summary(sweep._lateness(m, lengths_t), lengths_t)
            t["cpu_us_per_wait"] = m["cpu_s"] * 1e6 / tail
            t["counters"] = m["counters"]
            out["tail"] = t
    return out


def _fmt(d: dict[str, Any]) -> str:
    return " ".join(f"{k} {d[k]:.0f}" for k in ("p50", "p90", "p99", "max") if isinstance(d.get(k), (int, float)))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--device", choices=("cuda", "nv"), default="cuda")
    p.add_argument("--us", default="1000,10000,50000")
    p.add_argument("--n", type=int, default=40)
    p.add_argument("--tail", type=int, default=2000)
    p.add_argument("--json", default=None)
    p.add_argument("--tune", default="", help="EARLY,POLL_US: retune the core's watch after open (an experiment: NV with CUDA's naps is 0,500)")
    a = p.parse_args()
    r = asyncio.run(main(a.device, [int(x) for x in a.us.split(",")], a.n, a.tail, a.tune))
    print(f"ARIG_CUDA_BACKSTOP={r['backstop']}: {r['completion']}")
    for us, row in r["rows"].items():
        c = row.get("counters") or {}
        print(f"  {int(us) / 1000:g} ms: lateness {_fmt(row['lateness_us'])} µs, CPU {row['cpu_us_per_wait']:.0f} µs/wait, "
              f"counters {json.dumps({k: v for k, v in c.items() if v})}")
    for us, lat in r["never_seen"].items():
        print(f"  never seen {int(us) / 1000:g} ms: {_fmt(lat)} µs, CPU {lat.get('cpu') or 0:.0f} µs/wait")
    if "tail" in r:
        t = r["tail"]
        print(f"  tail n {t['n']}: p50 {t['p50']:.0f} p99 {t['p99']:.0f} p99.9 {t['p999']:.0f} max {t['max']:.0f} µs, "
              f"{t['late_over_1ms']} later than 1 ms, CPU {t['cpu_us_per_wait']:.0f} µs/wait")
        for us, lat in t.get("by_length_us", {}).items():
            print(f"    {int(us):>6} µs: {_fmt(lat)} µs (n {lat.get('n', 0)})")
        print(f"    counters {json.dumps({k: v for k, v in (t.get('counters') or {}).items() if v})}")
    if a.json:
        Path(a.json).write_text(json.dumps(r, indent=1))
