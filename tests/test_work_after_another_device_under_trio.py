"""``after=`` under trio as under asyncio (anyio's two backends): work waits for another device's
value, on the GPU behind a gate (CUDA over FakeCuda) or held on the loop (host), back-pressure
holds while it is held, and a peer's loss reaches the waiting device's waiters."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

import arig
import arig.cuda
import arig.host
from arig.testing import FakeCuda

from test_work_waits_for_another_devices_value import _blocked, _seen

pytestmark = pytest.mark.anyio

T = 10.0


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("kind", ["host", "cuda"])
async def test_work_waits_for_a_peer_under_either_loop(anyio_backend: str, engine: str, kind: str) -> None:
    fake = FakeCuda()
    with fake.installed():
        opener: Any = arig.host.cpu() if kind == "host" else arig.cuda.gpu(0)
        async with await arig.open(arig.host.cpu()) as peer, await arig.open(opener) as dev:
            gate, log = threading.Event(), []
            pv = await peer.submit(_blocked(gate))
            v = await dev.submit(_seen(peer, pv, log), after=[(peer, pv)])
            await anyio.sleep(0.05)
            assert log == [] and dev.reached == 0
            gate.set()
            with anyio.fail_after(T):
                await dev.wait(v)
            assert log == [True]
    assert fake.violations == []


async def test_held_work_keeps_back_pressure_and_hears_a_loss(anyio_backend: str) -> None:
    async with await arig.open(arig.host.cpu()) as peer, await arig.open(arig.host.cpu(), max_pending=1) as dev:
        gate = threading.Event()

        def fails(q: Any, arg: Any, v: int) -> None:
            gate.wait(T)
            raise RuntimeError("the peer broke")

        pv = await peer.submit(fails)
        v = await dev.submit(None, after=[(peer, pv)])
        outcome: list[bool] = []

        async def second() -> None:
            with pytest.raises(arig.DeviceLost):
                await dev.submit(None)
            outcome.append(True)

        async with anyio.create_task_group() as tg:
            tg.start_soon(second)
            await anyio.sleep(0.05)
            assert dev.submitted == v  # the second waits for room behind the held one
            gate.set()
        with pytest.raises(arig.DeviceLost, match="the peer broke"):
            await dev.wait(v)
        assert len(outcome) == 1 and dev.submitted == v
