"""The four CUDA completion modes over ``arig.testing.FakeCuda``: a value is
reached only after the (fake) GPU ran all work up to it.

Modes (the ``mode``/``path`` fixtures): the native core or the pure-Python
threads (conftest's ``engine``), each with and without stream memory operations
(conftest's ``memops``, and ``FakeCuda(memops=False)``: the driver has no
``cuStreamWriteValue64``).
The defect guarded against: without stream memory operations, a wake-up of a
waiter thread by the submit thread was taken for a completion, so ``wait(v)``
returned before v's work ran.  Here every piece of work is a fake kernel that
records its value when the fake GPU runs it; every ``wait`` that returns is
checked against that record.  No wake-up (a semaphore post, an eventfd
write), timeout or poll may be taken as a completion by itself.

Every test checks on the way out that the fake saw no misuse
(``violations``) and that no fake call came from the event-loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import json
import os
import struct
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from ctypes import c_int, c_size_t, c_uint, c_uint64, c_void_p
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arig
import arig._engine
import arig.cuda
import arig.cuda_abi as abi
from arig.cuda import Launch, pack
from arig.testing import FakeCuda, Fault

T = 10.0  # generous timeout for anything that should take milliseconds
NOT_YET = 0.3  # how long a held value must stay unreached


# -- the four modes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mode:
    native: bool
    memops: bool


@pytest.fixture
def mode(engine: str, memops: bool) -> Mode:
    """One of the four: conftest's ``engine`` times ``memops`` (which also makes the fake's driver have them)."""
    return Mode(engine == arig._engine.NATIVE, memops)


@dataclass
class Path:
    mode: Mode
    fake: FakeCuda
    devices: list[arig.Device] = field(default_factory=list)  # stopped at teardown, even after a failure


@contextlib.contextmanager
def _use(fake: FakeCuda) -> Iterator[FakeCuda]:
    """Install ``fake``; on the way out, check it saw no misuse and no call from the loop."""
    with fake.installed():
        yield fake
    assert fake.violations == []
    loop_thread = threading.main_thread().ident  # pytest-asyncio (and _run_example) run the loop on the main thread
    assert [c.name for c in fake.log if c.thread == loop_thread] == [], "the event loop called libcuda"


@pytest_asyncio.fixture
async def path(mode: Mode) -> AsyncIterator[Path]:
    with _use(FakeCuda(memops=mode.memops)) as fake:
        p = Path(mode, fake)
        try:
            yield p
        finally:  # a failed test leaves no device open (its finalizer's ResourceWarning would fail a later test)
            fake.release()
            for dev in p.devices:
                await asyncio.wait_for(dev.stop(), T)
            p.devices.clear()
            gc.collect()


async def _open(path: Path, *, queues: int = 1, **kw: Any) -> arig.Device:
    dev = await asyncio.wait_for(arig.open(arig.cuda.gpu(0, queues=queues), **kw), T)
    path.devices.append(dev)
    assert dev.facts["completion"].startswith("native" if path.mode.native else "pure"), dev.facts["completion"]
    assert dev.facts["stream_memops"] is path.mode.memops
    return dev


@contextlib.asynccontextmanager
async def _stopped_at_exit(fake: FakeCuda, dev: arig.Device) -> AsyncIterator[arig.Device]:
    """``dev``, released and stopped on the way out, even after a failure (before the fake goes)."""
    try:
        yield dev
    finally:
        fake.release()
        await asyncio.wait_for(dev.stop(), T)


async def _until(pred: Callable[[], Any], timeout: float = T) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.002)


async def _not_within(aw: Any, seconds: float = NOT_YET) -> None:
    """``aw`` must not finish within ``seconds`` (it is cancelled then)."""
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(aw, seconds)


# -- fake kernels and the ways to submit them -------------------------------------------------------


class Ran:
    """What the fake GPU ran: each recording kernel appends its value (on a fake stream thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.order: list[int] = []

    def kernel(self, args: bytes) -> None:
        (v,) = struct.unpack("<Q", args)
        with self.lock:
            self.order.append(v)

    def spec(self) -> tuple[Callable[[bytes], None], tuple[int]]:
        return self.kernel, (8,)

    def snapshot(self) -> list[int]:
        with self.lock:
            return list(self.order)

    def missing_upto(self, v: int) -> list[int]:
        done = set(self.snapshot())
        return [x for x in range(1, v + 1) if x not in done]


def _bad(args: bytes) -> None:
    raise Fault(700)


def _slow(flag: list[int]) -> Callable[[bytes], None]:
    def kernel(args: bytes) -> None:
        time.sleep(0.3)
        (v,) = struct.unpack("<Q", args)
        flag.append(v)

    return kernel


LAUNCH = ctypes.CFUNCTYPE(c_int, c_void_p, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_void_p, c_void_p, c_void_p)


class _CArg(ctypes.Structure):
    _fields_ = [("launch", c_void_p), ("func", c_void_p)]


C_CALLS: list[int] = []  # values the C fill was called with (by the native or the submit thread)


def _c_record(queue: int, arg: int, v: int) -> int:
    """A C fill: launch ``func(uint64_t v)`` through libcuda's cuLaunchKernel (the fake's thunk)."""
    C_CALLS.append(v)
    a = _CArg.from_address(arg)
    val, size = c_uint64(v), c_size_t(8)
    extra = (c_void_p * 5)(1, ctypes.addressof(val), 2, ctypes.addressof(size), 0)
    return int(LAUNCH(a.launch)(a.func, 1, 1, 1, 1, 1, 1, 0, queue, None, extra))


C_RECORD = arig.cuda.FILL(_c_record)
KINDS = ("py", "launch", "cfill", "graph")


class Submitter:
    """Submits one recording kernel per value, in any of the four ways."""

    def __init__(self, dev: arig.Device, func: int) -> None:
        self.dev, self.func = dev, func
        self.rec = dev.capability(abi.KEY)
        self.carg = _CArg(self.rec.symbol("cuLaunchKernel"), func)
        self.py_calls: list[int] = []

    def _py(self, kernel: int) -> Any:
        calls = self.py_calls

        def fill(stream: int, arg: Any, v: int) -> int:
            calls.append(v)
            return Launch(kernel, 1, 1, pack(np.uint64(v)))(stream)

        return fill

    async def graph(self, v: int, func: int | None = None) -> abi.Graph:
        g: abi.Graph = await self.rec.graph_async([abi.Kernel(self.func if func is None else func, 1, 1, pack(np.uint64(v)))])
        return g

    async def submit(self, kind: str, queue: int = 0, func: int | None = None, graph: abi.Graph | None = None) -> int:
        """Submit ``kind``; the value is predicted where the work must carry it before submit (one task submits)."""
        f = self.func if func is None else func
        want = self.dev.submitted + 1
        if kind == "py":
            v = await self.dev.submit(self._py(f), queue=queue)
        elif kind == "launch":
            v = await self.dev.submit(Launch(f, 1, 1, pack(np.uint64(want))), queue=queue)
        elif kind == "cfill":
            carg = self.carg if func is None else _CArg(self.carg.launch, f)
            v = await self.dev.submit(C_RECORD, carg, queue=queue, keep=carg)
        elif kind == "graph":
            g = graph if graph is not None else await self.graph(want, f)
            assert self.dev.submitted + 1 == want, "a submit ran meanwhile"
            v = await self.dev.submit(g, queue=queue)
        else:
            raise AssertionError(kind)
        assert v == want, (kind, v, want)
        return v


async def _checked_wait(dev: arig.Device, ran: Ran, v: int, problems: list[str]) -> str:
    """Wait for v; a return must come after the fake GPU ran everything up to v."""
    try:
        await dev.wait(v)
    except arig.ArigError as exc:
        return type(exc).__name__
    missing = ran.missing_upto(v)
    if missing:
        problems.append(f"wait({v}) returned before the work of {missing} ran (reached={dev.reached})")
    if dev.reached < v:
        problems.append(f"wait({v}) returned with reached={dev.reached}")
    return "ok"


# -- 1. a held stream reaches nothing --------------------------------------------------------------


@pytest.mark.asyncio
async def test_held_stream_reaches_nothing_until_released(path: Path) -> None:
    fake, ran = path.fake, Ran()
    C_CALLS.clear()
    dev = await _open(path)
    img = await dev.load(fake.image(record=ran.spec()))
    sub = Submitter(dev, img.function("record"))
    kinds = [KINDS[i % 4] for i in range(16)]
    graphs = {i + 1: await sub.graph(i + 1) for i, k in enumerate(kinds) if k == "graph"}  # built before the hold
    q = dev.queues[0].handle
    fake.hold(q)
    vs = [await sub.submit(k, graph=graphs.get(i + 1)) for i, k in enumerate(kinds)]
    assert vs == list(range(1, 17))
    problems: list[str] = []
    waiters = [asyncio.create_task(_checked_wait(dev, ran, v, problems)) for v in vs for _ in range(2)]
    # Every fill was called and its work (and its completion) handed to the held stream:
    await _until(lambda: len(sub.py_calls) == 4 and len(C_CALLS) == 4)
    await _until(lambda: len(fake.streams[q].items) >= 16)
    await _not_within(dev.wait(1))
    assert dev.reached == 0 and ran.snapshot() == [] and not any(w.done() for w in waiters)
    fake.release(q)
    assert await asyncio.wait_for(asyncio.gather(*waiters), T) == ["ok"] * len(waiters)
    assert problems == []
    assert ran.snapshot() == vs and dev.reached == 16  # in submit order
    await asyncio.wait_for(dev.stop(), T)
    del img


@pytest.mark.asyncio
async def test_memops_off_by_option_uses_host_functions_only(engine: str) -> None:
    """The driver has stream memory operations but ``gpu(0, memops=False)``: the same
    held-stream contract, and no cuStreamWriteValue64 is ever enqueued."""
    ran = Ran()
    with _use(FakeCuda(memops=True)) as fake:
        async with _stopped_at_exit(fake, await asyncio.wait_for(arig.open(arig.cuda.gpu(0, memops=False)), T)) as dev:
            assert dev.facts["stream_memops"] is False and dev.facts["completion"].startswith(engine)
            img = await dev.load(fake.image(record=ran.spec()))
            sub = Submitter(dev, img.function("record"))
            q = dev.queues[0].handle
            fake.hold(q)
            vs = [await sub.submit(k) for k in ("py", "launch", "py", "launch")]
            await _until(lambda: len(fake.streams[q].items) >= 4)
            await _not_within(dev.wait(vs[-1]))
            assert dev.reached == 0 and ran.snapshot() == []
            fake.release(q)
            await asyncio.wait_for(dev.wait(vs[-1]), T)
            assert ran.snapshot() == vs
            del img
        assert fake.calls("cuStreamWriteValue64_v2") == []


@pytest.mark.asyncio
async def test_memops_refused_by_the_engine_choice(engine: str) -> None:
    """Stream memory operations refused where the engine is chosen (as ``ARIG_NO_MEMOPS=1``
    does) over a driver that has them: host functions only, and the held-stream contract."""
    ran = Ran()
    with arig._engine.using(stream_memops=False), _use(FakeCuda(memops=True)) as fake:
        async with _stopped_at_exit(fake, await asyncio.wait_for(arig.open(arig.cuda.gpu(0)), T)) as dev:
            assert dev.facts["stream_memops"] is False
            img = await dev.load(fake.image(record=ran.spec()))
            sub = Submitter(dev, img.function("record"))
            q = dev.queues[0].handle
            fake.hold(q)
            v = await sub.submit("launch")
            await _not_within(dev.wait(v))
            fake.release(q)
            await asyncio.wait_for(dev.wait(v), T)
            assert ran.snapshot() == [v]
            del img
        assert fake.calls("cuStreamWriteValue64_v2") == []


_OPEN_AND_SAY = """
import asyncio, json, arig, arig.cuda
from arig.testing import FakeCuda

async def main():
    async with await arig.open(arig.cuda.gpu(0)) as dev:
        return {k: dev.facts[k] for k in ("completion", "stream_memops", "core")}

with FakeCuda(memops=True).installed():
    print(json.dumps(asyncio.run(main())))
"""


@pytest.mark.parametrize("env", [{}, {"ARIG_PURE": "1"}, {"ARIG_NO_MEMOPS": "1"}, {"ARIG_PURE": "1", "ARIG_NO_MEMOPS": "1"}], ids=repr)
def test_environment_chooses_the_engine_and_memops(env: dict[str, str]) -> None:
    """``ARIG_PURE=1`` and ``ARIG_NO_MEMOPS=1`` reach the one place that chooses (a fresh
    process: they are read at import), and the device's facts say what was chosen and why."""
    clean = {k: v for k, v in os.environ.items() if k not in ("ARIG_PURE", "ARIG_NO_MEMOPS")}
    out = subprocess.run([sys.executable, "-c", _OPEN_AND_SAY], env={**clean, **env}, capture_output=True, text=True, timeout=60, check=True)
    facts = json.loads(out.stdout.splitlines()[-1])
    assert facts["stream_memops"] is ("ARIG_NO_MEMOPS" not in env)
    if "ARIG_PURE" in env:
        assert facts["completion"].startswith("pure") and facts["core"] == "pure Python (ARIG_PURE=1)"
    else:
        # native where the core loads in that process; either way the facts agree on which, and why
        assert "ARIG_PURE" not in facts["core"] and facts["completion"].split()[0] == facts["core"].split()[0], facts


# -- 2. a long kernel is not reached early ---------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", KINDS)
async def test_long_kernel_is_not_reached_early(path: Path, kind: str) -> None:
    """``dev.run`` of a kernel that takes 0.3 s returns after 0.3 s, its side effect visible."""
    done: list[int] = []
    dev = await _open(path)
    img = await dev.load(path.fake.image(slow=(_slow(done), (8,))))
    sub = Submitter(dev, img.function("slow"))
    g = await sub.graph(1) if kind == "graph" else None
    t0 = time.monotonic()
    if kind == "launch":
        v = await dev.run(Launch(sub.func, 1, 1, pack(np.uint64(1))))
    elif kind == "graph":
        v = await dev.run(g)
    elif kind == "py":
        v = await dev.run(sub._py(sub.func))
    else:
        v = await dev.run(C_RECORD, sub.carg, keep=sub.carg)
    took = time.monotonic() - t0
    assert done == [v] == [1], "the kernel's side effect is visible when run returns"
    assert took >= 0.3 - 0.005, f"reached after {took:.3f} s, but the kernel sleeps 0.3 s"
    await asyncio.wait_for(dev.stop(), T)
    del img, g


@pytest.mark.asyncio
async def test_progress_shows_within_a_burst_of_long_kernels(path: Path) -> None:
    """Eight kernels of 0.15 s submitted at once (one burst of the submit or native thread) under a
    0.5 s hang watchdog: each one's completion is progress, so the device is not lost, on every path
    (without stream memory operations, each fill of the pure path gets its own host function)."""
    done: list[int] = []

    def kernel(args: bytes) -> None:
        time.sleep(0.15)
        done.append(struct.unpack("<Q", args)[0])

    dev = await asyncio.wait_for(arig.open(arig.cuda.gpu(0, hang_ms=500)), T)
    path.devices.append(dev)
    img = await dev.load(path.fake.image(slow=(kernel, (8,))))
    func = img.function("slow")
    vs = [await dev.submit(Launch(func, 1, 1, pack(np.uint64(i)))) for i in range(8)]
    await asyncio.wait_for(dev.wait(vs[-1]), T)
    assert dev.lost is None and done == list(range(8))
    await asyncio.wait_for(dev.stop(), T)
    del img


@pytest.mark.asyncio
async def test_no_spin_host_functions_only(path: Path) -> None:
    """``spin_us=0``: the native thread never spins (the host-function backstop tells
    every completion); held work stays unreached, long work is not reached early."""
    fake, ran, done = path.fake, Ran(), list[int]()
    dev = await asyncio.wait_for(arig.open(arig.cuda.gpu(0, spin_us=0)), T)
    path.devices.append(dev)
    img = await dev.load(fake.image(record=ran.spec(), slow=(_slow(done), (8,))))
    sub = Submitter(dev, img.function("record"))
    q = dev.queues[0].handle
    fake.hold(q)
    vs = [await sub.submit(k) for k in ("py", "launch", "cfill", "launch")]
    await _until(lambda: len(fake.streams[q].items) >= 4)
    await _not_within(dev.wait(vs[0]))
    assert dev.reached == 0 and ran.snapshot() == []
    fake.release(q)
    await asyncio.wait_for(dev.wait(vs[-1]), T)
    assert ran.snapshot() == vs
    t0 = time.monotonic()
    v = await dev.run(Launch(img.function("slow"), 1, 1, pack(np.uint64(5))))
    assert done == [v] == [5] and time.monotonic() - t0 >= 0.3 - 0.005
    await asyncio.wait_for(dev.stop(), T)
    del img


# -- 3. queues complete in value order ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_held_queue_holds_back_later_values_of_other_queues(path: Path) -> None:
    fake, ran = path.fake, Ran()
    dev = await _open(path, queues=2)
    img = await dev.load(fake.image(record=ran.spec()))
    sub = Submitter(dev, img.function("record"))
    q0, q1 = (q.handle for q in dev.queues)
    fake.hold(q0)
    v1 = await sub.submit("launch", queue=1)
    v2 = await sub.submit("py", queue=0)  # held
    v3 = await sub.submit("launch", queue=1)
    v4 = await sub.submit("cfill", queue=1)
    await asyncio.wait_for(dev.wait(v1), T)
    assert v1 in ran.snapshot()
    await _until(lambda: {v1, v3, v4} <= set(ran.snapshot()) and fake.drain(q1, 0))  # queue 1 is done
    await _not_within(dev.wait(v3))
    assert dev.reached == v1 and v2 not in ran.snapshot()
    fake.release(q0)
    await asyncio.wait_for(dev.wait(v4), T)
    assert dev.reached == v4 == 4 and sorted(ran.snapshot()) == [1, 2, 3, 4]
    await asyncio.wait_for(dev.stop(), T)
    del img


@pytest.mark.asyncio
async def test_held_queue_zero_keeps_everything_unreached(path: Path) -> None:
    fake, ran = path.fake, Ran()
    dev = await _open(path, queues=2)
    img = await dev.load(fake.image(record=ran.spec()))
    sub = Submitter(dev, img.function("record"))
    q0, q1 = (q.handle for q in dev.queues)
    fake.hold(q0)
    first = await sub.submit("launch", queue=0)
    later = [await sub.submit(k, queue=1) for k in ("py", "launch", "cfill", "launch")]
    await _until(lambda: set(later) <= set(ran.snapshot()) and fake.drain(q1, 0))
    await _not_within(dev.wait(later[-1]))
    assert dev.reached == 0 < first
    fake.release(q0)
    await asyncio.wait_for(dev.wait(later[-1]), T)
    assert dev.reached == 5 and sorted(ran.snapshot()) == [1, 2, 3, 4, 5]
    await asyncio.wait_for(dev.stop(), T)
    del img


# -- 4. faults --------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", KINDS)
async def test_fault_fails_every_waiter_and_reaches_nothing_past_it(path: Path, kind: str) -> None:
    fake, ran = path.fake, Ran()
    dev = await _open(path)
    img = await dev.load(fake.image(record=ran.spec(), bad=(_bad, (8,))))
    sub = Submitter(dev, img.function("record"))
    bad = img.function("bad")
    g = await sub.graph(11, bad) if kind == "graph" else None
    q = dev.queues[0].handle
    fake.hold(q)
    before = [await sub.submit(KINDS[i % 4]) for i in range(10) if KINDS[i % 4] != "graph"]
    while dev.submitted < 10:
        before.append(await sub.submit("launch"))
    fv = await sub.submit(kind, func=bad, graph=g)
    assert fv == 11
    after = [await sub.submit(k) for k in ("launch", "py", "cfill") * 3]
    problems: list[str] = []
    waiters = [asyncio.create_task(_checked_wait(dev, ran, v, problems)) for v in (*before, fv, *after)]
    await _until(lambda: len(fake.streams[q].items) >= 20)
    fake.release(q)
    res = await asyncio.wait_for(asyncio.gather(*waiters), T)
    assert problems == []
    assert res[len(before) :] == ["DeviceLost"] * (1 + len(after)), res
    assert all(r in ("ok", "DeviceLost") for r in res[: len(before)]), res
    assert dev.reached < fv and all(v < fv for v in ran.snapshot())
    assert isinstance(dev.lost, arig.cuda.CudaError) and dev.lost.code == 700
    with pytest.raises(arig.DeviceLost, match="CUDA_ERROR_ILLEGAL_ADDRESS"):
        await dev.wait(fv)
    with pytest.raises(arig.DeviceLost, match="CUDA_ERROR_ILLEGAL_ADDRESS"):
        await dev.wait(after[-1])
    with pytest.raises(arig.DeviceLost, match="CUDA_ERROR_ILLEGAL_ADDRESS"):
        await dev.submit(sub._py(bad))
    await asyncio.wait_for(dev.stop(), T)
    assert dev.reached < fv
    del img, g


@pytest.mark.asyncio
async def test_fault_first_fails_all_twenty_waiters(path: Path) -> None:
    fake, ran = path.fake, Ran()
    dev = await _open(path)
    img = await dev.load(fake.image(record=ran.spec(), bad=(_bad, (8,))))
    sub = Submitter(dev, img.function("record"))
    q = dev.queues[0].handle
    fake.hold(q)
    fv = await sub.submit("launch", func=img.function("bad"))
    vs = [await sub.submit(KINDS[i % 3]) for i in range(19)]
    waiters = [asyncio.create_task(dev.wait(v)) for v in (fv, *vs)]
    await _until(lambda: len(fake.streams[q].items) >= 20)
    fake.release(q)
    res = await asyncio.wait_for(asyncio.gather(*waiters, return_exceptions=True), T)
    assert all(isinstance(r, arig.DeviceLost) and "CUDA_ERROR_ILLEGAL_ADDRESS" in str(r) for r in res), res
    assert dev.reached == 0 and ran.snapshot() == []
    await asyncio.wait_for(dev.stop(), T)
    del img


# -- 5. stop with work queued ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_stop_with_work_queued_on_a_held_stream(path: Path) -> None:
    fake, ran = path.fake, Ran()
    dev = await _open(path, stop_timeout=0.5)
    img = await dev.load(fake.image(record=ran.spec()))
    sub = Submitter(dev, img.function("record"))
    g = await sub.graph(4)
    q = dev.queues[0].handle
    fake.hold(q)
    vs = [await sub.submit(k, graph=g if k == "graph" else None) for k in ("py", "launch", "cfill", "graph", "py", "launch")]
    problems: list[str] = []
    waiters = [asyncio.create_task(_checked_wait(dev, ran, v, problems)) for v in vs]
    await _until(lambda: len(fake.streams[q].items) >= len(vs))
    t0 = time.monotonic()
    await asyncio.wait_for(dev.stop(), T)
    assert time.monotonic() - t0 < 5.0
    res = await asyncio.wait_for(asyncio.gather(*waiters), T)
    assert problems == [] and res == ["DeviceLost"] * len(vs), res
    assert isinstance(dev.lost, arig.DeviceHang) and dev.reached == 0 and ran.snapshot() == []
    with pytest.raises(arig.ArigError):
        await dev.wait(vs[-1])
    with pytest.raises(arig.ArigError):
        await dev.submit(sub._py(sub.func))
    # The held work runs after the stop: it touches nothing the stop freed, and nothing crashes.
    fake.release(q)
    assert await asyncio.to_thread(fake.drain, q)
    await asyncio.sleep(0.05)  # host functions of the orphaned completion ran
    assert fake.violations == []
    assert ran.snapshot() == vs and dev.reached == 0  # a lost timeline stays where it was
    del img, g


# -- 6. many tasks, gapless values ------------------------------------------------------------------


def _store2(args: bytes) -> None:
    """store2(uint64_t *dev_out, uint64_t *host_out, uint32_t i, uint64_t value): both [i] = value."""
    a, b, i, value = struct.unpack("<QQI4xQ", args)
    c_uint64.from_address(a + 8 * i).value = value
    c_uint64.from_address(b + 8 * i).value = value


@pytest.mark.asyncio
async def test_many_tasks_gapless_mixing_python_fills_and_launches(path: Path) -> None:
    tasks, per = 16, 50
    total = tasks * per
    dev = await _open(path)
    img = await dev.load(path.fake.image(store2=(_store2, (8, 8, 4, 8))))
    store2 = img.function("store2")
    out = await dev.alloc(8 * (total + 1))
    mapped = await dev.alloc(8 * (total + 1), "mapped")  # host-visible: checked at every wait
    host = mapped.numpy().view(np.uint64)
    host[:] = 0
    seen: list[int] = []
    problems: list[str] = []

    def args(slot: int) -> bytes:
        return pack(out, mapped, np.uint32(slot), np.uint64(slot * 7 + 1))  # noqa: F821

    async def task(k: int) -> None:
        mine: list[tuple[int, int]] = []  # (value, slot)
        for i in range(per):
            slot = k * per + i + 1
            if (k + i) % 2:
                v = await dev.submit(Launch(store2, 1, 1, args(slot)))
            else:
                a = args(slot)
                v = await dev.submit(lambda s, _a, _v, a=a: Launch(store2, 1, 1, a)(s))
            seen.append(v)
            mine.append((v, slot))
            if i % 7 == 3:
                await dev.wait(v)
                for w, sl in mine:
                    if w <= v and host[sl] != sl * 7 + 1:  # noqa: F821 (deleted after the tasks end)
                        problems.append(f"wait({v}) returned before value {w} (slot {sl}) was written")
            elif i % 5 == 0:
                await asyncio.sleep(0)

    await asyncio.wait_for(asyncio.gather(*(task(k) for k in range(tasks))), 60)
    await asyncio.wait_for(dev.wait(max(seen)), T)
    assert problems == []
    assert sorted(seen) == list(range(1, total + 1)) and dev.reached == total == dev.submitted
    got = np.empty(total + 1, np.uint64)
    await dev.download(out, got)
    want = np.arange(total + 1, dtype=np.uint64) * 7 + 1
    np.testing.assert_array_equal(got[1:], want[1:])
    np.testing.assert_array_equal(host[1:], want[1:])
    await asyncio.wait_for(dev.stop(), T)
    del img, out, mapped, host


# -- 7. back-pressure --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_back_pressure_waits_for_room_then_proceeds(path: Path) -> None:
    fake, ran = path.fake, Ran()
    dev = await _open(path, max_pending=4)
    img = await dev.load(fake.image(record=ran.spec()))
    sub = Submitter(dev, img.function("record"))
    q = dev.queues[0].handle
    fake.hold(q)
    gate = threading.Event()
    entered = threading.Event()

    def blocking(stream: int, arg: Any, v: int) -> int:
        entered.set()
        gate.wait(T)
        return Launch(sub.func, 1, 1, pack(np.uint64(v)))(stream)

    v1 = await dev.submit(blocking)
    await asyncio.to_thread(entered.wait, T)  # the fill runs, blocked: it still counts as pending
    vs = [v1]
    extra: asyncio.Task[int] | None = None
    for _ in range(8):  # fill up to the bound, whichever side counts it
        t = asyncio.create_task(sub.submit("launch"))
        await asyncio.sleep(0.02)
        if not t.done():
            extra = t
            break
        vs.append(t.result())
    assert extra is not None, "submit never waited for room with max_pending=4 and the submit path blocked"
    assert len(vs) <= 5, vs
    await _not_within(asyncio.shield(extra), 0.2)
    assert dev.submitted == len(vs)
    gate.set()
    vs.append(await asyncio.wait_for(extra, T))
    vs += [await sub.submit(k) for k in ("py", "launch", "cfill")]
    assert vs == list(range(1, len(vs) + 1)), vs  # no value gaps
    await _not_within(dev.wait(vs[-1]))
    assert dev.reached == 0
    fake.release(q)
    await asyncio.wait_for(dev.wait(vs[-1]), T)
    assert ran.snapshot() == vs and dev.reached == vs[-1]
    await asyncio.wait_for(dev.stop(), T)
    del img


@pytest.mark.asyncio
async def test_cancelling_one_submit_waiting_for_room_leaves_the_others(path: Path) -> None:
    """Two tasks wait for room; one is cancelled: the other must go on and get its value.

    Each waiter must have its own future: a shared one, awaited bare, is cancelled for all
    by cancelling one waiting submit.
    """
    fake, ran = path.fake, Ran()
    dev = await _open(path, max_pending=2)
    img = await dev.load(fake.image(record=ran.spec()))
    sub = Submitter(dev, img.function("record"))
    gate = threading.Event()
    entered = threading.Event()

    def blocking(stream: int, arg: Any, v: int) -> int:
        entered.set()
        gate.wait(T)
        return Launch(sub.func, 1, 1, pack(np.uint64(v)))(stream)

    await dev.submit(blocking)
    await asyncio.to_thread(entered.wait, T)
    a = None
    for _ in range(8):  # fill up to the bound: the first submit that waits is a
        t = asyncio.create_task(dev.submit(sub._py(sub.func)))
        await asyncio.sleep(0.02)
        if not t.done():
            a = t
            break
        t.result()
    assert a is not None, "submit never waited for room with max_pending=2"
    n = dev.submitted
    b = asyncio.create_task(dev.submit(sub._py(sub.func)))
    await asyncio.sleep(0.05)
    assert not a.done() and not b.done()
    a.cancel()
    await asyncio.sleep(0.05)
    gate.set()
    res = await asyncio.wait_for(asyncio.gather(a, b, return_exceptions=True), T)
    assert isinstance(res[0], asyncio.CancelledError)
    assert res[1] == n + 1, f"the other waiter for room got {res[1]!r}"
    await asyncio.wait_for(dev.wait(dev.submitted), T)
    assert sorted(ran.snapshot()) == list(range(1, dev.submitted + 1))
    await asyncio.wait_for(dev.stop(), T)
    del img


# -- 8. random programs ------------------------------------------------------------------------------

OPS = st.one_of(
    st.tuples(st.sampled_from(["py", "launch", "cfill", "py", "launch"]), st.integers(0, 1)),
    st.tuples(st.just("graph"), st.integers(0, 1)),
    st.tuples(st.sampled_from(["hold", "release"]), st.integers(0, 1)),
    st.tuples(st.just("wait"), st.integers(0, 60), st.sampled_from([0.0, 0.01, 0.03])),
    st.tuples(st.just("waiter"), st.integers(0, 60)),
    st.tuples(st.just("cancel"), st.integers(0, 10), st.integers(0, 3)),
    st.tuples(st.just("sleep"), st.sampled_from([0.0, 0.002, 0.01])),
    st.tuples(st.just("fault"), st.integers(0, 1)),
)


@dataclass
class Example:
    ran: Ran = field(default_factory=Ran)
    problems: list[str] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    fault_v: int | None = None


async def _program(mode: Mode, fake: FakeCuda, ops: list[tuple[Any, ...]]) -> None:
    before = set(threading.enumerate())
    tasks_before = asyncio.all_tasks()
    ex = Example()
    dev = await asyncio.wait_for(arig.open(arig.cuda.gpu(0, queues=2), stop_timeout=T), T)
    assert dev.facts["completion"].startswith("native" if mode.native else "pure") and dev.facts["stream_memops"] is mode.memops
    try:
        await _steps(mode, fake, ops, dev, ex, before, tasks_before)
    finally:  # a failing example leaves no device behind for the next one
        if not dev.stopped:
            fake.release()
            await asyncio.wait_for(dev.stop(), T)


@dataclass
class _Steps:
    """One example's device and what its ops did so far; each op is the method of its name."""

    dev: arig.Device
    fake: FakeCuda
    ex: Example
    sub: Submitter
    bad: Any
    streams: list[int]
    values: list[int] = field(default_factory=list)
    queue_of: dict[int, int] = field(default_factory=dict)
    waiters: list[asyncio.Task[str]] = field(default_factory=list)
    cancelled: set[asyncio.Task[str]] = field(default_factory=set)

    async def run(self, op: tuple[Any, ...]) -> None:
        kind = op[0]
        await getattr(self, "submit" if kind in ("py", "launch", "cfill", "graph", "fault") else kind)(op)

    async def checked(self, v: int) -> str:
        r = await _checked_wait(self.dev, self.ex.ran, v, self.ex.problems)
        if r != "ok" and self.dev.lost is None:
            self.ex.problems.append(f"wait({v}) raised {r} but the device is not lost")
        return r

    async def submit(self, op: tuple[Any, ...]) -> None:
        kind, dev, ex = op[0], self.dev, self.ex
        if dev.lost is not None:
            with pytest.raises(arig.DeviceLost):
                await dev.submit(self.sub._py(self.sub.func), queue=op[1])
            return
        try:
            if kind == "fault":
                if ex.fault_v is not None:
                    return
                v = await self.sub.submit("launch", queue=op[1], func=self.bad)
                ex.fault_v = v
            else:
                v = await self.sub.submit(kind, queue=op[1])
        except arig.ArigError:  # DeviceLost, or a graph refused in the faulted context
            if ex.fault_v is None:
                raise
            return
        self.values.append(v)
        self.queue_of[v] = op[1]

    async def hold(self, op: tuple[Any, ...]) -> None:
        self.fake.hold(self.streams[op[1]])

    async def release(self, op: tuple[Any, ...]) -> None:
        self.fake.release(self.streams[op[1]])

    async def wait(self, op: tuple[Any, ...]) -> None:
        if not self.values:
            return
        v = self.values[op[1] % len(self.values)]
        try:
            self.ex.outcomes.append(await asyncio.wait_for(self.checked(v), op[2] or 0.001))
        except TimeoutError:
            self.ex.outcomes.append("timeout")

    async def waiter(self, op: tuple[Any, ...]) -> None:
        if self.values:
            self.waiters.append(asyncio.create_task(self.checked(self.values[op[1] % len(self.values)])))

    async def cancel(self, op: tuple[Any, ...]) -> None:
        if not self.waiters:
            return
        t = self.waiters[op[1] % len(self.waiters)]
        for _ in range(op[2]):
            await asyncio.sleep(0)
        if t.cancel():
            self.cancelled.add(t)

    async def sleep(self, op: tuple[Any, ...]) -> None:
        await asyncio.sleep(op[1])

    async def check_values(self) -> list[int]:
        """After the ops: every value reached (or, after a fault, none from it on), each ran once, in order."""
        dev, ex, values = self.dev, self.ex, self.values
        n = dev.submitted
        assert values == list(range(1, n + 1)), "values are 1..n, gapless"
        if n:
            if ex.fault_v is None:
                await asyncio.wait_for(dev.wait(n), T)
                assert dev.reached == n
                assert sorted(ex.ran.snapshot()) == values
            else:
                with pytest.raises(arig.DeviceLost, match="CUDA_ERROR_ILLEGAL_ADDRESS"):
                    await asyncio.wait_for(dev.wait(n), T)
                assert dev.reached < ex.fault_v
                assert set(range(1, dev.reached + 1)) <= set(ex.ran.snapshot())
        results = await asyncio.wait_for(asyncio.gather(*self.waiters, return_exceptions=True), T)
        for t, r in zip(self.waiters, results, strict=True):
            if t in self.cancelled:
                assert isinstance(r, (asyncio.CancelledError, str)), repr(r)
            else:
                assert r in ("ok", "DeviceLost"), repr(r)
                assert r == "ok" or ex.fault_v is not None
        ran = ex.ran.snapshot()
        assert len(ran) == len(set(ran)), "each value's work ran once"
        for qi in range(2):  # each queue ran its work in value order
            on_q = [v for v in ran if self.queue_of[v] == qi]
            assert on_q == sorted(on_q), (qi, on_q)
        return ran


async def _steps(mode: Mode, fake: FakeCuda, ops: list[tuple[Any, ...]], dev: arig.Device, ex: Example, before: set[threading.Thread], tasks_before: set[asyncio.Task[Any]]) -> None:
    img = await dev.load(fake.image(record=ex.ran.spec(), bad=(_bad, (8,))))
    steps = _Steps(dev, fake, ex, Submitter(dev, img.function("record")), img.function("bad"), [q.handle for q in dev.queues])
    for op in ops:
        await steps.run(op)
    fake.release()
    ran = await steps.check_values()
    await asyncio.wait_for(dev.stop(), T)
    assert ex.problems == []
    if ex.fault_v is not None:
        assert dev.reached < ex.fault_v and all(v != ex.fault_v for v in ran)
    # No task leaks, and the device's threads end.
    assert [t for t in asyncio.all_tasks() - tasks_before if not t.done()] == []
    mine = [t for t in threading.enumerate() if t not in before and t.name.startswith("arig-")]
    for t in mine:
        await asyncio.to_thread(t.join, 3.0)
    assert [t.name for t in mine if t.is_alive()] == []
    del img, steps


def _run_example(mode: Mode, ops: list[tuple[Any, ...]]) -> None:
    errors: list[dict[str, Any]] = []
    with _use(FakeCuda(memops=mode.memops)) as fake:
        with asyncio.Runner() as runner:
            runner.get_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx))
            runner.run(asyncio.wait_for(_program(mode, fake, ops), 40.0))
            gc.collect()
    assert errors == []


def test_random_programs(mode: Mode) -> None:
    m = mode

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(OPS, max_size=30))
    def run(ops: list[tuple[Any, ...]]) -> None:
        _run_example(m, ops)

    run()


def test_a_fixed_program_with_every_op(mode: Mode) -> None:
    m = mode
    ops: list[tuple[Any, ...]] = [
        ("hold", 0), ("py", 0), ("launch", 1), ("cfill", 0), ("graph", 1), ("waiter", 1), ("waiter", 0),
        ("wait", 0, 0.03), ("hold", 1), ("launch", 1), ("waiter", 5), ("cancel", 2, 1), ("wait", 4, 0.01),
        ("release", 0), ("wait", 2, 0.03), ("sleep", 0.01), ("py", 1), ("release", 1), ("wait", 5, 0.03),
    ]  # fmt: skip
    _run_example(m, ops)
    _run_example(m, [*ops[:8], ("fault", 0), ("launch", 1), ("waiter", 7), ("py", 0), *ops[8:]])
