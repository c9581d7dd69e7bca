"""The pure engine's rules, on lanes that record what they are asked: each item is run and noted,
each lane's last value is signalled once a burst ends (the queue ran dry, BURST items, a control
comes, the thread stops), nothing is signalled on a lost device; a watcher reports each new
value once and asks for a fault only while work is outstanding and nothing was posted."""

from __future__ import annotations

import queue
import threading
from typing import Any

import pytest

from arig._pure import BURST, Bursts, Watcher


class _Lane:
    def __init__(self, log: list[tuple[str, int, int]], qi: int, fail_signal: BaseException | None, notes: bool) -> None:
        self.log, self.qi, self.fail_signal, self.notes = log, qi, fail_signal, notes

    def note(self, v: int) -> None:
        self.log.append(("note", self.qi, v))

    def signal(self, v: int) -> None:
        if self.fail_signal is not None:
            raise self.fail_signal
        self.log.append(("signal", self.qi, v))


class _Engine:
    def __init__(self, nlanes: int = 2, fail_signal: BaseException | None = None, fail_run: int | None = None, notes: bool = True) -> None:
        self.log: list[tuple[str, int, int]] = []
        self.lost: list[BaseException] = []
        self.is_lost = False
        self.fail_run = fail_run
        lanes = [_Lane(self.log, i, fail_signal, notes) for i in range(nlanes)]
        self.bursts = Bursts(self.run_item, lanes, lambda: self.is_lost, self.lost.append)

    def run_item(self, qi: int, fill: Any, arg: Any, v: int) -> None:
        if v == self.fail_run:
            raise RuntimeError("the fill failed")
        self.log.append(("run", qi, v))

    def signals(self) -> list[tuple[str, int, int]]:
        return [e for e in self.log if e[0] == "signal"]


def test_each_item_is_run_then_noted_and_a_dry_queue_signals_each_lanes_last_value() -> None:
    e = _Engine()
    b = e.bursts
    assert not b.pending
    for qi, v in [(0, 1), (1, 2), (0, 3)]:
        b.run(qi, None, None, v)
    assert e.log == [("run", 0, 1), ("note", 0, 1), ("run", 1, 2), ("note", 1, 2), ("run", 0, 3), ("note", 0, 3)]
    assert b.pending and e.signals() == []
    b.idle()
    assert e.signals() == [("signal", 0, 3), ("signal", 1, 2)] and not b.pending
    b.idle()  # nothing new: nothing signalled again
    assert len(e.signals()) == 2


def test_lanes_that_do_not_note_are_not_asked_to_and_still_signal() -> None:
    e, quiet = _Engine(), _Engine(notes=False)
    for eng in (e, quiet):
        for v in range(1, BURST + 2):
            eng.bursts.run(v % 2, None, None, v)
        eng.bursts.idle()
    assert [x for x in quiet.log if x[0] == "note"] == [] and len([x for x in e.log if x[0] == "note"]) == BURST + 1
    assert quiet.signals() == e.signals() == [("signal", 1, BURST - 1), ("signal", 0, BURST), ("signal", 1, BURST + 1)]


@pytest.mark.parametrize("end", ["before_control", "stop"])
def test_a_control_or_the_stop_ends_the_burst(end: str) -> None:
    e = _Engine()
    e.bursts.run(1, None, None, 1)
    getattr(e.bursts, end)()
    assert e.signals() == [("signal", 1, 1)] and not e.bursts.pending


def test_a_burst_ends_after_burst_items_even_while_more_wait() -> None:
    e = _Engine(nlanes=1)
    for v in range(1, BURST):
        e.bursts.run(0, None, None, v)
    assert e.signals() == []
    e.bursts.run(0, None, None, BURST)
    assert e.signals() == [("signal", 0, BURST)]
    for v in range(BURST + 1, 2 * BURST):  # the count starts again with the next burst
        e.bursts.run(0, None, None, v)
    assert e.signals() == [("signal", 0, BURST)]
    e.bursts.run(0, None, None, 2 * BURST)
    assert e.signals()[-1] == ("signal", 0, 2 * BURST)


def test_a_dry_queue_restarts_the_burst_count() -> None:
    e = _Engine(nlanes=1)
    for v in range(1, BURST):
        e.bursts.run(0, None, None, v)
    e.bursts.idle()
    e.bursts.run(0, None, None, BURST)
    assert e.signals() == [("signal", 0, BURST - 1)]


def test_a_lost_device_signals_nothing_and_forgets_its_values() -> None:
    e = _Engine()
    e.bursts.run(0, None, None, 1)
    e.is_lost = True
    e.bursts.idle()
    assert e.signals() == [] and not e.bursts.pending


def test_a_failing_signal_loses_the_device_once_and_clears_the_burst() -> None:
    boom = OSError("no host function")
    e = _Engine(fail_signal=boom)
    e.bursts.run(0, None, None, 1)
    e.bursts.run(1, None, None, 2)
    e.bursts.idle()
    assert e.lost == [boom] and not e.bursts.pending


def test_a_failing_item_is_neither_noted_nor_signalled() -> None:
    e = _Engine(fail_run=2)
    e.bursts.run(0, None, None, 1)
    with pytest.raises(RuntimeError):
        e.bursts.run(0, None, None, 2)
    e.bursts.idle()
    assert ("note", 0, 2) not in e.log and e.signals() == [("signal", 0, 1)]


class _Watched:
    """A lane whose posts and reached values the test feeds."""

    def __init__(self) -> None:
        self.qi = 3
        self.signalled = 0
        self.posts: queue.SimpleQueue[int] = queue.SimpleQueue()
        self.value = 0
        self.fault: BaseException | None = None
        self.fault_checks = 0
        self.started = threading.Event()

    def thread_start(self) -> None:
        self.started.set()

    def wait(self, timeout: float) -> bool:
        try:
            self.value = self.posts.get(timeout=timeout)
        except queue.Empty:
            return False
        return True

    def reached(self, posted: bool) -> int:
        return self.value

    def check_fault(self) -> BaseException | None:
        self.fault_checks += 1
        return self.fault

    def halt(self) -> None:
        self.posts.put(self.value)


def _until(cond: Any, timeout: float = 5.0) -> None:
    done = threading.Event()
    for _ in range(int(timeout / 0.005)):
        if cond():
            return
        done.wait(0.005)
    raise AssertionError("timed out")


def test_a_watcher_reports_each_new_value_once_and_checks_faults_only_while_work_is_outstanding() -> None:
    lane = _Watched()
    reports: list[tuple[int, int]] = []
    fails: list[BaseException] = []
    w = Watcher(lane, "arig-test-watch", lambda qi, v: reports.append((qi, v)), fails.append)
    w.start()
    try:
        assert lane.started.wait(5.0)
        threading.Event().wait(0.1)  # idle: nothing outstanding, no fault check
        assert lane.fault_checks == 0
        lane.signalled = 2
        lane.posts.put(1)
        lane.posts.put(1)  # the same value again: not reported twice
        _until(lambda: reports == [(3, 1)])
        _until(lambda: lane.fault_checks > 0)  # 2 outstanding and no post: it looks for a fault
        lane.posts.put(2)
        _until(lambda: reports == [(3, 1), (3, 2)])
        checks = lane.fault_checks
        threading.Event().wait(0.1)  # all seen: no more fault checks
        assert lane.fault_checks == checks and fails == []
    finally:
        w.stop()


def test_a_watcher_that_finds_a_fault_reports_it_and_ends() -> None:
    lane = _Watched()
    lane.signalled = 1
    lane.fault = RuntimeError("the stream faulted")
    fails: list[BaseException] = []
    w = Watcher(lane, "arig-test-watch", lambda qi, v: None, fails.append)
    w.start()
    _until(lambda: fails == [lane.fault])
    w.stop()
    assert lane.fault_checks == 1
