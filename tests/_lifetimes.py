"""What the host-device tests measure to see that a device left nothing behind: its threads
(named ``arig-...``), this process's file descriptors, a loop's readers, and a loop that
reports whatever it was left to handle."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any


class Token:
    """An object to keep (or pass as an arg) and watch with a weakref."""


class Unprintable(Exception):
    """A failure whose ``str()`` itself raises."""

    def __str__(self) -> str:
        raise RuntimeError("this exception cannot be printed")


def noop(queue: Any, arg: Any, v: int) -> None:
    return None


def arig_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("arig-")}


def ended(threads: Iterable[threading.Thread], timeout: float = 5.0) -> bool:
    """Whether every one of ``threads`` ends within ``timeout`` seconds in all."""
    threads = list(threads)
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return not any(t.is_alive() for t in threads)


def fds() -> set[str]:
    return set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else set()


def readers(loop: asyncio.AbstractEventLoop) -> int:
    selector = getattr(loop, "_selector", None)
    return len(selector.get_map()) if selector is not None else 0


def run(main: Callable[[], Coroutine[Any, Any, Any]], reported: list[dict[str, Any]] | None = None) -> Any:
    """Run ``main`` in a fresh loop; fail on anything left unhandled in that loop, unless
    ``reported`` is given: then what the loop's exception handler got is put there."""
    errors: list[dict[str, Any]] = [] if reported is None else reported
    with asyncio.Runner() as runner:
        runner.get_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx))
        result = runner.run(main())
    if reported is None:
        assert errors == [], errors
    return result
