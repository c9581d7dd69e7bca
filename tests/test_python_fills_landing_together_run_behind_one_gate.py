"""Python fills that land in a native core's ring together run behind one gate: the submit thread
runs them one after another on one hold of the GIL, in value order, and the core signals each
value as its fill ends, instead of opening a gate, and waiting for the submit thread, for each.  Only where Python fills are known to be short work (the
tests tell the core to take them so, as its prediction would on a GPU: ``_as_short``): fills of
unknown or long work, and a fill that waits on the GPU behind a gate of its own (``after=`` of
another device), keep a gate each.  A fill that raises inside such a run loses the device with its
own error; the fills before it ran, those after it never do.

Over FakeCuda with stream memory operations, on the native core only (the pure engine has no
gate: its submit thread runs every fill).  Counted by the core's ``py_gates``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import arig
import arig._env
import arig._native
import arig.cuda
import arig.host
from arig.testing import FakeCuda

pytestmark = pytest.mark.skipif(arig._env.PURE or arig._native.library() is None, reason="the gate is the native core's")

T = 10.0
N = 24  # fills landing behind a blocked one: fewer than the core's burst (32)


def _gates(dev: arig.Device) -> int:
    return int(dev._backend.completion.core.stats()["py_gates"])


def _as_short(dev: arig.Device) -> None:
    """Have the core take every Python fill as short work: the fake's streams run them as slowly as
    this machine is loaded, which its prediction would follow (its own threshold is 50 µs)."""
    dev._backend.completion.core.py_short(-1)


def _recording(ran: list[int], gate: threading.Event | None = None) -> Any:
    def fill(q: Any, arg: Any, v: int) -> None:
        if gate is not None:
            gate.wait(T)
        ran.append(v)

    return fill


async def _land_behind_a_blocked_fill(dev: arig.Device, ran: list[int], later: Any) -> tuple[int, list[int]]:
    """Submit a fill that blocks, then N more (``later(i)`` makes the i-th); open the block once all
    landed.  The first value and the later ones."""
    gate = threading.Event()
    first = await dev.submit(_recording(ran, gate))
    await asyncio.sleep(0.01)  # the core reached the first and waits for it: the rest land behind it
    values = [await dev.submit(later(i)) for i in range(N)]
    await asyncio.sleep(0.01)
    gate.set()
    return first, values


def test_python_fills_that_land_together_share_one_gate() -> None:
    async def main() -> tuple[int, list[int], list[int], int]:
        async with await arig.open(arig.cuda.gpu(0)) as dev:
            _as_short(dev)
            ran: list[int] = []
            before = _gates(dev)
            first, values = await _land_behind_a_blocked_fill(dev, ran, lambda i: _recording(ran))
            await asyncio.wait_for(dev.wait(values[-1]), T)
            return first, values, ran, _gates(dev) - before

    with FakeCuda().installed() as fake:
        first, values, ran, gates = asyncio.run(main())
    assert fake.violations == []
    assert ran == [first, *values], "every fill ran once, in value order"
    assert gates <= 3, f"{N + 1} fills that landed together opened {gates} gates"


def test_a_fill_that_raises_inside_a_run_loses_the_device_and_the_rest_never_run() -> None:
    bad_at = N // 2

    def later(ran: list[int]) -> Any:
        def make(i: int) -> Any:
            if i != bad_at:
                return _recording(ran)

            def raises(q: Any, arg: Any, v: int) -> None:
                ran.append(v)
                raise RuntimeError(f"fill {i} broke")

            return raises

        return make

    async def main() -> tuple[int, list[int], list[int], list[Any]]:
        dev = await arig.open(arig.cuda.gpu(0))
        try:
            _as_short(dev)
            ran: list[int] = []
            first, values = await _land_behind_a_blocked_fill(dev, ran, later(ran))
            outcomes = await asyncio.wait_for(asyncio.gather(*(dev.wait(v) for v in values), return_exceptions=True), T)
            return first, values, ran, outcomes
        finally:
            try:
                await dev.stop()
            except arig.ArigError:
                pass

    with FakeCuda().installed():
        first, values, ran, outcomes = asyncio.run(main())
    assert ran == [first, *values[: bad_at + 1]], "the fills after the one that raised never ran"
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert lost, "the failure lost the device"
    assert all(isinstance(o, arig.DeviceLost) and f"fill {bad_at} broke" in str(o) for o in lost), outcomes
    assert all(isinstance(o, arig.DeviceLost) for o in outcomes[bad_at:]), "no value at or after the failure is reached"


def test_python_fills_of_unknown_length_keep_a_gate_each() -> None:
    """Fills whose work is not known to be short (never measured: the core's own threshold) keep a gate each."""

    async def main() -> tuple[list[int], list[int], int]:
        async with await arig.open(arig.cuda.gpu(0)) as dev:
            ran: list[int] = []
            before = _gates(dev)
            first, values = await _land_behind_a_blocked_fill(dev, ran, lambda i: _recording(ran))
            await asyncio.wait_for(dev.wait(values[-1]), T)
            return [first, *values], ran, _gates(dev) - before

    with FakeCuda().installed():
        values, ran, gates = asyncio.run(main())
    assert ran == values
    assert gates == N + 1


def test_a_gated_fill_keeps_a_gate_of_its_own() -> None:
    """Fills behind gates of their own (``after=`` a host device's value) ping-pong with that device:
    each value must be signalled before the next gated fill's work waits on the GPU."""

    async def main() -> tuple[int, int]:
        async with await arig.open(arig.host.cpu()) as host, await arig.open(arig.cuda.gpu(0)) as dev:
            _as_short(dev)
            before = _gates(dev)
            last: tuple[Any, int] | None = None
            steps = 40
            for i in range(steps):
                d = host if i % 2 == 0 else dev
                fill = _recording([]) if d is dev else (lambda q, arg, v: None)
                last = (d, await d.submit(fill, after=[] if last is None else [last]))
            assert last is not None
            await asyncio.wait_for(last[0].wait(last[1]), T)
            return _gates(dev) - before, steps // 2

    with FakeCuda().installed():
        gates, fills = asyncio.run(main())
    assert gates == fills, "each gated fill opened a gate of its own"
