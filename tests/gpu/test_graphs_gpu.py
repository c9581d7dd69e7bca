"""Graphs on a real GPU: one test per statement of the seeds ``Rig_cuda_abi``
(the record, fills, graphs) and ``Cuda.Graph`` (stream capture), named after it.

Run with ``ARIG_GPU_REQUIRED=1`` on the H200 (scripts/gpu_suite.sh).  The
scenario that faults the primary context runs in a subprocess: a faulted
context must not poison this process.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import threading
import time
import weakref
from ctypes import POINTER, byref, c_int, c_uint64, c_void_p
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import (
    compile_fill,
    MS,
    Kit,
    capture_stores,
    chain,
    child,
    exec_fill,
    in_thread,
    launch_fill,
    noop,
    open_kit,
    private_stream,
    read,
    run_fill,
    update_launch_fill,
    zeros,
)

import arig
import arig._env
import arig.cuda
import arig.cuda_abi as abi
import arig.host
import arig.nvrm
from arig._stall import StallMeter
from arig.cuda import CudaError, Launch, capture, pack
from arig.cuda import shipped_image
from arig.cuda._lib import check, lib

pytestmark = pytest.mark.arig_gpu


def _u32(i: int) -> np.uint32:
    return np.uint32(i)


def _u64(v: int) -> np.uint64:
    return np.uint64(v)


# =================================================================================================
# Rig_cuda_abi: the module's opening statements
# =================================================================================================

C_FILL = r"""
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
typedef int (*launch_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **);
typedef int (*memcpy_t)(uint64_t, uint64_t, size_t, void *);
typedef int (*host_t)(void *, void (*)(void *), void *);
typedef int (*glaunch_t)(void *, void *);
struct arg {
    launch_t launch; memcpy_t memcpy; host_t host; glaunch_t glaunch;
    void *store; void *graph; uint64_t out; uint64_t pinned;
    int64_t stamp_ns; int64_t host_tid; int64_t fill_tid; uint64_t v; void *queue;
};
/* A host function: no CUDA call, no lock. */
static void stamp(void *p) {
    struct arg *a = p;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    a->stamp_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    a->host_tid = (int64_t)syscall(SYS_gettid);
}
int fill(void *queue, void *arg_, uint64_t v) {
    struct arg *a = arg_;
    int rc;
    a->v = v; a->queue = queue; a->fill_tid = (int64_t)syscall(SYS_gettid);
    struct { uint64_t out; uint32_t index; uint32_t pad; uint64_t value; } p = { a->out, 0, 0, 1000 + v };
    size_t size = sizeof p;
    void *extra[] = { (void *)1, &p, (void *)2, &size, (void *)0 };
    if ((rc = a->launch(a->store, 1, 1, 1, 1, 1, 1, 0, queue, NULL, extra))) return rc;   /* a kernel */
    if ((rc = a->glaunch(a->graph, queue))) return rc;                                    /* a graph */
    if ((rc = a->glaunch(a->graph, queue))) return rc;                                    /* ... any number of times */
    if ((rc = a->memcpy(a->pinned, a->out, 4 * sizeof(uint64_t), queue))) return rc;      /* a copy */
    return a->host(queue, stamp, a);                                                      /* a timestamp */
}
"""


class _CArg(ctypes.Structure):
    _fields_ = [
        ("launch", c_void_p), ("memcpy", c_void_p), ("host", c_void_p), ("glaunch", c_void_p),
        ("store", c_void_p), ("graph", c_void_p), ("out", c_uint64), ("pinned", c_uint64),
        ("stamp_ns", ctypes.c_int64), ("host_tid", ctypes.c_int64), ("fill_tid", ctypes.c_int64),
        ("v", c_uint64), ("queue", c_void_p),
    ]


@pytest.mark.asyncio
async def test_compiled_code_runs_a_kernel_a_copy_a_timestamp_and_a_graph_through_libcuda(tmp_path: Path) -> None:
    """cuLaunchKernel, cuMemcpyAsync, cuLaunchHostFunc and cuGraphLaunch, found with
    ``record.symbol``, called by a C fill; its host function runs on a CUDA thread."""
    cfill = compile_fill(tmp_path, C_FILL)
    fill = abi.FILL(ctypes.cast(cfill.fill, c_void_p).value)
    kit = await open_kit()
    dev, rec = kit.dev, kit.rec
    try:
        out = await zeros(dev, 4)
        pinned = await dev.alloc(32, kind="pinned")
        graph = await rec.graph_async([kit.store(out, 1, 7), kit.store(out, 2, 8), kit.store(out, 3, 9)])
        syms = {n: rec.symbol(n) for n in ("cuLaunchKernel", "cuMemcpyAsync", "cuLaunchHostFunc", "cuGraphLaunch")}
        assert all(isinstance(a, int) and a for a in syms.values()), syms
        for _ in range(3):
            arg = _CArg(syms["cuLaunchKernel"], syms["cuMemcpyAsync"], syms["cuLaunchHostFunc"], syms["cuGraphLaunch"],
                        kit.f("store"), graph.handle, out.address, pinned.address)
            t0 = time.monotonic_ns()
            v = await dev.submit(fill, arg, keep=(arg, graph, out, pinned, kit.image))
            await dev.wait(v)
            assert arg.v == v and arg.queue == dev.queues[0].handle
            assert [int(x) for x in pinned.numpy(np.uint64)[:4]] == [1000 + v, 7, 8, 9]
            assert arg.stamp_ns >= t0, "the timestamp was taken after the work was submitted"
            with open(f"/proc/self/task/{arg.fill_tid}/comm") as f:
                fill_thread = f.read().strip()
            native = dev.facts["completion"].startswith("native")
            # A C fill runs on the device's native thread, or on its submit thread without the native core.
            assert fill_thread == ("arig-native" if native else "arig-submit"), fill_thread
            assert arg.host_tid not in (arg.fill_tid, threading.get_native_id()), "the host function runs on a CUDA library thread"
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_the_driver_declares_its_record_and_code_finds_it_under_key() -> None:
    kit = await open_kit()
    try:
        rec = kit.dev.capability(abi.KEY)
        assert isinstance(rec, abi.CudaAbi)
        assert kit.dev.capability(abi.KEY) is rec
        assert abi.declare(rec) == (abi.KEY, rec)
    finally:
        await kit.dev.stop()


@pytest.mark.asyncio
async def test_key_is_none_if_the_device_is_not_a_cuda_device() -> None:
    async with await arig.open(arig.host.cpu()) as host:
        assert host.capability(abi.KEY) is None
    try:
        nv = await arig.open(arig.nvrm.gpu(0))
    except arig.ArigError:
        return  # the kernel-driver device is not available here: the host device made the point
    async with nv:
        assert nv.capability(abi.KEY) is None


# =================================================================================================
# Rig_cuda_abi: Fills
# =================================================================================================


@pytest.mark.asyncio
async def test_fill_is_called_with_the_queues_stream_its_arg_and_v_with_the_context_current() -> None:
    kit = await open_kit(queues=2)
    dev = kit.dev
    seen: list[tuple[Any, ...]] = []

    def fill(queue: int, arg: Any, v: int) -> None:
        cur, sctx = c_void_p(), c_void_p()
        lib.cuCtxGetCurrent(byref(cur))
        lib.cuStreamGetCtx(queue, byref(sctx))
        seen.append((queue, arg, v, cur.value, sctx.value, threading.current_thread().name))

    try:
        token = object()
        v0 = await dev.submit(fill, token, queue=0)
        v1 = await dev.submit(fill, token, queue=1)
        await dev.wait(v1)
        ctx = kit.rec.context
        assert [s[:3] for s in seen] == [(dev.queues[0].handle, token, v0), (dev.queues[1].handle, token, v1)]
        assert dev.queues[0].handle != dev.queues[1].handle
        assert all(s[3] == ctx and s[4] == ctx for s in seen), "the device's context is current; the queue is a stream of it"
        assert all(s[5].startswith("arig-submit") for s in seen)
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_each_call_of_a_fill_may_block_until_earlier_work_frees_room_in_the_stream() -> None:
    kit = await open_kit()
    dev = kit.dev
    n = 8192
    try:
        out = await zeros(dev, n)
        launches = [kit.spin(200 * MS)] + [kit.store_launch(out, i, i + 1) for i in range(n)]
        took: list[float] = []

        def fill(queue: int, arg: Any, v: int) -> int:
            t = time.perf_counter()
            rc = run_fill(queue, arg, v)
            took.append(time.perf_counter() - t)
            return rc

        async with StallMeter() as meter:
            v = await dev.submit(fill, launches, keep=out)
            await dev.wait(v)
        print(f"fill of {n + 1} launches behind a 200 ms kernel took {took[0] * 1e3:.1f} ms; loop stall {meter.longest * 1e3:.1f} ms")
        assert meter.longest < 0.02, "a fill blocked in libcuda stalls only the submit thread"
        assert await read(dev, out, n) == list(range(1, n + 1))
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_the_driver_orders_a_fills_work_after_earlier_work_and_signals_v() -> None:
    kit = await open_kit()
    dev = kit.dev
    try:
        out = await zeros(dev, 1)
        step = kit.f("step")
        first = [kit.spin(100 * MS), Launch(step, 1, 1, pack(out, _u32(0), _u64(1)))]
        second = [Launch(step, 1, 1, pack(out, _u32(0), _u64(2)))]
        t0 = time.perf_counter()
        v1 = await dev.submit(run_fill, first)
        v2 = await dev.submit(run_fill, second)
        await dev.wait(v2)
        assert time.perf_counter() - t0 >= 0.09 and dev.reached >= v2 > v1
        assert await read(dev, out, 1) == [chain([1, 2])], "the second fill's work ran after the first's"
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_a_fill_returning_a_curesult_loses_the_device() -> None:
    kit = await open_kit()
    dev = kit.dev
    try:
        v = await dev.submit(lambda q, a, v: 1)  # CUDA_ERROR_INVALID_VALUE
        with pytest.raises(arig.DeviceLost) as info:
            await dev.wait(v)
        assert isinstance(info.value.cause, CudaError) and info.value.cause.code == 1
        with pytest.raises(CudaError):
            await asyncio.to_thread(kit.rec.graph, [])
    finally:
        await dev.stop()
    kit = await open_kit()  # the context itself is fine
    try:
        out = await zeros(kit.dev, 1)
        await kit.dev.run(run_fill, [kit.store_launch(out, 0, 5)])
        assert await read(kit.dev, out, 1) == [5]
    finally:
        await kit.dev.stop()


FAULT = """
import asyncio, gc, json, numpy as np
import arig, arig.cuda, arig.cuda_abi as abi
from arig.cuda import Launch, pack
from arig.cuda import shipped_image

def fill(q, launch, v): return launch(q)
def launch_fill(q, g, v): return g.launch(q)

async def main():
    r = {}
    dev = await arig.open(arig.cuda.gpu(0))
    rec = dev.capability(abi.KEY)
    gpu = rec._backend.gpu
    img = await dev.load(shipped_image())
    store = img.function("store")
    out = await dev.alloc(64)
    k = lambda v: abi.Kernel(store, 1, 1, pack(out, np.uint32(0), np.uint64(v)))
    kept = await rec.graph_async([k(1)])      # reachable across the fault
    dropped = await rec.graph_async([k(2)])   # collected after the fault
    bad = Launch(img.function("illegal"), 1, 1, pack(np.uint64(8)))
    v = await dev.submit(fill, bad)           # the fill returns 0: its work fails after it returned
    try:
        await dev.wait(v); r["lost"] = None
    except arig.DeviceLost as e:
        r["lost"] = type(e.cause).__name__; r["lost_code"] = getattr(e.cause, "code", None)
    try:
        await asyncio.to_thread(rec.graph, [k(3)]); r["graph"] = "ok"
    except arig.cuda.CudaError as e:
        r["graph"] = "CudaError"; r["graph_code"] = e.code
    except Exception as e:
        r["graph"] = type(e).__name__ + ": " + str(e)
    destroyed0 = gpu.destroyed
    del dropped; gc.collect()
    r["pending_after_collect"] = gpu.pending
    await dev.stop()
    r["pending_after_stop"] = gpu.pending
    r["destroyed_by_collect_and_stop"] = gpu.destroyed - destroyed0
    dev2 = None
    try:
        dev2 = await arig.open(arig.cuda.gpu(0)); r["reopen"] = "ok"
    except arig.OpenError as e:
        r["reopen"] = "OpenError: " + str(e)
    r["pending_after_reopen"] = gpu.pending
    r["destroyed_after_reopen"] = gpu.destroyed - destroyed0
    if dev2 is not None:
        rec2 = dev2.capability(abi.KEY)
        img2 = await dev2.load(shipped_image())
        out2 = await dev2.alloc(64)
        s2 = img2.function("store")
        g2 = await rec2.graph_async([abi.Kernel(s2, 1, 1, pack(out2, np.uint32(0), np.uint64(42)))])
        del kept; gc.collect()                   # a graph of the failed context, collected only now
        img3 = await dev2.load(shipped_image())  # reclaims it: no destructor, no unload of img2's module
        await dev2.run(launch_fill, g2, keep=g2)
        h = np.zeros(1, np.uint64); await dev2.download(out2, h)
        r["after"] = int(h[0]); r["lost2"] = repr(dev2.lost)
        await dev2.stop()
    print(json.dumps(r))

asyncio.run(main())
"""


def test_work_failing_after_the_fill_returned_loses_the_device_and_graph_then_errs_with_the_contexts_error() -> None:
    """Also: collection and stop after the fault call no destructor; the reopen reclaims."""
    r = child(FAULT)
    print(r)
    assert r["lost"] == "CudaError" and r["lost_code"], r
    assert r["graph"] == "CudaError" and r["graph_code"] == r["lost_code"], r
    assert r["pending_after_collect"] >= 1 and r["pending_after_stop"] == r["pending_after_collect"], r
    assert r["destroyed_by_collect_and_stop"] == 0, r
    assert r["pending_after_reopen"] == 0, "the reopen (even a refused one) reclaims the collected graphs"
    if r["reopen"] == "ok":
        assert r["after"] == 42 and r["lost2"] == "None", r
    else:
        assert "until the process exits" in r["reopen"], r


# =================================================================================================
# Rig_cuda_abi: Graphs
# =================================================================================================


@pytest.mark.asyncio
async def test_a_graph_records_a_sequence_of_kernel_launches_in_order() -> None:
    kit = await open_kit()
    try:
        out = await zeros(kit.dev, 2)
        values = [1, 2, 3, 4, 5, 6, 7, 8]
        g = await kit.rec.graph_async([kit.step(out, 0, v) for v in values] + [kit.store(out, 1, 99)])
        await kit.dev.run(launch_fill, g, keep=g)
        assert await read(kit.dev, out, 2) == [chain(values), 99]
        await kit.dev.run(launch_fill, g, keep=g)
        assert await read(kit.dev, out, 2) == [chain(values, chain(values)), 99]
    finally:
        await kit.dev.stop()


@pytest.mark.asyncio
async def test_a_graph_of_store_kernels_writes_each_value() -> None:
    kit = await open_kit()
    try:
        out = await zeros(kit.dev, 64)
        g = await kit.rec.graph_async([kit.store(out, i, 3 * i + 1) for i in range(64)])
        await kit.dev.run(launch_fill, g, keep=(g, out))
        assert await read(kit.dev, out, 64) == [3 * i + 1 for i in range(64)]
    finally:
        await kit.dev.stop()


@pytest.mark.asyncio
async def test_the_driver_calls_fills_one_at_a_time_so_cuda_never_sees_two_calls_on_one_graph() -> None:
    kit = await open_kit(queues=2)
    dev = kit.dev
    total = 400
    lock = threading.Lock()
    active = peak = 0
    threads: set[int] = set()
    try:
        out = await zeros(dev, total + 8)
        g = await kit.rec.graph_async([kit.store(out, 0, 0)])

        def fill(queue: int, arg: Any, v: int) -> int:
            nonlocal active, peak
            with lock:
                active += 1
                peak = max(peak, active)
                threads.add(threading.get_ident())
            try:
                time.sleep(0.0002)
                return update_launch_fill(queue, (g, [(0, pack(out, _u32(v), _u64(3 * v)))]), v)
            finally:
                with lock:
                    active -= 1

        async def task(k: int) -> list[int]:
            return [await dev.submit(fill, queue=(k + j) % 2, keep=(g, out)) for j in range(total // 8)]

        vs = sorted(v for vals in await asyncio.gather(*(task(k) for k in range(8))) for v in vals)
        await dev.wait(vs[-1])
        assert vs == list(range(vs[0], vs[0] + total))
        assert peak == 1 and len(threads) == 1
        got = await read(dev, out, total + 8)
        assert all(got[v] == 3 * v for v in vs), "each launch ran with the update its own fill made"
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_a_launch_runs_each_node_with_the_parameters_it_was_made_with_or_of_its_last_update() -> None:
    kit = await open_kit()
    dev = kit.dev
    try:
        out = await zeros(dev, 1)
        g = await kit.rec.graph_async([kit.store(out, 0, 7)])
        await dev.run(launch_fill, g, keep=g)
        assert await read(dev, out, 1) == [7], "made with"
        await dev.run(update_launch_fill, (g, [(0, pack(out, _u32(0), _u64(1)))]), keep=g)
        assert await read(dev, out, 1) == [1], "fill 1: update(1), launch"
        await dev.run(update_launch_fill, (g, [(0, pack(out, _u32(0), _u64(2)))]), keep=g)
        assert await read(dev, out, 1) == [2], "fill 2: update(2), launch"
        await dev.upload(out, np.zeros(1, np.uint64))
        await dev.run(launch_fill, g, keep=g)
        assert await read(dev, out, 1) == [2], "no update: the last update's parameters"
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_an_update_reaches_the_launches_after_it_and_none_enqueued_before_it() -> None:
    kit = await open_kit()
    dev = kit.dev
    try:
        out = await zeros(dev, 1)
        g = await kit.rec.graph_async([kit.step(out, 0, 9)])
        # One fill: update(1), launch, update(2), launch.  Were the first launch to see
        # the second update, the slot would hold chain([2, 2]) = 6, not chain([1, 2]) = 4.
        steps = [(0, pack(out, _u32(0), _u64(1))), (0, pack(out, _u32(0), _u64(2)))]
        await dev.run(update_launch_fill, (g, steps), keep=g)
        assert await read(dev, out, 1) == [chain([1, 2])]
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_an_update_waits_for_nothing() -> None:
    kit = await open_kit()
    dev = kit.dev
    try:
        out = await zeros(dev, 1)
        g = await kit.rec.graph_async([kit.step(out, 0, 1)])
        spin = kit.spin(300 * MS)
        took: list[float] = []

        def fill(queue: int, arg: Any, v: int) -> int:
            rc = spin(queue) or g.launch(queue)  # 300 ms of work, then a launch, pending
            t = time.perf_counter()
            rc = rc or g.update(0, args=pack(out, _u32(0), _u64(2)))
            took.append(time.perf_counter() - t)
            return rc or g.launch(queue)

        await dev.run(fill, keep=g)
        assert took[0] < 0.05, f"the update took {took[0] * 1e3:.1f} ms while 300 ms of work was pending"
        assert await read(dev, out, 1) == [chain([1, 2])]
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_a_node_naming_memory_of_one_run_is_updated_by_every_fill_that_launches_the_graph() -> None:
    kit = await open_kit()
    dev = kit.dev
    try:
        first = await zeros(dev, 1)
        g = await kit.rec.graph_async([kit.store(first, 0, 0)])
        bufs, vs = [], []
        for k in range(1, 6):
            b = await dev.alloc(8)  # memory of this submission
            bufs.append(b)
            vs.append(await dev.submit(update_launch_fill, (g, [(0, pack(b, _u32(0), _u64(11 * k)))]), keep=(g, b)))
        await dev.wait(vs[-1])
        assert [(await read(dev, b, 1))[0] for b in bufs] == [11 * k for k in range(1, 6)]
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_a_fill_may_update_a_nodes_grid_block_and_shared_memory_size() -> None:
    kit = await open_kit()
    dev = kit.dev
    n = 4096
    try:
        x = np.arange(n, dtype=np.float32)
        bx, by = await dev.alloc(4 * n), await dev.alloc(4 * n)
        await dev.upload(bx, x)
        await dev.upload(by, np.ones(n, np.float32))
        g = await kit.rec.graph_async([abi.Kernel(kit.f("saxpy"), 1, 256, pack(np.float32(2), bx, by, np.int32(n)))])
        rcs: list[int] = []

        def fill(queue: int, arg: Any, v: int) -> int:
            if arg:
                rc = g.update(0, **arg)
                rcs.append(rc)
                if rc:
                    return 0  # refused: CUDA's code is returned, nothing launched
            return g.launch(queue)

        y = np.ones(n, np.float32)
        for change, covered in [({}, 256), ({"grid": 16}, n), ({"grid": (8, 1, 1), "block": (512, 1, 1)}, n), ({"shared": 1024}, n)]:
            await dev.run(fill, change, keep=(g, bx, by))
            y[:covered] += 2 * x[:covered]
            out = np.empty(n, np.float32)
            await dev.download(by, out)
            np.testing.assert_array_equal(out, y, err_msg=str(change))
        assert rcs == [0, 0, 0]
        await dev.run(fill, {"shared": 1 << 30}, keep=g)
        assert rcs[-1] != 0, "too much shared memory: the update returns CUDA's code"
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_graph_handle_is_the_exec_and_nodes_are_its_kernels_in_order() -> None:
    kit = await open_kit()
    dev = kit.dev
    try:
        out = await zeros(dev, 4)
        g = await kit.rec.graph_async([kit.store(out, i, 100 + i) for i in range(4)])
        assert isinstance(g.handle, int) and g.handle
        assert len(g.nodes) == 4 and len(set(g.nodes)) == 4 and all(isinstance(n, int) and n for n in g.nodes)
        await dev.run(update_launch_fill, (g, [(2, pack(out, _u32(2), _u64(999)))]), keep=g)
        assert await read(dev, out, 4) == [100, 101, 999, 103], "node 2 is the third kernel"
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_a_graph_keeps_its_handle_nodes_and_modules_while_reachable() -> None:
    kit = await open_kit()
    dev, rec = kit.dev, kit.rec
    try:
        out = await zeros(dev, 1)
        img = await dev.load(shipped_image())
        module, store = img.handle, img.function("store")
        g = await rec.graph_async([abi.Kernel(store, 1, 1, pack(out, _u32(0), _u64(77)))])
        img.unload()
        await dev.run(noop)  # the unload ran on the submit thread before this
        assert not img.loaded and kit.gpu.loaded(module), "the graph keeps its module loaded"
        with pytest.raises(ValueError, match="no image loaded"):
            await asyncio.to_thread(rec.graph, [abi.Kernel(store, 1, 1, pack(out, _u32(0), _u64(1)))])
        await dev.run(launch_fill, g, keep=g)
        assert await read(dev, out, 1) == [77]
        del g
        keep = await rec.graph_async([])  # graph construction: destroys the graph, then unloads its module
        assert not kit.gpu.loaded(module)
        del keep
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_a_submission_keeping_the_graph_runs_correctly_after_the_caller_drops_it() -> None:
    """Warning of ``graph``: keep=graph; collection alone destroys nothing; the next load does."""
    kit = await open_kit()
    dev, rec, gpu = kit.dev, kit.rec, kit.gpu
    try:
        out = await zeros(dev, 1)
        g = await rec.graph_async([kit.step(out, 0, 1), kit.step(out, 0, 2)])
        spin = kit.spin(200 * MS)
        gc.collect()
        destroyed = gpu.destroyed

        def fill(queue: int, ref: Any, v: int) -> int:
            return spin(queue) or ref().launch(queue)

        v = await dev.submit(fill, weakref.ref(g), keep=g)  # the arg does not hold it: keep does
        ref = weakref.ref(g)
        del g
        gc.collect()
        assert ref() is not None, "the submission keeps the graph while its work runs"
        await dev.wait(v)
        gc.collect()
        assert ref() is None, "released once the value is reached"
        assert await read(dev, out, 1) == [chain([1, 2])]
        assert gpu.pending >= 1 and gpu.destroyed == destroyed, "collection calls no destructor"
        await dev.run(noop)
        assert gpu.destroyed == destroyed, "submitting work is not an operation that destroys graphs"
        await dev.load(shipped_image())
        assert gpu.destroyed >= destroyed + 1 and gpu.pending == 0
    finally:
        await dev.stop()


@pytest.mark.asyncio
@pytest.mark.parametrize("op", ["load", "unload", "graph", "reopen"])
async def test_a_collected_graph_is_destroyed_at_the_next_open_load_unload_or_graph_construction(op: str) -> None:
    kit = await open_kit()
    dev, gpu = kit.dev, kit.gpu
    try:
        extra = await dev.load(shipped_image()) if op == "unload" else None
        out = await zeros(dev, 1)
        g = await kit.rec.graph_async([kit.store(out, 0, 1)])
        gc.collect()
        pending, destroyed = gpu.pending, gpu.destroyed
        ref = weakref.ref(g)
        del g
        assert ref() is None and gpu.pending == pending + 1 and gpu.destroyed == destroyed
        await dev.run(noop)
        assert gpu.destroyed == destroyed
        keep: Any = None
        if op == "load":
            keep = await dev.load(shipped_image())
        elif op == "unload":
            assert extra is not None
            extra.unload()
            await dev.run(noop)
        elif op == "graph":
            keep = await kit.rec.graph_async([])
        else:
            await dev.stop()
            assert gpu.destroyed == destroyed, "stopping calls no destructor"
            dev = await arig.open(arig.cuda.gpu(0))
        assert gpu.destroyed >= destroyed + 1 and gpu.pending == 0, op
        del keep
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_collection_and_stopping_alone_call_no_cuda_destructor_and_reopening_reclaims() -> None:
    kit = await open_kit()
    gpu = kit.gpu
    out = await zeros(kit.dev, 1)
    graphs = [await kit.rec.graph_async([kit.store(out, 0, i)]) for i in range(3)]
    gc.collect()
    pending, destroyed = gpu.pending, gpu.destroyed
    await kit.dev.stop()
    assert gpu.destroyed == destroyed
    del graphs
    gc.collect()
    assert gpu.pending == pending + 3 and gpu.destroyed == destroyed, "collected after stop: queued, not destroyed"
    async with await arig.open(arig.cuda.gpu(0)):
        assert gpu.pending == 0 and gpu.destroyed == destroyed + pending + 3, "reopening the GPU reclaims them"


@pytest.mark.asyncio
async def test_collect_keeps_no_reference_to_the_graph_and_calls_no_cuda() -> None:
    kit = await open_kit()
    try:
        out = await zeros(kit.dev, 1)
        g = await kit.rec.graph_async([kit.store(out, 0, 1)])
        pending, destroyed = kit.gpu.pending, kit.gpu.destroyed
        ref = weakref.ref(g)
        del g  # no gc.collect: refcounting alone frees it, so nothing refers to it
        assert ref() is None
        assert kit.gpu.pending == pending + 1 and kit.gpu.destroyed == destroyed
    finally:
        await kit.dev.stop()


# =================================================================================================
# Rig_cuda_abi: the record
# =================================================================================================


@pytest.mark.asyncio
async def test_symbol_is_some_address_if_libcuda_exports_the_name_and_none_otherwise() -> None:
    kit = await open_kit()
    rec = kit.rec
    try:
        launch = rec.symbol("cuLaunchKernel")
        wait2 = rec.symbol("cuStreamWaitValue64_v2")  # the suffix selects the interface version
        assert isinstance(launch, int) and launch and isinstance(wait2, int) and wait2
        assert rec.symbol("noSuchFunction") is None
        assert isinstance(rec.symbol("cuGraphExecKernelNodeSetParams_v2"), int), "a C fill updates nodes through it"
        libcuda = ctypes.CDLL(arig._env.LIBCUDA)
        assert wait2 == ctypes.cast(libcuda.cuStreamWaitValue64_v2, c_void_p).value
        with pytest.raises(TypeError):
            rec.symbol(b"cuLaunchKernel")  # type: ignore[arg-type]
        # valid while the device is open: call one through its address
        version = ctypes.CFUNCTYPE(c_int, POINTER(c_int))(rec.symbol("cuDriverGetVersion"))
        v = c_int()
        assert version(byref(v)) == 0 and v.value >= 12040
        # any thread
        assert in_thread(rec.symbol, "cuLaunchKernel") == launch
        assert await asyncio.to_thread(rec.symbol, "cuGraphLaunch") == rec.symbol("cuGraphLaunch")
    finally:
        await kit.dev.stop()


@pytest.mark.asyncio
async def test_graph_of_an_empty_list_is_a_graph_that_launches() -> None:
    kit = await open_kit()
    try:
        g = await kit.rec.graph_async([])
        assert g.nodes == () and g.handle
        v = await kit.dev.run(launch_fill, g, keep=g)
        assert kit.dev.reached >= v and kit.dev.lost is None
        g2 = in_thread(kit.rec.graph, [])
        await kit.dev.run(launch_fill, g2, keep=g2)
    finally:
        await kit.dev.stop()


@pytest.mark.asyncio
async def test_any_thread_may_call_graph() -> None:
    kit = await open_kit()
    try:
        out = await zeros(kit.dev, 2)
        g = in_thread(kit.rec.graph, [kit.store(out, 0, 5), kit.store(out, 1, 6)])
        await kit.dev.run(launch_fill, g, keep=g)
        assert await read(kit.dev, out, 2) == [5, 6]
    finally:
        await kit.dev.stop()


@pytest.mark.asyncio
async def test_graph_may_be_called_at_any_time_even_inside_a_fill() -> None:
    kit = await open_kit()
    try:
        out = await zeros(kit.dev, 1)
        made: list[abi.Graph] = []

        def fill(queue: int, arg: Any, v: int) -> int:
            g = kit.rec.graph([kit.store(out, 0, 21)])
            made.append(g)
            return g.launch(queue)

        await kit.dev.run(fill, keep=made)
        assert await read(kit.dev, out, 1) == [21]
    finally:
        await kit.dev.stop()


@pytest.mark.asyncio
async def test_graph_lets_other_tasks_run_while_cuda_instantiates_5000_nodes() -> None:
    kit = await open_kit()
    dev = kit.dev
    try:
        out = await zeros(dev, 64)
        ks = [kit.store(out, i % 64, i) for i in range(5000)]
        empty = Launch(kit.f("empty"), 1, 1)
        done = False
        ran = 0

        async def other() -> None:
            nonlocal ran
            while not done:
                await dev.run(run_fill, [empty])
                ran += 1

        task = asyncio.get_running_loop().create_task(other())
        t0 = time.perf_counter()
        async with StallMeter() as meter:
            g = await kit.rec.graph_async(ks)
        took = time.perf_counter() - t0
        done = True
        await task
        print(f"5000-node graph: {took * 1e3:.0f} ms; loop stall {meter.longest * 1e3:.2f} ms; {ran} other submissions meanwhile")
        assert len(g.nodes) == 5000
        assert meter.longest < 0.02
        assert ran > 0
        await dev.run(launch_fill, g, keep=g)
        assert await read(dev, out, 64) == [max(i for i in range(5000) if i % 64 == j) for j in range(64)]
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_the_drivers_stop_waits_for_a_graph_call_in_flight() -> None:
    kit = await open_kit()
    dev, rec = kit.dev, kit.rec
    out = await zeros(dev, 64)
    ks = [kit.store(out, i % 64, i) for i in range(20000)]
    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(rec.graph(ks)))
    t.start()
    deadline = time.monotonic() + 10
    while rec._calls == 0 and t.is_alive() and time.monotonic() < deadline:
        await asyncio.sleep(0.0005)
    assert rec._calls == 1, "the call is in flight"
    await dev.stop()
    assert rec._calls == 0, "stop returned only after the call in flight had finished"
    t.join(30)
    assert box and isinstance(box[0], abi.Graph) and len(box[0].nodes) == 20000
    with pytest.raises(arig.DeviceStopped):
        rec.graph([])


@pytest.mark.asyncio
async def test_graph_is_an_error_with_cudas_reason_for_too_much_shared_memory() -> None:
    kit = await open_kit()
    try:
        out = await zeros(kit.dev, 1)
        k = abi.Kernel(kit.f("store"), 1, 1, pack(out, _u32(0), _u64(1)), shared=1 << 30)
        with pytest.raises(CudaError) as info:
            await kit.rec.graph_async([k])
        assert info.value.code and "CUDA_ERROR" in str(info.value)
        g = await kit.rec.graph_async([kit.store(out, 0, 3)])  # nothing was left half-made
        await kit.dev.run(launch_fill, g, keep=g)
        assert await read(kit.dev, out, 1) == [3]
    finally:
        await kit.dev.stop()


@pytest.mark.asyncio
async def test_graph_is_an_error_once_the_driver_has_stopped_the_device() -> None:
    kit = await open_kit()
    await kit.dev.stop()
    with pytest.raises(arig.DeviceStopped):
        await asyncio.to_thread(kit.rec.graph, [])
    with pytest.raises(arig.DeviceStopped):
        await kit.rec.graph_async([])


@pytest.mark.asyncio
async def test_graph_is_an_error_as_soon_as_the_driver_has_begun_to_stop_the_device() -> None:
    kit = await open_kit()
    await kit.dev.submit(run_fill, [kit.spin(500 * MS)])
    stop = asyncio.get_running_loop().create_task(kit.dev.stop())
    try:
        await asyncio.sleep(0.05)
        assert not stop.done(), "stop has begun: it waits for the submitted work"
        with pytest.raises(arig.DeviceStopped):
            await asyncio.to_thread(kit.rec.graph, [])
    finally:
        await stop


@pytest.mark.asyncio
async def test_graph_raises_invalid_argument_for_a_function_of_no_loaded_image_or_a_bad_size() -> None:
    kit = await open_kit()
    try:
        out = await zeros(kit.dev, 1)
        with pytest.raises(ValueError, match="no image loaded"):
            await kit.rec.graph_async([abi.Kernel(12345, 1, 1)])
        with pytest.raises(ValueError, match="argument buffer"):
            await kit.rec.graph_async([abi.Kernel(kit.f("store"), 1, 1, pack(np.uint64(1)))])
        with pytest.raises(ValueError):
            await kit.rec.graph_async([abi.Kernel(kit.f("store"), 0, 1, pack(out, _u32(0), _u64(1)))])
        with pytest.raises(ValueError):
            abi.Kernel(kit.f("store"), 1, 1 << 32, pack(out, _u32(0), _u64(1)))
    finally:
        await kit.dev.stop()


@pytest.mark.asyncio
async def test_graph_raises_invalid_argument_for_a_function_another_device_loaded() -> None:
    a = await open_kit()
    try:
        b = await open_kit()
        try:
            out = await zeros(a.dev, 1)
            with pytest.raises(ValueError, match="no image loaded"):
                await a.rec.graph_async([abi.Kernel(b.f("empty"), 1, 1)])
            g = await a.rec.graph_async([a.store(out, 0, 1)])
            assert len(g.nodes) == 1
        finally:
            await b.dev.stop()
    finally:
        await a.dev.stop()


# =================================================================================================
# Cuda.Graph: stream capture
# =================================================================================================


@pytest.mark.asyncio
async def test_begin_capture_records_the_streams_work_and_end_capture_instantiate_launch_replay_it() -> None:
    kit = await open_kit()
    dev = kit.dev
    try:
        out = await zeros(dev, 8)
        values = [11 * (i + 1) for i in range(8)]
        template = await asyncio.to_thread(capture_stores, kit, out, values, capture.GLOBAL, (kit.image, out))
        assert isinstance(template, capture.Template) and template.handle
        assert await read(dev, out, 8) == [0] * 8, "captured work is recorded, not run"
        exe = await asyncio.to_thread(capture.instantiate, template)
        await asyncio.to_thread(capture.destroy, template)  # the template may be destroyed afterwards
        await asyncio.to_thread(capture.destroy, template)
        assert template.destroyed
        await dev.run(exec_fill, exe)
        assert await read(dev, out, 8) == values
        await dev.upload(out, np.zeros(8, np.uint64))
        await dev.run(exec_fill, exe)  # replayed: the whole sequence, one call
        assert await read(dev, out, 8) == values
        await asyncio.to_thread(capture.exec_destroy, exe)
        await asyncio.to_thread(capture.exec_destroy, exe)
        assert exe.destroyed
    finally:
        await dev.stop()


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", list(capture.CaptureMode))
async def test_capture_in_each_mode(mode: capture.CaptureMode) -> None:
    kit = await open_kit()
    try:
        out = await zeros(kit.dev, 2)
        template = await asyncio.to_thread(capture_stores, kit, out, [5, 6], mode, (kit.image, out))
        exe = await asyncio.to_thread(capture.instantiate, template)
        await kit.dev.run(exec_fill, exe)
        assert await read(kit.dev, out, 2) == [5, 6]
    finally:
        await kit.dev.stop()


def _unsafe_call(rec: abi.CudaAbi) -> int:
    """cuMemAlloc: not stream-ordered, so "potentially unsafe" during a capture."""
    with capture.using(rec):
        p = c_uint64()
        rc: int = lib.cuMemAlloc_v2(byref(p), 4096)
        if rc == 0:
            lib.cuMemFree_v2(p.value)
        return rc


def _capture_with_unsafe_call(kit: Kit, out: arig.Buffer, mode: capture.CaptureMode, where: str) -> tuple[int, bool]:
    launch = kit.store_launch(out, 0, 1)
    with private_stream(kit.rec) as s:
        capture.begin_capture(s, mode)
        rc = _unsafe_call(kit.rec) if where == "capturing thread" else in_thread(_unsafe_call, kit.rec)
        launch(s)
        try:
            capture.end_capture(s)
            return rc, True
        except CudaError:
            return rc, False


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("mode", "where", "allowed"),
    [
        (capture.GLOBAL, "capturing thread", False),
        (capture.GLOBAL, "another thread", False),
        (capture.THREAD_LOCAL, "capturing thread", False),
        (capture.THREAD_LOCAL, "another thread", True),
        (capture.RELAXED, "capturing thread", True),
        (capture.RELAXED, "another thread", True),
    ],
)
async def test_capture_mode_says_whose_unsafe_calls_invalidate_the_capture(mode: capture.CaptureMode, where: str, allowed: bool) -> None:
    """GLOBAL: unsafe calls from any thread; THREAD_LOCAL: from the capturing thread; RELAXED: none."""
    kit = await open_kit()
    try:
        out = await zeros(kit.dev, 1)  # the device is idle: its own threads make no call meanwhile
        rc, valid = await asyncio.to_thread(_capture_with_unsafe_call, kit, out, mode, where)
        if allowed:
            assert rc == 0 and valid, (rc, valid)
        else:
            assert rc != 0 and not valid, (rc, valid)
    finally:
        await kit.dev.stop()


@pytest.mark.asyncio
async def test_end_capture_raises_cuda_error_if_the_capture_was_invalidated() -> None:
    kit = await open_kit()
    try:
        out = await zeros(kit.dev, 1)
        launch = kit.store_launch(out, 0, 1)

        def invalidated() -> tuple[int, int | None]:
            with private_stream(kit.rec) as s:
                capture.begin_capture(s)
                launch(s)
                rc: int = lib.cuStreamSynchronize(s)  # waiting on a capturing stream is prohibited
                try:
                    capture.end_capture(s)
                except CudaError as exc:
                    return rc, exc.code
                return rc, None

        rc, code = await asyncio.to_thread(invalidated)
        assert rc != 0 and code is not None, (rc, code)

        def never_captured() -> None:
            with private_stream(kit.rec) as s:
                capture.end_capture(s)

        with pytest.raises(CudaError):
            await asyncio.to_thread(never_captured)
        # the module still works afterwards
        t = await asyncio.to_thread(capture_stores, kit, out, [4], capture.GLOBAL, (kit.image, out))
        exe = await asyncio.to_thread(capture.instantiate, t)
        await kit.dev.run(exec_fill, exe)
        assert await read(kit.dev, out, 1) == [4]
    finally:
        await kit.dev.stop()


@pytest.mark.asyncio
async def test_template_and_exec_retain_the_resources_of_the_captured_work() -> None:
    kit = await open_kit()
    dev = kit.dev
    try:
        img = await dev.load(shipped_image())
        buf = await dev.alloc(16)
        await dev.upload(buf, np.zeros(2, np.uint64))
        kit2 = Kit(dev, kit.rec, img)
        template = await asyncio.to_thread(capture_stores, kit2, buf, [5, 6], capture.GLOBAL, (img, buf))
        exe = await asyncio.to_thread(capture.instantiate, template)
        await asyncio.to_thread(capture.destroy, template)
        del template, kit2
        img_ref, buf_ref = weakref.ref(img), weakref.ref(buf)
        del img, buf
        gc.collect()
        await dev.run(noop)  # any release would have been posted to the submit thread before this
        assert img_ref() is not None and buf_ref() is not None, "the exec keeps them (the template was destroyed)"
        await dev.run(exec_fill, exe)  # the module is still loaded, the buffer still allocated
        b = buf_ref()
        assert b is not None and await read(dev, b, 2) == [5, 6]
        del b
        await asyncio.to_thread(capture.exec_destroy, exe)
        await asyncio.to_thread(capture.reclaim)
        del exe
        gc.collect()
        assert img_ref() is None and buf_ref() is None
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_launch_retains_the_exec_until_its_work_is_done() -> None:
    kit = await open_kit()
    dev = kit.dev
    try:
        out = await zeros(dev, 2)
        template = await asyncio.to_thread(capture_stores, kit, out, [7, 8], capture.GLOBAL, (kit.image, out))
        exe = await asyncio.to_thread(capture.instantiate, template)
        del template
        spin = kit.spin(300 * MS)
        launched = threading.Event()

        def fill(queue: int, ref: Any, v: int) -> int:
            rc = spin(queue)
            if rc:
                return rc
            capture.launch(ref(), queue)
            launched.set()
            return 0

        before = capture.stats()
        v = await dev.submit(fill, weakref.ref(exe))  # neither arg nor keep holds the exec
        assert await asyncio.to_thread(launched.wait, 10)
        ref = weakref.ref(exe)
        del exe
        gc.collect()
        await asyncio.to_thread(capture.reclaim)
        assert ref() is not None, "the launch is pending: the stream retains the exec"
        assert capture.stats()["launches_pending"] >= 1
        await dev.wait(v)
        await asyncio.to_thread(capture.reclaim)
        gc.collect()
        assert ref() is None, "released once its work was done"
        assert capture.stats()["execs_destroyed"] >= before["execs_destroyed"] + 1
        assert await read(dev, out, 2) == [7, 8]
    finally:
        await dev.stop()


async def _in_fresh_thread(fn: Any, *args: Any) -> Any:
    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(fn(*args)))
    t.start()
    while t.is_alive():
        await asyncio.sleep(0.001)
    t.join()
    return box.pop()


@pytest.mark.asyncio
async def test_destroy_and_exec_destroy_are_idempotent_and_finalizers_cover_the_rest() -> None:
    kit = await open_kit()
    try:
        out = await zeros(kit.dev, 1)
        gc.collect()
        await asyncio.to_thread(capture.reclaim)  # earlier tests' collected values: not counted here
        before = capture.stats()
        t1 = await asyncio.to_thread(capture_stores, kit, out, [1])
        e1 = await asyncio.to_thread(capture.instantiate, t1)
        for _ in range(3):
            await asyncio.to_thread(capture.destroy, t1)
            await asyncio.to_thread(capture.exec_destroy, e1)
        mid = capture.stats()
        assert mid["templates_destroyed"] == before["templates_destroyed"] + 1
        assert mid["execs_destroyed"] == before["execs_destroyed"] + 1
        with pytest.raises(ValueError, match="destroyed"):
            await asyncio.to_thread(capture.instantiate, t1)
        with pytest.raises(arig.DeviceLost) as lost:  # a fill that raises loses the device
            await kit.dev.run(exec_fill, e1)
        assert isinstance(lost.value.__cause__, ValueError) and "destroyed" in str(lost.value.__cause__)
    finally:
        await kit.dev.stop()
    kit = await open_kit()
    try:
        out = await zeros(kit.dev, 1)
        gc.collect()
        await asyncio.to_thread(capture.reclaim)
        # A fresh thread per call: an executor's worker (asyncio.to_thread) may keep
        # its last result referenced, which is not what this test is about.
        t2 = await _in_fresh_thread(capture_stores, kit, out, [1])
        e2 = await _in_fresh_thread(capture.instantiate, t2)
        mid = capture.stats()
        del t2, e2
        gc.collect()  # the finalizers queue the handles; no CUDA call here, on the loop thread
        assert capture.stats()["awaiting_destruction"] >= 2
        await asyncio.to_thread(capture.reclaim)
        after = capture.stats()
        assert after["templates_destroyed"] == mid["templates_destroyed"] + 1
        assert after["execs_destroyed"] == mid["execs_destroyed"] + 1
        assert after["awaiting_destruction"] == 0
    finally:
        await kit.dev.stop()


@pytest.mark.asyncio
async def test_capture_from_inside_a_fill_on_the_devices_queue() -> None:
    kit = await open_kit()
    dev = kit.dev
    try:
        out = await zeros(dev, 3)
        launches = [kit.store_launch(out, i, 40 + i) for i in range(3)]
        made: list[capture.Exec] = []

        def fill(queue: int, arg: Any, v: int) -> int:
            capture.begin_capture(queue)
            for launch in launches:
                rc = launch(queue)
                if rc:
                    capture.end_capture(queue)
                    return rc
            template = capture.end_capture(queue, keep=(kit.image, out))
            exe = capture.instantiate(template)
            capture.destroy(template)
            made.append(exe)
            capture.launch(exe, queue)
            return 0

        await dev.run(fill)
        assert await read(dev, out, 3) == [40, 41, 42]
        await dev.upload(out, np.zeros(3, np.uint64))
        await dev.run(exec_fill, made[0])
        assert await read(dev, out, 3) == [40, 41, 42]
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_a_global_capture_on_a_worker_thread_does_not_disturb_a_busy_device() -> None:
    """While work is outstanding the device's own threads keep calling libcuda; with
    another thread capturing in GLOBAL mode those calls must neither fail the device
    nor invalidate the capture."""
    kit = await open_kit()
    dev = kit.dev
    try:
        out = await zeros(dev, 1)
        busy = await dev.submit(run_fill, [kit.spin(500 * MS)])
        launch = kit.store_launch(out, 0, 3)

        def capture_while_busy() -> capture.Template:
            with private_stream(kit.rec) as s:
                capture.begin_capture(s, capture.GLOBAL)
                time.sleep(0.25)
                check(launch(s), "cuLaunchKernel")
                return capture.end_capture(s, keep=(kit.image, out))

        template = await asyncio.to_thread(capture_while_busy)
        await dev.wait(busy)
        assert dev.lost is None
        exe = await asyncio.to_thread(capture.instantiate, template)
        await dev.run(exec_fill, exe)
        assert await read(dev, out, 1) == [3]
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_capture_refuses_the_event_loop_thread_on_a_gpu() -> None:
    kit = await open_kit()
    try:
        with pytest.raises(RuntimeError, match="event loop"):
            capture.begin_capture(kit.dev.queues[0])
        with pytest.raises(RuntimeError, match="event loop"):
            capture.reclaim()
    finally:
        await kit.dev.stop()


@pytest.mark.asyncio
async def test_capture_calls_from_a_thread_with_no_current_context() -> None:
    """Each call finds its context itself (the stream's, the template's) and restores none."""
    kit = await open_kit()
    try:
        out = await zeros(kit.dev, 1)
        template = await asyncio.to_thread(capture_stores, kit, out, [9], capture.GLOBAL, (kit.image, out))

        def bare() -> capture.Exec:
            cur = c_void_p()
            lib.cuCtxGetCurrent(byref(cur))
            assert cur.value is None, "a new thread has no current context"
            exe = capture.instantiate(template)
            capture.destroy(template)
            capture.reclaim()
            lib.cuCtxGetCurrent(byref(cur))
            assert cur.value is None, "the previous (no) context is restored"
            return exe

        exe = in_thread(bare)
        await kit.dev.run(exec_fill, exe)
        assert await read(kit.dev, out, 1) == [9]
    finally:
        await kit.dev.stop()
