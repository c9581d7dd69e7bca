"""``stop`` with a fill that blocks the submit thread takes one ``stop_timeout``, loses the
device as hung, warns twice (the fill, the thread) and releases the submission's kept objects."""

from __future__ import annotations

import gc
import logging
import threading
import time
import weakref

import pytest
from _lifetimes import Token, arig_threads, ended

import arig
import arig.host


@pytest.mark.asyncio
async def test_stop_with_a_blocked_fill_takes_one_timeout_and_releases_kept_objects(caplog: pytest.LogCaptureFixture) -> None:
    before = arig_threads()
    gate = threading.Event()
    kept = Token()
    ref = weakref.ref(kept)
    dev = await arig.open(arig.host.cpu(), stop_timeout=0.3)
    try:
        await dev.submit(lambda q, a, v: gate.wait(10.0) and None, keep=(kept,))
        del kept
        t0 = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="arig"):
            await dev.stop()  # warnings are errors here: stop must not warn
        elapsed = time.monotonic() - t0
        assert 0.25 < elapsed < 0.55, elapsed  # one stop_timeout (and a 50 ms grace), not two
        assert isinstance(dev.lost, arig.DeviceHang)
        gc.collect()
        assert ref() is None, "stop kept the submission's keep alive"
        records = [r for r in caplog.records if r.name == "arig"]
        assert [r.levelno for r in records] == [logging.WARNING, logging.WARNING]
        assert "did not finish within 0.3 s" in records[0].getMessage()
        assert "submit thread did not end" in records[1].getMessage()
    finally:
        gate.set()
    assert ended(arig_threads() - before)
