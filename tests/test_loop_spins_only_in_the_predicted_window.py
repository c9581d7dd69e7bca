"""The loop side of the native engine spins only in the window where a completion is predicted.

When the core wakes the loop ahead of long work's predicted end and nothing is there to deliver,
``NativeCompletion._spin_window`` spins on the words (the core's ``loop_spin``, the GIL released)
only if that end is at most ``LOOP_SPIN_AHEAD_NS`` away, for at most ``LOOP_SPIN_PAST_NS`` past it
and ``LOOP_SPIN_MAX_NS`` in all, and delivers what the spin saw.  Here over a stand-in of the core's
loop-side calls (the window is arithmetic on the core's predicted time; the GPU runs of the bench's
length sweep measure what it gains).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from arig._native import completion as nc


class _Core:
    """The loop-side calls of a core whose completion is predicted ``ahead_ns`` from now."""

    def __init__(self, ahead_ns: int | None, sees: bool) -> None:
        self._due = 0 if ahead_ns is None else time.monotonic_ns() + ahead_ns
        self._sees = sees
        self.spins: list[int] = []
        self.armed = 0

    def due(self) -> int:
        return self._due

    def loop_spin(self, ns: int) -> bool:
        self.spins.append(ns)
        return self._sees

    def arm(self) -> None:
        self.armed += 1


def _completion(core: _Core) -> Any:
    c = nc.NativeCompletion.__new__(nc.NativeCompletion)
    c.core = core  # type: ignore[assignment]
    c.delivered = 0

    def deliver() -> bool:
        c.delivered += 1
        return True

    c.deliver = deliver
    return c


@pytest.mark.parametrize("ahead_us", [0, 20, 70])
def test_a_near_completion_is_spun_for_and_delivered(ahead_us: int) -> None:
    core = _Core(ahead_us * 1000, sees=True)
    c = _completion(core)
    c._spin_window()
    (ns,) = core.spins
    assert ns <= nc.LOOP_SPIN_MAX_NS and ns <= ahead_us * 1000 + nc.LOOP_SPIN_PAST_NS
    assert ns >= min(nc.LOOP_SPIN_PAST_NS, nc.LOOP_SPIN_MAX_NS)  # a little past the predicted end at least
    assert core.armed == 1 and c.delivered == 1  # the spin left the loop disarmed: re-armed, then delivered


def test_a_completion_that_is_not_seen_in_the_window_is_left_to_the_core() -> None:
    core = _Core(10_000, sees=False)
    c = _completion(core)
    c._spin_window()
    assert len(core.spins) == 1 and core.armed == 0 and c.delivered == 0


@pytest.mark.parametrize("ahead_ns", [None, nc.LOOP_SPIN_AHEAD_NS + 50_000, 5_000_000])
def test_no_spin_without_a_prediction_or_far_from_it(ahead_ns: int | None) -> None:
    core = _Core(ahead_ns, sees=True)
    c = _completion(core)
    c._spin_window()
    assert core.spins == [] and c.delivered == 0


def test_a_prediction_already_past_spins_only_a_little_past_it() -> None:
    core = _Core(-1_000_000, sees=True)  # predicted a millisecond ago: still running
    c = _completion(core)
    c._spin_window()
    assert core.spins == [nc.LOOP_SPIN_PAST_NS]
