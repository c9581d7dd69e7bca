"""Blocking calls in a worker thread, under whichever library runs the caller (asyncio, trio).

Why not anyio's ``to_thread`` alone: under trio it needs the trio release
that anyio was built against (``abandon_on_cancel``), where trio's own
``to_thread.run_sync`` keeps the same meaning in every release: the call is
never abandoned (a cancelled caller waits for it to end).  Under asyncio
this is anyio's, as before.

Threads: the loop's (``run_sync`` awaits; the work runs on a worker thread).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

__all__ = ["Serial", "run_sync"]


class Serial:
    """One call at a time (a capacity limiter of one), under asyncio and trio alike."""

    __slots__ = ("_anyio", "_trio")

    def __init__(self) -> None:
        self._anyio: anyio.CapacityLimiter | None = None
        self._trio: Any = None

    def of_anyio(self) -> anyio.CapacityLimiter:
        if self._anyio is None:
            self._anyio = anyio.CapacityLimiter(1)
        return self._anyio

    def of_trio(self) -> Any:
        if self._trio is None:
            import trio  # noqa: PLC0415 - only under a trio run

            self._trio = trio.CapacityLimiter(1)
        return self._trio


async def run_sync(fn: Callable[..., Any], *args: Any, serial: Serial | None = None) -> Any:
    """``fn(*args)`` on a worker thread, never abandoned; ``serial``: one such call at a time."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        import trio  # noqa: PLC0415 - no asyncio loop runs: a trio run does (else trio raises)

        return await trio.to_thread.run_sync(fn, *args, limiter=serial.of_trio() if serial is not None else None)
    return await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=False, limiter=serial.of_anyio() if serial is not None else None)
