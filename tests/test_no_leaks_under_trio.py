"""No path leaks under trio either: after a stop, a stop timeout, a blocked fill, a loss, a hang
(``test_no_leaks``'s paths, run by ``trio.run``), or a device never stopped and collected, no
thread, file descriptor, reader task of the trio port or kept object is left behind; on every
kind of device the port's readers of the device's fds are gone once it stopped."""

from __future__ import annotations

import gc
import logging
import weakref
from typing import Any

import pytest
import trio
from _kinds import KINDS, installed
from _lifetimes import Token, arig_threads, ended, fds, noop
from test_no_leaks import PATHS, never_stopped, through

import arig
import arig._engine
import arig.host
from arig._running import running_loop


def _port_tasks(port: Any) -> tuple[int, int]:
    """The trio port's fd readers and its own tasks (readers, timers, spawned ones)."""
    return port._hub.watching(), len(port._tasks)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_no_path_leaks_a_thread_fd_reader_or_kept_object_under_trio(path: str, engine: str) -> None:
    before, open_fds = arig_threads(), fds()
    refs: list[weakref.ref[Token]] = []

    async def main() -> None:
        port = running_loop()
        tasks_before = _port_tasks(port)
        await through(path, refs)
        await trio.sleep(0.01)  # a spawned task (the stop) ends at its next turn
        assert _port_tasks(port) == tasks_before

    trio.run(main)
    assert ended(arig_threads() - before)
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)
    assert fds() == open_fds


@pytest.mark.parametrize("kind", KINDS)
def test_a_stopped_device_leaves_no_reader_in_the_trio_port(kind: str, engine: str) -> None:
    before, open_fds = arig_threads(), fds()
    with installed(kind) as opener:

        async def main() -> None:
            port = running_loop()
            readers, tasks = _port_tasks(port)
            async with await arig.open(opener) as dev:
                await dev.run(noop)
                if kind != "host" and engine == arig._engine.NATIVE:  # the pure engine's watcher threads report without one
                    assert _port_tasks(port)[0] > readers, "the native core's eventfd is read by a reader of the port"
            await trio.sleep(0.01)
            assert _port_tasks(port) == (readers, tasks), "every reader the device added ended with its stop"

        trio.run(main)
    assert ended(arig_threads() - before)
    assert fds() == open_fds


def test_a_device_never_stopped_and_collected_under_trio_leaks_nothing(caplog: pytest.LogCaptureFixture) -> None:
    before, open_fds = arig_threads(), fds()
    refs: list[weakref.ref[Token]] = []
    with caplog.at_level(logging.ERROR, logger="arig"):
        trio.run(never_stopped, refs)  # reported to arig's logger: a trio run has no exception handler
    assert [r.getMessage() for r in caplog.records if "never stopped" in r.getMessage()] == ["arig: device HOST was never stopped; use `async with` or `await dev.stop()`"]
    assert ended(arig_threads() - before)
    gc.collect()
    assert refs[0]() is None
    assert fds() == open_fds
