"""Names the GPU tests after which an arig thread outlives the test.

A device's submit thread ends with its stop, or soon after its collection; one still alive
after its test (given a moment, and a collection) belongs to a device the test left behind, or
is stuck in a driver call (a stream that never drains).  Either keeps the process from
exiting cleanly, and at exit libcuda's own teardown may then wait for that stream for ever.
The terminal summary lists each such test with the threads it left, so that a GPU run that
passes but does not exit says which test to look at.  A report, not a failure: the test's own
assertions say whether it did what it should.

A run that does not exit within ``EXIT_DUMP_S`` of its session's end prints every thread's
Python stack (``faulthandler``): where each thread stands, the one that holds the exit named.
"""

from __future__ import annotations

import faulthandler
import gc
import sys
import threading
import time
from collections.abc import Iterator

import pytest

_left: list[tuple[str, list[str]]] = []
SETTLE_S = 2.0  # a collected device's submit thread closes its backend: give it this long
EXIT_DUMP_S = 10.0  # a session over this long ago whose process still runs hangs at exit


def _arig_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("arig-")}


@pytest.fixture(autouse=True)
def _arig_threads_end_with_the_test(request: pytest.FixtureRequest) -> Iterator[None]:
    before = _arig_threads()
    yield
    new = _arig_threads() - before
    if not new:
        return
    gc.collect()
    deadline = time.monotonic() + SETTLE_S
    while new and time.monotonic() < deadline:
        time.sleep(0.02)
        new = {t for t in new if t.is_alive()}
    if new:
        _left.append((request.node.nodeid, sorted(t.name for t in new)))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _left:
        terminalreporter.section("arig threads still alive after their test")
        for nodeid, names in _left:
            terminalreporter.write_line(f"{nodeid}: {', '.join(names)}")


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    faulthandler.dump_traceback_later(EXIT_DUMP_S, exit=False, file=sys.__stderr__)
