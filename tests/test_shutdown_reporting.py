"""Shutdown is never quiet: a device never stopped is reported through the loop's exception
handler (seen by default) and one ResourceWarning; a device whose loop closed is released by
``await dev.stop()`` on another loop; a stop that waits for work says, once, what it waits for."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from _kinds import KINDS, installed
from _lifetimes import arig_threads, ended, fds

import arig
import arig.host

NEVER_STOPPED = "arig: device HOST was never stopped; use `async with` or `await dev.stop()`"

_SCRIPT = """
import asyncio, gc, arig, arig.host
async def main():
    dev = await arig.open(arig.host.cpu())
    await dev.run(None)
    del dev
    gc.collect()
asyncio.run(main())
"""


@pytest.mark.parametrize("flags", [[], ["-X", "dev"]], ids=["default", "dev-mode"])
def test_a_device_never_stopped_is_said_once_by_default_and_warned_once(flags: list[str]) -> None:
    out = subprocess.run([sys.executable, *flags, "-c", _SCRIPT], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    said = [line for line in out.stderr.splitlines() if "was never stopped" in line]
    warned = [line for line in said if "ResourceWarning" in line]
    assert len(warned) == (1 if flags else 0), out.stderr  # shown where warnings are, and then once
    assert [line for line in said if line not in warned] == [NEVER_STOPPED], out.stderr  # the loop's handler, by default


def _open_then_close_the_loop(opener: Any, work: Any = None, stop_timeout: float = 5.0) -> arig.Device:
    """A device opened on a loop that is then closed without the device being stopped."""
    loop = asyncio.new_event_loop()
    try:

        async def main() -> arig.Device:
            dev = await arig.open(opener, stop_timeout=stop_timeout)
            await dev.run(None)
            if work is not None:
                await dev.submit(work)
            return dev

        return loop.run_until_complete(main())
    finally:
        loop.close()


@pytest.mark.usefixtures("engine")
@pytest.mark.parametrize("kind", KINDS)
def test_a_device_whose_loop_closed_is_stopped_from_another_loop(kind: str) -> None:
    before, open_fds = arig_threads(), fds()
    with installed(kind) as opener:
        dev = _open_then_close_the_loop(opener)
        with pytest.raises(arig.WrongLoopError, match="closed now"):
            asyncio.run(dev.run(None))  # work still needs its own loop
        asyncio.run(dev.stop())
        assert ended(arig_threads() - before)
        assert dev.stopped and "stopped" in repr(dev)
        asyncio.run(dev.stop())  # idempotent, as a stop is
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # released: collecting it warns of nothing
            del dev
            gc.collect()
    assert fds() == open_fds


def test_a_stop_from_another_loop_is_bounded_by_the_stop_timeout(caplog: pytest.LogCaptureFixture) -> None:
    before = arig_threads()
    gate, started = threading.Event(), threading.Event()

    def blocked(queue: Any, arg: Any, v: int) -> None:
        started.set()
        gate.wait(10.0)

    dev = _open_then_close_the_loop(arig.host.cpu(), blocked, stop_timeout=0.3)
    try:
        assert started.wait(5.0)  # the fill runs: the submit thread is inside it
        t0 = time.monotonic()
        asyncio.run(dev.stop())
        assert time.monotonic() - t0 < 3.0
        assert any("its loop is closed" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    finally:
        gate.set()
    assert ended(arig_threads() - before)  # the fill returned: what it held is released


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "arig" and "stop waits" in r.getMessage()]


@pytest.mark.asyncio
async def test_a_stop_that_waits_for_work_says_once_what_it_waits_for(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="arig")
    dev = await arig.open(arig.host.cpu(), stop_timeout=10.0)
    await dev.submit(lambda q, a, v: q.enqueue(time.sleep, 1.6))
    await dev.submit(None)
    await dev.stop()  # about 1.6 s: said at 1 s, once
    assert dev.lost is None
    assert _said(caplog) == ["device HOST: stop waits for 2 value(s) to be reached, the lowest 1 (last 2); past the stop timeout (10.0 s) it loses the device"]


@pytest.mark.asyncio
async def test_a_stop_that_waits_less_than_a_second_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="arig")
    dev = await arig.open(arig.host.cpu(), stop_timeout=10.0)
    await dev.submit(lambda q, a, v: q.enqueue(time.sleep, 0.3))
    await dev.stop()
    assert [r for r in caplog.records if r.name == "arig"] == []


_CTRL_C = """
import asyncio, signal, sys, time, arig, arig.host
signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever the parent left: Ctrl-C as in a terminal
async def main():
    async with await arig.open(arig.host.cpu(), stop_timeout=10.0) as dev:
        v = await dev.submit(lambda q, a, v: q.enqueue(time.sleep, 2.0))
        print("ready", flush=True)
        await dev.wait(v)
        await asyncio.sleep(30)
asyncio.run(main())
"""


def test_ctrl_c_with_work_pending_says_what_the_stop_waits_for() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    child = subprocess.Popen([sys.executable, "-c", _CTRL_C], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        t0 = time.monotonic()
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
    finally:
        child.kill()
    assert child.returncode != 0 and "KeyboardInterrupt" in err  # the interrupt still ends the program ...
    assert 1.0 < time.monotonic() - t0 < 9.0  # ... once the pending work is done (about 2 s), not at the stop timeout
    said = [line for line in err.splitlines() if "stop waits for" in line]
    assert said == ["device HOST: stop waits for 1 value(s) to be reached, the lowest 1 (last 1); past the stop timeout (10.0 s) it loses the device"], err


def test_in_debug_mode_the_report_says_where_the_device_was_opened() -> None:
    before = arig_threads()
    contexts: list[dict[str, Any]] = []

    async def forgets_to_stop() -> None:
        dev = await arig.open(arig.host.cpu())
        await dev.run(None)

    async def main() -> None:
        with pytest.warns(ResourceWarning, match="never stopped"):
            await forgets_to_stop()
            gc.collect()

    with asyncio.Runner(debug=True) as runner:
        runner.get_loop().set_exception_handler(lambda _loop, ctx: contexts.append(ctx))
        runner.run(main())
    (context,) = contexts
    assert context["message"] == NEVER_STOPPED
    last = context["source_traceback"][-1]
    assert last.name == "forgets_to_stop" and "arig.open" in (last.line or "")
    assert ended(arig_threads() - before)
