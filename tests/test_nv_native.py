"""The NV device on the native core (its NV lanes and GPFIFO channel, ``lanes_nv.c`` and ``nv_channel.c``), over ``arig.testing.FakeNvrm``.

What the core does in C: the pushbuffer words it patches numbers into (each
must equal what ``arig.nvrm._push`` writes), compiled fills through the
``arig.nvrm.abi`` record, the times ``reached_at`` gives, frees deferred until
the GPU is past the work submitted before them, and rings that wrap and
fill.  (Without the core the device does not open: tests/test_nv_fake.py.)  The fake stands in for the kernel driver only (see
``tests/test_nv_fake.py``); every device test checks on the way out that the
fake saw no misuse and no driver call came from the event loop's thread.
"""

from __future__ import annotations

import asyncio
import ctypes
import struct
import threading
import time
from collections.abc import Callable, Iterator
from ctypes import c_int, c_uint32, c_uint64, c_void_p
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import arig
import arig._env
import arig._native
import arig.cuda_abi
import arig.nvrm as nvrm
import arig.nvrm._launch
import arig.nvrm._queue
import arig.nvrm.abi
from arig._errors import DeviceLost, FillError
from arig.nvrm import _push as pb
from arig.testing import FakeNvrm

CUBIN = (Path(__file__).resolve().parent / "data" / "nv" / "probe.sm_90.cubin").read_bytes()
T = 10.0

#: The record's functions, as compiled code calls them (``struct arig_nv_abi``).
NV_LAUNCH = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p)
NV_COPY = ctypes.CFUNCTYPE(c_int, c_void_p, c_uint64, c_uint64, c_uint64)
NV_SEM = ctypes.CFUNCTYPE(c_int, c_void_p, c_uint64, c_uint64)


def _native_core_here() -> bool:
    return not arig._env.PURE and arig._native.library() is not None


needs_native = pytest.mark.skipif(not _native_core_here(), reason=f"the native core is not in use here: {arig._native.status()}")


def axpy_args(a: float, x: arig.Buffer | int, y: arig.Buffer | int, n: int) -> bytes:
    """axpy(float a, const float *x, float *y, int n) as the kernel lays it out (tests/data/nv/probe.cu)."""
    xa = x if isinstance(x, int) else x.address
    ya = y if isinstance(y, int) else y.address
    return struct.pack("<f4xQQi", a, xa, ya, n)


def _installed(f: FakeNvrm) -> Iterator[FakeNvrm]:
    """``f`` as the kernel driver, with the checks of tests/test_nv_fake.py's fixture on the way out."""
    loop_thread = threading.get_ident()  # the test's event loop runs on this thread
    with f.installed():
        yield f
        assert [c for c in f.log if c.thread == loop_thread] == [], "the event loop called the driver"
    assert f.violations == []


def _with_axpy(f: FakeNvrm, before: Callable[[], None] | None = None, after: Callable[[np.ndarray[Any, Any]], None] | None = None) -> None:
    """Register the probe's axpy on ``f``; ``before()`` runs first (it may hold the fake GPU), ``after(y)`` last."""

    def axpy(params: bytes, grid: tuple[int, int, int], block: tuple[int, int, int]) -> None:
        if before is not None:
            before()
        a, x, y, n = struct.unpack("<f4xQQi", params)
        n = min(n, grid[0] * block[0])  # the threads that exist: i < n of them write
        xs, ys = f.array(x, np.float32, n), f.array(y, np.float32, n)
        ys[:] = np.float32(a) * xs + ys
        if after is not None:
            after(ys)

    f.kernel("axpy", axpy)


@pytest.fixture
def fake() -> Iterator[FakeNvrm]:
    """A fake driver with the probe's axpy, on the native core (skipped where it is not in use)."""
    if not _native_core_here():
        pytest.skip(f"the native core is not in use here: {arig._native.status()}")
    f = FakeNvrm()
    _with_axpy(f)
    yield from _installed(f)


# -- 1. templates: the core patches numbers into _push's words ------------------------------------

A16 = st.integers(0, (1 << 53) - 1).map(lambda k: k * 16)  # 16-byte aligned, below 2**57
A8 = st.integers(0, (1 << 54) - 1).map(lambda k: k * 8)  # 8-byte aligned, below 2**57
U64 = st.integers(0, (1 << 64) - 1)
QMD = st.integers(0, (1 << 32) - 1).map(lambda k: k * 256)  # 256-byte aligned, below 2**40
NBYTES = st.integers(1, (1 << 31) - 1)


def _patched(t: arig._native.NvTemplate, a: int = 0, b: int = 0, c: int = 0) -> list[int]:
    """The words ``nv_channel.c``'s ``nv_patch`` makes of ``t`` with ``a``, ``b``, ``c`` patched in."""
    libs = arig._native.library()
    assert libs is not None
    out = (c_uint32 * arig._native.NvTemplate.WORDS)()
    n = libs[0].arig_nv_patch(ctypes.byref(t), a, b, c, out)
    assert 0 < n <= arig._native.NvTemplate.WORDS
    return list(out[:n])


@needs_native
@pytest.mark.parametrize("copy", [False, True], ids=["compute", "copy"])
@settings(max_examples=300, deadline=None)
@given(timeline=A16, value=U64, address=A16, address8=A8, dst=A16, src=A16, nbytes=NBYTES, qmd=QMD)
def test_patched_templates_are_the_words_push_writes(
    copy: bool, timeline: int, value: int, address: int, address8: int, dst: int, src: int, nbytes: int, qmd: int
) -> None:
    """Every template of a compute and a copy queue, with random numbers patched in by C, is word for
    word what ``Push`` (and ``wait_words``, ``launch_words``) write for those numbers."""
    progress = timeline + 16 if timeline + 16 < 1 << 57 else timeline - 16
    tm = arig.nvrm._queue.templates(timeline, progress, copy)
    assert tuple(tm) == arig.nvrm._queue.TEMPLATES
    # Unaligned copy addresses too: Push.copy takes any byte address; a 16-aligned one is the common case.
    dst, src = dst + value % 16, src + (value >> 4) % 16

    def rel(addr: int, v: int) -> list[int]:
        return (pb.Push().copy_release(addr, v) if copy else pb.Push().release(addr, v)).words

    assert _patched(tm["rel_tl"], value) == rel(timeline, value)
    assert _patched(tm["rel_prog"], value) == rel(progress, value)
    assert _patched(tm["wait_prog"], value) == pb.wait_words(progress, value)
    assert _patched(tm["wait_tl"], value) == pb.wait_words(timeline, value)
    assert _patched(tm["intr"], value, value, nbytes) == pb.Push().non_stall_interrupt().words
    assert _patched(tm["launch"], qmd >> 8) == arig.nvrm._launch.launch_words(qmd)
    assert _patched(tm["copy"], src, dst, nbytes) == pb.Push().copy(dst, src, nbytes).words
    assert _patched(tm["release"], address, value) == rel(address, value)
    assert _patched(tm["acquire"], address8, value) == pb.Push().acquire(address8, value).words


@needs_native
def test_templates_fill_every_spec_slot() -> None:
    """``templates`` gives exactly the templates ``struct arig_nv_spec`` holds, each within NV_TW words."""
    spec_slots = [field[0] for field in arig._native.NvSpec._fields_ if field[1] is arig._native.NvTemplate]
    for copy in (False, True):
        tm = arig.nvrm._queue.templates(0x1000, 0x1010, copy)
        assert list(tm) == spec_slots
        for name, t in tm.items():
            assert 0 < t.n <= arig._native.NvTemplate.WORDS, name
            assert all(-1 <= ix < t.n for ix in t.ix), name


# -- 2. compiled fills through the record ------------------------------------------------------------


class _FillArg(ctypes.Structure):
    """What the test's compiled fill reads from its ``arg``: a launch record and three copies' addresses."""

    _fields_ = [("launch", c_uint64), ("x_src", c_uint64), ("x", c_uint64), ("y", c_uint64), ("y_out", c_uint64), ("nbytes", c_uint64),
                ("sem", c_uint64), ("sem_value", c_uint64)]  # fmt: skip


@pytest.mark.asyncio
@pytest.mark.parametrize("queue", [0, 1], ids=["on-compute-queue", "on-copy-queue"])
async def test_compiled_fill_copies_launches_and_releases_through_the_record(fake: FakeNvrm, queue: int) -> None:
    """A C-callable fill that, through ``arig.nvrm.abi``'s record, copies x in (copy engine), launches axpy
    on it (compute), copies y out, and releases and acquires a semaphore: the GPU runs it in that order
    (the two channels are ordered with each other), whichever queue the fill was submitted to."""
    n = 4096
    rng = np.random.default_rng(7)
    x, y0 = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    loop_thread = threading.get_ident()
    async with await arig.open(nvrm.gpu(0)) as dev:
        rec = dev.capability(arig.nvrm.abi.KEY)
        assert isinstance(rec, arig.nvrm.abi.NvAbi)
        assert rec.version == 1 and rec.size == ctypes.sizeof(arig.nvrm.abi.NvAbi)
        assert rec.address == ctypes.addressof(rec) and all((rec.launch, rec.copy, rec.release, rec.acquire))
        assert dev.capability(arig.cuda_abi.KEY) is None
        image = await dev.load(CUBIN)
        x_src, y, y_out, sem = (await dev.alloc(4 * n, "pinned"), await dev.alloc(4 * n, "pinned"),
                                await dev.alloc(4 * n, "pinned"), await dev.alloc(4096, "pinned"))  # fmt: skip
        x_dev = await dev.alloc(4 * n, "device")
        x_src.numpy(np.float32)[:n] = x
        y.numpy(np.float32)[:n] = y0
        launch = nvrm.Launch(image.function("axpy"), n // 256, 256, axpy_args(3.0, x_dev, y, n))
        arg = _FillArg(launch.record, x_src.address, x_dev.address, y.address, y_out.address, 4 * n, sem.address, 0xFEED_F00D_0123_4567)
        do_launch, do_copy, do_release, do_acquire = NV_LAUNCH(rec.launch), NV_COPY(rec.copy), NV_SEM(rec.release), NV_SEM(rec.acquire)
        calls: list[tuple[int, int, int]] = []  # (thread, arg address, v)
        errors: list[BaseException] = []

        def body(q: int | None, a: int | None, v: int) -> int:
            try:
                assert q and a
                calls.append((threading.get_ident(), a, v))
                p = _FillArg.from_address(a)
                for rc in (do_copy(q, p.x, p.x_src, p.nbytes), do_launch(q, p.launch), do_copy(q, p.y_out, p.y, p.nbytes),
                           do_release(q, p.sem, p.sem_value), do_acquire(q, p.sem, p.sem_value)):  # fmt: skip
                    if rc:
                        return int(rc)
                return 0
            except BaseException as e:  # noqa: BLE001 - a ctypes callback must not raise: the test reports it
                errors.append(e)
                return 99

        fill = arig.cuda_abi.FILL(body)
        v = await dev.submit(fill, arg, queue=queue, keep=(arg, launch, fill))
        await asyncio.wait_for(dev.wait(v), T)
        assert errors == [] and dev.lost is None
        assert [(a, vv) for _, a, vv in calls] == [(ctypes.addressof(arg), v)]
        assert calls[0][0] != loop_thread  # the core's native thread ran it
        np.testing.assert_allclose(y_out.numpy(np.float32)[:n], np.float32(3.0) * x + y0, rtol=1e-6)
        value, gpu_time = struct.unpack("<QQ", bytes(sem.numpy(np.uint8)[:16]))
        assert value == 0xFEED_F00D_0123_4567 and gpu_time > 0  # the release's payload and its GPU time
        # The same fill by address, submitted again: it runs again (the record's functions keep working).
        v2 = await dev.submit(ctypes.cast(fill, c_void_p).value, arg, queue=queue, keep=(arg, launch, fill))
        await asyncio.wait_for(dev.wait(v2), T)
        assert errors == [] and [vv for _, _, vv in calls] == [v, v2]
        np.testing.assert_allclose(y_out.numpy(np.float32)[:n], np.float32(6.0) * x + y0, rtol=1e-6)
        for b in (x_src, x_dev, y, y_out, sem):
            b.close()
    assert fake.launches == [("axpy", (n // 256, 1, 1), (256, 1, 1))] * 2


@pytest.mark.asyncio
async def test_compiled_fill_with_no_arg(fake: FakeNvrm) -> None:
    """``submit(fill)`` with no arg, as ``Device.submit``'s signature allows: the fill runs and gets a null ``arg``."""
    got: list[int | None] = []

    def body(q: int | None, a: int | None, v: int) -> int:
        got.append(a)
        return 0

    fill = arig.cuda_abi.FILL(body)
    async with await arig.open(nvrm.gpu(0), stop_timeout=1.0) as dev:  # the bug leaves a value that never completes
        v = await dev.submit(fill)
        await asyncio.wait_for(dev.wait(v), T)
    assert got == [None]


@pytest.mark.asyncio
async def test_compiled_fill_nonzero_code_loses_the_device(fake: FakeNvrm) -> None:
    """A C fill returning 7 loses the device: waits raise DeviceLost whose cause is a FillError naming 7."""
    fill = arig.cuda_abi.FILL(lambda q, a, v: 7)
    arg = c_uint64(0)
    dev = await arig.open(nvrm.gpu(0))
    try:
        v = await dev.submit(fill, arg, keep=(fill, arg))
        with pytest.raises(DeviceLost, match=r"returned 7") as info:
            await asyncio.wait_for(dev.wait(v), T)
        assert isinstance(info.value.cause, FillError) and info.value.cause.code == 7
        assert isinstance(dev.lost, FillError) and dev.lost.code == 7
    finally:
        await dev.stop()


@pytest.mark.asyncio
async def test_record_refuses_a_misaligned_release_with_minus_103(fake: FakeNvrm) -> None:
    """The record's ``release`` at an address 8 bytes off 16 returns -103 (nothing enqueued); the fill
    returns it, and the device is lost with the code and its meaning named."""
    codes: list[int] = []
    async with await arig.open(nvrm.gpu(0)) as dev:
        rec = dev.capability(arig.nvrm.abi.KEY)
        sem = await dev.alloc(4096, "pinned")
        release = NV_SEM(rec.release)

        def body(q: int | None, a: int | None, v: int) -> int:
            codes.append(int(release(q, sem.address + 8, 1)))
            return codes[-1]

        fill = arig.cuda_abi.FILL(body)
        arg = c_uint64(0)
        v = await dev.submit(fill, arg, keep=(fill, arg, sem))
        with pytest.raises(DeviceLost) as info:
            await asyncio.wait_for(dev.wait(v), T)
        assert codes == [-103]
        cause = info.value.cause
        assert isinstance(cause, FillError) and cause.code == -103
        assert arig._native.NV_ERRORS[-103] in str(cause) and "-103" in str(info.value)
        assert sem.numpy(np.uint64)[0] == 0  # nothing was released


# -- 3. reached_at: when the work was done --------------------------------------------------------------


@pytest.mark.asyncio
async def test_reached_at_is_between_the_kernels_end_and_the_check(fake: FakeNvrm) -> None:
    """After a launch on the native path, ``reached_at(v)`` is a time on the monotonic clock no earlier than
    the end of the (fake) kernel, which ran after the submit, and no later than ``time.monotonic()`` at the
    check; over a run of launches, one at a time and in bursts, the times never go back."""
    ends: list[float] = []
    _with_axpy(fake, before=lambda: time.sleep(0.002), after=lambda ys: ends.append(time.monotonic()))
    n = 256
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        x, y = await dev.alloc(4 * n, "pinned"), await dev.alloc(4 * n, "pinned")
        launch = nvrm.Launch(image.function("axpy"), 1, n, axpy_args(1.0, x, y, n))
        stamps: list[float] = []
        for burst in (1, 1, 1, 1, 1, 8, 8, 1, 16):
            before = time.monotonic()
            first = len(ends)
            vs = [await dev.submit(launch, keep=(x, y)) for _ in range(burst)]
            await asyncio.wait_for(dev.wait(vs[-1]), T)
            check = time.monotonic()
            assert len(ends) == first + burst
            for i, v in enumerate(vs):
                t = dev.reached_at(v)
                assert isinstance(t, float), (v, t)
                assert before <= ends[first + i] <= t <= check, (v, before, ends[first + i], t, check)
                stamps.append(t)
        assert stamps == sorted(stamps)


# -- 4. frees wait for the GPU ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_memory_freed_during_a_launch_is_freed_after_it(fake: FakeNvrm) -> None:
    """Buffers a running launch uses, closed while the fake GPU holds that launch, are not freed (no RM
    free, no DMA unmap) until the launch is done; the launch reads and writes them intact, and they
    are freed soon after its value is reached (not kept until stop)."""
    gate = threading.Event()
    started = threading.Event()
    done_at: list[int] = []  # fake.log's length when the kernel ended
    results: list[np.ndarray[Any, Any]] = []

    def hold() -> None:
        started.set()
        assert gate.wait(T), "the test never let the kernel go"

    def finished(ys: np.ndarray[Any, Any]) -> None:
        results.append(ys.copy())
        done_at.append(len(fake.log))

    _with_axpy(fake, before=hold, after=finished)
    n = 1024

    def frees() -> list[int]:
        return [i for i, c in enumerate(list(fake.log)) if c.name.startswith("ioctl") and c.args[1] in ("free VRAM device", "unmap device DMA")]

    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        x, y = await dev.alloc(4 * n, "device"), await dev.alloc(4 * n, "device")
        await dev.upload(x, np.full(n, 2.0, np.float32))
        await dev.upload(y, np.full(n, 1.0, np.float32))
        v = await dev.submit(nvrm.Launch(image.function("axpy"), n // 256, 256, axpy_args(3.0, x, y, n)))  # no keep: only the device defers
        assert await asyncio.to_thread(started.wait, T), "the launch never reached the fake GPU"
        x.close()
        y.close()
        await asyncio.sleep(0.3)  # time enough for the submit thread and the loop to act on the frees
        assert frees() == [], "memory a running launch uses was freed"
        assert dev.reached < v
        gate.set()
        await asyncio.wait_for(dev.wait(v), T)
        assert dev.lost is None
        assert len(results) == 1 and np.all(results[0] == np.float32(7.0))
        deadline = time.monotonic() + T
        while len(frees()) < 4 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        got = frees()
        assert len(got) == 4, f"the buffers were not freed after their launch: {got}"
        assert min(got) >= done_at[0]


# -- 5. the core's rings wrap and fill ---------------------------------------------------------------


@pytest.fixture
def small_rings(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeNvrm]:
    """The fake driver with rings small enough that a test wraps and fills each of them: 16 GPFIFO
    entries (a burst of many launches may take a single entry), 16 KiB of pushbuffer and 32 KiB of argument ring per queue (the core uses the first
    bytes of the full-size allocations)."""
    if not _native_core_here():
        pytest.skip(f"the native core is not in use here: {arig._native.status()}")
    import arig.nvrm._rm as rm

    monkeypatch.setattr(rm, "GPFIFO_ENTRIES", 16)
    spec = arig.nvrm._queue.spec

    def small(**kw: Any) -> Any:
        s = spec(**kw)
        s.pb_size = 16 << 10
        if s.args:
            s.args_size = 32 << 10
        return s

    monkeypatch.setattr(arig.nvrm._queue, "spec", small)
    gate = threading.Event()
    gate.set()
    f = FakeNvrm()
    f.gate = gate  # type: ignore[attr-defined]
    _with_axpy(f, before=lambda: gate.wait(T))
    yield from _installed(f)


@pytest.mark.asyncio
async def test_rings_wrap_under_3000_launches_and_copies(small_rings: FakeNvrm) -> None:
    """3,000 launches from 8 tasks and staged copies between them, through rings that wrap many times
    (each launch takes a 1 KiB argument slot, each submission a GPFIFO entry): every value is reached,
    in order, with every task's data right."""
    fake, total, tasks, n = small_rings, 3000, 8, 64
    values: list[int] = []
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        func = image.function("axpy")
        ones = await dev.alloc(4 * n, "device")
        await dev.upload(ones, np.ones(n, np.float32))

        async def task(k: int, count: int) -> None:
            y = await dev.alloc(4 * n, "device")
            await dev.upload(y, np.zeros(n, np.float32))
            # y += a with a different a per launch: a slot reused before the GPU read it would change the sum
            launches = [nvrm.Launch(func, 1, n, axpy_args(float(j + 1), ones, y, n)) for j in range(7)]
            want = 0.0
            for i in range(count):
                values.append(await dev.submit(launches[i % 7], keep=(y, ones)))
                want += i % 7 + 1
                if i % 25 == 24:  # a staged copy now and then: the copy queue's rings turn too
                    out = np.empty(n, np.float32)
                    await asyncio.wait_for(dev.download(y, out), T)
                    assert np.all(out == np.float32(want)), (k, i, out[:4])
            out = np.empty(n, np.float32)
            await asyncio.wait_for(dev.download(y, out), T)
            assert np.all(out == np.float32(want)), (k, out[:4])
            y.close()

        await asyncio.wait_for(asyncio.gather(*(task(k, total // tasks) for k in range(tasks))), 120)
        assert len(set(values)) == total  # one value each (the downloads' values lie between them)
        assert dev.lost is None and dev.reached >= max(values)
        assert dev.queues[0].handle.seq > 3 * 16 and dev.queues[1].handle.seq > 16  # both GPFIFO rings wrapped
    assert len(fake.launches) == total


@pytest.mark.asyncio
async def test_full_rings_wait_for_the_gpu_then_go_on(small_rings: FakeNvrm) -> None:
    """With the fake GPU held inside the first launch, 300 more launches fill the argument ring (32
    slots of 1 KiB) and the GPFIFO ring: the native thread waits for room (bounded, without the loop
    blocking), and once the GPU goes on every value is reached and every launch ran once."""
    fake, n = small_rings, 64
    gate: threading.Event = fake.gate  # type: ignore[attr-defined]
    async with await arig.open(nvrm.gpu(0)) as dev:
        image = await dev.load(CUBIN)
        ones, y = await dev.alloc(4 * n, "pinned"), await dev.alloc(4 * n, "pinned")
        ones.numpy(np.float32)[:n] = 1.0
        y.numpy(np.float32)[:n] = 0.0
        # y += i + 1 for launch i: a slot reused before the GPU read it would change the sum
        launches = [nvrm.Launch(image.function("axpy"), 1, n, axpy_args(float(i + 1), ones, y, n)) for i in range(301)]
        gate.clear()
        vs = [await dev.submit(launch, keep=(y, ones)) for launch in launches]
        t0 = time.monotonic()
        await asyncio.sleep(0.3)  # the loop runs meanwhile: submit never blocked it
        assert time.monotonic() - t0 < 0.5
        assert dev.reached < vs[-1]
        gate.set()
        await asyncio.wait_for(dev.wait(vs[-1]), 60)
        assert dev.lost is None and np.all(y.numpy(np.float32)[:n] == np.float32(301 * 302 // 2))
        assert dev.queues[0].handle.seq > 16  # the GPFIFO ring wrapped too
    assert len(fake.launches) == 301
