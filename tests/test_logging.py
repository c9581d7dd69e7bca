"""arig's log (the logger named ``arig``): what is logged, once, at which level.

A loss nobody awaited must not be silent, so it is an ERROR; a loss the
waiting tasks were told of is a WARNING; a hang is an ERROR; a stop that
gave up is a WARNING; a fallback path is INFO, once per process.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import arig
import arig.host
from arig import _log


class Boom(Exception):
    pass


def _boom(queue: Any, arg: Any, v: int) -> None:
    raise Boom(f"fill {v} failed")


def _arig_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("arig")]


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG, logger="arig")
    yield caplog


def test_arig_configures_no_handler() -> None:
    code = "import logging, arig, arig.host, arig.cuda, arig.nvrm; l = logging.getLogger('arig'); print(l.handlers, l.level, l.propagate)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["[]", "0", "True"]


@pytest.mark.asyncio
async def test_a_loss_nobody_awaited_is_one_error_with_its_traceback(logs: pytest.LogCaptureFixture) -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        await dev.submit(_boom)
        for _ in range(200):
            if dev.lost is not None:
                break
            await asyncio.sleep(0.01)
    records = _arig_records(logs)
    assert len(records) == 1
    (record,) = records
    assert record.levelno == logging.ERROR
    assert record.name == "arig"
    message = record.getMessage()
    assert "HOST" in message and "Boom: fill 1 failed" in message and "no task was waiting" in message
    assert record.exc_info is not None and record.exc_info[1] is dev.lost


@pytest.mark.asyncio
async def test_a_loss_told_to_waiting_tasks_is_one_warning(logs: pytest.LogCaptureFixture) -> None:
    gate = threading.Event()
    dev = await arig.open(arig.host.cpu(queues=2))
    try:
        v1 = await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0), queue=1)
        waiters = [asyncio.create_task(dev.wait(v1)) for _ in range(2)]
        await asyncio.sleep(0.02)
        await dev.submit(_boom)
        for w in waiters:
            with pytest.raises(arig.DeviceLost):
                await asyncio.wait_for(w, 5.0)
    finally:
        gate.set()
        await dev.stop()
    (record,) = _arig_records(logs)
    assert record.levelno == logging.WARNING
    assert "2 waiting task(s)" in record.getMessage()


@pytest.mark.asyncio
async def test_a_hang_is_one_error(logs: pytest.LogCaptureFixture) -> None:
    gate = threading.Event()
    dev = await arig.open(arig.host.cpu(hang_ms=100))
    try:
        v = await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0))
        with pytest.raises(arig.DeviceLost):
            await asyncio.wait_for(dev.wait(v), 5.0)
    finally:
        gate.set()
        await dev.stop()
    (record,) = _arig_records(logs)
    assert record.levelno == logging.ERROR  # although a task waited: a hang is always an error
    assert "DeviceHang" in record.getMessage() and "hang_ms=100" in record.getMessage()


@pytest.mark.asyncio
async def test_a_stop_timeout_is_one_warning(logs: pytest.LogCaptureFixture) -> None:
    gate = threading.Event()
    dev = await arig.open(arig.host.cpu(), stop_timeout=0.2)
    try:
        await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0))
        await dev.stop()
    finally:
        gate.set()
    (record,) = _arig_records(logs)  # the submit thread was free: it ended, nothing more to say
    assert record.levelno == logging.WARNING
    assert "did not finish within 0.2 s" in record.getMessage()


@pytest.mark.asyncio
async def test_a_healthy_device_logs_nothing(logs: pytest.LogCaptureFixture) -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        for _ in range(10):
            await dev.run(lambda q, a, v: q.enqueue(time.sleep, 0))
    assert _arig_records(logs) == []


@pytest.mark.asyncio
async def test_a_second_failure_logs_nothing_more(logs: pytest.LogCaptureFixture) -> None:
    async with await arig.open(arig.host.cpu(queues=2)) as dev:
        await dev.submit(lambda q, a, v: q.enqueue(time.sleep, 0.05), queue=1)
        await dev.submit(_boom, queue=0)
        await dev.submit(lambda q, a, v: q.enqueue(_raise), queue=1)
        await asyncio.sleep(0.2)
    assert len(_arig_records(logs)) == 1


def _raise() -> None:
    raise Boom("second")


def test_a_fallback_is_info_once_per_message(logs: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_log, "_said", set())
    _log.fallback("CUDA: the pure-Python path (no native core)")
    _log.fallback("CUDA: the pure-Python path (no native core)")
    _log.fallback("CUDA:1: no stream memory operations")
    records = _arig_records(logs)
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.INFO, "CUDA: the pure-Python path (no native core)"),
        (logging.INFO, "CUDA:1: no stream memory operations"),
    ]


def test_a_broken_handler_does_not_stop_a_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            raise RuntimeError("handler broke")

        def handleError(self, record: logging.LogRecord) -> None:
            raise RuntimeError("handleError broke too")

    handler = Broken()
    logger = logging.getLogger("arig")
    logger.addHandler(handler)
    try:

        async def main() -> None:
            gate = threading.Event()
            dev = await arig.open(arig.host.cpu(queues=2))
            v1 = await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0), queue=1)
            waiter = asyncio.create_task(dev.wait(v1))
            await asyncio.sleep(0.02)
            await dev.submit(_boom)
            with pytest.raises(arig.DeviceLost):
                await asyncio.wait_for(waiter, 5.0)
            gate.set()
            await dev.stop()

        asyncio.run(main())
    finally:
        logger.removeHandler(handler)


def test_without_logging_set_up_a_lost_device_still_says_so_on_stderr() -> None:
    code = """
import asyncio, arig
async def main():
    async with await arig.open(arig.host.cpu()) as dev:
        await dev.submit(lambda q, a, v: 5)
        await asyncio.sleep(0.2)
asyncio.run(main())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "device HOST lost: FillError: fill returned 5" in out.stderr
