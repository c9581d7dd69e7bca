"""Under trio, a reader whose fd is itself an epoll set is called each time the port's hub wakes,
whether or not the hub's own poll finds that set ready; a reader of any other fd is called only
when its fd is readable.

Why: a file inside such a set may clear its state when polled (the NVIDIA driver's event fd clears
its pending flag on every poll).  trio's own poll of the hub's fd polls the nested set, and with it
that file, before the hub polls its set, so the hub's poll can find it no longer ready.  Skipping
its reader then lost the wake: an NV device's completion was seen only by its 20 ms backstop (1 %
of 10 ms waits under trio on an H100).  The NV device's reader reads the device's words itself, as
it does under asyncio, so a call with nothing new costs a look and loses nothing.
"""

from __future__ import annotations

import os
import select
import threading
import time
from typing import Any

import trio

from arig._running import running_loop


def _post_later(port: Any, fn: Any, value: Any) -> None:
    """Post from another thread once the run waits on the hub's fd (so the post wakes it through the fd)."""

    def later() -> None:
        time.sleep(0.02)
        port.post(fn, value)

    threading.Thread(target=later).start()


def test_a_nested_epoll_sets_reader_runs_on_a_wake_its_set_did_not_cause() -> None:
    inner = select.epoll()
    quiet = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)  # never written: never readable
    calls = {"nested": 0, "plain": 0}

    async def main() -> None:
        port: Any = running_loop()
        port.add_reader(inner.fileno(), lambda: calls.__setitem__("nested", calls["nested"] + 1))
        port.add_reader(quiet, lambda: calls.__setitem__("plain", calls["plain"] + 1))
        try:
            for i in range(3):
                fut = port.create_future()
                # A wake of the hub that neither fd caused: a post from another thread.
                _post_later(port, fut.set_result, i)
                with trio.fail_after(5):
                    assert await fut == i
                assert calls["nested"] >= i + 1, f"wake {i}: the nested set's reader was not called: {calls}"
            assert calls["plain"] == 0, f"a reader of an fd never readable was called: {calls}"
            port.remove_reader(inner.fileno())
            before = calls["nested"]
            fut = port.create_future()
            _post_later(port, fut.set_result, None)
            with trio.fail_after(5):
                await fut
            assert calls["nested"] == before, "a removed reader was called"
        finally:
            port.remove_reader(inner.fileno())
            port.remove_reader(quiet)

    try:
        trio.run(main)
    finally:
        inner.close()
        os.close(quiet)
