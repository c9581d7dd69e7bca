"""The NV device's driver event fd wakes the loop on every event loop, uvloop included.

The kernel driver's poll registers a waiter only on a blocking file, and some
loops make every fd they are given non-blocking (uvloop's libuv does).  The
device therefore hands its loop an epoll fd holding the driver's fd, which
stays blocking.  Over ``FakeNvrm``, whose event fd behaves as the driver's,
with the core's spin off so that every completion is told by an interrupt:
no interrupt may go unheard, whichever loop runs the device.
"""

from __future__ import annotations

import asyncio
import os
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import arig
import arig._env
import arig._native
import arig.nvrm as nvrm
import arig.nvrm._device
from arig.testing import FakeNvrm

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {"asyncio": asyncio.new_event_loop}
try:
    import uvloop

    LOOPS["uvloop"] = uvloop.new_event_loop
except ImportError:  # pragma: no cover - uvloop is optional
    pass

CUBIN = (Path(__file__).resolve().parent / "data" / "nv" / "probe.sm_90.cubin").read_bytes()

pytestmark = pytest.mark.skipif(arig._env.PURE or arig._native.library() is None, reason="the NV device runs on the native core only")


def _run(factory: Callable[[], asyncio.AbstractEventLoop], main: Callable[[], Any]) -> Any:
    with asyncio.Runner(loop_factory=factory) as r:
        return r.run(main())


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_interrupts_reach_the_loop_and_the_driver_fd_stays_blocking(loop: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arig.nvrm._device, "SPIN_US", 0)  # no spin: the interrupt tells every completion
    f = FakeNvrm()
    f.kernel("axpy", lambda params, grid, block: time.sleep(0.002))  # long enough to be waited for

    async def main() -> tuple[bool, int, bool]:
        async with await arig.open(nvrm.gpu(0)) as dev:
            events = dev._backend.events
            image = await dev.load(CUBIN)
            launch = nvrm.Launch(image.function("axpy"), 1, 1, struct.pack("<f4xQQi", 1.0, 0, 0, 0))
            for _ in range(5):
                await dev.wait(await dev.submit(launch))
            own = getattr(events, "loop_fd", -1) not in (-1, events.fd)  # the loop reads an epoll set, not the driver's fd
            return os.get_blocking(events.fd), f.interrupts, own

    with f.installed():
        blocking, heard, own = _run(LOOPS[loop], main)
    assert blocking, "the driver's event fd was made non-blocking: its interrupts wake no poller"
    assert f.interrupts_unheard == 0 and heard >= 1  # a wait the core saw end before its spin gave up takes none
    assert own
    assert f.violations == []
