"""Work that waits for other devices' values: ``after=`` of ``submit``, ``run``, ``upload`` and ``download``.

``await dev.submit(fill, arg, after=[(other, v)])`` assigns the value at once, as any submit
does; the work starts only once ``other`` reached ``v``.  Either way below, the peer's timeline
calls back from its own delivery of ``v`` (``Timeline.call_when``), in the loop iteration that
resolves the peer's waiters, so no task wakes in between, and no thread blocks.

* On the device itself (feature ``"wait_peers"``, ``Gates``: CUDA devices with stream memory
  operations): the work is handed over at once behind a *gate*, a wait of the device for a word
  of its own host memory to reach the work's ticket (``arig.cuda._gates``); the callback opens
  the gate with a store to that word.  Launch and submit cost are paid before the peer is done:
  the hand-off is the device's poll of the word.  A loss of the device opens every gate still
  shut (to the last ticket handed out on its queue): no GPU waits for ever on a value that
  never comes.
* On the loop (``Holds``: every other device and submission, C fills and adopted queues
  included): the submission reaches the device's submitter only once the peers reached their
  values.

Order on the loop: a device's submissions reach its submitter in value order, so while one
is held every later submission of that device (on any queue) is held behind
it.  The device's ``_put``, ``_full`` and ``_sub`` are swapped for the hold's
while anything is held, and swapped back once it drains: a submit without
``after=`` costs nothing more while nothing is held.

``after=`` orders work, not the call of a fill: a gated fill is called when the submit thread
gets to it, and what it enqueues waits on the stream; a held fill is called once it is handed on.

Loss: a peer lost while work waits on it (held or gated) loses the waiting device, its cause a
``DeviceLost`` naming the peer (its work can never run in order, and every value after it
would wait for ever).  A waiting device lost meanwhile drops what it holds and opens its gates
(its timeline already failed every waiter; what ran behind a gate is never reported).  A stop
waits for held and gated work as for any other (``stop_timeout``, then the device is lost), and
so does the hang watchdog (``hang_ms``: a peer slower than that loses the waiting device).
Back-pressure: at most ``max_pending`` submissions are held; more wait for room, as for the
submit thread (gated work is a submission like any other).

Arguments (``check_after``), refused before a value is assigned: ``after`` is
a list or tuple of ``(device, value)`` pairs; each device an open device of
the same loop, not lost or stopped, and not the submitting device itself (its
own values are ordered by its queues, and a wait across its own queues is
what ``queue=`` order or a second submit after ``await`` says); each value an
int from 0 to that device's ``submitted``.  A value already reached costs
nothing.

Threads: every function here runs on the event-loop thread.
"""

from __future__ import annotations

import collections
import weakref
from collections.abc import Callable
from typing import Any

from ._backend import Submitter
from ._device_args import check_index
from ._errors import ArigTypeError, ArigValueError, DeviceLost, DeviceStopped, WrongLoopError, safe_repr

__all__ = ["check_after", "hand_over_after"]


def check_after(after: Any, dev: Any) -> list[tuple[Any, int]]:
    """The (timeline, value) pairs ``dev``'s work must wait for: each peer once, at its highest
    value, and only where that value is not reached yet.  Raises for anything else."""
    if not isinstance(after, (list, tuple)):
        raise ArigTypeError(f"after must be a list of (device, value) pairs, got {type(after).__name__}")
    if isinstance(after, tuple) and len(after) == 2 and isinstance(after[0], type(dev)):
        raise ArigTypeError("after takes a list of (device, value) pairs, got one pair: write after=[(device, value)]")
    highest: dict[int, tuple[Any, int]] = {}
    for pair in after:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise ArigTypeError(f"after takes (device, value) pairs, got {safe_repr(pair)}")
        other, v = pair
        _check_peer(other, dev)
        v = check_index(v, "the value in after")
        if v < 0:
            raise ArigValueError(f"after: value {v} of {other.name} is negative; values are 1, 2, ... (0 is reached from the start)")
        tl = other._tl
        if v > tl.assigned:
            raise ArigValueError(f"after: value {v} was never submitted to {other.name} (last is {tl.assigned})")
        if v > tl.reached and v > highest.get(id(tl), (None, 0))[1]:
            highest[id(tl)] = (tl, v)
    return list(highest.values())


def _check_peer(other: Any, dev: Any) -> None:
    if not isinstance(other, type(dev)):
        raise ArigTypeError(f"after names devices (arig.open's), got {safe_repr(other)}")
    if other is dev:
        raise ArigValueError(
            f"after names {dev.name}, the submitting device itself: its own work is ordered by its queues; "
            "to order across its queues, await the value, then submit"
        )
    if other._loop is not dev._loop:
        raise WrongLoopError(f"after names {other.name}, a device of another event loop: a wait spans one loop's devices")
    if other._tl.cause is not None:
        other._tl.told += 1
        raise DeviceLost(other.name, other._tl.cause)
    if other._stopping:
        raise DeviceStopped(f"after names {other.name}, which is stopped: none of its values will come")


def hand_over_after(dev: Any, qi: int, fill: Any, arg: Any, item: Any, held: Any, waits: list[tuple[Any, int]]) -> int:
    """``Device._hand_over`` for work that waits for ``waits``: assign its value, and hand it over
    behind a gate of the device (feature ``"wait_peers"``), or hold it on the loop until every
    peer reached its value.  Handed over as any submission where it waits for nothing."""
    if not waits:
        return int(dev._hand_over(qi, item, held))  # behind what is held, if anything is
    if dev._waits_peers is not None:
        v = _gated(dev, qi, fill, arg, held, waits)
        if v is not None:
            return v
    return _held(dev, qi, item, held, waits)


def _gated(dev: Any, qi: int, fill: Any, arg: Any, held: Any, waits: list[tuple[Any, int]]) -> int | None:
    """Hand the work over behind a gate of the device; None where the backend cannot gate it."""
    gates: Gates | None = dev._gates
    if gates is None:
        gates = dev._gates = Gates(dev._tl, dev._waits_peers)
    made = gates.gate(qi, fill, arg, len(waits))
    if made is None:
        return None
    v = int(dev._hand_over(qi, made[0], held))
    for peer_tl, pv in waits:
        peer_tl.call_when(pv, gates.on_peer(made[1], peer_tl))
    return v


def _held(dev: Any, qi: int, item: Any, held: Any, waits: list[tuple[Any, int]]) -> int:
    """Assign the work's value and hold it on the loop until every peer reached its value."""
    holds: Holds | None = dev._holds
    if holds is None:
        holds = dev._holds = Holds(dev)
    tl = dev._tl
    idle = tl.assigned == tl.reached
    v: int = tl.assign(qi, held)
    entry = holds.hold(qi, item, v, len(waits))
    for peer_tl, pv in waits:
        peer_tl.call_when(pv, holds.on_peer(entry, peer_tl))
    if idle and dev._watch is not None:
        dev._watch.arm()
    return v


def _on_peer(tl: Any, waiting: _Ticket | _Entry, peer_tl: Any, ready: Callable[[], None]) -> Callable[[BaseException | None], None]:
    """What ``peer_tl`` calls (``Timeline.call_when``) for ``waiting``: with None once it reached its
    value (``ready()`` once no peer is left to wait for), or with its cause once it is lost, which
    loses ``tl``'s device too, naming the peer (its work could never run in order)."""

    def reached(cause: BaseException | None) -> None:
        if cause is not None:
            if waiting.pending > 0 and tl.cause is None:
                tl.fail(DeviceLost(peer_tl._name, cause))
            return
        waiting.pending -= 1
        if waiting.pending == 0:
            ready()

    return reached


class _Ticket:
    __slots__ = ("qi", "ticket", "pending")

    def __init__(self, qi: int, ticket: int, pending: int) -> None:
        self.qi, self.ticket, self.pending = qi, ticket, pending


#: At most this many gates of a device are shut at once; further work that waits for other
#: devices is held on the loop until some open.  A stream held at a gate keeps everything queued
#: behind it, host functions included (a backstop, a burst's signal without memory operations),
#: and libcuda blocks the next enqueue of a context once some tens of host functions are pending:
#: the other device's work that would open the gate might then never be enqueued.
MAX_SHUT_GATES = 16


class Gates:
    """One device's gates (``arig._backend.WaitsPeers``): per queue, the tickets handed out and
    not yet opened, in order.  Holds the timeline and the backend, never the device."""

    def __init__(self, tl: Any, backend: Any) -> None:
        self._tl = tl
        self._backend = backend
        self._next: dict[int, int] = {}
        self._shut: dict[int, collections.deque[_Ticket]] = {}
        tl.on_fail(self._open_all)

    def gate(self, qi: int, fill: Any, arg: Any, waits: int) -> tuple[Any, _Ticket] | None:
        """The gated item of ``fill`` on queue ``qi`` and its ticket (shut until ``waits`` peers
        reached their values), or None: the backend cannot gate it."""
        if sum(len(q) for q in self._shut.values()) >= MAX_SHUT_GATES:
            return None  # held on the loop instead (see MAX_SHUT_GATES)
        n = self._next.get(qi, 0) + 1
        item = self._backend.gate_item(qi, n, fill, arg)
        if item is None:
            return None
        self._next[qi] = n
        t = _Ticket(qi, n, waits)
        self._shut.setdefault(qi, collections.deque()).append(t)
        return item, t

    def on_peer(self, t: _Ticket, peer_tl: Any) -> Callable[[BaseException | None], None]:
        """What ``peer_tl`` calls for ``t``; a loss opens every gate (``_open_all``)."""
        return _on_peer(self._tl, t, peer_tl, lambda: self._open(t.qi))

    def _open(self, qi: int) -> None:
        """Open queue ``qi``'s gate up to the last ticket from the front that waits for nothing more."""
        shut, last = self._shut[qi], 0
        while shut and shut[0].pending == 0:
            last = shut.popleft().ticket
        if last and self._tl.cause is None:
            self._backend.open_gate(qi, last)

    def _open_all(self) -> None:
        """The device is lost: every gate still shut opens for good (its GPU must not wait for
        ever), to the last ticket its queue handed out.  Not to some ``2**64 - 1``: the GPU
        compares a gate with its ticket cyclically, ``(int64_t)(gate - ticket) >= 0``
        (``arig.cuda._gates``), and reads so high a word as below every ticket."""
        for qi, shut in self._shut.items():
            if shut:
                shut.clear()
                self._backend.open_gate(qi, self._next[qi])


class _Entry:
    __slots__ = ("qi", "item", "v", "pending")

    def __init__(self, qi: int, item: Any, v: int, pending: int) -> None:
        self.qi, self.item, self.v, self.pending = qi, item, v, pending


class Holds:
    """One device's held submissions, in value order; while any is held, the device's submitter.

    Holds the device weakly (it is the device's own attribute): a device dropped with work held
    is collected and released as any other."""

    def __init__(self, dev: Any) -> None:
        self._dev = weakref.ref(dev)
        self._sub: Submitter = dev._sub  # the real submitter, under the hold
        self._tl = dev._tl
        self._name = dev.name
        self._limit = dev._st._limit
        self._new_future = dev._port.future_factory()
        self._shield = dev._port.shield
        self._held: collections.deque[_Entry] = collections.deque()
        self._space: Any = None
        dev._tl.on_fail(self._drop)

    # -- the submitter's face, while something is held -------------------------------------
    def full(self) -> bool:
        return len(self._held) >= self._limit or self._sub.full()

    async def wait_space(self, check: Callable[[], None]) -> None:
        while len(self._held) >= self._limit:
            check()
            if self._space is None or self._space.done():
                self._space = self._new_future()
            await self._shield(self._space)
        await self._sub.wait_space(check)

    def wake_space(self) -> None:
        self._wake()
        self._sub.wake_space()

    def forget_space(self) -> None:
        self._space = None
        self._sub.forget_space()

    def put(self, qi: int, item: Any, v: int) -> None:
        """A submission while something is held: behind it, waiting for nothing of its own."""
        self._held.append(_Entry(qi, item, v, 0))

    # -- holding -----------------------------------------------------------------------------
    def hold(self, qi: int, item: Any, v: int, pending: int) -> _Entry:
        entry = _Entry(qi, item, v, pending)
        if not self._held:
            dev = self._dev()
            if dev is not None:
                dev._put, dev._full, dev._sub = self.put, self.full, self
        self._held.append(entry)
        return entry

    def on_peer(self, entry: _Entry, peer_tl: Any) -> Callable[[BaseException | None], None]:
        """What ``peer_tl`` calls for ``entry``; a loss drops everything held (``_drop``)."""
        return _on_peer(self._tl, entry, peer_tl, self._flush)

    def _flush(self) -> None:
        """Hand the submitter every entry from the front that waits for nothing more, in order."""
        held, sub = self._held, self._sub
        while held and held[0].pending == 0 and self._tl.cause is None:
            e = held.popleft()
            try:
                sub.put(e.qi, e.item, e.v)
            except BaseException as exc:  # noqa: BLE001 - the value can never be reached: lose the device (as _hand_over)
                self._tl.fail(exc)
                return
        self._wake()
        if not held:
            self._restore()

    def _restore(self) -> None:
        dev = self._dev()
        if dev is not None:
            sub = self._sub
            dev._put, dev._full, dev._sub = sub.put, sub.full, sub

    def _wake(self) -> None:
        if self._space is not None and not self._space.done():
            self._space.set_result(None)

    def _drop(self) -> None:
        """The device is lost: what it holds is never run (its waiters were failed with it)."""
        self._held.clear()
        self._wake()
        self._restore()
