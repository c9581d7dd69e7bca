"""The argument checks of a device's calls: what each call refuses before anything is queued.

Pure functions of the arguments and the device's name: no driver, no device
state, so they run on the caller's thread (the event loop's) before the call
reaches the submit thread.  Each raises the ``ArigTypeError`` or
``ArigValueError`` the device's method documents.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._errors import ArigTypeError, ArigValueError, safe_repr
from ._memory import Buffer


def check_index(value: Any, what: str) -> int:
    """``value`` if it is an int (not a bool); ``ArigTypeError`` naming ``what`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArigTypeError(f"{what} must be an int, got {type(value).__name__}")
    return value


def check_alloc(nbytes: Any, kind: Any) -> int:
    """``alloc``'s size (a positive int) and kind (None or a str)."""
    n = check_index(nbytes, "nbytes")
    if n <= 0:
        raise ArigValueError(f"nbytes must be positive, got {n}")
    if kind is not None and not isinstance(kind, str):
        raise ArigTypeError(f"kind must be a str, got {type(kind).__name__}")
    return n


def check_buffer(buf: Any, device: str) -> Buffer:
    """``buf`` if it is an open buffer of the device named ``device``."""
    if not isinstance(buf, Buffer) or buf.device != device:
        raise ArigTypeError(f"expected a buffer of {device}, got {safe_repr(buf)}")
    if buf.closed:
        raise ArigValueError(f"buffer is closed{buf._held.why}: no new work may use it")
    return buf


def check_copy(buf: Any, array: Any, device: str, writable: bool) -> np.ndarray[Any, Any]:
    """``array`` if ``upload`` (``writable=False``) or ``download`` may copy between it and ``buf``."""
    check_buffer(buf, device)
    if not isinstance(array, np.ndarray):
        raise ArigTypeError(f"expected a numpy array, got {type(array).__name__}")
    if not array.flags.c_contiguous or (writable and not array.flags.writeable):
        raise ArigValueError("the array must be C-contiguous" + (" and writable" if writable else ""))
    if array.nbytes > buf.nbytes:
        raise ArigValueError(f"array of {array.nbytes} bytes does not fit the buffer of {buf.nbytes}")
    return array


def dma_region(buf: Buffer, offset: Any, nbytes: Any) -> tuple[int, int]:
    """``dma``'s (offset, size): a region of at least one byte inside ``buf`` (all after ``offset`` if ``nbytes`` is None)."""
    offset = check_index(offset, "offset")
    n = buf.nbytes - offset if nbytes is None else check_index(nbytes, "nbytes")
    if offset < 0 or offset + n > buf.nbytes or n <= 0:
        raise ArigValueError(f"the region at {offset} of {n} bytes is not inside the buffer of {buf.nbytes} bytes")
    return offset, n


def host_memory(obj: Any) -> tuple[memoryview, int]:
    """``map_host``'s view of ``obj`` (writable, C-contiguous, at least one byte) and its address.

    The caller keeps the view until the mapping is made: while it is exported,
    ``obj`` cannot be resized under the driver."""
    try:
        view = memoryview(obj)
    except TypeError:
        raise ArigTypeError(f"map_host takes an object with the buffer protocol (a numpy array, a bytearray), not {type(obj).__name__}") from None
    if view.readonly:
        raise ArigValueError("map_host needs writable memory: the GPU may write it, and the kernel pins its pages for writing")
    if not view.c_contiguous:
        raise ArigValueError("map_host needs C-contiguous memory")
    if view.nbytes == 0:
        raise ArigValueError("map_host needs at least one byte")
    return view, np.frombuffer(view, dtype=np.uint8).ctypes.data


def check_image(image: Any) -> bytes:
    """``load``'s image as bytes: a non-empty bytes-like object."""
    if not isinstance(image, (bytes, bytearray, memoryview)):
        raise ArigTypeError(f"image must be bytes, got {type(image).__name__}")
    if len(image) == 0:
        raise ArigValueError("image is empty")
    return bytes(image)


def check_open(opener: Any, max_pending: Any, stop_timeout: Any) -> str:
    """``open``'s arguments; the opener's name."""
    name = getattr(opener, "name", None)
    if not isinstance(name, str) or not callable(getattr(opener, "make", None)):
        raise ArigTypeError(f"expected an opener (arig.host.cpu(), arig.cuda.gpu(i), ...), got {safe_repr(opener)}")
    if check_index(max_pending, "max_pending") < 1:
        raise ArigValueError(f"max_pending must be at least 1, got {max_pending}")
    if not stop_timeout > 0:
        raise ArigValueError(f"stop_timeout must be positive, got {stop_timeout}")
    return name
