"""What the process keeps of every device it made: a weak registry, and the report of one never stopped.

``track`` is called once per device, at open, on the event loop's thread;
the registry holds devices weakly, so it never keeps one alive.  A device
collected without ``stop`` ends its submit thread from its finalizer
(``_abandon``), which the collector may run on any thread: it calls no
driver and takes no lock that can wait on one.  It reports the device
twice over: to the loop's exception handler (logged by default, so a
forgotten stop is never silent) and as a ``ResourceWarning`` (for tools
and test runs that turn warnings on or into errors).

``release`` ends a device whose loop is closed: nothing runs on that loop,
so what the backend registered with it (an eventfd the loop read) is
dropped by a short-lived thread of its own, once the submit thread has
closed the backend.  Any thread.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Callable
from typing import Any

from ._submit import SubmitThread

#: Every device made, while referenced (``arig.device.open_devices``).
_devices: weakref.WeakSet[Any] = weakref.WeakSet()


def track(dev: Any, st: SubmitThread, name: str, source: Any = None) -> weakref.finalize[Any, Any]:
    """File ``dev`` and return its finalizer, which abandons ``st`` if ``dev`` dies unstopped
    (``source``: where it was opened, a ``traceback.StackSummary``, or None)."""
    _devices.add(dev)
    return weakref.finalize(dev, _abandon, st, name, source)


def devices() -> list[Any]:
    """The devices made and still referenced, in no order."""
    return list(_devices)


def release(st: SubmitThread, then: Callable[[], None] | None = None) -> None:
    """End ``st`` (a device whose loop is closed): skip its work, close its backend, then, on a
    thread of its own, detach the backend from the closed loop and call ``then()``.  Any thread."""
    st.abandon()
    try:
        threading.Thread(target=_detach_when_ended, args=(st, then), name=f"arig-release-{st._name}", daemon=True).start()
    except RuntimeError:  # the interpreter is shutting down: it takes the descriptors with it
        pass


def _detach_when_ended(st: SubmitThread, then: Callable[[], None] | None) -> None:
    # The submit thread closes the backend and then posts its detach to the loop; on a closed
    # loop that post is dropped, so the detach runs here, once nothing can use the backend.
    st._thread.join()
    try:
        if st.backend is not None:
            st.backend.detach()
        if st.timeline is not None:
            st.timeline.release_kept()
    except Exception:  # noqa: BLE001 - a thread of arig's own: nothing could catch it here
        pass
    if then is not None:
        then()


def _abandon(st: SubmitThread, name: str, source: Any) -> None:
    message = f"arig: device {name} was never stopped; use `async with` or `await dev.stop()`"
    port = st._port
    if port.closed:
        release(st)
    else:
        st.abandon()  # the thread's close posts the backend's detach to the loop
    try:
        context: dict[str, Any] = {"message": message}
        if source is not None:
            context["source_traceback"] = source  # asyncio's handler prints it: "Object created at"
        port.report(context)
    except Exception:  # noqa: BLE001 - a handler's failure must not keep the report's warning from being said
        pass
    # Last: under -W error the warning raises, and everything above must have happened.
    warnings.warn(message, ResourceWarning, stacklevel=2)
