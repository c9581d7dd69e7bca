"""Buffers and images: handle holders with finalizers, freed in stream order.

A buffer's memory is freed by its driver on the device's submit thread,
never on the event loop: ``close()`` and the finalizer only post the free,
and only once every value submitted before the close is reached (the
device's :class:`Ledger`, the one rule of every device: work still queued
may use the memory).  The finalizer holds what the buffer owns (``_Held``),
never the buffer, so it cannot keep the buffer alive (cuda.core's
``_MembersNeededForFinalize`` pattern).

``Buffer`` knows nothing of any driver: what only one driver's memory has
(a CUDA buffer's ``__cuda_array_interface__`` and its DLPack device) lives
in that driver's subclass.

A buffer's ``kind`` is a name each device gives its kinds of memory; the
same name may mean different memory on different devices (``"mapped"`` is
host memory mapped for the GPU on a CUDA device, and VRAM mapped for the
CPU on an NV device).  So each device describes its kinds once, as
:class:`Kind` rows of one table (``arig.cuda._resources.KIND_TABLE``,
``arig.nvrm._memory.KIND_TABLE``), and its checks, messages and docs read
them from there.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ._errors import ArigKeyError, ArigTypeError, ArigValueError, safe_repr

__all__ = ["Buffer", "Image", "Kind", "Ledger", "kind_names", "describe_kinds", "refuse_closed", "refuse_used", "uses_of", "owners_of"]


@dataclass(frozen=True)
class Kind:
    """What one kind of memory of one device is: where it lives, who reads it, and what makes it.

    ``lives``: ``"host"`` (the machine's RAM) or ``"gpu"`` (the GPU's own
    memory, VRAM).  ``cpu``: the program reads and writes it in place
    (``buf.numpy()``).  ``gpu``: kernels read and write it at
    ``buf.address``; without it, arig promises the GPU reaches it only
    through copies.  ``made_by``: the call that makes such buffers
    (``"alloc"``: ``dev.alloc(n, kind)`` takes the name).  ``what``: one
    phrase for messages and docs.
    """

    name: str
    lives: Literal["host", "gpu"]
    cpu: bool
    gpu: bool
    made_by: str
    what: str

    def __str__(self) -> str:
        return f"{self.name!r}: {self.what}"


def kind_names(kinds: Sequence[Kind], made_by: str = "alloc") -> tuple[str, ...]:
    """The names of the kinds ``made_by`` makes, in the table's order."""
    return tuple(k.name for k in kinds if k.made_by == made_by)


def describe_kinds(kinds: Sequence[Kind], made_by: str = "alloc") -> str:
    """One line per kind ``made_by`` makes, for a message that must say what each name is."""
    return "; ".join(str(k) for k in kinds if k.made_by == made_by)


class _Held:
    """What a buffer or image owns, apart from the object itself: shared by the object, its finalizer
    and its device's ledger, and holding no reference to the object (so the finalizer cannot keep it alive).

    ``closed``: no new work may name it (set at once by ``close``); ``freed``: its memory is gone
    (the driver's free is posted, or the device stopped), so not even work submitted before the
    close may touch it any more."""

    __slots__ = ("release", "host", "keep", "ledger", "closed", "freed", "why", "what", "functions", "owner", "__weakref__")

    def __init__(self, release: Callable[[], None] | None, host: Any, keep: Any, ledger: Ledger | None, what: str = "buffer") -> None:
        self.what = what  # "buffer" or "image", for messages
        self.functions: tuple[int, ...] = ()  # an image's kernel handles, in _FUNCTIONS while its code lives
        self.owner: weakref.ref[Any] | None = None  # an image's Image object (what a Launch of its kernels keeps)
        self.release = release
        self.host = host
        self.keep = keep
        self.ledger = ledger
        self.closed = False
        self.freed = False
        self.why = ""  # what closed it, beyond close() (its device's stop), for messages


#: Each loaded kernel's handle -> what its image owns, while the code lives: a launch made of the
#: handle finds its image there (``uses_of``), so that one submitted after the unload is refused.
_FUNCTIONS: dict[int, _Held] = {}


def _forget_functions(held: _Held) -> None:
    for f in held.functions:
        if _FUNCTIONS.get(f) is held:
            del _FUNCTIONS[f]


def _close(held: _Held) -> None:
    """``close()``, ``unload()`` and the finalizer (any thread): closed now, freed in stream order."""
    if held.closed:
        return
    held.closed = True
    if held.ledger is None:
        _free(held)
    else:
        held.ledger.close(held)


def _free(held: _Held) -> None:
    """Drop what keeps the memory (any thread), then post the driver's free.  Idempotent."""
    if held.freed:
        return
    held.freed = True
    held.host = held.keep = None
    _forget_functions(held)
    release, held.release = held.release, None
    if held.ledger is not None:
        held.ledger.forget(held)
    if release is not None:
        release()


class Ledger:
    """The buffers and images one device made, and when their memory is freed.

    The rule, the same on every device: ``close()`` (or ``unload()``, or the
    collection of the object) makes it closed at once, and its memory is freed
    once every value submitted before the close is reached, as a stream-ordered
    free is (cuda.core's ``Buffer.close(stream)``).  Work submitted before the
    close may still use the memory; work submitted after it must not (the device
    refuses a copy, or an ``arg``/``keep`` that names a closed buffer, before a
    value is assigned).  While the device is lost nothing is freed here: the
    GPU may still run work that uses the memory, and the backend's close decides
    at stop, as it does for everything it holds.  At stop (:meth:`end`) every
    buffer and image of the device is closed and freed: the backend freed the
    memory itself, so nothing of it may be used, on this device or another.

    Threads: ``track`` on the submit thread (where the backend makes the objects);
    ``close`` and ``forget`` on any thread; ``end`` on the loop, after the submit
    thread ended.  The timeline runs the frees that wait for a value (loop thread).
    """

    def __init__(self, timeline: Any, name: str) -> None:
        self._tl = timeline
        self.name = name
        self._live: dict[int, _Held] = {}  # id -> what is not freed yet
        self.ended = False

    def track(self, held: _Held) -> None:
        if self.ended:  # made while the device stopped: nothing may use it
            held.closed = held.freed = True
            held.why = f" (its device {self.name} stopped)"
            held.host = held.keep = held.release = None
            return
        self._live[id(held)] = held

    def forget(self, held: _Held) -> None:
        self._live.pop(id(held), None)

    def close(self, held: _Held) -> None:
        tl = self._tl
        if self.ended or tl.lost is not None:
            return  # freed at stop (already, or by the backend's close): the GPU may still use it
        target = tl.assigned  # every value submitted so far may use the memory
        if tl.reached >= target:
            _free(held)
        else:
            tl.when_reached(target, _free, held)

    def end(self) -> None:
        """Once the backend closed: every buffer and image is closed and freed.  At stop on the loop
        thread, and on the submit thread right after the close (a device collected without a stop
        has no loop to do it); the second call finds nothing."""
        self.ended = True
        live, self._live = self._live, {}
        for held in list(live.values()):
            held.why = f" (its device {self.name} stopped)"
            held.closed = held.freed = True
            held.host = held.keep = held.release = None
            _forget_functions(held)


def refuse_closed(*objs: Any) -> None:
    """Raise ``ArigValueError`` if any of ``objs`` is, or a tuple or list of them directly holds, a closed
    buffer or image: work submitted after a close must not use its memory (loop thread, before a value)."""
    for obj in objs:
        if type(obj) is tuple or type(obj) is list:
            for o in obj:
                if isinstance(o, (Buffer, Image)) and o._held.closed:
                    _refuse(o)
        elif isinstance(obj, (Buffer, Image)) and obj._held.closed:
            _refuse(obj)


def _refuse(obj: Buffer | Image) -> None:
    what = "closed" if isinstance(obj, Buffer) else "unloaded"
    raise ArigValueError(f"{obj!r} is {what}{obj._held.why}: work submitted after its close() must not use it")


def uses_of(func: int, args: Any) -> tuple[_Held, ...]:
    """What a launch of ``func`` with argument bytes ``args`` uses, where arig can see it: the image the
    kernel handle came from (while its code lives), and the buffers ``args`` names if it was packed by
    ``arig.cuda.pack`` (its ``uses``).  Any thread, no driver call."""
    image = _FUNCTIONS.get(func)
    packed: tuple[_Held, ...] = getattr(args, "uses", ())
    return packed if image is None else (image, *packed)


def owners_of(uses: tuple[_Held, ...]) -> tuple[Any, ...]:
    """The Image objects of the images in ``uses``, to be kept alive by a launch that names their
    kernels: an image collected while a launch of it is kept would be unloaded under it (on CUDA the
    launch would then fail with an invalid handle and lose the device)."""
    out = []
    for held in uses:
        owner = held.owner() if held.owner is not None else None
        if owner is not None:
            out.append(owner)
    return tuple(out)


def refuse_used(uses: tuple[_Held, ...]) -> None:
    """Raise ``ArigValueError`` if a launch uses a closed buffer or an unloaded image (loop thread, at submit)."""
    for held in uses:
        if held.closed:
            what = "an unloaded image" if held.what == "image" else "a closed buffer"
            raise ArigValueError(f"the launch uses {what}{held.why}: work submitted after its close() must not use it")


class Buffer:
    """Memory of a device: ``address`` and ``nbytes``; ``numpy()`` for host-visible kinds.

    ``close()`` frees it in stream order (:class:`Ledger`): closed at once, the
    memory freed once every value submitted before the close is reached.

    DLPack export works for host-visible memory (as ``kDLCPU``) here; a driver
    whose memory the host cannot see subclasses it and sets ``_dl``, its DLPack
    ``(device type, id)`` (``arig._dlpack.buffer_dlpack_device``).
    """

    def __init__(
        self,
        device: str,
        kind: str,
        address: int,
        nbytes: int,
        release: Callable[[], None],
        host: np.ndarray[Any, Any] | None = None,
        keep: Any = None,
        readonly: bool = False,
        ledger: Ledger | None = None,
    ) -> None:
        self.device = device
        self.kind = kind
        self._address = address
        self.nbytes = nbytes
        self.readonly = readonly
        self._visible = host is not None
        # The memory and a wrapped array's owner (``Device.wrap``), released with the memory.
        self._held = held = _Held(release, host, keep, ledger)
        if ledger is not None:
            ledger.track(held)
        self._finalizer = weakref.finalize(self, _close, held)

    @property
    def _host(self) -> np.ndarray[Any, Any] | None:
        """The host's view of the memory while it lives (None for memory the host cannot see, or freed)."""
        host: np.ndarray[Any, Any] | None = self._held.host
        return host

    @property
    def _keep(self) -> Any:
        """A wrapped array's owner (``Device.wrap``) while the memory lives."""
        return self._held.keep

    @property
    def address(self) -> int:
        """Where the memory is (for the GPU); ``ArigValueError`` once it is freed."""
        if self._held.freed:
            raise ArigValueError(f"buffer is closed{self._held.why}: its memory was freed")
        return self._address

    @property
    def closed(self) -> bool:
        """Was it closed (``close()``, or its device stopped)?  Its memory may live on until the work
        submitted before the close is done; no new work may name it."""
        return self._held.closed

    def close(self) -> None:
        """Close now; the memory is freed once every value submitted before this call is reached.

        Idempotent, any thread.  Work submitted before the close (a copy, a
        launch, a fill's work that reads ``numpy()``) still finds the memory;
        work submitted after it must not use the buffer: a copy, or an
        ``arg``/``keep`` naming it, is refused.  At stop every buffer is closed.
        """
        _close(self._held)

    def numpy(self, dtype: Any = np.uint8, shape: Any = None) -> np.ndarray[Any, Any]:
        """A numpy view of host-visible memory (host, pinned and mapped kinds).

        After ``close()`` it still works until the memory is freed (for the work
        submitted before the close), then raises ``ArigValueError``."""
        if not self._visible:
            raise ArigTypeError(f"{self.kind} memory of {self.device} is not visible to the host; use download()")
        host = self._held.host
        if host is None:
            raise ArigValueError(f"buffer is closed{self._held.why}: its memory was freed")
        view: np.ndarray[Any, Any] = host.view(dtype)
        return view if shape is None else view.reshape(shape)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: bool | None = None) -> Any:
        """The bytes as a DLPack capsule (``torch.from_dlpack(buf)``, ``cupy.from_dlpack(buf)``: no copy).

        The tensor is 1-D ``uint8``; view it as the consumer's dtype.  No
        stream synchronization is done (``stream`` is accepted and ignored):
        await the arig work that writes the buffer before handing it out.
        The capsule keeps the buffer alive; ``close()`` still frees it.
        """
        from . import _dlpack  # noqa: PLC0415 - ctypes capsule machinery, loaded on first use

        return _dlpack.buffer_dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        from . import _dlpack  # noqa: PLC0415

        return _dlpack.buffer_dlpack_device(self)

    def __repr__(self) -> str:
        state = "closed" if self._held.closed else f"0x{self._address:x}"
        return f"<arig.Buffer {self.kind} {self.nbytes} bytes on {self.device} at {state}>"


class Image:
    """Code loaded on a device (a CUDA module); ``function(name)`` is a kernel's handle.

    ``unload()`` is a buffer's ``close()`` (:class:`Ledger`): unloaded at once,
    its code freed once every value submitted before the unload is reached."""

    def __init__(self, device: str, handle: int, functions: dict[str, int], release: Callable[[], None], ledger: Ledger | None = None) -> None:
        self.device = device
        self.handle = handle
        # Resolved at load, on the submit thread: looking a name up later
        # must not call the driver from the event loop.
        self._functions = dict(functions)
        self._held = held = _Held(release, None, None, ledger, "image")
        held.functions = tuple(self._functions.values())
        held.owner = weakref.ref(self)
        for f in held.functions:
            _FUNCTIONS[f] = held
        if ledger is not None:
            ledger.track(held)
        self._finalizer = weakref.finalize(self, _close, held)

    @property
    def names(self) -> list[str]:
        return sorted(self._functions)

    def function(self, name: str) -> int:
        """The CUfunction of entry ``name`` as an int (``ArigKeyError``, a ``KeyError``, naming it if absent)."""
        if self._held.closed:
            raise ArigValueError(f"image is unloaded{self._held.why}")
        try:
            return self._functions[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name
            raise ArigKeyError(f"no function {safe_repr(name)} in the image; it has {self.names}") from None

    @property
    def loaded(self) -> bool:
        return not self._held.closed

    def unload(self) -> None:
        """Unload now; the code is freed once every value submitted before this call is reached.  Idempotent."""
        _close(self._held)

    def __repr__(self) -> str:
        return f"<arig.Image of {self.device}{'' if self.loaded else ' unloaded'}>"


#: What must never be freed: memory, cores, eventfds, semaphores and handles that the GPU or a
#: driver callback may still use after their device closed (a stream that still had work, a
#: channel the driver would not free, a graph launch whose end cannot be seen).  Freeing them
#: could let the GPU write into memory reused for something else; keeping them costs only
#: their size, once per such close.  One list for every device kind.
GRAVEYARD: list[Any] = []


def never_free(*objs: Any) -> None:
    """Keep ``objs`` referenced for the life of the process (any thread: a list append)."""
    GRAVEYARD.extend(objs)
