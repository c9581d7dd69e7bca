"""``dev.submit(fill, arg, inline=True)``: the Python fill runs inside ``submit``, on the loop's
thread, with a recorder as its queue; the one piece of work it hands the recorder is run by the
device as if it had been submitted, and the loop never calls the driver (``_use`` checks the
fake's log for calls from the loop thread).  A fill that raises, returns an error code or hands
over what it may not assigns no value, and the device stays usable.  Over ``FakeCuda`` on both
engines, and the NV device over ``FakeNvrm``."""

from __future__ import annotations

import asyncio
import gc
import struct
import threading
import weakref
from typing import Any

import anyio
import numpy as np
import pytest

import arig
import arig.cuda
import arig.cuda_abi
import arig.host
import arig.nvrm
from arig.cuda import Launch, pack
from arig.testing import FakeCuda, FakeNvrm, fail_next_fill

from test_cuda_fake import STORE, T, _launch, _open, _use
from test_cuda_fake import completion as completion  # the fixture: both engines
from test_nv_fake import CUBIN, axpy_args

pytest_plugins = ["_fake_drivers"]  # the fixture fake_nv


async def _store_setup(fake: FakeCuda, dev: arig.Device) -> tuple[Any, Any, Any]:
    """The store kernel, a buffer for it, and its image (held: the fills make launches of it later)."""
    img = await dev.load(fake.image(store=STORE))
    out = await dev.alloc(8 * 8, kind="pinned")
    return img.function("store"), out, img


@pytest.mark.asyncio
async def test_an_inline_fill_runs_on_the_loop_and_its_launch_on_the_device(completion: str) -> None:
    with _use(FakeCuda()) as fake:
        async with await _open() as dev:
            store, out, _img = await _store_setup(fake, dev)
            seen: list[tuple[int | None, Any, int]] = []

            def fill(queue: Any, arg: Any, v: int) -> int:
                seen.append((threading.get_ident(), queue.queue, v))
                return Launch(store, 1, 1, pack(out, np.uint32(arg), np.uint64(100 + v)))(queue)

            vs = [await dev.submit(fill, i, inline=True) for i in range(4)]
            await asyncio.wait_for(dev.wait(vs[-1]), T)
            assert [s[2] for s in seen] == vs  # each ran with the value it got
            assert {s[0] for s in seen} == {threading.get_ident()} and {s[1] for s in seen} == {dev.queues[0]}
            assert list(out.numpy(np.uint64)[:4]) == [100 + v for v in vs]
            # put() too, on another queue index, with its arg; and a fill that hands nothing is a marker
            v = await dev.submit(lambda q, a, v: q.put(a), Launch(store, 1, 1, pack(out, np.uint32(5), np.uint64(55))), inline=True)
            v2 = await dev.submit(lambda q, a, v: None, inline=True)
            await asyncio.wait_for(dev.wait(v2), T)
            assert v2 == v + 1 and out.numpy(np.uint64)[5] == 55
            # a graph, handed over with put
            g = await dev.capability(arig.cuda_abi.KEY).graph_async([arig.cuda_abi.Kernel(store, 1, 1, pack(out, np.uint32(6), np.uint64(66)))])
            v3 = await dev.submit(lambda q, a, v: q.put(a), g, inline=True)
            await asyncio.wait_for(dev.wait(v3), T)
            assert out.numpy(np.uint64)[6] == 66 and "cuGraphLaunch" in {c.name for c in fake.log}


@pytest.mark.asyncio
async def test_a_failing_inline_fill_assigns_no_value_and_keeps_the_device(completion: str) -> None:
    with _use(FakeCuda()) as fake:
        async with await _open() as dev:
            store, out, _img = await _store_setup(fake, dev)
            ok = Launch(store, 1, 1, pack(out, np.uint32(0), np.uint64(9)))
            before = dev.submitted

            def raises(q: Any, a: Any, v: int) -> None:
                raise KeyError("the user's bug")

            with pytest.raises(KeyError) as info:
                await dev.submit(raises, inline=True)
            assert any("inline fill" in n for n in getattr(info.value, "__notes__", []))
            with pytest.raises(arig.FillError, match="inline fill"):
                await dev.submit(lambda q, a, v: 719, inline=True)
            with pytest.raises(arig.ArigValueError, match="one piece of work"):
                await dev.submit(lambda q, a, v: (q.put(ok), q.put(ok)), inline=True)
            with pytest.raises(arig.ArigTypeError, match="Python callable"):
                await dev.submit(lambda q, a, v: q.put(_launch, ok), inline=True)
            with pytest.raises(arig.ArigValueError, match="takes no arg"):  # the recorded work is checked as a submission
                await dev.submit(lambda q, a, v: q.put(ok, 1), inline=True)
            with pytest.raises(arig.ArigTypeError, match="cannot"):
                await dev.submit(lambda q, a, v: arig.cuda.interop.stream_handle(q), inline=True)
            gone = await dev.alloc(8, kind="pinned")
            gone.close()
            for arg, keep in ((gone, ()), (None, gone), (None, [gone])):  # the fill's own arg and keep are checked as any
                with pytest.raises(arig.ArigValueError, match="closed"):
                    await dev.submit(lambda q, a, v: ok(q), arg, keep=keep, inline=True)
            assert dev.submitted == before and dev.lost is None
            v = await dev.submit(lambda q, a, v: ok(q), inline=True)
            await asyncio.wait_for(dev.wait(v), T)
            assert v == before + 1 and out.numpy(np.uint64)[0] == 9


@pytest.mark.asyncio
async def test_inline_refuses_work_that_is_not_a_python_fill_and_adopted_queues(completion: str) -> None:
    with _use(FakeCuda()) as fake:
        async with await _open() as dev:
            store, out, _img = await _store_setup(fake, dev)
            before = dev.submitted
            with pytest.raises(arig.ArigTypeError, match="inline=True takes a Python fill"):
                await dev.submit(Launch(store, 1, 1, pack(out, np.uint32(0), np.uint64(1))), inline=True)
            with pytest.raises(arig.ArigTypeError, match="inline=True takes a Python fill"):
                await dev.submit(None, inline=True)
            with pytest.raises(arig.ArigTypeError, match="coroutine"):

                async def not_a_fill(q: Any, a: Any, v: int) -> None:
                    pass

                await dev.submit(not_a_fill, inline=True)
            user = fake.primary(0)  # any stream handle will do for the refusal: the default stream
            with pytest.raises(arig.ArigValueError, match="adopted queue"):
                await dev.submit(lambda q, a, v: None, queue=dev.adopt(0), inline=True)
            assert user is not None and dev.submitted == before and dev.lost is None


@pytest.mark.asyncio
async def test_a_fault_armed_for_the_next_fill_fails_an_inline_one_as_any(completion: str) -> None:
    """``fail_next_fill`` swaps the submission for its failing fill: submitted, it loses the device
    on the submit thread, as it would a fill submitted without ``inline``."""
    with _use(FakeCuda()):
        async with await _open() as dev:
            err = RuntimeError("injected")
            fail_next_fill(dev, err)
            ran: list[int] = []
            v = await dev.submit(lambda q, a, v: ran.append(v), inline=True)
            with pytest.raises(arig.DeviceLost) as info:
                await asyncio.wait_for(dev.wait(v), T)
            assert info.value.cause is err and ran == [] and dev.lost is err


@pytest.mark.asyncio
async def test_an_inline_fill_waits_after_another_device_and_a_bad_after_runs_nothing(completion: str) -> None:
    with _use(FakeCuda()) as fake:
        async with await _open() as dev, await arig.open(arig.host.cpu()) as host:
            store, out, _img = await _store_setup(fake, dev)
            gate = threading.Event()
            hv = await host.submit(lambda q, a, v: q.enqueue(gate.wait, T))  # the host's work waits for the test
            ran: list[int] = []

            def fill(q: Any, a: Any, v: int) -> int:
                ran.append(v)
                return Launch(store, 1, 1, pack(out, np.uint32(1), np.uint64(v)))(q)

            with pytest.raises(arig.ArigTypeError, match="after"):
                await dev.submit(fill, inline=True, after=(host, hv))  # one pair, not a list of them
            assert ran == [] and dev.submitted == 0
            v = await dev.submit(fill, inline=True, after=[(host, hv)])
            assert ran == [v]
            await asyncio.sleep(0.05)
            assert dev.reached < v, "the launch waits for the host's value"
            gate.set()
            await asyncio.wait_for(dev.wait(v), T)
            assert out.numpy(np.uint64)[1] == v and host.reached == hv


@pytest.mark.asyncio
async def test_an_inline_fill_and_what_it_holds_are_released_once_reached(completion: str) -> None:
    """Each inline fill is checked once per device, but the device keeps neither it nor its
    closure past the value it ran for."""
    with _use(FakeCuda()) as fake:
        async with await _open() as dev:
            store, out, _img = await _store_setup(fake, dev)

            class Held:
                pass

            held = Held()
            gone = weakref.ref(held)

            def fill(q: Any, a: Any, v: int, held: Held = held) -> int:
                return Launch(store, 1, 1, pack(out, np.uint32(7), np.uint64(v)))(q)

            vs = [await dev.submit(fill, inline=True) for _ in range(3)]  # checked once, run three times
            await asyncio.wait_for(dev.wait(vs[-1]), T)
            assert out.numpy(np.uint64)[7] == vs[-1]
            fills = weakref.ref(fill)
            del fill, held
            gc.collect()
            assert fills() is None and gone() is None


def test_an_inline_fill_under_trio(engine: str) -> None:
    pytest.importorskip("trio")

    async def main() -> list[int]:
        async with await _open_anyio() as dev:
            img = await dev.load(fake.image(store=STORE))
            out = await dev.alloc(8 * 4, kind="pinned")
            store = img.function("store")
            vs = []
            for i in range(3):
                vs.append(await dev.submit(lambda q, a, v: Launch(store, 1, 1, pack(out, np.uint32(a), np.uint64(v)))(q), i, inline=True))
            with anyio.fail_after(T):
                await dev.wait(vs[-1])
            assert list(out.numpy(np.uint64)[:3]) == vs
            return vs

    with _use(FakeCuda()) as fake:
        assert len(anyio.run(main, backend="trio")) == 3


async def _open_anyio() -> arig.Device:
    with anyio.fail_after(T):
        return await arig.open(arig.cuda.gpu(0))


@pytest.mark.asyncio
async def test_an_inline_fill_on_the_nv_device(fake_nv: FakeNvrm) -> None:
    def axpy(params: bytes, grid: tuple[int, int, int], block: tuple[int, int, int]) -> None:
        a, x, y, n = struct.unpack("<f4xQQi", params)
        ys = fake_nv.array(y, np.float32, n)
        ys[:] = np.float32(a) * fake_nv.array(x, np.float32, n) + ys

    fake_nv.kernel("axpy", axpy)
    async with await arig.open(arig.nvrm.gpu(0)) as dev:
        img = await dev.load(CUBIN)
        n = 256
        x, y = np.arange(n, dtype=np.float32), np.ones(n, dtype=np.float32)
        bx, by = await dev.alloc(4 * n, "pinned"), await dev.alloc(4 * n, "pinned")
        await dev.upload(bx, x)
        await dev.upload(by, y)
        launch = arig.nvrm.Launch(img.function("axpy"), 1, 256, axpy_args(2.0, bx, by, n))
        v = await dev.submit(lambda q, a, v: q.put(a), launch, inline=True, keep=(bx, by, img))
        await asyncio.wait_for(dev.wait(v), T)
        np.testing.assert_array_equal(by.numpy(np.float32)[:n], 2.0 * x + y)
        with pytest.raises(arig.ArigTypeError, match="Python callable"):
            await dev.submit(lambda q, a, v: q.put(lambda *_: 0), inline=True)
        assert dev.submitted == v and dev.lost is None
    assert fake_nv.launches == [("axpy", (1, 1, 1), (256, 1, 1))]
