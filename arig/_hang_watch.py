"""The hang watchdog: a device whose pending work makes no progress for ``hang_ms`` is lost.

Event-loop thread only: the watch is a timer of the device's loop (its own call_later, or the trio port's), armed by
the submission that makes an idle device busy, and it re-arms itself while
work is pending.  The timer holds the watch weakly, and the watch holds the
timeline, not the device: a device dropped without ``stop`` is not kept
alive by its watchdog.
"""

from __future__ import annotations

import logging
import time
import weakref

from typing import Any

from ._errors import DeviceHang
from ._timeline import Timeline


class HangWatch:
    """Fails ``tl`` with ``DeviceHang`` once ``hang_s`` seconds pass with work pending and no progress."""

    __slots__ = ("_later", "_tl", "hang_s", "_period", "_timer", "__weakref__")

    def __init__(self, loop: Any, tl: Timeline, hang_s: float) -> None:
        # An asyncio loop's own call_later (no port in between), or a trio run's port's: one signature.
        self._later = loop.call_later
        self._tl = tl
        self.hang_s = hang_s
        self._period = min(hang_s / 4, 1.0)
        self._timer: Any = None

    def arm(self) -> None:
        """Start watching, unless already watching (the device went from idle to busy)."""
        if self._timer is None:
            self._timer = self._later(self._period, _check, weakref.ref(self))

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _check(ref: weakref.ref[HangWatch]) -> None:
    watch = ref()
    if watch is None:
        return
    watch._timer = None
    tl = watch._tl
    if tl.lost is not None or tl.assigned == tl.reached:
        return  # nothing pending: the next submit arms it again
    idle = time.monotonic() - max(tl.last_progress, tl.progress_time)
    if idle >= watch.hang_s:
        hang = DeviceHang(f"no progress for {idle * 1000:.0f} ms (hang_ms={watch.hang_s * 1000:.0f}) with values {tl.reached + 1}..{tl.assigned} pending")
        tl.fail(hang, logging.ERROR)
        return
    watch._timer = watch._later(watch._period, _check, ref)
