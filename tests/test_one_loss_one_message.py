"""One loss, one message: every waiter (and every later call) gets a DeviceLost of its own, with the
same type and text, and they all share one message string, so that a failure with a long text
costs its size once, not once per waiter."""

from __future__ import annotations

import asyncio
import threading
import tracemalloc
from typing import Any

import pytest

import arig
import arig.host

BIG = 2 << 20  # 2 MiB of text
WAITERS = 64


class Huge(Exception):
    pass


@pytest.mark.asyncio
async def test_every_waiter_gets_its_own_exception_sharing_one_message() -> None:
    gate = threading.Event()

    def fill(queue: Any, arg: Any, v: int) -> None:
        gate.wait(10.0)
        raise Huge("x" * BIG)

    dev = await arig.open(arig.host.cpu())
    try:
        v = await dev.submit(fill)
        waiters = [asyncio.ensure_future(dev.wait(v)) for _ in range(WAITERS)]
        await asyncio.sleep(0.05)
        tracemalloc.start()  # the peak: a copy per waiter would be 144 MiB; the log and its capture take a few fixed ones
        try:
            gate.set()
            told = await asyncio.gather(*waiters, return_exceptions=True)
            for _ in range(8):  # later calls too
                with pytest.raises(arig.DeviceLost) as later:
                    await dev.submit(None)
                told.append(later.value)
            grown = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        await dev.stop()
    assert all(type(e) is arig.DeviceLost for e in told)
    assert len({id(e) for e in told}) == len(told)  # each its own exception, with its own traceback
    assert {str(e) for e in told} == {f"device HOST lost: Huge: {'x' * BIG}"}
    assert len({id(e.args[0]) for e in told}) == 1, "the message was copied"
    assert all(e.__cause__ is dev.lost for e in told)
    assert grown < WAITERS * BIG // 4, f"{grown / 2**20:.0f} MiB for {len(told)} exceptions"
