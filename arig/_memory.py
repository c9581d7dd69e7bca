"""Buffers and images: handle holders with finalizers.

A buffer's memory is freed by its driver on the device's submit thread,
never on the event loop: ``close()`` and the finalizer only post the free.
The finalizer holds the release callable, never the buffer, so it cannot
keep the buffer alive (cuda.core's ``_MembersNeededForFinalize`` pattern).

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

__all__ = ["Buffer", "Image", "Kind", "kind_names", "describe_kinds"]


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


class Buffer:
    """Memory of a device: ``address`` and ``nbytes``; ``numpy()`` for host-visible kinds.

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
    ) -> None:
        self.device = device
        self.kind = kind
        self.address = address
        self.nbytes = nbytes
        self.readonly = readonly
        self._host = host
        self._keep = keep  # a wrapped array's owner (``Device.wrap``), released with the buffer
        self._finalizer = weakref.finalize(self, release)

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        """Free the memory (on the device's submit thread).  Idempotent."""
        self._finalizer()

    def numpy(self, dtype: Any = np.uint8, shape: Any = None) -> np.ndarray[Any, Any]:
        """A numpy view of host-visible memory (host, pinned and mapped kinds)."""
        if self._host is None:
            raise ArigTypeError(f"{self.kind} memory of {self.device} is not visible to the host; use download()")
        if self.closed:
            raise ArigValueError("buffer is closed")
        view: np.ndarray[Any, Any] = self._host.view(dtype)
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
        state = "closed" if self.closed else f"0x{self.address:x}"
        return f"<arig.Buffer {self.kind} {self.nbytes} bytes on {self.device} at {state}>"


class Image:
    """Code loaded on a device (a CUDA module); ``function(name)`` is a kernel's handle."""

    def __init__(self, device: str, handle: int, functions: dict[str, int], release: Callable[[], None]) -> None:
        self.device = device
        self.handle = handle
        # Resolved at load, on the submit thread: looking a name up later
        # must not call the driver from the event loop.
        self._functions = dict(functions)
        self._finalizer = weakref.finalize(self, release)

    @property
    def names(self) -> list[str]:
        return sorted(self._functions)

    def function(self, name: str) -> int:
        """The CUfunction of entry ``name`` as an int (``ArigKeyError``, a ``KeyError``, naming it if absent)."""
        if not self._finalizer.alive:
            raise ArigValueError("image is unloaded")
        try:
            return self._functions[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name
            raise ArigKeyError(f"no function {safe_repr(name)} in the image; it has {self.names}") from None

    @property
    def loaded(self) -> bool:
        return self._finalizer.alive

    def unload(self) -> None:
        """Unload the image (on the device's submit thread).  Idempotent."""
        self._finalizer()


#: What must never be freed: memory, cores, eventfds, semaphores and handles that the GPU or a
#: driver callback may still use after their device closed (a stream that still had work, a
#: channel the driver would not free, a graph launch whose end cannot be seen).  Freeing them
#: could let the GPU write into memory reused for something else; keeping them costs only
#: their size, once per such close.  One list for every device kind.
GRAVEYARD: list[Any] = []


def never_free(*objs: Any) -> None:
    """Keep ``objs`` referenced for the life of the process (any thread: a list append)."""
    GRAVEYARD.extend(objs)
