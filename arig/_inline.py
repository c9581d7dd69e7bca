"""Inline fills: ``dev.submit(fill, arg, inline=True)`` runs the fill inside ``submit``.

A Python fill normally runs on the device's submit thread, at its place in the
device's order: the loop hands it over, the submit thread takes the GIL, runs
it, and hands the device its work.  For a fill that only chooses arig work (a
``Launch`` called from Python, the usual first fill) those hand-offs cost more
than the fill.  An inline fill is the opt-in contract that avoids them: it
runs at once, on the loop's thread, with a :class:`Recorder` as its ``queue``;
it may hand the recorder one piece of arig work (a ``Launch``,
graph, C fill or ``None``), which the device then takes as if it had been
submitted itself, and must do nothing else that touches the device's driver.
The loop thread still never calls the driver: the work is launched by the
device's own thread, as a submitted ``Launch`` is.

Why at most one piece of work: a value is one entry of the device's order, and
work of one value is signalled as one; several kernels go in a graph.

The fill runs after any wait for room and before the value is assigned, with
the value it will get (``v``).  A fill that raises, returns an error code or
records what cannot be submitted leaves no value behind: the caller gets the
error, and the device is not lost (nothing reached the driver).

Threads: everything here runs on the loop's thread, inside ``submit``.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ._backend import fill_result
from ._errors import ArigError, ArigTypeError, ArigValueError, FillError
from ._launchspec import LaunchSpec

__all__ = ["Recorder", "check_inline", "run_inline"]

_ONE_PIECE = "an inline fill hands arig one piece of work: put several kernels in a graph, or submit each"


class Recorder:
    """The ``queue`` an inline fill receives: ``put(work, arg=None)`` hands the device the fill's
    one piece of work.  A CUDA ``Launch`` called with it (``launch(queue)``) puts itself.
    ``queue`` is the device's queue the work will run on (``dev.queues[k]``)."""

    __slots__ = ("queue", "work", "arg", "taken")

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        self.work: Any = None
        self.arg: Any = None
        self.taken = False

    def put(self, work: Any, arg: Any = None) -> int:
        """Record ``work`` (with its ``arg``) as the fill's work; 0, for a fill that returns it."""
        if self.taken:
            raise ArigValueError(_ONE_PIECE)
        if callable(work) and not _is_work(work):
            raise ArigTypeError(
                f"an inline fill cannot hand over a Python callable ({type(work).__name__}): it hands arig work "
                "(a Launch, a graph or a C fill); submit a Python fill without inline=True"
            )
        self.work, self.arg, self.taken = work, arg, True
        return 0

    def put_launch(self, launch: LaunchSpec) -> int:
        """``put`` of a launch, which is arig work by its type (``Launch.__call__`` with a recorder)."""
        if self.taken:
            raise ArigValueError(_ONE_PIECE)
        self.work, self.taken = launch, True
        return 0

    def __repr__(self) -> str:
        return f"<arig inline recorder for {self.queue!r}>"


def _is_work(x: Any) -> bool:
    """Is ``x`` arig work that is not a Python callable (a launch, a C fill)?"""
    return isinstance(x, (LaunchSpec, ctypes._CFuncPtr))  # type: ignore[attr-defined]


def check_inline(fill: Any) -> None:
    """Refuse, before anything runs, an inline ``fill`` that is no Python fill."""
    if not callable(fill) or _is_work(fill):
        raise ArigTypeError(f"inline=True takes a Python fill, fill(queue, arg, v), not a {type(fill).__name__}: submit that work without inline")


def _refused(code: int, v: int) -> BaseException:
    return FillError(code, f"an inline fill of value {v}; nothing was submitted")


def run_inline(fill: Any, arg: Any, queue: Any, v: int) -> Recorder:
    """Run the inline ``fill(recorder, arg, v)`` now; the recorder holds its work.

    Raises what the fill raised (with a note saying what its queue was), a ``FillError`` for an
    error code, or ``ArigTypeError`` for a result that is no fill's."""
    rec = Recorder(queue)
    try:
        r = fill(rec, arg, v)
    except ArigError:
        raise
    except Exception as exc:
        exc.add_note(
            f"(in an inline fill: its queue was {rec!r}, which records one piece of arig work through "
            "put(work) or launch(queue); it cannot be used as a driver's stream)"
        )
        raise
    fill_result(r, v, _refused)
    return rec
