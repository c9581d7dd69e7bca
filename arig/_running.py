"""Which event loop runs the calling task: asyncio's, or a trio run (through its port).

A module of its own so that the asyncio port never imports the trio one:
trio is imported only where a trio run is the one running (it is in
``sys.modules`` then), so an asyncio program never imports it.

Threads: any thread (each function says what it finds on the calling one).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

__all__ = ["running_loop", "current_task"]


def running_loop() -> Any:
    """What runs the calling task: the running asyncio loop, or the running trio run's port.
    ``RuntimeError`` where neither runs (asyncio's own words)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        if "trio" in sys.modules:  # trio runs only where it was imported
            from ._trio_port import current

            port = current()
            if port is not None:
                return port
        raise


def current_task() -> Any:
    """The calling task (asyncio's or trio's), or None outside one."""
    try:
        return asyncio.current_task()
    except RuntimeError:
        if "trio" in sys.modules:
            import trio

            try:
                return trio.lowlevel.current_task()
            except RuntimeError:
                pass
        return None
