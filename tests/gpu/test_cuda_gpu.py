"""The CUDA device on a real GPU: open, submit, complete, fault and hang, with libcuda itself.

Scenarios that fault or hang the primary context run in a subprocess: a
faulted context stays faulted while anyone in the process (CuPy, PyTorch in
the interop test) holds it.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import arig
import arig.cuda
import arig.cuda_abi
from arig.cuda import Launch, pack
from arig.cuda import shipped_image

from _util import compile_fill, gapless_stores, saxpy_checked

pytestmark = pytest.mark.arig_gpu


def _fill(stream: int, launch: Launch, v: int) -> int:
    return launch(stream)


async def _open(**kw: object) -> arig.Device:
    return await arig.open(arig.cuda.gpu(0, **kw))  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_facts_and_record() -> None:
    async with await _open() as dev:
        assert dev.name == "CUDA" and dev.arch.startswith("sm_")
        f = dev.facts
        assert f["memory_total"] > 1 << 30 and f["multiprocessors"] > 0 and ":" in f["bus"]
        assert f["hang_ms"] in (None, 30_000)
        rec = dev.capability(arig.cuda_abi.KEY)
        assert isinstance(rec, arig.cuda_abi.CudaAbi)
        assert isinstance(rec.symbol("cuLaunchKernel"), int) and rec.symbol("cuNoSuchThing") is None
        assert isinstance(dev.queues[0].handle, int)


@pytest.mark.asyncio
async def test_open_error_names_gpu_count() -> None:
    n = arig.cuda.count()
    with pytest.raises(arig.OpenError, match=f"this machine has {n}"):
        await arig.open(arig.cuda.gpu(n + 3))


@pytest.mark.asyncio
async def test_saxpy_random_against_numpy() -> None:
    async with await _open() as dev:
        await saxpy_checked(dev)


@pytest.mark.asyncio
async def test_wrong_argument_size_is_refused() -> None:
    async with await _open() as dev:
        img = await dev.load(shipped_image())
        with pytest.raises(ValueError, match="argument buffer"):
            Launch(img.function("saxpy"), 1, 1, pack(np.float32(1.0)))


@pytest.mark.asyncio
async def test_10000_submits_from_64_tasks_gapless_and_checked() -> None:
    async def gather(fns: list[Any]) -> None:
        await asyncio.gather(*(fn() for fn in fns))

    async with await _open() as dev:
        await gapless_stores(dev, 10_000, 64, gather)


@pytest.mark.asyncio
async def test_10000_inline_submits_from_64_tasks_gapless_and_checked() -> None:
    async def gather(fns: list[Any]) -> None:
        await asyncio.gather(*(fn() for fn in fns))

    async with await _open() as dev:
        await gapless_stores(dev, 10_000, 64, gather, inline=True)
        before = dev.submitted
        with pytest.raises(arig.FillError, match="inline fill"):  # a code from an inline fill loses nothing
            await dev.submit(lambda q, a, v: 1, inline=True)
        assert dev.lost is None and dev.submitted == before


C_FILL = r"""
#include <stddef.h>
#include <stdint.h>
typedef int (*launch_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **);
struct arg { launch_t launch; void *func; uint64_t out; };
int fill(void *queue, void *arg_, uint64_t v) {
    struct arg *a = arg_;
    struct { uint64_t out; uint32_t index; uint32_t pad; uint64_t value; } p = { a->out, (uint32_t)(v % 64), 0, v * 3 };
    size_t size = sizeof p;
    void *extra[] = { (void *)1, &p, (void *)2, &size, (void *)0 };
    return a->launch(a->func, 1, 1, 1, 1, 1, 1, 0, queue, NULL, extra);
}
"""


@pytest.mark.asyncio
async def test_c_fill_compiled_here(tmp_path: Path) -> None:
    lib = compile_fill(tmp_path, C_FILL)
    fill = arig.cuda_abi.FILL(ctypes.cast(lib.fill, ctypes.c_void_p).value)

    class Arg(ctypes.Structure):
        _fields_ = [("launch", ctypes.c_void_p), ("func", ctypes.c_void_p), ("out", ctypes.c_uint64)]

    async with await _open() as dev:
        img = await dev.load(shipped_image())
        out = await dev.alloc(8 * 64)
        rec = dev.capability(arig.cuda_abi.KEY)
        arg = Arg(rec.symbol("cuLaunchKernel"), img.function("store"), out.address)
        vs = [await dev.submit(fill, arg, keep=(arg, img)) for _ in range(20)]
        vs.append(await dev.submit(ctypes.cast(lib.fill, ctypes.c_void_p).value, arg, keep=arg))  # by address
        await dev.wait(vs[-1])
        host = np.empty(64, np.uint64)
        await dev.download(out, host)
        for v in vs:
            assert host[v % 64] == v * 3


@pytest.mark.asyncio
async def test_interop_cuda_array_interface() -> None:
    data = np.arange(256, dtype=np.float32)
    async with await _open() as dev:
        buf = await dev.alloc(data.nbytes)
        await dev.upload(buf, data)
        checked = 0
        try:
            import cupy

            arr = cupy.asarray(buf).view(cupy.float32)
            np.testing.assert_array_equal(cupy.asnumpy(arr), data)
            checked += 1
        except ImportError:
            pass
        try:
            import torch

            t = torch.as_tensor(buf, device="cuda").view(torch.float32)
            np.testing.assert_array_equal(t.cpu().numpy(), data)
            checked += 1
        except ImportError:
            pass
        if not checked:
            pytest.skip("neither CuPy nor PyTorch here")


@pytest.mark.asyncio
async def test_stop_with_work_in_flight() -> None:
    dev = await _open()
    img = await dev.load(shipped_image())
    spin = img.function("spin")
    vs = [await dev.submit(_fill, Launch(spin, 1, 1, pack(np.uint64(20_000_000)))) for _ in range(10)]
    t = time.perf_counter()
    await dev.stop()
    assert time.perf_counter() - t >= 0.15  # it let the 200 ms of work finish
    assert dev.reached == vs[-1] and dev.lost is None
    with pytest.raises(arig.DeviceStopped):
        await dev.submit(_fill, None)


@pytest.mark.asyncio
async def test_backpressure_with_a_long_kernel() -> None:
    async with await arig.open(arig.cuda.gpu(0), max_pending=8) as dev:
        img = await dev.load(shipped_image())
        spin, empty = img.function("spin"), img.function("empty")
        await dev.submit(_fill, Launch(spin, 1, 1, pack(np.uint64(1_500_000_000))))
        launch = Launch(empty, 1, 1)
        count = 0

        async def flood() -> None:
            nonlocal count
            for _ in range(6000):
                await dev.submit(_fill, launch)
                count += 1

        task = asyncio.get_running_loop().create_task(flood())
        await asyncio.sleep(0.7)
        # The stream fills up behind the 1.5 s kernel, the submit thread blocks in
        # cuLaunchKernel, and submit waits: the flood cannot have finished.
        assert not task.done() and count < 6000
        assert dev.submitted - dev.reached > 8
        await task
        await dev.wait(dev.submitted)
        assert dev.reached == 6001


def _child(code: str, timeout: float = 120) -> dict[str, object]:
    """Run a scenario in a fresh interpreter; it prints one JSON line last."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


FAULT = """
import asyncio, json, time, numpy as np, arig, arig.cuda
from arig.cuda import Launch, pack
from arig.cuda import shipped_image
KERNEL = {kernel!r}
def fill(s, launch, v): return launch(s)
async def main():
    dev = await arig.open(arig.cuda.gpu(0))
    img = await dev.load(shipped_image())
    spin, empty = img.function("spin"), img.function("empty")
    await dev.submit(fill, Launch(spin, 1, 1, pack(np.uint64(50_000_000))))
    bad = Launch(img.function(KERNEL), 1, 1, pack(np.uint64(8)) if KERNEL == "illegal" else b"")
    t0 = time.perf_counter()
    await dev.submit(fill, bad)
    vs = [await dev.submit(fill, Launch(empty, 1, 1)) for _ in range(100)]
    res = await asyncio.gather(*(dev.wait(v) for v in vs), return_exceptions=True)
    t_all = time.perf_counter() - t0
    kinds = sorted({{type(r).__name__ for r in res}})
    cause = type(dev.lost).__name__ + ":" + str(getattr(dev.lost, "name", ""))
    msg = str(res[0])
    try:
        await dev.submit(fill, bad); later = "accepted"
    except arig.DeviceLost: later = "DeviceLost"
    t1 = time.perf_counter(); await dev.stop(); t_stop = time.perf_counter() - t1
    t2 = time.perf_counter()
    after, reopen = None, "ok"
    try:
        async with await arig.open(arig.cuda.gpu(0)) as dev2:
            img2 = await dev2.load(shipped_image())
            out = await dev2.alloc(8)
            await dev2.run(fill, Launch(img2.function("store"), 1, 1, pack(out, np.uint32(0), np.uint64(42))))
            h = np.zeros(1, np.uint64); await dev2.download(out, h)
            after = int(h[0])
    except arig.OpenError as e:
        reopen = "OpenError: " + str(e)
    t_reopen = time.perf_counter() - t2
    print(json.dumps(dict(kinds=kinds, cause=cause, msg=msg, later=later, fanout_s=t_all, stop_s=t_stop, reopen_s=t_reopen, reopen=reopen, after=after)))
asyncio.run(main())
"""


@pytest.mark.parametrize("kernel", ["trap", "illegal"])
def test_fault_fails_100_waiters_then_reopen(kernel: str) -> None:
    r = _child(FAULT.format(kernel=kernel))
    assert r["kinds"] == ["DeviceLost"], r
    assert str(r["cause"]).startswith("CudaError:CUDA_ERROR_"), r
    assert "CUDA_ERROR_" in str(r["msg"]), r
    assert r["later"] == "DeviceLost"
    print(f"{kernel}: {r}")
    # libcuda keeps a sticky fault for the life of the process; arig then refuses the
    # reopen with an OpenError that says so, rather than hand out a dead device.
    if r["reopen"] == "ok":
        assert r["after"] == 42, r
    else:
        assert "until the process exits" in str(r["reopen"]), r


HANG = """
import asyncio, json, time, numpy as np, arig, arig.cuda
from arig.cuda import Launch, pack
from arig.cuda import shipped_image
def fill(s, launch, v): return launch(s)
async def main():
    async with await arig.open(arig.cuda.gpu(0, hang_ms=400)) as dev:
        img = await dev.load(shipped_image())
        spin = img.function("spin")
        # progress every 100 ms for 1.5 s: longer than hang_ms in total, never idle that long
        vs = [await dev.submit(fill, Launch(spin, 1, 1, pack(np.uint64(100_000_000)))) for _ in range(15)]
        await dev.wait(vs[-1]); short_ok = dev.lost is None
        t0 = time.perf_counter()
        v = await dev.submit(fill, Launch(spin, 1, 1, pack(np.uint64(3_000_000_000))))
        try:
            await dev.wait(v); long = "returned"
        except arig.DeviceLost as e:
            long = type(e.__cause__).__name__
        t_lost = time.perf_counter() - t0
    # A hang is no fault of the context: after stop, the GPU opens again in this process.
    async with await arig.open(arig.cuda.gpu(0)) as dev2:
        img2 = await dev2.load(shipped_image())
        out = await dev2.alloc(8)
        await dev2.run(fill, Launch(img2.function("store"), 1, 1, pack(out, np.uint32(0), np.uint64(42))))
        h = np.zeros(1, np.uint64); await dev2.download(out, h)
    print(json.dumps(dict(short_ok=short_ok, long=long, t_lost=t_lost, after=int(h[0]))))
asyncio.run(main())
"""


def test_hang_shorter_and_longer_than_hang_ms() -> None:
    r = _child(HANG)
    assert r["short_ok"] is True, r
    assert r["long"] == "DeviceHang", r
    assert 0.3 < float(r["t_lost"]) < 2.5, r  # lost after ~hang_ms, long before the 3 s kernel ends
    assert r["after"] == 42, r  # reopened in the same process after the loss and stop
    print(r)


@pytest.mark.asyncio
async def test_idle_wait_costs_no_cpu() -> None:
    async with await _open() as dev:
        img = await dev.load(shipped_image())
        v = await dev.submit(_fill, Launch(img.function("spin"), 1, 1, pack(np.uint64(1_000_000_000))))
        c0, t0 = time.process_time(), time.perf_counter()
        await dev.wait(v)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        print(f"1 s kernel: wall {wall:.3f} s, process CPU {cpu * 1e3:.1f} ms")
        assert wall > 0.9
        assert cpu < 0.05 * wall  # no busy spinning: < 5% of one core


@pytest.mark.asyncio
async def test_reached_at_is_monotone_and_before_wakeup() -> None:
    async with await _open() as dev:
        img = await dev.load(shipped_image())
        launch = Launch(img.function("empty"), 1, 1)
        prev = 0.0
        for _ in range(50):
            v = await dev.submit(_fill, launch)
            await dev.wait(v)
            woke = time.perf_counter()
            t = dev.reached_at(v)
            assert t is not None and prev <= t <= woke
            prev = t
