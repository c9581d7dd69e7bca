"""A device whose release of its resources raises (a bug: it must not) still stops, and the error
is logged, naming the device: it is neither lost in silence nor left for the stop to hang on."""

from __future__ import annotations

import asyncio
import logging

import pytest

import arig
import arig.host


def test_the_stop_ends_and_the_release_error_is_logged(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def broken(self: object) -> None:
        raise RuntimeError("the release broke")

    monkeypatch.setattr(arig.host.HostBackend, "close", broken)

    async def main() -> None:
        dev = await arig.open(arig.host.cpu())
        await dev.run(None)
        await asyncio.wait_for(dev.stop(), 10)

    with caplog.at_level(logging.ERROR, logger="arig"):
        asyncio.run(main())
    errors = [r for r in caplog.records if "releasing its resources failed" in r.getMessage()]
    assert len(errors) == 1 and "the release broke" in errors[0].getMessage()
