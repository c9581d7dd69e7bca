"""Awaiting the streams and events users already have (PyTorch, CuPy, cuda.core, raw handles),
and arig's queues as streams for other libraries.

``dev.adopt(stream)`` makes a queue of a CUDA device from another
library's stream; ``await arig.cuda.wait_event(event)`` awaits an event
another library recorded.  A CUDA device's queues, its own and adopted
ones, speak cuda.core's stream protocol (:class:`CudaQueue`).  Neither blocks a thread or polls: the device's
join lane waits for the stream or event on the GPU (``cuStreamWaitEvent``)
and its value is signalled as any other, by the GPU's own write or a host
function.

Threads: the handle readers here run on the event loop and call no libcuda
function (they read the objects' attributes); the event records and waits
run on the device's native thread (``K_JOIN`` of the core) or, on the pure
path, its Python submit thread.
"""

from __future__ import annotations

import ctypes
import functools
import weakref
from typing import Any

import anyio

from .. import device as _device
from .._errors import ArigTypeError, ArigValueError, safe_repr
from .._port import port_of
from .._running import running_loop
from ..queue import AdoptedQueue, Queue

__all__ = ["CudaQueue", "CudaAdoptedQueue", "stream_handle", "event_handle", "wait_event"]

#: CU_STREAM_PER_THREAD: the calling thread's default stream; arig enqueues from its own thread.
PER_THREAD = 2


class CudaQueue(Queue):
    """A queue of a CUDA device: ``handle`` is its CUstream, as an int.

    It speaks cuda.core's stream protocol, so other libraries can launch on
    it: ``cupy.cuda.Stream.from_external(q)``, or with the handle itself,
    ``torch.cuda.ExternalStream(q.handle)``.  Queues of other devices are
    plain ``arig.Queue``s and have no ``__cuda_stream__``
    (``hasattr(q, "__cuda_stream__")`` is how consumers ask).
    """

    __slots__ = ()
    handle: int

    def __cuda_stream__(self) -> tuple[int, int]:
        """``(0, CUstream)``: protocol version 0."""
        return (0, self.handle)


class CudaAdoptedQueue(AdoptedQueue, CudaQueue):
    """A CUDA device's queue of an adopted stream (``dev.adopt(stream)``).

    A submission on it runs its fill with the user's stream, then makes the
    device's join lane (``index``) wait for everything the stream had been
    given (an event recorded on it), and signals the value on the join lane:
    the user's stream itself gets no arig work but the event record.
    ``join_event`` holds that CUevent: made on first use by the thread that
    enqueues, destroyed when the device closes.  ``mark_item`` is the device's
    item of ``submit(None, queue=q)``, made once: the same join every time.
    """

    __slots__ = ("join_event", "mark_item")

    def __init__(self, device: str, index: int, handle: int, source: Any) -> None:
        super().__init__(device, index, handle, source)
        self.join_event = ctypes.c_void_p(0)
        self.mark_item: Any = None


def _as_handle(value: Any, what: str) -> int:
    """An int handle (ctypes pointers and cuda.bindings objects convert with int())."""
    if isinstance(value, bool):
        raise ArigTypeError(f"{what} must be a handle, got a bool")
    try:
        h = int(value) if not isinstance(value, int) else value
    except (TypeError, ValueError):
        raise ArigTypeError(f"{what} must be a handle (an int), got {type(value).__name__}") from None
    if not 0 <= h < 1 << 64:
        raise ArigValueError(f"{what} must be in 0..2**64-1, got {h}")
    return h


def _device_index(obj: Any) -> int | None:
    """The GPU ordinal a torch or CuPy stream/event belongs to, where it says."""
    dev = getattr(obj, "device", None)
    index = getattr(dev, "index", None)  # torch.device
    if isinstance(index, int):
        return index
    for name in ("device_id", "device_index"):  # CuPy; older torch
        v = getattr(obj, name, None)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def stream_handle(stream: Any) -> tuple[int, int | None]:
    """``(CUstream, GPU ordinal or None)`` of a stream object or raw handle.

    Understood: cuda.core's protocol (``__cuda_stream__() -> (0, handle)``),
    ``torch.cuda.Stream`` (``cuda_stream``), ``cupy.cuda.Stream`` (``ptr``),
    and an int.  The legacy default stream (0 or 1) is accepted; the
    per-thread default stream (2) is refused, since it means a different
    stream on every thread.
    """
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        got = proto() if callable(proto) else proto
        if not (isinstance(got, tuple) and len(got) == 2):
            raise ArigTypeError(f"{type(stream).__name__}.__cuda_stream__ gave {safe_repr(got)}, not (version, handle)")
        if got[0] != 0:
            raise ArigValueError(f"{type(stream).__name__}.__cuda_stream__ speaks version {got[0]}; arig knows version 0")
        h = _as_handle(got[1], "the stream")
    elif hasattr(stream, "cuda_stream"):  # torch.cuda.Stream / ExternalStream
        h = _as_handle(stream.cuda_stream, "the stream")
    elif hasattr(stream, "ptr") and not isinstance(stream, int):  # cupy.cuda.Stream
        h = _as_handle(stream.ptr, "the stream")
    elif isinstance(stream, int) and not isinstance(stream, bool):
        h = _as_handle(stream, "the stream")
    else:
        raise ArigTypeError(
            f"cannot adopt {safe_repr(stream)}: expected an object with __cuda_stream__, a torch.cuda.Stream, a cupy.cuda.Stream or a CUstream int"
        )
    if h == PER_THREAD:
        raise ArigValueError("the per-thread default stream (CU_STREAM_PER_THREAD) cannot be adopted: it is a different stream on each thread")
    return h, _device_index(stream)


def event_handle(event: Any) -> tuple[int, int | None]:
    """``(CUevent, GPU ordinal or None)`` of an event object or raw handle (0: never recorded).

    Understood: ``torch.cuda.Event`` (``cuda_event``, made at its first record),
    ``cupy.cuda.Event`` (``ptr``), cuda.core's ``Event`` (``handle``), an int.
    """
    if hasattr(event, "cuda_event"):
        h = _as_handle(event.cuda_event, "the event")
    elif hasattr(event, "ptr") and not isinstance(event, int):
        h = _as_handle(event.ptr, "the event")
    elif hasattr(event, "handle") and not isinstance(event, int):
        h = _as_handle(event.handle, "the event")
    elif isinstance(event, int) and not isinstance(event, bool):
        h = _as_handle(event, "the event")
    else:
        raise ArigTypeError(f"cannot wait for {safe_repr(event)}: expected a torch.cuda.Event, a cupy.cuda.Event, a cuda.core Event or a CUevent int")
    return h, _device_index(event)


class _Private:
    """The devices ``wait_event`` opened on one loop, and the keeper that stops them."""

    def __init__(self) -> None:
        self.devices: dict[int, Any] = {}
        self.keeper: Any = None
        self.lock = anyio.Lock()  # of the running library: asyncio's or trio's


# Per loop (an asyncio loop, or a trio run's port); dropped when the loop shuts down (the keeper's finally).
_private: weakref.WeakKeyDictionary[Any, _Private] = weakref.WeakKeyDictionary()


async def _stop_all(loop: Any, private: _Private) -> None:
    """At the loop's shutdown (``LoopPort.at_shutdown``): stop the devices ``wait_event`` opened on it."""
    _private.pop(loop, None)
    for dev in list(private.devices.values()):
        await dev.stop()
    private.devices.clear()


async def _device_for(gpu: int | None) -> Any:
    """An open CUDA device of this loop on ``gpu`` (any GPU if None), opening one if none is."""
    loop = running_loop()
    for found in _device.open_devices(loop):
        if "wait_event" in found.features and (gpu is None or found.facts.get("ordinal") == gpu):
            return found
    private = _private.get(loop)
    if private is None:
        private = _private[loop] = _Private()
        private.keeper = await port_of(loop).at_shutdown(functools.partial(_stop_all, loop, private))
    async with private.lock:
        index = 0 if gpu is None else gpu
        dev = private.devices.get(index)
        if dev is None or dev.stopped or dev.lost is not None:
            from . import gpu as opener  # noqa: PLC0415 - arig.cuda imports this module

            dev = private.devices[index] = await _device.open(opener(index))
        return dev


async def wait_event(event: Any, *, device: Any = None) -> None:
    """Return once the work an existing CUDA event records has completed.

    ``event``: a ``torch.cuda.Event``, ``cupy.cuda.Event``, cuda.core
    ``Event`` or a raw ``CUevent``.  Its latest record when the device's
    thread reaches the wait is what is awaited (as ``cuStreamWaitEvent``);
    an event never recorded is complete.  ``device``: the CUDA device whose
    join lane waits; by default an open CUDA device of this loop on the
    event's GPU, else one opened for this loop and stopped at its shutdown.
    Raises ``DeviceLost`` if the device is lost meanwhile.
    """
    handle, gpu = event_handle(event)
    if handle == 0:
        return
    dev = device if device is not None else await _device_for(gpu)
    v = await dev.join_event(handle, keep=event)  # a device without "wait_event" refuses, naming why
    await dev.wait(v)
