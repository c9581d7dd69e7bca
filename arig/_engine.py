"""Which completion engine a device gets: decided here, and nowhere else.

Two engines run a device's submissions and report its completions: the
native core (``arig._native``, a C thread) and the pure-Python one (the
device's submit thread and waiter threads).  A backend asks :func:`choose`
once, when it opens, and from then on holds one engine object that knows
how to do each job; nothing else asks which engine runs.  Deciding in one
place keeps the rule ("``ARIG_PURE=1``, or a core that did not load, means
pure") from drifting between backends, and gives ``arig info`` one answer
to print.

CUDA's stream memory operations are decided next to it (:func:`memops`):
they are the other half of which completion path a CUDA device takes.

Tests choose an engine explicitly with :func:`using` instead of changing
``arig._env``: the choice then holds for every device opened inside the
``with`` block, on whatever thread opens it (devices open on their submit
thread, so a context variable would not reach them).

Threads: any.  :func:`choose` may load the native core (a ``dlopen``, once
per process): call it where a device opens, not on the event loop's hot path.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from . import _env, _log, _native

__all__ = ["Engine", "choose", "library", "status", "memops", "unavailable", "using", "no_fill", "NATIVE", "PURE"]

NATIVE = "native"
PURE = "pure"


def no_fill(queue: Any, arg: Any, v: int) -> None:
    """The fill of ``submit(None)`` on an engine that runs fills in Python: no work, so the value
    marks the queue's earlier work.  One function for every backend: a device's items may be
    told apart by identity (``item[0] is no_fill``)."""


@dataclass(frozen=True)
class Engine:
    """The engine a device gets: ``name`` (``"native"`` or ``"pure"``), the native core's bindings
    where it is native, and ``why``: the line ``arig info`` and a device's facts print."""

    name: str
    why: str
    libs: tuple[ctypes.PyDLL, ctypes.CDLL] | None = None

    @property
    def native(self) -> bool:
        return self.libs is not None


_lock = threading.Lock()
_forced: str | None = None  # set only by using(): the engine every device opened meanwhile gets
_forced_memops: bool | None = None  # set only by using(): stream memory operations allowed or not


def _native_engine() -> Engine | str:
    """The native engine, or why there is none (the environment asked for pure, or no core loaded)."""
    if _env.PURE:
        _log.fallback("the pure-Python submit and completion path (ARIG_PURE=1)")
        return "pure Python (ARIG_PURE=1)"
    libs = _native.library()
    if libs is None:
        return _native.status()
    return Engine(NATIVE, _native.status(), libs)


def choose() -> Engine:
    """The engine for a device opening now: an engine forced by :func:`using`, else native where
    ``ARIG_PURE`` is unset and the native core loaded, else pure (with the reason)."""
    if _forced == PURE:
        return Engine(PURE, "pure Python (chosen by arig._engine.using)")
    found = _native_engine()
    if isinstance(found, Engine):
        return found
    if _forced == NATIVE:  # using() refused this already; the core cannot have gone since
        raise RuntimeError(f"arig: the native engine was asked for but is not here: {found}")
    return Engine(PURE, found)


def library() -> tuple[ctypes.PyDLL, ctypes.CDLL] | None:
    """The native core's bindings where devices get the native engine now, else None.

    A device that needs the bindings later (to make a queue, a record) should keep those of the
    :class:`Engine` it got at open (``choose().libs``): asking again may answer otherwise inside
    or outside a :func:`using` block."""
    return choose().libs


def status() -> str:
    """Which engine devices get now, and why (``arig info``)."""
    return choose().why


def unavailable(name: str) -> str | None:
    """Why engine ``name`` cannot be had here (None: it can)."""
    if name == PURE:
        return None
    if name != NATIVE:
        raise ValueError(f"arig: no engine named {name!r} (there are {NATIVE!r} and {PURE!r})")
    found = _native_engine()
    return None if isinstance(found, Engine) else found


def memops() -> str | None:
    """Why a CUDA device must not use stream memory operations (None: it may, where its driver has them)."""
    if _forced_memops is not None:
        return None if _forced_memops else "memops=False chosen by arig._engine.using"
    return "ARIG_NO_MEMOPS=1" if _env.NO_MEMOPS else None


def gpu_stamps() -> bool:
    """Whether a CUDA device on the native engine signals long work with the GPU's time (the stamp
    kernel) where its driver builds it; ``ARIG_NO_GPU_STAMPS=1`` says no (to compare the two)."""
    return not _env.NO_GPU_STAMPS


@contextmanager
def using(name: str | None = None, *, stream_memops: bool | None = None) -> Iterator[None]:
    """Within the block, devices that open get engine ``name`` (None: as :func:`choose` decides)
    and, on CUDA, stream memory operations where the driver has them or never
    (``stream_memops`` True or False; None: as ``ARIG_NO_MEMOPS`` says).

    Raises ``RuntimeError`` for an engine that cannot be had here (:func:`unavailable`).
    Blocks nest; each restores what it found."""
    global _forced, _forced_memops
    if name is not None:
        why = unavailable(name)
        if why is not None:
            raise RuntimeError(f"arig: the {name} engine is not here: {why}")
    with _lock:
        before = _forced, _forced_memops
        if name is not None:
            _forced = name
        if stream_memops is not None:
            _forced_memops = stream_memops
    try:
        yield
    finally:
        with _lock:
            _forced, _forced_memops = before
