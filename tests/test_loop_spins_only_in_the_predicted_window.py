"""The loop side of the native engine spins only in the window where a completion is predicted.

When the core wakes the loop ahead of long work's predicted end and nothing is there to deliver,
``NativeCompletion._spin_window`` spins on the words (the core's ``loop_spin``, the GIL released)
only if that end is at most ``LOOP_SPIN_AHEAD_NS`` away, for at most ``LOOP_SPIN_PAST_NS`` past it
and ``LOOP_SPIN_MAX_NS`` in all, and delivers what the spin saw.  The spin is handed to the first
waiter, to run on its own task (``Timeline.spin_hint``), and runs on the loop's callback only
where no one waits.  Here over a stand-in of the core's loop-side calls (the window is arithmetic
on the core's predicted time; the GPU runs of the bench's length sweep measure what it gains).
"""

from __future__ import annotations

import time
import types
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
        self.leads: list[int] = []

    def due(self) -> int:
        return self._due

    def loop_spin(self, ns: int) -> bool:
        self.spins.append(ns)
        return self._sees

    def arm(self) -> None:
        self.armed += 1

    def loop_lead(self, ns: int) -> None:
        self.leads.append(ns)


class _Timeline:
    """A timeline's spin_hint: with ``waiter``, the first waiter takes the spin (kept here)."""

    def __init__(self, waiter: bool) -> None:
        self.waiter = waiter
        self.handed: list[Any] = []

    def spin_hint(self, spin: Any) -> bool:
        if self.waiter:
            self.handed.append(spin)
        return self.waiter


class _Owner:
    def __init__(self, waiter: bool) -> None:
        self.timeline = _Timeline(waiter)


def _completion(core: _Core, waiter: bool = False) -> Any:
    c = nc.NativeCompletion.__new__(nc.NativeCompletion)
    c.core = core  # type: ignore[assignment]
    c._owner = _Owner(waiter)
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
def test_no_spin_without_a_prediction_or_far_from_it(ahead_ns: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    core = _Core(ahead_ns, sees=True)
    if ahead_ns is not None:  # the clock stands still: a machine that stalls here must not bring the end near
        monkeypatch.setattr(nc, "time", types.SimpleNamespace(monotonic_ns=lambda: core._due - ahead_ns))
    c = _completion(core)
    c._spin_window()
    assert core.spins == [] and c.delivered == 0


def test_a_prediction_already_past_spins_only_a_little_past_it() -> None:
    core = _Core(-1_000_000, sees=True)  # predicted a millisecond ago: still running
    c = _completion(core)
    c._spin_window()
    assert core.spins == [nc.LOOP_SPIN_PAST_NS]


def test_the_spin_is_handed_to_the_first_waiter_and_runs_when_it_calls_it() -> None:
    core = _Core(20_000, sees=True)
    c = _completion(core, waiter=True)
    c._spin_window()
    (spin,) = c._owner.timeline.handed
    assert core.spins == [] and c.delivered == 0, "nothing spun on the loop's callback"
    spin()  # the waiter's task runs it
    assert len(core.spins) == 1 and core.armed == 1 and c.delivered == 1


def test_a_handed_spin_that_runs_after_the_end_moved_far_spins_not() -> None:
    core = _Core(20_000, sees=True)
    c = _completion(core, waiter=True)
    c._spin_window()
    (spin,) = c._owner.timeline.handed
    core._due = time.monotonic_ns() + 5_000_000  # delivered meanwhile; the next work's end is far
    spin()
    core._due = 0  # nothing predicted any more
    spin()
    assert core.spins == [] and c.delivered == 0


def test_the_loop_learns_its_lead_from_wake_up_to_spin_and_tells_the_core(monkeypatch: pytest.MonkeyPatch) -> None:
    core = _Core(20_000, sees=False)
    now = core._due - 20_000
    monkeypatch.setattr(nc, "time", types.SimpleNamespace(monotonic_ns=lambda: now))  # the clock stands still
    c = _completion(core)
    for _ in range(30):
        c._woke_at = now - 40_000  # woke 40 us before its spin starts
        c._spin_window()
    assert core.leads, "the core was told the loop's lead"
    assert 30_000 < core.leads[-1] <= 50_000, core.leads
    assert len(core.leads) < 30, "told again only once the figure moved"
    told = len(core.leads)
    c._woke_at = now - 10_000_000  # a wake-up long before (not this spin's): counted as at most the spin's cap
    c._spin_window()
    assert core.leads[-1] <= 0.8 * 50_000 + 0.2 * nc.LOOP_SPIN_MAX_NS + 1_000 and len(core.leads) == told + 1
