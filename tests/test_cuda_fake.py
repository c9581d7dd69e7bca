"""The CUDA device's real backend code on CPU, over ``arig.testing.FakeCuda``.

The fake stands in for libcuda only: open, the submit thread, the waiter
threads, the timeline words written by ``cuStreamWriteValue64`` and the host
functions (the C helper's eventfd signal, or libc's ``sem_post``) are all
arig's own; the ``engine`` fixture (conftest) runs a test over both engines.  Every
test checks on the way out that no fake call came from the event-loop thread
and that the fake saw no misuse (``violations``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import struct
import threading
import time
from collections.abc import Callable, Iterator
from ctypes import c_int, c_size_t, c_uint, c_uint32, c_uint64, c_void_p
from typing import Any

import numpy as np
import pytest

import arig
import arig.cuda
import arig.cuda._device
import arig.cuda_abi as abi
from arig.cuda import CudaError, Launch, pack
from arig.cuda._resources import KIND_TABLE, KINDS
from arig.testing import FakeCuda, FakeGpu, Fault

T = 10.0  # generous timeout for anything that should take milliseconds


def _addr(x: object) -> int:
    """A ctypes argument's address or value as an int."""
    return int(getattr(x, "value", x) or 0)  # type: ignore[call-overload]


def _users_destroyed(fake: FakeCuda) -> list[tuple[str, int]]:
    """What the fake destroyed of the test's own objects (a device's stamp kernel and the events
    its native core's waiters sit on are its own; these tests make no event)."""
    return [d for d in fake.destroyed if d[0] not in ("stamp module", "event")]


@contextlib.contextmanager
def _use(fake: FakeCuda) -> Iterator[FakeCuda]:
    """Install ``fake``; on the way out, check it saw no misuse and no call from the loop."""
    with fake.installed():
        yield fake
    assert fake.violations == []
    loop_thread = threading.main_thread().ident  # pytest-asyncio runs the loop on the main thread
    assert [c.name for c in fake.log if c.thread == loop_thread] == [], "the event loop called libcuda"


@pytest.fixture
def fake() -> Iterator[FakeCuda]:
    with _use(FakeCuda(gpus=[FakeGpu(name="NVIDIA Fake H100", cc=(8, 6), bus="0000:3B:00.0"), FakeGpu(watchdog=True, bus="0000:5E:00.0")])) as f:
        yield f


@pytest.fixture
def completion(engine: str) -> str:
    """conftest's ``engine``, under the name the modules that import this fixture use."""
    return engine


async def _until(pred: Callable[[], Any], timeout: float = T) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.002)


def _noop(queue: Any, arg: Any, v: int) -> None:
    return None


def _launch(queue: int, launch: Launch, v: int) -> int:
    return launch(queue)


# Fake kernels: Python callables on the packed argument bytes.
def _store(args: bytes) -> None:
    """store(uint64_t *out, uint32_t i, uint64_t value): out[i] = value."""
    out, i, value = struct.unpack("<QI4xQ", args)
    c_uint64.from_address(out + 8 * i).value = value


STORE = (_store, (8, 4, 8))


#: What the native core's backstop is on CUDA (ARIG_CUDA_BACKSTOP): a host function, or an event
#: record that its waiter thread sits on (without joins, the only event records of a device).
BACKSTOPS = ("cuLaunchHostFunc", "cuEventRecord")


def _backstops(fake: FakeCuda) -> list[Any]:
    return [c for c in fake.calls() if c.name in BACKSTOPS]


async def _open(**kw: Any) -> arig.Device:
    return await asyncio.wait_for(arig.open(arig.cuda.gpu(0, **kw)), T)


# -- facts and open errors ----------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("memops", [True], ids=["memops"], indirect=True)  # whatever ARIG_NO_MEMOPS says
async def test_facts(fake: FakeCuda, memops: bool) -> None:
    async with await _open() as dev:
        assert dev.name == "CUDA" and dev.arch == "sm_86"
        f = dev.facts
        assert f["name"] == "NVIDIA Fake H100" and f["bus"] == "0000:3b:00.0"
        assert f["hang_ms"] == 30_000 and f["display_watchdog"] is False  # attribute 17 is 0
        assert f["compute_capability"] == (8, 6) and f["multiprocessors"] == 132 and f["memory_total"] == 80 << 30
        assert f["driver_version"] == "12.8" and f["stream_memops"] is True and f["ordinal"] == 0
        assert isinstance(dev.capability(abi.KEY), abi.CudaAbi)
        assert fake.primary(0).refs >= 1
    async with await arig.open(arig.cuda.gpu(1)) as dev1:
        assert dev1.name == "CUDA:1" and dev1.arch == "sm_90" and dev1.facts["ordinal"] == 1
        assert dev1.facts["hang_ms"] is None and dev1.facts["display_watchdog"] is True  # a display watchdog runs
    async with await arig.open(arig.cuda.gpu(1, hang_ms=1234)) as dev1:
        assert dev1.facts["hang_ms"] == 1234
    assert fake.primary(0).refs == 0 and not fake.primary(0).alive  # every open gave its context back


@pytest.mark.asyncio
async def test_sched_is_set_only_where_arig_creates_the_context(fake: FakeCuda) -> None:
    async with await _open(sched="blocking") as dev:
        assert dev.facts["sched"] == "blocking" and fake.ctx_flags[0] & 7 == 4
        async with await _open(sched="spin") as dev2:  # the context is active: its flags stay
            assert dev2.facts["sched"] == "blocking" and fake.ctx_flags[0] & 7 == 4


@pytest.mark.asyncio
async def test_open_errors(fake: FakeCuda) -> None:
    with pytest.raises(arig.OpenError, match="no GPU 2: this machine has 2 GPUs"):
        await arig.open(arig.cuda.gpu(2))
    assert await asyncio.to_thread(arig.cuda.count) == 2


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("kw", "match", "count"),
    [
        ({"gpus": 0}, "no GPU 0: this machine has 0 GPUs", 0),
        ({"driver_version": 11080}, r"the driver supports CUDA 11\.8; arig needs 12\.4 or newer", 1),
        ({"available": False}, "cannot load libcuda", 0),
    ],
)
async def test_open_refused(kw: dict[str, Any], match: str, count: int) -> None:
    with _use(FakeCuda(**kw)) as f:
        with pytest.raises(arig.OpenError, match=match):
            await arig.open(arig.cuda.gpu(0))
        assert await asyncio.to_thread(arig.cuda.count) == count
        assert f.contexts == {} or f.primary(0).refs == 0


# -- fills, submit and wait -----------------------------------------------------------------


@pytest.mark.asyncio
async def test_python_fill_gets_the_stream(fake: FakeCuda) -> None:
    seen: list[tuple[Any, int, str]] = []
    async with await _open(queues=2) as dev:
        for q in (0, 1, 0):
            await dev.run(lambda s, a, v: seen.append((s, v, threading.current_thread().name)), queue=q)
        handles = [dev.queues[0].handle, dev.queues[1].handle]
        assert [s for s, _, _ in seen] == [handles[0], handles[1], handles[0]]
        assert all(isinstance(h, int) and h in fake.streams for h in handles) and handles[0] != handles[1]
        assert [v for _, v, _ in seen] == [1, 2, 3] and all(n.startswith("arig-submit-") for _, _, n in seen)


@pytest.mark.asyncio
async def test_many_tasks_gapless_values_and_results(fake: FakeCuda, engine: str) -> None:
    total, tasks = 2000, 16
    async with await _open() as dev:
        assert dev.facts["completion"].startswith(engine)
        img = await dev.load(fake.image(store=STORE))
        out = await dev.alloc(8 * (total + 1))
        store = img.function("store")
        seen: list[int] = []

        async def task(k: int) -> None:
            for i in range(total // tasks):
                v = await dev.submit(lambda s, a, v: Launch(store, 1, 1, pack(out, np.uint32(v), np.uint64(v * 7 + 1)))(s))
                seen.append(v)
                if i % 25 == 0:
                    await dev.wait(v)

        await asyncio.wait_for(asyncio.gather(*(task(k) for k in range(tasks))), 60)
        await asyncio.wait_for(dev.wait(max(seen)), T)
        assert sorted(seen) == list(range(1, total + 1)) and dev.reached == total
        host = np.empty(total + 1, np.uint64)
        await dev.download(out, host)
        np.testing.assert_array_equal(host[1:], np.arange(1, total + 1, dtype=np.uint64) * 7 + 1)


@pytest.mark.asyncio
@pytest.mark.parametrize("memops", [True], ids=["memops"], indirect=True)  # the GPU writes one word per burst
async def test_completions_are_coalesced(fake: FakeCuda, engine: str, memops: bool) -> None:
    async with await _open() as dev:
        q = dev.queues[0].handle
        gate = threading.Event()
        fake.hold(q)  # nothing completes until released
        first = await dev.submit(lambda s, a, v: gate.wait(T) and None)  # the submit thread waits in it...
        vs = [await dev.submit(_noop) for _ in range(98)]  # ...while 99 more queue up behind it
        at: list[int] = []
        vs.append(await dev.submit(lambda s, a, v: at.append(len(fake.log))))
        before = len(_backstops(fake))
        gate.set()
        await _until(lambda: at and any(c.name in BACKSTOPS for c in fake.log[at[0] :]))  # all signalled
        assert dev.reached < first  # held: nothing reached
        fake.release(q)
        await asyncio.wait_for(dev.wait(vs[-1]), T)
        signals = len(_backstops(fake)) - before
        assert 1 <= signals <= 8, signals  # one backstop per burst (<= 32 fills), not per fill


@pytest.mark.asyncio
async def test_queues_complete_in_value_order(fake: FakeCuda, engine: str) -> None:
    async with await _open(queues=2) as dev:
        q0, q1 = (q.handle for q in dev.queues)
        fake.hold(q0)
        v1 = await dev.submit(_noop, queue=0)
        v2 = await dev.submit(_noop, queue=1)
        signals = lambda: fake.calls("cuLaunchHostFunc") + fake.calls("cuStreamWriteValue64_v2")  # noqa: E731
        await _until(lambda: any(c.args[0] == q1 for c in signals()) and fake.drain(q1, 0))
        await asyncio.sleep(0.05)
        assert dev.reached == 0  # v2's queue is done, but v1 is not
        fake.release(q0)
        await asyncio.wait_for(dev.wait(v2), T)
        assert dev.reached == v2 == v1 + 1


@pytest.mark.asyncio
async def test_without_stream_memops() -> None:
    with _use(FakeCuda(memops=False)) as f:
        async with await _open() as dev:
            assert dev.facts["stream_memops"] is False
            vs = [await dev.submit(_noop) for _ in range(50)]
            await asyncio.wait_for(dev.wait(vs[-1]), T)
            assert f.calls("cuStreamWriteValue64_v2") == []


# -- loss -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_fill_returning_an_error_loses_the_device(fake: FakeCuda) -> None:
    async with await _open() as dev:
        v = await dev.submit(lambda s, a, v: 1)
        with pytest.raises(arig.DeviceLost) as e:
            await asyncio.wait_for(dev.wait(v), T)
        cause = e.value.__cause__
        assert isinstance(cause, CudaError) and cause.code == 1 and cause.name == "CUDA_ERROR_INVALID_VALUE"
        assert "CUDA_ERROR_INVALID_VALUE" in str(e.value) and "invalid argument" in str(e.value)
        with pytest.raises(arig.DeviceLost):
            await dev.submit(_noop)


def _fault(code: int) -> Callable[[bytes], None]:
    def kernel(args: bytes) -> None:
        if code == 700:
            raise Fault(700)
        raise RuntimeError("a kernel bug")  # any other error: CUDA_ERROR_LAUNCH_FAILED

    return kernel


@pytest.mark.asyncio
@pytest.mark.parametrize(("code", "name"), [(700, "CUDA_ERROR_ILLEGAL_ADDRESS"), (719, "CUDA_ERROR_LAUNCH_FAILED")])
async def test_kernel_fault_fails_every_waiter_then_reopen(fake: FakeCuda, engine: str, code: int, name: str) -> None:
    image = fake.image(bad=(_fault(code), ()), store=STORE)
    dev = await _open()
    img = await dev.load(image)
    g = await dev.capability(abi.KEY).graph_async([abi.Kernel(img.function("store"), 1, 1, pack(np.uint64(0), np.uint32(0), np.uint64(0)))])
    q = dev.queues[0].handle
    fake.hold(q)
    await dev.submit(_launch, Launch(img.function("bad"), 1, 1))
    vs = [await dev.submit(_noop) for _ in range(100)]
    at: list[int] = []
    vs.append(await dev.submit(lambda s, a, v: at.append(len(fake.log))))
    # Every fill returned and its completion was enqueued before the fault happens:
    await _until(lambda: at and any(c.name in BACKSTOPS for c in fake.log[at[0] :]))
    old = fake.primary(0)
    t0 = time.monotonic()
    fake.release(q)
    res = await asyncio.wait_for(asyncio.gather(*(dev.wait(v) for v in vs), return_exceptions=True), T)
    print(f"{name}: {len(vs)} waiters lost after {time.monotonic() - t0:.3f} s")
    assert all(isinstance(r, arig.DeviceLost) and name in str(r) for r in res), res[:3]
    assert isinstance(dev.lost, CudaError) and dev.lost.code == code and dev.lost.name == name
    assert any(c.name in ("cuStreamQuery", "cuEventSynchronize") and c.rc == code for c in fake.log), "the watch found it"
    assert old.faulted == code and dev.reached == 0  # no host function ran after the fault
    with pytest.raises(arig.DeviceLost):
        await dev.submit(_noop)
    with pytest.raises(CudaError, match=name):  # the record refuses graphs in the failed context
        await dev.capability(abi.KEY).graph_async([])
    await asyncio.wait_for(dev.stop(), T)
    assert old.refs >= 1  # the loaded module keeps the faulted context held
    async with await _open() as dev2:  # open gives the faulted context back: a fresh one is made
        new = fake.primary(0)
        assert new is not old and not old.alive and old.refs == 0 and new.alive and new.faulted == 0  # same handle, as libcuda
        img2 = await dev2.load(image)
        out = await dev2.alloc(8)
        await asyncio.wait_for(dev2.run(_launch, Launch(img2.function("store"), 1, 1, pack(out, np.uint32(0), np.uint64(42)))), T)
        h = np.zeros(1, np.uint64)
        await dev2.download(out, h)
        assert h[0] == 42
        del g  # made in the failed context: its handles died with it and must reach no destructor
        gc.collect()
        await dev2.load(fake.image())
        assert _users_destroyed(fake) == []
    del img, img2


@pytest.mark.asyncio
async def test_sticky_fault_refuses_reopen_saying_why() -> None:
    with _use(FakeCuda(sticky_faults=True)) as f:
        dev = await _open()
        img = await dev.load(f.image(bad=(_fault(700), ())))
        v = await dev.submit(_launch, Launch(img.function("bad"), 1, 1))
        with pytest.raises(arig.DeviceLost, match="CUDA_ERROR_ILLEGAL_ADDRESS"):
            await asyncio.wait_for(dev.wait(v), T)
        await asyncio.wait_for(dev.stop(), T)
        with pytest.raises(arig.OpenError, match="until the process exits"):
            await _open()
        del img


@pytest.mark.asyncio
@pytest.mark.parametrize("with_image", [False, True])
async def test_hang(fake: FakeCuda, engine: str, with_image: bool) -> None:
    dev = await _open(hang_ms=200)
    img = await dev.load(fake.image(store=STORE)) if with_image else None
    buf = await dev.alloc(64)
    q = dev.queues[0].handle
    fake.hold(q)  # the GPU hangs
    v = await dev.submit(_noop)
    t0 = time.monotonic()
    with pytest.raises(arig.DeviceLost) as e:
        await asyncio.wait_for(dev.wait(v), T)
    assert isinstance(e.value.__cause__, arig.DeviceHang) and time.monotonic() - t0 >= 0.15
    # Stop returns although the work still hangs: it waits in no free and no context
    # release (libcuda's wait for the hung work).
    await asyncio.wait_for(dev.stop(), T)
    # The hung work ends after the stop: it touches nothing the stop freed.
    fake.release(q)
    assert await asyncio.to_thread(fake.drain, q)
    assert fake.violations == []
    async with await _open() as dev2:
        await asyncio.wait_for(dev2.run(_noop), T)
    del img, buf


@pytest.mark.asyncio
async def test_stop_timeout_with_work_stalled(fake: FakeCuda, engine: str) -> None:
    dev = await asyncio.wait_for(arig.open(arig.cuda.gpu(0), stop_timeout=0.3), T)
    img = await dev.load(fake.image(store=STORE))
    q = dev.queues[0].handle
    fake.hold(q)
    v = await dev.submit(_noop)
    await asyncio.wait_for(dev.stop(), T)
    assert isinstance(dev.lost, arig.DeviceHang) and dev.reached < v
    fake.release(q)
    assert await asyncio.to_thread(fake.drain, q)
    del img


@pytest.mark.asyncio
async def test_two_devices_share_the_primary_context(fake: FakeCuda) -> None:
    a, b = await _open(), await _open()
    ctx = fake.primary(0)
    assert ctx.refs == 2
    img = await a.load(fake.image(store=STORE))
    out = await b.alloc(16)
    await a.run(_launch, Launch(img.function("store"), 1, 1, pack(out, np.uint32(1), np.uint64(7))))
    await a.stop()
    assert ctx.alive and fake.primary(0) is ctx
    h = np.zeros(2, np.uint64)
    await b.download(out, h)  # b goes on after a stopped
    assert list(h) == [0, 7]
    assert _users_destroyed(fake) == []  # a's stop unloaded nothing
    await b.load(fake.image())  # b's load reclaims on the GPU: a's image is unloaded now
    assert _users_destroyed(fake) == [("module", img.handle)]
    await b.stop()
    assert ctx.alive and ctx.refs == 1  # the GPU state holds it for b's image until the next reclaim


# -- memory and images ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_each_cuda_kind_is_the_memory_its_table_row_says(fake: FakeCuda) -> None:
    assert KINDS == ("device", "pinned", "mapped")
    async with await _open() as dev:
        for row in (k for k in KIND_TABLE if k.made_by == "alloc"):
            buf = await dev.alloc(64, row.name)
            assert buf.kind == row.name
            assert hasattr(buf, "__cuda_array_interface__") == (row.lives == "gpu")
            if row.cpu:
                buf.numpy()[:] = 3
            else:
                with pytest.raises(TypeError, match="not visible to the host"):
                    buf.numpy()
            if row.lives == "host":  # "mapped" is host RAM mapped for the GPU: DEVICEMAP exactly where kernels use it
                assert bool(fake.calls("cuMemHostAlloc")[-1].args[2] & 2) == row.gpu
            buf.close()
        with pytest.raises(ValueError, match="'mapped': page-locked host RAM also mapped for the GPU"):
            await dev.alloc(64, "bar1")


@pytest.mark.asyncio
async def test_alloc_upload_download(fake: FakeCuda) -> None:
    rng = np.random.default_rng(7)
    async with await _open() as dev:
        data = rng.integers(0, 256, 1 << 16, dtype=np.uint8)
        buf = await dev.alloc(data.nbytes)
        assert buf.kind == "device" and buf.address % 256 == 0 and buf.__cuda_array_interface__["data"][0] == buf.address
        await dev.upload(buf, data)
        out = np.zeros_like(data)
        await dev.download(buf, out)
        np.testing.assert_array_equal(out, data)
        pinned = await dev.alloc(64, "mapped")
        pinned.numpy()[:] = 5
        assert bytes(ctypes.string_at(pinned.address, 64)) == b"\x05" * 64
        addr = buf.address
        buf.close()
        pinned.close()
        await dev.run(_noop)  # frees run on the submit thread, before the next fill
        assert [c.args[0] for c in fake.calls("cuMemFree_v2")] == [addr] and len(fake.calls("cuMemFreeHost")) >= 1
        with pytest.raises(arig.cuda.CudaOutOfMemory):
            await dev.alloc(1 << 40)


@pytest.mark.asyncio
async def test_load_function_launch(fake: FakeCuda) -> None:
    calls: list[tuple[float, int]] = []

    def scale(args: bytes) -> None:  # scale(float a, float *x, int n)
        a, ptr, n = struct.unpack("<f4xQi", args)
        calls.append((a, n))
        arr = (ctypes.c_float * n).from_address(ptr)
        for i in range(n):
            arr[i] *= a

    async with await _open() as dev:
        img = await dev.load(fake.image(scale=(scale, (4, 8, 4)), store=STORE))
        assert img.names == ["scale", "store"] and img.layouts["scale"] == ((0, 4), (8, 8), (16, 4))
        x = np.arange(8, dtype=np.float32)
        buf = await dev.alloc(x.nbytes)
        await dev.upload(buf, x)
        await dev.run(_launch, Launch(img.function("scale"), 1, 8, pack(np.float32(2.5), buf, np.int32(8))))
        out = np.empty_like(x)
        await dev.download(buf, out)
        np.testing.assert_array_equal(out, x * 2.5)
        assert calls == [(2.5, 8)]
        with pytest.raises(ValueError, match="argument buffer of 4 bytes"):
            Launch(img.function("scale"), 1, 1, pack(np.float32(1.0)))
        with pytest.raises(KeyError, match="no function 'nope'"):
            img.function("nope")


# -- C fills ------------------------------------------------------------------------------------

LAUNCH = ctypes.CFUNCTYPE(c_int, c_void_p, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_void_p, c_void_p, c_void_p)


class _Arg(ctypes.Structure):
    _fields_ = [("launch", c_void_p), ("func", c_void_p), ("out", c_uint64)]


class _Params(ctypes.Structure):
    _fields_ = [("out", c_uint64), ("index", c_uint32), ("pad", c_uint32), ("value", c_uint64)]


def _c_like_fill(queue: int, arg: int, v: int) -> int:
    """What tests/gpu's C fill does: store v*3 at out[v % 64] through libcuda's cuLaunchKernel."""
    a = _Arg.from_address(arg)
    p = _Params(a.out, v % 64, 0, v * 3)
    size = c_size_t(ctypes.sizeof(p))
    extra = (c_void_p * 5)(1, ctypes.addressof(p), 2, ctypes.addressof(size), 0)
    return int(LAUNCH(a.launch)(a.func, 1, 1, 1, 1, 1, 1, 0, queue, None, extra))


C_FILL = arig.cuda.FILL(_c_like_fill)


@pytest.mark.asyncio
async def test_c_fill_by_pointer_and_by_address(fake: FakeCuda) -> None:
    async with await _open() as dev:
        img = await dev.load(fake.image(store=STORE))
        out = await dev.alloc(8 * 64)
        rec = dev.capability(abi.KEY)
        assert rec.symbol("cuNoSuchThing") is None
        arg = _Arg(rec.symbol("cuLaunchKernel"), img.function("store"), out.address)
        vs = [await dev.submit(C_FILL, arg, keep=arg) for _ in range(20)]
        vs.append(await dev.submit(ctypes.cast(C_FILL, c_void_p).value, arg, keep=arg))  # by address
        await asyncio.wait_for(dev.wait(vs[-1]), T)
        host = np.empty(64, np.uint64)
        await dev.download(out, host)
        assert all(host[v % 64] == v * 3 for v in vs)
        stores = [c for c in fake.calls("cuLaunchKernel") if _addr(c.args[0]) == img.function("store")]
        assert len(stores) == 21 and all(c.rc == 0 for c in stores)


@pytest.mark.asyncio
async def test_c_fill_with_no_arg_gets_null_and_a_bad_int_arg_is_refused(fake: FakeCuda) -> None:
    """``submit(fill)`` with no arg runs the fill with a NULL arg (on both paths); an int arg outside a
    pointer's range is refused before a value is given."""
    got: list[int | None] = []
    fill = arig.cuda.FILL(lambda q, a, v: got.append(a) or 0)
    async with await _open() as dev:
        await asyncio.wait_for(dev.wait(await dev.submit(fill)), T)
        for bad in (-1, 1 << 64):
            with pytest.raises(ValueError, match="void"):
                await dev.submit(fill, bad)
        assert got == [None] and dev.submitted == 1 and dev.lost is None


@pytest.mark.asyncio
async def test_c_fill_with_the_wrong_prototype_is_refused(fake: FakeCuda) -> None:
    async with await _open() as dev:
        for bad in (ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p)(lambda q, a: 0), ctypes.CFUNCTYPE(None, c_void_p, c_void_p, c_uint64)(lambda q, a, v: None)):
            with pytest.raises(TypeError, match="prototype"):
                await dev.submit(bad)
        with pytest.raises(ValueError, match="must not be 0"):
            await dev.submit(0)
        assert dev.submitted == 0 and dev.lost is None


# -- threads ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_event_loop_never_calls_libcuda(fake: FakeCuda) -> None:
    loop_thread = threading.get_ident()
    async with await _open(queues=2) as dev:
        img = await dev.load(fake.image(store=STORE))
        buf = await dev.alloc(64)
        await dev.upload(buf, np.ones(8, np.uint64))
        await dev.run(_launch, Launch(img.function("store"), 1, 1, pack(buf, np.uint32(1), np.uint64(9))), queue=1)
        g = await dev.capability(abi.KEY).graph_async([abi.Kernel(img.function("store"), 1, 1, pack(buf, np.uint32(2), np.uint64(3)))])
        await dev.run(lambda s, a, v: g.launch(s), keep=g)
        await dev.run(Launch(img.function("store"), 1, 1, pack(buf, np.uint32(3), np.uint64(4))))  # native where the core is
        await dev.run(g)
        buf.close()
        img.unload()
        await dev.run(_noop)
    threads = {c.thread for c in fake.log}
    # the submit thread, a graph worker, and the native thread (or the two pure waiters)
    assert loop_thread not in threads and len(threads) >= 3
    assert {"cuLaunchKernel", "cuGraphLaunch", "cuGraphInstantiateWithFlags", "cuMemcpyHtoDAsync_v2"} <= {c.name for c in fake.log}


# -- graphs ---------------------------------------------------------------------------------------


def _tagger(seen: list[int]) -> tuple[Callable[[bytes], None], tuple[int]]:
    return (lambda args: seen.append(struct.unpack("<I", args)[0])), (4,)


def _graph_launch(queue: int, g: abi.Graph, v: int) -> int:
    return g.launch(queue)


@pytest.mark.asyncio
async def test_graph_runs_in_order_and_updates_reach_later_launches(fake: FakeCuda) -> None:
    seen: list[int] = []
    async with await _open() as dev:
        img = await dev.load(fake.image(tag=_tagger(seen)))
        tag = img.function("tag")
        rec = dev.capability(abi.KEY)
        g = await rec.graph_async([abi.Kernel(tag, 1, 1, pack(np.uint32(i))) for i in (1, 2, 3)])
        assert len(g.nodes) == 3
        q = dev.queues[0].handle
        fake.hold(q)
        await dev.submit(_graph_launch, g)
        v = await dev.submit(lambda s, g, v: g.update(0, args=pack(np.uint32(10))) or g.launch(s), g)
        fake.release(q)
        await asyncio.wait_for(dev.wait(v), T)
        assert seen == [1, 2, 3, 10, 2, 3]  # the first launch, enqueued before the update, kept its arguments
        with pytest.raises(ValueError, match="argument buffer"):
            g.update(0, args=b"12345")  # refused before any driver call
        with pytest.raises(ValueError, match="argument buffer"):
            await rec.graph_async([abi.Kernel(tag, 1, 1, b"")])
        assert _users_destroyed(fake) == []
        del g
        gc.collect()
    assert _users_destroyed(fake) == []  # stopping destroys nothing
    with pytest.raises(arig.DeviceStopped):
        await rec.graph_async([])


@pytest.mark.asyncio
@pytest.mark.parametrize("trigger", ["load", "graph", "open"])
async def test_collected_graph_destroyed_at_the_next_load_graph_or_open(fake: FakeCuda, trigger: str) -> None:
    seen: list[int] = []
    image = fake.image(tag=_tagger(seen))
    dev = await _open()
    img = await dev.load(image)
    module = img.handle
    g = await dev.capability(abi.KEY).graph_async([abi.Kernel(img.function("tag"), 1, 1, pack(np.uint32(5)))])
    exec_ = g.handle
    await asyncio.wait_for(dev.run(_graph_launch, g), T)
    img.unload()  # the graph still uses its module
    await dev.run(_noop)
    del g
    gc.collect()
    buf = await dev.alloc(64)
    await dev.run(_noop)  # collected, and neither alloc nor fills destroy it
    buf.close()
    assert seen == [5] and _users_destroyed(fake) == []
    if trigger == "load":
        await dev.load(fake.image())
    elif trigger == "graph":
        await dev.capability(abi.KEY).graph_async([])
    else:
        await asyncio.wait_for(dev.stop(), T)
        assert _users_destroyed(fake) == []  # no destroy at stop
        dev = await _open()
    assert [k for k, _ in _users_destroyed(fake)] == ["exec", "graph", "module"]
    assert _users_destroyed(fake)[0][1] == exec_ and _users_destroyed(fake)[2][1] == module
    await asyncio.wait_for(dev.stop(), T)


# -- the low-latency loop -------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["native"], indirect=True)
def test_spin_loop_spins_only_while_work_is_in_flight_and_completes_everything(engine: str) -> None:
    """arig.new_event_loop(): its selector spins on the native core's words while a
    completion is predicted within the window, and blocks as usual otherwise."""
    seen: list[int] = []
    fake = FakeCuda()

    async def main() -> tuple[int, int, float]:
        from arig._loop import selector_of

        sel = selector_of(asyncio.get_running_loop())
        assert sel is not None
        async with await _open() as dev:
            img = await dev.load(fake.image(store=STORE))
            buf = await dev.alloc(8 * 65)
            launches = [Launch(img.function("store"), 1, 1, pack(buf, np.uint32(i), np.uint64(i * 3))) for i in range(1, 65)]
            for launch in launches:
                seen.append(await dev.run(launch))
            spins = sel.spins
            t0 = time.process_time()
            await asyncio.sleep(0.3)  # nothing in flight: no spinning
            idle_cpu = time.process_time() - t0
            host = np.zeros(65, np.uint64)
            await dev.download(buf, host)
            assert list(host[1:]) == [i * 3 for i in range(1, 65)]
            return spins, sel.spins, idle_cpu

    with _use(fake):
        loop = arig.new_event_loop(spin_us=200)
        try:
            spins, spins_after, idle_cpu = loop.run_until_complete(main())
        finally:
            loop.close()
    assert seen == list(range(seen[0], seen[0] + 64))
    assert spins > 0, "the selector never spun although completions were due"
    assert spins_after - spins <= 3, "it spun while nothing was in flight"
    assert idle_cpu < 0.2


def test_new_event_loop_refuses_a_bad_window() -> None:
    with pytest.raises(ValueError, match="spin_us"):
        arig.new_event_loop(spin_us=-1)
    with pytest.raises(ValueError, match="spin_us"):
        arig.new_event_loop(spin_us=True)


@pytest.mark.asyncio
async def test_progress_inside_a_burst_of_long_kernels_keeps_the_hang_watchdog_quiet(fake: FakeCuda, engine: str) -> None:
    """Eight 60 ms kernels submitted back to back under hang_ms=200, once the device has seen
    such a kernel: each one's completion is progress, so 480 ms of work loses nothing."""
    ran: list[int] = []

    def slow(args: bytes) -> None:
        time.sleep(0.06)
        ran.append(struct.unpack("<I", args)[0])

    async with await _open(hang_ms=200) as dev:
        img = await dev.load(fake.image(slow=(slow, (4,))))
        launches = [Launch(img.function("slow"), 1, 1, pack(np.uint32(i))) for i in range(9)]
        await dev.run(launches[8])  # alone first: the device learns that this work is long
        ran.clear()
        fake.hold(dev.queues[0].handle)
        vs = [await dev.submit(launches[i]) for i in range(8)]
        await asyncio.sleep(0.05)  # every launch enqueued (one burst where the core takes them together)
        fake.release(dev.queues[0].handle)
        await asyncio.wait_for(dev.wait(vs[-1]), T)
        assert dev.lost is None and ran == list(range(8))


@pytest.mark.asyncio
async def test_reached_at_is_monotone_across_queues_and_never_before_the_submit(fake: FakeCuda, engine: str) -> None:
    async with await _open(queues=2) as dev:
        submitted: dict[int, float] = {}
        for i in range(40):
            t = time.perf_counter()
            v = await dev.submit(_noop, queue=i % 2)
            submitted[v] = t
            if i % 5 == 4:
                await dev.wait(v)
        await dev.wait(max(submitted))
        stamps = [dev.reached_at(v) or 0.0 for v in sorted(submitted)]
        assert all(stamps), "a reached value without its time"
        assert stamps == sorted(stamps), "reached_at goes back in time across queues"
        assert all(s >= submitted[v] for v, s in zip(sorted(submitted), stamps)), "a value reached before it was submitted"
