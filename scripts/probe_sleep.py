"""How late a timed sleep of this machine ends, by its length (no GPU needed).

The native core sleeps until shortly before a predicted completion; if a sleep of milliseconds ends
late in proportion to its length (a virtual machine's timer running slow against CLOCK_MONOTONIC),
a fixed early margin cannot cover long work.  Per length: the overshoot (end - target) of
``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`` with 1 us timer slack, of the same after a
first sleep to 300 us before the target (the core's two-stage sleep), and of ``time.sleep``
(default slack), p50 / p90 / max in us, and the overshoot as a fraction of the length.

Usage: python3 scripts/probe_sleep.py [--ms 0.1,0.3,1,3,10,30,50] [--n 15]
"""

from __future__ import annotations

import argparse
import ctypes
import time

import numpy as np

CLOCK_MONOTONIC, TIMER_ABSTIME, PR_SET_TIMERSLACK = 1, 1, 29


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ms", default="0.1,0.3,1,3,10,30,50")
    ap.add_argument("--n", type=int, default=15)
    a = ap.parse_args()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0)

    def sleep_abs(t_ns: int) -> None:
        ts = _Timespec(t_ns // 1_000_000_000, t_ns % 1_000_000_000)
        libc.clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, ctypes.byref(ts), None)

    def one(d_ns: int, how: str) -> float:
        target = time.monotonic_ns() + d_ns
        if how == "two-stage" and d_ns > 600_000:
            sleep_abs(target - 300_000)
        if how == "time.sleep":
            libc.prctl(PR_SET_TIMERSLACK, 50_000, 0, 0, 0)
            time.sleep(d_ns / 1e9)
            libc.prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0)
        else:
            sleep_abs(target)
        return (time.monotonic_ns() - target) / 1e3

    print(f"{'length':>8} {'how':>10}  {'p50':>8} {'p90':>8} {'max':>8}  {'p50/len':>8}")
    for ms in (float(x) for x in a.ms.split(",")):
        d = int(ms * 1e6)
        for how in ("one sleep", "two-stage", "time.sleep"):
            over = np.array([one(d, how) for _ in range(a.n)])
            p50, p90, mx = np.percentile(over, 50), np.percentile(over, 90), over.max()
            print(f"{ms:>6} ms {how:>10}  {p50:8.1f} {p90:8.1f} {mx:8.1f}  {p50 / (ms * 1e3) * 100:7.3f}%")


if __name__ == "__main__":
    main()
