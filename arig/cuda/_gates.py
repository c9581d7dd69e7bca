"""A CUDA device's gates: work that waits, on the GPU, for other devices' values (``after=``).

Each queue's lane has a gate word, 8 bytes of the device's own pinned, device-mapped timeline
memory.  Work that waits for other devices is enqueued at once behind
``cuStreamWaitValue64(stream, gate, ticket, GEQ)``; once every device it waits for reached its
value, the event loop stores ``ticket`` into the gate (a store to host memory, no driver call),
and the GPU, polling the word, starts the work.  Tickets of a lane count 1, 2, 3, ... in submit
order and are opened in that order (``arig._after.Gates``): opening one opens those before it,
which the stream runs first anyway.  The GPU compares cyclically, ``(int64_t)(*gate - ticket)
>= 0`` as CUDA documents ``CU_STREAM_WAIT_VALUE_GEQ``: a gate opens to a ticket handed out, never
to a word "above everything" such as ``2**64 - 1``, which reads as below every ticket (a lost
device's gates opened that way stayed shut, and the context's next synchronizing call, a
``cuMemFree`` of another device of the same GPU, waited for ever).

Why the device's own word, not the other device's timeline word: its lifetime and its loss are
this device's.  The other device may stop, free its words, or be lost with its word never to be
written, while this stream still waits; the gate is freed with this device, and a loss of this
device opens every gate still shut (``arig._after``, at the loss, before any stop can free the
words) so that no stream waits for ever: what was queued behind a gate then runs as any work
queued on a lost device does (its results are no one's; its memory is kept, as ``close`` keeps
a lost device's).  A loss of the other device loses this one first, then opens the gates.

Not gated (left to the loop's hold, ``arig._after``): a device without stream memory
operations, the join lane (adopted queues), C fills (their address and arg are the native
core's to call; a gated item is a Python fill), and every device on the pure engine.

Why not the pure engine: a wait on a word that another stream's completion opens is an order
CUDA cannot see, and libcuda warns that such waits may deadlock.  On the H200 a 1000-step
ping-pong between two CUDA devices of one GPU hung in four of six runs on the pure engine; it
never hung on the native core.  The likely cause (not shown): the pure engine ends each burst
with a host function, which pile up behind a stream held at a gate, and libcuda blocks a
context's next enqueue once some tens are pending, so the other device's work that would open
the gate is never enqueued.  The pure engine holds such work on the loop instead (a host round
trip, no deadlock), and a device keeps at most ``arig._after.MAX_SHUT_GATES`` gates shut at once
(the native core's backstops are host functions too).

Threads: ``gate_item`` and ``open_gate`` run on the event loop (no driver call);
the gated fill runs where Python fills run (the submit thread).
"""

from __future__ import annotations

import ctypes
from typing import Any

from . import _abi
from ._items import Copy
from ._launch import Launch
from ._lib import lib

__all__ = ["Gates", "CU_STREAM_WAIT_VALUE_GEQ"]

CU_STREAM_WAIT_VALUE_GEQ = 0


class _GatedFill:
    """A Python fill: the stream waits for its gate to reach ``ticket``, then ``inner`` enqueues the work."""

    __slots__ = ("gate", "ticket", "inner")

    def __init__(self, gate: int, ticket: int, inner: Any) -> None:
        self.gate, self.ticket, self.inner = gate, ticket, inner

    def __call__(self, stream: int, arg: Any, v: int) -> Any:
        rc = lib.cuStreamWaitValue64_v2(stream, self.gate, self.ticket, CU_STREAM_WAIT_VALUE_GEQ)
        if rc:
            return int(rc)  # a CUresult: loses the device, named by the fill result check
        return self.inner(stream, arg, v)


def _no_work(stream: int, arg: Any, v: int) -> None:
    return None


class Gates:
    """The CUDA backend's side of feature ``"wait_peers"`` (``arig._backend.WaitsPeers``): where the
    gates are (set once the timeline memory exists) and the items behind them."""

    completion: Any
    gate_host = 0  # host address of lane 0's gate (0: no gates: memory gone, or no memops)
    gate_dev = 0  # its device address, in the device's context
    gate_lanes = 0  # how many lanes (the queues) have a gate

    def set_gates(self, memops: bool, native: bool, host: int, dev: int, lanes: int) -> str:
        """Submit thread, at open (before the loop sees the device): the gates, zeroed, where the
        device has stream memory operations and the native core; where ``after=`` waits (the fact
        ``"after"``)."""
        if not memops or not lib.has("cuStreamWaitValue64_v2"):
            return "on the event loop"
        if not native:
            return "on the event loop (the pure engine holds such work: see arig.cuda._gates)"
        ctypes.memset(host, 0, 8 * lanes)
        self.gate_host, self.gate_dev, self.gate_lanes = host, dev, lanes
        return "on the GPU (cuStreamWaitValue64 on a gate word)"

    # -- loop thread ------------------------------------------------------------------------
    def gate_item(self, qi: int, ticket: int, fill: Any, arg: Any) -> Any | None:
        """The item of ``fill`` (checked by ``prepare`` already) on queue ``qi`` behind the wait for
        ticket ``ticket``, or None: this submission is not gated (see the module docstring)."""
        if not self.gate_host or qi >= self.gate_lanes:
            return None
        inner = _inner(fill)
        if inner is None:
            return None
        return self.completion.gated_item(_GatedFill(self.gate_dev + 8 * qi, ticket, inner), arg)

    def open_gate(self, qi: int, ticket: int) -> None:
        if self.gate_host:
            ctypes.c_uint64.from_address(self.gate_host + 8 * qi).value = ticket


def _inner(fill: Any) -> Any | None:
    """What a gated fill calls after the wait: the work of ``fill`` as a Python fill; None for
    what only the native core may call (C fills)."""
    t = type(fill)
    if t is Launch:
        return lambda stream, a, v: fill(stream)
    if t is Copy:
        return fill
    if t is _abi.Graph:
        return lambda stream, a, v: fill.launch(stream)
    if fill is None:
        return _no_work
    if isinstance(fill, (int, ctypes._CFuncPtr)):  # type: ignore[attr-defined]
        return None
    return fill if callable(fill) else None

