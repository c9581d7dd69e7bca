"""What the process keeps of every device it made: a weak registry, and the warning for one never stopped.

``track`` is called once per device, at open, on the event loop's thread;
the registry holds devices weakly, so it never keeps one alive.  A device
collected without ``stop`` ends its submit thread from its finalizer
(``_abandon``), which the collector may run on any thread: it calls no
driver and takes no lock that can wait on one.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any

from ._submit import SubmitThread

#: Every device made, while referenced (``arig.device.open_devices``).
_devices: weakref.WeakSet[Any] = weakref.WeakSet()


def track(dev: Any, st: SubmitThread, name: str) -> weakref.finalize[Any, Any]:
    """File ``dev`` and return its finalizer, which abandons ``st`` if ``dev`` dies unstopped."""
    _devices.add(dev)
    return weakref.finalize(dev, _abandon, st, name)


def devices() -> list[Any]:
    """The devices made and still referenced, in no order."""
    return list(_devices)


def _abandon(st: SubmitThread, name: str) -> None:
    st.abandon()  # first: under -W error the warning raises, and the threads must end anyway
    warnings.warn(f"arig: device {name} was never stopped; use `async with` or `await dev.stop()`", ResourceWarning, stacklevel=2)
