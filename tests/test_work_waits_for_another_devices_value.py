"""``after=``: a device's work waits for other devices' values, and a peer's loss reaches it.

Pairings over what this machine has: host devices, the CUDA device over ``FakeCuda`` and the NV
device over ``FakeNvrm`` (``tests/_kinds``); the ``engine`` fixture runs each over both engines.
A peer's value is kept from being reached by a Python fill that blocks its submit thread (every
kind), or by a held stream of the fake GPU.  The waiting device's *work* records whether the
peer had reached its value when it ran: work the fill enqueues (a host queue's item, a CUDA
host function, which a gate on the GPU holds back), or the fill itself on an NV device (its
submissions are held on the loop).  ``after=`` orders work, not the call of a fill: a CUDA
fill is called at once, and its stream waits.
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
from typing import Any

import numpy as np
import pytest

import arig
import arig._engine
import arig.cuda
import arig.cuda._lib
import arig.host
import arig.nvrm
from arig.testing import FakeCuda

from _kinds import openers

T = 10.0
pytestmark = pytest.mark.asyncio

PAIRS = [("host", "host"), ("host", "cuda"), ("cuda", "host"), ("cuda", "cuda"), ("nv", "cuda"), ("cuda", "nv")]


def _blocked(gate: threading.Event) -> Any:
    def fill(q: Any, arg: Any, v: int) -> None:
        gate.wait(T)

    return fill


HOST_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_kept: list[Any] = []  # host functions the fake GPU may still call


def on_queue(q: Any, fn: Any) -> None:
    """Run ``fn()`` as work of queue ``q``, in its order: on a host queue's worker, as a CUDA host
    function on the stream, or now (an NV queue: its submissions wait on the loop, fill and all)."""
    if isinstance(q, arig.host.HostQueue):
        q.enqueue(fn)
    elif isinstance(q, int):
        cb = HOST_FN(lambda _: fn())
        _kept.append(cb)
        assert arig.cuda._lib.lib.cuLaunchHostFunc(q, cb, None) == 0
    else:
        fn()


def _seen(peer: Any, pv: int, log: list[bool]) -> Any:
    def fill(q: Any, arg: Any, v: int) -> None:
        on_queue(q, lambda: log.append(peer.reached >= pv))  # a plain int of the peer's timeline

    return fill


@pytest.mark.parametrize(("peer_kind", "kind"), PAIRS)
async def test_work_after_a_peers_value_never_runs_before_it(engine: str, peer_kind: str, kind: str) -> None:
    with openers((peer_kind, kind)) as (po, o):
        async with await arig.open(po) as peer, await arig.open(o) as dev:
            gate, log = threading.Event(), []
            pv = await peer.submit(_blocked(gate))
            v1 = await dev.submit(_seen(peer, pv, log), after=[(peer, pv)])
            v2 = await dev.submit(_seen(peer, pv, log))  # waits for nothing itself, but comes after v1
            await asyncio.sleep(0.05)
            assert log == [] and dev.reached == 0 and dev.submitted == v2 == v1 + 1
            gate.set()
            await asyncio.wait_for(dev.wait(v2), T)
            assert log == [True, True]


async def test_a_held_stream_of_the_peer_holds_the_work(engine: str) -> None:
    fake = FakeCuda()
    with fake.installed():
        async with await arig.open(arig.cuda.gpu(0)) as peer, await arig.open(arig.cuda.gpu(0)) as dev:
            fake.hold(peer.queues[0].handle)
            pv = await peer.submit(None)
            log: list[bool] = []
            v = await dev.submit(_seen(peer, pv, log), after=[(peer, pv)])
            await asyncio.sleep(0.1)
            assert log == [] and peer.reached < pv
            fake.release(peer.queues[0].handle)
            await asyncio.wait_for(dev.wait(v), T)
            assert log == [True]
    assert fake.violations == []


async def test_upload_and_download_wait_for_a_peer() -> None:
    async with await arig.open(arig.host.cpu()) as peer, await arig.open(arig.host.cpu()) as dev:
        gate = threading.Event()
        buf = await dev.alloc(8)
        pv = await peer.submit(_blocked(gate))
        up = asyncio.ensure_future(dev.upload(buf, np.arange(8, dtype=np.uint8), after=[(peer, pv)]))
        await asyncio.sleep(0.05)
        assert not up.done() and dev.reached == 0
        gate.set()
        await asyncio.wait_for(up, T)
        out = np.zeros(8, np.uint8)
        await dev.download(buf, out, after=[(peer, pv)])  # reached already: no wait
        assert out.tolist() == list(range(8))


async def test_a_ping_pong_between_two_devices_keeps_its_order(engine: str) -> None:
    with openers(("host", "cuda")) as (ao, bo):
        async with await arig.open(ao) as a, await arig.open(bo) as b:
            box = [0]

            seen: list[int] = []

            def step(want: int) -> Any:
                def fill(q: Any, arg: Any, v: int) -> None:
                    on_queue(q, lambda: (seen.append(box[0] - want), box.__setitem__(0, box[0] + 1)))

                return fill

            last: tuple[Any, int] | None = None
            for i in range(200):
                dev = a if i % 2 == 0 else b
                last = (dev, await dev.submit(step(i), after=[] if last is None else [last]))
            assert last is not None
            await asyncio.wait_for(last[0].wait(last[1]), T)
            assert box[0] == 200 and a.lost is None and b.lost is None
            assert seen == [0] * 200, "a step ran before the one it waits for"


async def test_a_peers_loss_loses_the_waiting_work_naming_the_peer(engine: str) -> None:
    with openers(("host", "cuda")) as (po, o):
        async with await arig.open(po) as peer, await arig.open(o) as dev:
            gate, log = threading.Event(), []

            def fails(q: Any, arg: Any, v: int) -> None:
                gate.wait(T)
                raise RuntimeError("the peer broke")

            pv = await peer.submit(fails)
            v = await dev.submit(_seen(peer, pv, log), after=[(peer, pv)])
            waiter = asyncio.ensure_future(dev.wait(v))
            await asyncio.sleep(0.02)
            gate.set()
            with pytest.raises(arig.DeviceLost) as lost:
                await asyncio.wait_for(waiter, T)
            assert peer.name in str(lost.value) and "the peer broke" in str(lost.value)
            assert isinstance(dev.lost, arig.DeviceLost) and dev.lost.device == peer.name
            assert dev.reached < v  # never reported; a gate on the GPU opened at the loss (the fake checks no stream waits for ever)
            with pytest.raises(arig.DeviceLost):
                await dev.submit(None)


async def test_a_lost_waiting_device_drops_what_it_holds_and_its_peer_is_unharmed() -> None:
    async with await arig.open(arig.host.cpu()) as peer, await arig.open(arig.host.cpu()) as dev:
        gate, log = threading.Event(), []
        pv = await peer.submit(_blocked(gate))
        v = await dev.submit(_seen(peer, pv, log), after=[(peer, pv)])
        dev._tl.fail(RuntimeError("lost while it waits"))
        with pytest.raises(arig.DeviceLost):
            await dev.wait(v)
        gate.set()
        await asyncio.wait_for(peer.wait(pv), T)  # the peer's delivery calls back into the dropped hold
        await asyncio.sleep(0.02)
        assert log == [] and peer.lost is None


async def test_stop_while_work_waits_for_a_peer() -> None:
    peer = await arig.open(arig.host.cpu())
    dev = await arig.open(arig.host.cpu(), stop_timeout=0.2)
    gate, log = threading.Event(), []
    pv = await peer.submit(_blocked(gate))
    v = await dev.submit(_seen(peer, pv, log), after=[(peer, pv)])
    waiter = asyncio.ensure_future(dev.wait(v))
    await asyncio.wait_for(dev.stop(), T)  # the peer never comes within the timeout: the device is lost
    with pytest.raises(arig.DeviceLost):
        await waiter
    assert log == [] and isinstance(dev.lost, arig.DeviceHang)
    gate.set()
    await peer.stop()
    assert peer.lost is None and log == []


async def test_stop_lets_held_work_finish_once_the_peer_comes() -> None:
    async with await arig.open(arig.host.cpu()) as peer:
        dev = await arig.open(arig.host.cpu())
        gate, log = threading.Event(), []
        pv = await peer.submit(_blocked(gate))
        v = await dev.submit(_seen(peer, pv, log), after=[(peer, pv)])
        stop = asyncio.ensure_future(dev.stop())
        await asyncio.sleep(0.05)
        gate.set()
        await asyncio.wait_for(stop, T)
        assert log == [True] and dev.lost is None and dev.reached == v


async def test_held_work_counts_against_max_pending() -> None:
    async with await arig.open(arig.host.cpu()) as peer, await arig.open(arig.host.cpu(), max_pending=2) as dev:
        gate = threading.Event()
        pv = await peer.submit(_blocked(gate))
        await dev.submit(None, after=[(peer, pv)])
        await dev.submit(None)
        third = asyncio.ensure_future(dev.submit(None))
        await asyncio.sleep(0.05)
        assert not third.done() and dev.submitted == 2
        gate.set()
        assert await asyncio.wait_for(third, T) == 3
        await asyncio.wait_for(dev.wait(3), T)
        assert dev._put == dev._st.put  # the hold drained: submissions go straight to the submit thread again


async def test_values_already_reached_hold_nothing() -> None:
    async with await arig.open(arig.host.cpu()) as peer, await arig.open(arig.host.cpu()) as dev:
        pv = await peer.run(None)
        v = await dev.submit(None, after=[(peer, pv), (peer, 0)])
        assert dev._holds is None
        await asyncio.wait_for(dev.wait(v), T)
        v = await dev.submit(None, after=[])
        assert dev._holds is None


@pytest.mark.parametrize(
    ("after", "error", "says"),
    [
        (lambda peer, dev: (peer, 1), arig.ArigTypeError, "list of (device, value) pairs"),
        (lambda peer, dev: [peer], arig.ArigTypeError, "pairs"),
        (lambda peer, dev: [(object(), 1)], arig.ArigTypeError, "names devices"),
        (lambda peer, dev: [(peer, 1.0)], arig.ArigTypeError, "must be an int"),
        (lambda peer, dev: [(peer, True)], arig.ArigTypeError, "must be an int"),
        (lambda peer, dev: [(peer, -1)], arig.ArigValueError, "negative"),
        (lambda peer, dev: [(peer, peer.submitted + 1)], arig.ArigValueError, "never submitted"),
        (lambda peer, dev: [(dev, 0)], arig.ArigValueError, "the submitting device itself"),
    ],
)
async def test_bad_after_is_refused_before_a_value(after: Any, error: type[BaseException], says: str) -> None:
    async with await arig.open(arig.host.cpu()) as peer, await arig.open(arig.host.cpu()) as dev:
        await peer.run(None)
        with pytest.raises(error, match=says.replace("(", r"\(").replace(")", r"\)")):
            await dev.submit(None, after=after(peer, dev))
        assert dev.submitted == 0 and dev.lost is None
        assert await dev.run(None) == 1


async def test_a_lost_or_stopped_peer_is_refused_before_a_value() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        lost = await arig.open(arig.host.cpu())
        lost._tl.fail(RuntimeError("gone"))
        with pytest.raises(arig.DeviceLost, match="gone"):
            await dev.submit(None, after=[(lost, 0)])
        await lost.stop()
        stopped = await arig.open(arig.host.cpu())
        await stopped.stop()
        with pytest.raises(arig.DeviceStopped, match="stopped"):
            await dev.submit(None, after=[(stopped, 0)])
        assert dev.submitted == 0 and dev.lost is None


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")
def test_a_device_of_another_loop_is_refused() -> None:
    async def opened() -> Any:
        return await arig.open(arig.host.cpu())

    other_loop = asyncio.new_event_loop()
    other = other_loop.run_until_complete(opened())

    async def main() -> None:
        async with await arig.open(arig.host.cpu()) as dev:
            with pytest.raises(arig.WrongLoopError, match="another event loop"):
                await dev.submit(None, after=[(other, 0)])
            assert dev.submitted == 0

    try:
        asyncio.run(main())
    finally:
        other_loop.run_until_complete(other.stop())
        other_loop.close()


async def test_cuda_work_waits_behind_a_gate_on_the_gpu(engine: str) -> None:
    """On the native core the stream waits; the pure engine holds the work on the loop instead
    (a gate there hung on a real GPU: see arig.cuda._gates)."""
    fake = FakeCuda()
    with fake.installed():
        async with await arig.open(arig.host.cpu()) as peer, await arig.open(arig.cuda.gpu(0)) as dev:
            gated = engine == "native"
            assert "wait_peers" in dev.features and dev.facts["after"].startswith("on the GPU" if gated else "on the event loop")
            gate, log = threading.Event(), []
            pv = await peer.submit(_blocked(gate))
            v1 = await dev.submit(_seen(peer, pv, log), after=[(peer, pv)])
            v2 = await dev.submit(_seen(peer, pv, log))
            waits = lambda: fake.calls("cuStreamWaitValue64_v2")  # noqa: E731
            for _ in range(200 if gated else 5):
                if waits():
                    break
                await asyncio.sleep(0.01)
            if gated:
                assert len(waits()) == 1 and dev._holds is None  # handed over at once, the stream waits
            else:
                assert waits() == [] and dev._holds is not None and len(dev._holds._held) == 2  # held, and what follows behind it
            await asyncio.sleep(0.05)
            assert log == [] and dev.reached == 0
            gate.set()
            await asyncio.wait_for(dev.wait(v2), T)
            assert log == [True, True] and v2 == v1 + 1
    assert fake.violations == []


async def test_without_stream_memory_operations_cuda_waits_on_the_loop(engine: str) -> None:
    fake = FakeCuda(memops=False)
    with fake.installed():
        async with await arig.open(arig.host.cpu()) as peer, await arig.open(arig.cuda.gpu(0)) as dev:
            assert dev.facts["after"] == "on the event loop"
            gate, log = threading.Event(), []
            pv = await peer.submit(_blocked(gate))
            v = await dev.submit(_seen(peer, pv, log), after=[(peer, pv)])
            assert dev._holds is not None and len(dev._holds._held) == 1
            gate.set()
            await asyncio.wait_for(dev.wait(v), T)
            assert log == [True] and fake.calls("cuStreamWaitValue64_v2") == []
    assert fake.violations == []


async def test_a_lost_cuda_device_opens_its_gates(engine: str) -> None:
    fake = FakeCuda()
    with fake.installed():
        peer = await arig.open(arig.host.cpu())
        dev = await arig.open(arig.cuda.gpu(0), stop_timeout=0.3)
        gate = threading.Event()
        pv = await peer.submit(_blocked(gate))
        v = await dev.submit(None, after=[(peer, pv)])
        if engine == "native":  # the stream waits at the gate before the loss opens it
            for _ in range(200):
                if fake.calls("cuStreamWaitValue64_v2"):
                    break
                await asyncio.sleep(0.01)
            assert len(fake.calls("cuStreamWaitValue64_v2")) == 1
        await asyncio.wait_for(dev.stop(), T)  # the peer never comes within the timeout: lost, and its gate opened
        assert isinstance(dev.lost, arig.DeviceHang) and dev.reached < v
        gate.set()
        await peer.stop()
    assert fake.violations == []  # no stream of the fake GPU was left waiting for its gate


@pytest.mark.skipif(arig._engine.unavailable("native") is not None, reason="gates are the native core's")
async def test_at_most_a_few_gates_are_shut_and_the_rest_is_held_in_order() -> None:
    """A stream held at a gate keeps what is queued behind it (host functions too), so a device keeps
    at most ``MAX_SHUT_GATES`` shut; later work waiting for peers is held on the loop, in order."""
    from arig._after import MAX_SHUT_GATES

    fake = FakeCuda()
    with fake.installed(), arig._engine.using("native"):
        async with await arig.open(arig.host.cpu()) as peer, await arig.open(arig.cuda.gpu(0)) as dev:
            gate, order = threading.Event(), []
            pv = await peer.submit(_blocked(gate))
            n = MAX_SHUT_GATES + 24

            def step(i: int) -> Any:
                def fill(q: Any, arg: Any, v: int) -> None:
                    on_queue(q, lambda: order.append((i, peer.reached >= pv)))

                return fill

            values = [await dev.submit(step(i), after=[(peer, pv)]) for i in range(n)]
            assert values == list(range(1, n + 1))
            waits = lambda: len(fake.calls("cuStreamWaitValue64_v2"))  # noqa: E731
            for _ in range(200):
                if waits() >= MAX_SHUT_GATES:
                    break
                await asyncio.sleep(0.01)
            assert waits() == MAX_SHUT_GATES and dev._holds is not None and len(dev._holds._held) == n - MAX_SHUT_GATES
            gate.set()
            await asyncio.wait_for(dev.wait(values[-1]), T)
            assert order == [(i, True) for i in range(n)], "every step after the peer's value, in submit order"
            assert waits() == MAX_SHUT_GATES, "held work is handed on once the peer is there: no gate left to wait at"
    assert fake.violations == []
