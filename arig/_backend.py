"""The backend seam: everything a ``Device`` asks of a driver, and nothing more.

A device (``arig.device``) is the same object on every driver; what differs
is its ``Backend``.  This module declares every member the device calls, so
that a new driver is written against one list, and the device never has to
ask a backend what it happens to have:

* ``Backend``, the ABC: open facts, the submission items, the pure engine's lanes, stop
  and close, memory and images (the last three optional: an unsupported one
  raises ``ArigTypeError``);
* ``Submitter``, what takes submissions (the submit thread, or an engine);
* the *features*, what only some drivers offer.  Each is a protocol, checked
  once when the device opens (``features_of``); the device keeps the names
  in ``dev.features`` and calls a feature only through the backend it found
  to have it:

  ================  ====================  ======================================
  name              protocol              ``Device`` methods it serves
  ================  ====================  ======================================
  ``"adopt"``       ``Adopts``            ``adopt``; ``submit`` on adopted queues
  ``"wait_event"``  ``WaitsEvents``       ``join_event`` (``arig.cuda.wait_event``)
  ``"dma"``         ``ExportsDmabuf``     ``dma``
  ``"map_host"``    ``MapsHost``          ``map_host``
  ``"wrap"``        ``Wraps``             ``wrap``
  ``"wait_peers"``  ``WaitsPeers``        ``after=`` waits on the device itself
  ================  ====================  ======================================

* the fill checks every backend shares (``defers_work``, ``fill_result``...):
  the native core's loop side uses them too, so they live here rather than
  in ``arig.device``, which the engine must not depend on.

Threads: each member's docstring says where it runs; every loop-thread
member calls no driver function.
"""

from __future__ import annotations

import abc
import inspect
import operator
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ._device_args import check_fill_args
from ._errors import ArigTypeError, safe_repr
from ._memory import Buffer, Image, Ledger
from ._pure import Lane
from ._submit import SubmitThread
from ._timeline import Timeline
from .queue import AdoptedQueue, Queue

__all__ = [
    "Adopts",
    "Backend",
    "DEFERRED",
    "ExportsDmabuf",
    "FEATURES",
    "MapsHost",
    "Opener",
    "Submitter",
    "WaitsEvents",
    "WaitsPeers",
    "Wraps",
    "callable_name",
    "deferred_result",
    "defers_work",
    "features_of",
    "fill_result",
]


#: Code flags of functions whose call makes a coroutine or a generator instead
#: of doing their work: as a fill, or as a host queue's work, they would do nothing.
DEFERRED = inspect.CO_COROUTINE | inspect.CO_ITERABLE_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_GENERATOR


def defers_work(fn: Any) -> bool:
    """Does calling ``fn`` only make a coroutine or generator (``async def``, a generator function)?

    A fill runs on a thread with no event loop: such a fill would be called,
    do nothing, and its value be reached.  Cheap for a plain function (one
    flag test); other callables (partials, bound methods, objects with
    ``__call__``) take inspect's slower checks.
    """
    if type(fn) is types.FunctionType:
        return bool(fn.__code__.co_flags & DEFERRED)
    call = type(fn).__call__  # an object with ``async def __call__`` makes coroutines too
    return any(inspect.iscoroutinefunction(f) or inspect.isasyncgenfunction(f) or inspect.isgeneratorfunction(f) for f in (fn, call))


def deferred_result(r: Any) -> bool:
    """Is ``r`` a coroutine or generator that a call made instead of doing its work?

    A coroutine is closed here: collected unawaited, it would warn.
    """
    if inspect.iscoroutine(r):
        r.close()
        return True
    return inspect.isgenerator(r) or inspect.isasyncgen(r)


def fill_result(r: Any, v: int, error_of: Callable[[int, int], BaseException], codes: str = "an int error code") -> None:
    """Check what a fill of value ``v`` returned (submit thread): None or 0 (numpy's integers too) is
    success; another int raises ``error_of(code, v)``; anything else is a misuse, named."""
    if r is None:
        return
    if type(r) is not bool and not isinstance(r, np.bool_):
        try:
            code = operator.index(r)
        except TypeError:
            pass
        else:
            if code != 0:
                err = error_of(code, v)  # the driver's error (FillError, CudaError): of arig's tree
                raise err
            return
    if deferred_result(r):
        raise ArigTypeError(f"fill returned {type(r).__name__}: it never ran; a fill is a plain function, not async def or a generator")
    raise ArigTypeError(f"fill returned {safe_repr(r)} of type {type(r).__name__}; a fill returns None, 0 or {codes}")


def callable_name(fn: Any) -> str:
    """A callable's name for a message; never raises (a caller's ``__repr__`` might)."""
    try:
        name = getattr(fn, "__qualname__", None)
    except Exception:  # noqa: BLE001
        name = None
    return name if isinstance(name, str) else type(fn).__name__


class Opener(Protocol):
    """What ``arig.open`` takes: a name and ``make()``, run on the new device's submit thread."""

    name: str

    def make(self) -> Backend: ...


class Submitter(Protocol):
    """What takes a device's submissions (loop thread, no driver call): the submit thread
    itself, or an engine that runs some items without it (``Backend.submitter``)."""

    def full(self) -> bool:
        """Would one more submission exceed the bound (back-pressure)?"""

    async def wait_space(self, check: Callable[[], None]) -> None:
        """Wait until there is room; ``check`` raises once the device ended meanwhile."""

    def wake_space(self) -> None:
        """Wake every task waiting for room (they re-check, and may raise)."""

    def forget_space(self) -> None:
        """Drop the futures of tasks waiting for room, unresolved: the loop closed (any thread)."""

    def put(self, qi: int, item: Any, v: int) -> None:
        """Hand lane ``qi`` the prepared ``item`` of value ``v``; raises only if it cannot."""


class Backend(abc.ABC):
    """A driver under a device.  Every method but ``check_fill``, ``prepare``,
    ``submitter``, ``begin_stop``, ``abort`` and ``detach`` runs on the
    device's submit thread."""

    name: str
    arch: str
    facts: Mapping[str, Any]
    #: What each queue's fills receive as ``queue``.
    queue_handles: Sequence[Any]
    #: The class of ``dev.queues``' items, made from ``queue_handles``: a driver whose queues
    #: speak more than ``Queue`` (another library's stream protocol) names its subclass here.
    queue_type: type[Queue] = Queue
    #: Records declared for compiled code, by key (``Device.capability``).
    capabilities: Mapping[Any, Any] = types.MappingProxyType({})
    #: Work pending with no progress for this long loses the device (None: never).
    hang_ms: int | None = None
    timeline: Timeline
    ledger: Ledger

    def bind(self, timeline: Timeline, post: Callable[..., None]) -> None:
        """Report completions to ``timeline`` (``timeline.report(lane, v)``, any thread).

        ``post(fn, *args)`` runs ``fn(*args)`` later on the submit thread, from
        any thread (finalizers free memory through it).
        """
        self.timeline = timeline
        self.post = post
        #: The buffers and images this backend makes (``ledger=``): freed in stream order, closed at stop.
        self.ledger = Ledger(timeline, self.name)

    def check_fill(self, fill: Any) -> Any:
        """Validate a fill on the loop thread (no driver call); return what ``call_fill`` takes.

        An ``async def`` (or generator) fill is refused here, before a value
        is assigned: called on the submit thread it would only make a coroutine;
        so is one that cannot take (queue, arg, v), where its signature can be read.
        """
        if not callable(fill):
            raise ArigTypeError(f"fill must be callable as fill(queue, arg, v), got {type(fill).__name__}")
        if defers_work(fill):
            raise ArigTypeError(
                f"fill {callable_name(fill)} makes a coroutine or generator when called; a fill is a plain function that enqueues work and returns"
            )
        check_fill_args(fill)
        return fill

    def prepare(self, fill: Any, arg: Any) -> Any:
        """Check a submission on the loop thread (no driver call); return the item the submitter's ``put`` takes.

        Raises for anything that cannot be a fill or its arg, before a value is assigned.
        """
        return (self.check_fill(fill), arg)

    def submitter(self, st: SubmitThread, limit: int) -> Submitter:
        """Loop thread, once at open: what takes submissions.  Default: the submit thread."""
        return st

    @abc.abstractmethod
    def call_fill(self, qi: int, fill: Any, arg: Any, v: int) -> None:
        """Run one item of value ``v`` on queue ``qi``; raise to lose the device.

        The pure engine runs every item through it; an engine that signals by itself
        (the native core) hands it only Python fills, each at its place in the engine's order."""

    def lanes(self) -> Sequence[Lane] | None:
        """Once, before the first item: the pure engine's lane operations, lane ``qi`` being queue
        ``qi``'s (``arig._pure.Lane``: ``note`` after each item, ``signal`` at the end of a burst).

        None (the default): the backend's engine reports completions by itself, and the
        submit thread only hands it Python fills (``call_fill``)."""
        return None

    def abort(self) -> None:
        """The device is lost: unblock whatever waits on the driver.  Loop thread; must not block."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release everything the backend holds."""

    def begin_stop(self) -> None:
        """Stop began (loop thread, must not block): refuse new driver work of the backend's own."""

    def detach(self) -> None:
        """After ``close``, on the loop thread: drop what the backend registered with the loop."""

    # Memory and images: optional per driver.
    # An unsupported operation is an ArigTypeError: this kind of device has no such method.
    def alloc(self, nbytes: int, kind: str | None) -> Buffer:
        raise ArigTypeError(f"{self.name} allocates no memory")

    def copy_fill(self, buf: Buffer, array: np.ndarray[Any, Any], to_device: bool) -> tuple[Any, Any]:
        """A fill and its arg that copy ``array`` into (or out of) ``buf`` on a queue."""
        raise ArigTypeError(f"{self.name} copies no memory")

    def load(self, image: bytes) -> Image:
        raise ArigTypeError(f"{self.name} loads no images")


# -- features: what only some backends have -------------------------------------------------
# Protocols, not ABC methods: a backend that lacks one has no such member at all, so
# "does it have it" is answered once, by the protocol, instead of by probing names.


@runtime_checkable
class Adopts(Protocol):
    """Feature ``"adopt"``: queues made from streams another library owns.  Loop thread, no driver call."""

    def adopt(self, stream: Any) -> AdoptedQueue:
        """The queue of ``stream`` (the same one for the same stream), its lane ready to use."""

    def adopted(self, handle: int) -> AdoptedQueue | None:
        """The queue this backend made for stream ``handle``, if any."""

    def prepare_adopted(self, q: AdoptedQueue, fill: Any, arg: Any) -> Any:
        """``prepare`` for a submission on ``q``: its fill on the owner's stream, then the join."""


@runtime_checkable
class WaitsEvents(Protocol):
    """Feature ``"wait_event"``: the join lane waits, on the device, for events another library
    records.  Loop thread, no driver call."""

    #: The lane where the waits run (never a queue's: their work waits for no one else's).
    join_lane: int

    def event_slot(self, handle: int) -> Any:
        """What holds event ``handle`` for the thread that enqueues the wait; kept until it is reached."""

    def prepare_event(self, slot: Any) -> Any:
        """The item that makes the join lane wait for the event ``slot`` holds; the lane is ready to use."""


@runtime_checkable
class ExportsDmabuf(Protocol):
    """Feature ``"dma"``: device memory exported as a dma-buf.  Submit thread."""

    def dma(self, buf: Buffer, offset: int, nbytes: int) -> Any:
        """The region of ``buf`` as a dma-buf another driver can import."""


@runtime_checkable
class MapsHost(Protocol):
    """Feature ``"map_host"``: the program's own memory mapped for the GPU.  Submit thread."""

    def map_host(self, address: int, nbytes: int, owner: Any) -> Buffer:
        """``nbytes`` at host ``address`` as a buffer the GPU reaches; ``owner`` stays referenced while it lives."""


@runtime_checkable
class Wraps(Protocol):
    """Feature ``"wrap"``: another library's GPU array as a buffer.  Loop thread, no driver call."""

    def wrap(self, obj: Any) -> Buffer:
        """``obj``'s memory as a buffer of this device (its library frees it, never arig)."""


@runtime_checkable
class WaitsPeers(Protocol):
    """Feature ``"wait_peers"``: work that waits for other devices' values (``after=``) waits on
    the device itself, behind a *gate*: a word of host memory the device polls, one per queue,
    that the loop opens (a store, no driver call) once the other devices reached their values.
    Tickets of a queue count 1, 2, 3, ... and are opened in order (``arig._after``).  Loop thread;
    a loss of the device opens every gate (``abort``), so that nothing waits on one for ever."""

    def gate_item(self, qi: int, ticket: int, fill: Any, arg: Any) -> Any:
        """The item of ``fill`` (``prepare`` checked it) on queue ``qi``, behind the wait for gate
        ``qi`` to reach ``ticket``; None where this one cannot be gated (the loop holds it instead)."""

    def open_gate(self, qi: int, ticket: int) -> None:
        """Let queue ``qi``'s work up to ``ticket`` start."""


#: Every feature, by the name ``dev.features`` holds.
FEATURES: Mapping[str, type] = types.MappingProxyType(
    {"adopt": Adopts, "wait_event": WaitsEvents, "dma": ExportsDmabuf, "map_host": MapsHost, "wrap": Wraps, "wait_peers": WaitsPeers}
)


def features_of(backend: Backend) -> frozenset[str]:
    """The names of the features ``backend`` has (once, at open: a protocol check probes every member)."""
    return frozenset(name for name, proto in FEATURES.items() if isinstance(backend, proto))
