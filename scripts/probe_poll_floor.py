"""Probe: the lateness floor of an ideal poller, and the GPU's clock against the host's.

A one-thread CuPy kernel reads ``%globaltimer`` as it starts, spins for the given length on it,
then writes its start and end times into mapped host memory; the host spins on the end time
(a load of a cached line: it sees the store within a microsecond), then on the stream's event
(``ev.done``, what a busy poller waits on).  From these, per length:

- the GPU clock against CLOCK_MONOTONIC: a line fitted to (host time the end was seen - GPU end)
  against host time (its slope is the drift, in ppm; its residual shows how exact a GPU stamp is);
- launch -> kernel start (host before the launch call to the GPU's start, with the offset from the
  fit's lower envelope); the launch call's own time;
- end -> stream done: from the kernel's last store to ``ev.done`` turning true;
- the poller's latency - the kernel's own GPU length: what no completion watch on this machine
  can beat, since a spinning poller adds nothing but its own reads.

Usage (GPU machine, CuPy installed): python3 scripts/probe_poll_floor.py [--us 0,1000,10000,20000,50000] [--n 30]
"""

from __future__ import annotations

import argparse
import ctypes
import time

import cupy as cp
import numpy as np

SRC = r"""
extern "C" __global__ void spin_stamped(unsigned long long ns, volatile unsigned long long *out) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    t = t0;
    while (t - t0 < ns)
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    out[0] = t0;
    __threadfence_system();
    out[1] = t;
    __threadfence_system();
}
"""


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--us", default="0,1000,10000,20000,50000")
    p.add_argument("--n", type=int, default=30)
    a = p.parse_args()
    kern = cp.RawKernel(SRC, "spin_stamped")
    ptr = cp.cuda.runtime.hostAlloc(16, cp.cuda.runtime.hostAllocMapped)  # UVA: the device uses the host address
    buf = (ctypes.c_uint64 * 2).from_address(ptr)
    stream = cp.cuda.Stream(non_blocking=True)
    ev = cp.cuda.Event(disable_timing=True)
    rows = []  # (us, t_launch, t_called, t_seen, t_done, gpu_start, gpu_end)
    with stream:
        for us in [int(x) for x in a.us.split(",")]:
            for i in range(a.n + 3):
                buf[0] = buf[1] = 0
                t0 = time.monotonic_ns()
                kern((1,), (1,), (np.uint64(us * 1000), np.uint64(ptr)))
                t1 = time.monotonic_ns()
                ev.record(stream)
                while buf[1] == 0:
                    pass
                t_seen = time.monotonic_ns()
                while not ev.done:
                    pass
                t_done = time.monotonic_ns()
                if i >= 3:  # the first runs warm the module and the stream
                    rows.append((us, t0, t1, t_seen, t_done, buf[0], buf[1]))
    r = np.array(rows, dtype=np.float64)
    us, t0, t1, seen, done, g0, g1 = r.T
    off = seen - g1  # host time the end was seen - the GPU's time of the end
    x = (seen - seen[0]) * 1e-9
    slope, icpt = np.polyfit(x, off, 1)
    resid = off - (slope * x + icpt)
    base = slope * x + icpt + np.min(resid)  # the lower envelope: the offset, with the fastest sighting as zero
    print(f"GPU clock vs CLOCK_MONOTONIC over {x[-1]:.2f} s: drift {slope / 1e3:+.2f} ppm; residual p50/p90/max {np.percentile(resid - resid.min(), 50) / 1e3:.2f}/"
          f"{np.percentile(resid - resid.min(), 90) / 1e3:.2f}/{(resid - resid.min()).max() / 1e3:.2f} us")
    print(f"{'length':>8} {'launch call':>12} {'launch->start':>14} {'end->done':>10} {'poll late p50/p90/max':>22}   (us, p50 unless said)")
    for u in np.unique(us):
        m = us == u
        gpu_len = g1[m] - g0[m]
        start = g0[m] + base[m] - t0[m]
        end_done = done[m] - (g1[m] + base[m])
        late = (done[m] - t0[m]) - gpu_len
        q = np.percentile(late, [50, 90, 100]) / 1e3
        print(f"{u / 1e3:6.1f}ms {np.median(t1[m] - t0[m]) / 1e3:12.1f} {np.median(start) / 1e3:14.1f} {np.median(end_done) / 1e3:10.1f} {q[0]:8.1f} / {q[1]:.1f} / {q[2]:.1f}")
    cp.cuda.runtime.freeHost(ptr)


if __name__ == "__main__":
    main()
