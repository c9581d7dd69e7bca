"""Measure arig's own CPU per operation on a machine without a GPU.

A null GPU: the device opens over ``arig.testing.FakeCuda``, but the native
core's driver table points at a few C functions (built here with the system
C compiler) under which work completes the moment it is enqueued:
``cuStreamWriteValue64`` stores the value at once, a host function runs at
once.  What is left is arig's own cost: the loop's submit, wait and
resolution, the ring, the native thread and the eventfd.

Usage: python3 scripts/loop_cost.py [--profile] [--loop asyncio|uvloop|spin]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import ctypes
import os
import pstats
import subprocess
import tempfile
import time

import numpy as np

import arig
import arig.cuda
from arig.cuda import Launch
from arig.testing import FakeCuda

STUB = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
/* A null GPU with one engine: each launch takes dur_ns after the previous work ends;
 * value writes and host functions happen in order when the work before them is done. */
static uint64_t now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000ull + t.tv_nsec; }
typedef struct { int kind; uint64_t addr, v, due; void (*fn)(void *); void *u; } op_t;
static op_t q[1 << 16]; static uint64_t qh, qt, gpu_free, dur_ns;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_t th; static int started;
static void *gpu(void *x) {
    prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0);
    for (;;) {
        pthread_mutex_lock(&mu);
        while (qt == qh) pthread_cond_wait(&cv, &mu);
        op_t o = q[qt & 0xffff];
        pthread_mutex_unlock(&mu);
        uint64_t n = now();
        if (o.due > n) { struct timespec ts = {(o.due - n) / 1000000000ull, (o.due - n) % 1000000000ull}; nanosleep(&ts, 0); }
        if (o.kind == 0) *(volatile uint64_t *)(uintptr_t)o.addr = o.v; else o.fn(o.u);
        pthread_mutex_lock(&mu); qt++; pthread_mutex_unlock(&mu);
    }
    return x;
}
static void put(op_t o) {
    pthread_mutex_lock(&mu);
    if (!started) { started = 1; pthread_create(&th, 0, gpu, 0); }
    q[qh++ & 0xffff] = o; pthread_cond_signal(&cv); pthread_mutex_unlock(&mu);
}
void set_dur(uint64_t ns) { dur_ns = ns; }
int ok(void) { return 0; }
int launch(void *f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e, unsigned g, unsigned s, void *st, void **p, void **x) {
    uint64_t n = now(); pthread_mutex_lock(&mu); gpu_free = (gpu_free > n ? gpu_free : n) + dur_ns; pthread_mutex_unlock(&mu); return 0; }
int write64(void *st, uint64_t addr, uint64_t v, unsigned fl) {
    if (!dur_ns) { *(volatile uint64_t *)(uintptr_t)addr = v; return 0; }
    op_t o = {0, addr, v, gpu_free, 0, 0}; put(o); return 0; }
int hostfn(void *st, void (*fn)(void *), void *u) {
    if (!dur_ns) { fn(u); return 0; }
    op_t o = {1, 0, 0, gpu_free + 40000, fn, u}; put(o); return 0; }
int query(void *st) { return 0; }
int glaunch(void *g, void *st) { return 0; }
int htod(uint64_t d, const void *s, size_t n, void *st) { memcpy((void *)(uintptr_t)d, s, n); return 0; }
int dtoh(void *d, uint64_t s, size_t n, void *st) { memcpy(d, (const void *)(uintptr_t)s, n); return 0; }
"""
KERNELS = [int(x) for x in os.environ.get("KERNELS", "").split(",") if x]
NAMES = {
    "cuCtxSetCurrent": "ok", "cuLaunchKernel": "launch", "cuStreamWriteValue64_v2": "write64", "cuLaunchHostFunc": "hostfn",
    "cuStreamQuery": "query", "cuGraphLaunch": "glaunch", "cuMemcpyHtoDAsync_v2": "htod", "cuMemcpyDtoHAsync_v2": "dtoh",
}  # fmt: skip


def _stub() -> ctypes.CDLL:
    d = tempfile.mkdtemp()
    c, so = os.path.join(d, "stub.c"), os.path.join(d, "stub.so")
    with open(c, "w") as f:
        f.write(STUB)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", so, c, "-lpthread"], check=True)
    return ctypes.CDLL(so)


class NullGpu(FakeCuda):
    """FakeCuda for open and close; the native thread's calls go to the stub."""

    def __init__(self) -> None:
        super().__init__()
        self.stub = _stub()

    def address(self, name: str) -> int | None:
        if name in NAMES:
            return ctypes.cast(getattr(self.stub, NAMES[name]), ctypes.c_void_p).value
        return super().address(name)


async def measure(profile: bool) -> None:
    fake = NullGpu()
    img_bytes = fake.image(empty=(lambda a: None, ()))
    with fake.installed():
        async with await arig.open(arig.cuda.gpu(0, spin_us=int(os.environ.get("SPIN_US", 40)))) as dev:
            print("completion:", dev.facts["completion"])
            img = await dev.load(img_bytes)
            launch = Launch(img.function("empty"), 1, 1)
            submit, wait = dev.submit, dev.wait

            async def one(n: int) -> tuple[float, float]:
                t0, c0 = time.perf_counter(), time.thread_time()
                for _ in range(n):
                    await wait(await submit(launch))
                return (time.perf_counter() - t0) / n * 1e6, (time.thread_time() - c0) / n * 1e6

            async def many(k: int, n: int) -> tuple[float, float, float]:
                done = [0]

                async def w() -> None:
                    while done[0] < n:
                        await wait(await submit(launch))
                        done[0] += 1

                t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
                await asyncio.gather(*(w() for _ in range(k)))
                dt = time.perf_counter() - t0
                return done[0] / dt, (time.thread_time() - c0) / done[0] * 1e6, (time.process_time() - p0) / done[0] * 1e6

            async def submits(n: int) -> float:
                c0 = time.thread_time()
                for i in range(n):
                    v = await submit(launch)
                    if i % 512 == 511:
                        await wait(v)
                await wait(v)
                return (time.thread_time() - c0) / n * 1e6

            stub = fake.stub
            stub.set_dur.argtypes = (ctypes.c_uint64,)
            for us in KERNELS:
                stub.set_dur(us * 1000)
                s0 = dev._backend.completion.stats()
                lat = []
                for _ in range(200):
                    t = time.perf_counter()
                    await wait(await submit(launch))
                    lat.append((time.perf_counter() - t) * 1e6)
                s1 = dev._backend.completion.stats()
                print(f"kernel {us:5d} us: p50 {np.median(lat):8.1f} us  p90 {np.percentile(lat, 90):8.1f}  "
                      + ", ".join(f"{k} {s1[k] - s0[k]}" for k in s1 if s1[k] != s0[k]))
            stub.set_dur(0)
            await one(2000)
            pr = cProfile.Profile() if profile else None
            if pr:
                pr.enable()
            wall, cpu = await one(20000)
            print(f"1 task:   {wall:6.2f} us/op wall, loop-thread CPU {cpu:5.2f} us/op")
            r, lc, pc = await many(64, 100000)
            print(f"64 tasks: {r / 1e3:6.1f}k ops/s, loop-thread CPU {lc:5.2f} us/op, process CPU {pc:5.2f} us/op")
            print(f"submit only: loop-thread CPU {await submits(50000):5.2f} us/submit")
            if pr:
                pr.disable()
                pstats.Stats(pr).sort_stats("tottime").print_stats(18)
            print("core:", dev._backend.completion.stats())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--profile", action="store_true")
    p.add_argument("--loop", default="asyncio", choices=("asyncio", "uvloop", "spin"))
    a = p.parse_args()
    if a.loop == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    elif a.loop == "spin":
        factory = arig.new_event_loop
    else:
        factory = asyncio.new_event_loop
    loop = factory()
    loop.run_until_complete(measure(a.profile))
    loop.close()


main()
