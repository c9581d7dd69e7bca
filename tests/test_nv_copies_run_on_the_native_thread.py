"""An NV device's uploads and downloads are items the core's native thread runs: no Python runs for them on
any thread but the event loop's, so a copy of any size holds the GIL on no other thread and waits for no
hand-off to the submit thread (which would need the GIL the busy loop holds).

Over ``arig.testing.FakeNvrm``: every Python call on the device's submit thread is recorded
(``threading.setprofile``) while copies of every kind and several sizes run from concurrent tasks,
and their bytes are checked.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from types import FrameType
from typing import Any

import numpy as np
import pytest

import arig
import arig.nvrm as nvrm
from arig.testing import FakeNvrm

pytestmark = pytest.mark.asyncio
pytest_plugins = ["_fake_drivers"]  # the fixture fake_nv

T = 10.0
SIZES = (1, 4096, (1 << 20) + 3, (16 << 20) + 5)  # the last crosses a staging slot (16 MiB)


class SubmitThreadCalls:
    """Every Python function called on an ``arig-submit-*`` thread while ``recording`` (threads started after ``__enter__``)."""

    def __init__(self) -> None:
        self.recording = False
        self.calls: list[str] = []

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.recording and event == "call" and threading.current_thread().name.startswith("arig-submit"):
            self.calls.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    def __enter__(self) -> SubmitThreadCalls:
        threading.setprofile(self._profile)
        return self

    def __exit__(self, *exc: Any) -> None:
        threading.setprofile(None)  # type: ignore[arg-type]


async def _round_trip(dev: arig.Device, buf: arig.Buffer, nbytes: int, seed: int) -> None:
    data = np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)
    await asyncio.wait_for(dev.upload(buf, data), T)
    out = np.zeros(nbytes, np.uint8)
    await asyncio.wait_for(dev.download(buf, out), T)
    assert hashlib.sha256(out).hexdigest() == hashlib.sha256(data).hexdigest(), f"{buf!r}, {nbytes} bytes"


async def test_uploads_and_downloads_run_no_python_on_the_submit_thread(fake_nv: FakeNvrm) -> None:
    with SubmitThreadCalls() as seen:
        async with await arig.open(nvrm.gpu(0)) as dev:
            jobs = [(await dev.alloc(n, kind), n) for kind in ("device", "pinned", "mapped") for n in SIZES]
            await _round_trip(dev, jobs[0][0], 1, 0)  # the device is open and idle
            seen.recording = True  # the allocations and frees are the submit thread's: only the copies are recorded
            await asyncio.gather(*(_round_trip(dev, buf, n, i) for i, (buf, n) in enumerate(jobs)))
            seen.recording = False
            for buf, _ in jobs:
                buf.close()
    assert seen.calls == [], "copies ran Python on the submit thread: " + ", ".join(sorted(set(seen.calls))[:8])
    assert [c for c in fake_nv.log if c.thread == threading.get_ident()] == [], "the event loop called the driver"
