"""arig's log: the logger named ``arig``.

arig configures no handler: the application decides where records go.
Without any logging set up, Python's last-resort handler still prints
WARNING and above to stderr, so a device lost while nobody awaited it is
never silent.

What is logged, once per event:

* a device lost: ERROR when no task was waiting for a value (nothing else
  tells anyone), WARNING when waiting tasks were told through ``DeviceLost``;
* a hang (the watchdog gave up on pending work): ERROR;
* a stop that timed out or left a thread behind: WARNING;
* a stop that has waited a second for submitted work: WARNING, once, with how
  many values it waits for (a Ctrl-C that leaves ``async with`` waits there);
* a fallback (a slower path chosen because a better one is missing): INFO,
  once per process per message.
"""

from __future__ import annotations

import logging

from ._errors import describe

__all__ = ["logger", "lost", "stop_slow", "stop_waits", "close_failed", "fallback"]

logger = logging.getLogger("arig")

_said: set[str] = set()


def lost(device: str, cause: BaseException, waiting: int, level: int | None = None) -> None:
    """Log the loss of ``device`` (``waiting``: tasks told by DeviceLost).  Never raises."""
    if level is None:
        level = logging.WARNING if waiting else logging.ERROR
    told = f"{waiting} waiting task(s) raise DeviceLost" if waiting else "no task was waiting for a value"
    exc_info = (type(cause), cause, cause.__traceback__) if cause.__traceback__ is not None else None
    try:
        logger.log(level, "device %s lost: %s (%s)", device, describe(cause), told, exc_info=exc_info)
    except Exception:  # noqa: BLE001 - a broken handler must not stop the loss from reaching the waiters
        pass


def stop_slow(device: str, message: str) -> None:
    """WARNING: a stop that could not end as asked.  Never raises."""
    try:
        logger.warning("device %s: %s", device, message)
    except Exception:  # noqa: BLE001 - see lost()
        pass


def stop_waits(device: str, lowest: int, last: int, timeout: float) -> None:
    """WARNING: a stop has waited a while for values ``lowest..last``.  Never raises."""
    stop_slow(device, f"stop waits for {last - lowest + 1} value(s) to be reached, the lowest {lowest} (last {last}); past the stop timeout ({timeout} s) it loses the device")


def close_failed(device: str, exc: BaseException) -> None:
    """ERROR: releasing a device's driver resources raised (a bug of arig: it must not; the
    stop still ends, and what the release did not reach is kept).  Never raises."""
    try:
        logger.error("device %s: releasing its resources failed: %s", device, describe(exc), exc_info=(type(exc), exc, exc.__traceback__))
    except Exception:  # noqa: BLE001 - see lost()
        pass


def fallback(message: str) -> None:
    """INFO, once per process per ``message``: arig chose a slower path, and why.

    Once: a server that opens devices again and again makes the same choice
    each time, and one record says it.
    """
    if message in _said:
        return
    _said.add(message)
    try:
        logger.info("%s", message)
    except Exception:  # noqa: BLE001 - see lost()
        pass
