"""The argument checks of a device's calls: what each call refuses before anything is queued.

Pure functions of the arguments and the device's name: no driver, no device
state, so they run on the caller's thread (the event loop's) before the call
reaches the submit thread.  Each raises the ``ArigTypeError`` or
``ArigValueError`` the device's method documents.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import operator
import weakref
from types import FunctionType, MethodType
from typing import Any

import numpy as np

from ._errors import ArigTypeError, ArigValueError, WrongLoopError, safe_repr
from ._memory import Buffer


#: The largest buffer any device is asked for: a size past it is a mistake (2**70), and would
#: otherwise surface as numpy's or ctypes' own overflow text, naming no argument.
MAX_NBYTES = (1 << 63) - 1


def check_index(value: Any, what: str) -> int:
    """``value`` as an int: an int or anything with ``__index__`` (a numpy integer), not a bool;
    ``ArigTypeError`` naming ``what`` otherwise."""
    if type(value) is int:
        return value
    if not isinstance(value, (bool, np.bool_)):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise ArigTypeError(f"{what} must be an int, got {type(value).__name__}")


def check_value(v: Any) -> int:
    """A timeline value (``wait``, ``reached_at``): an int of at least 0 (0 is reached from the start)."""
    value = check_index(v, "v")
    if value < 0:
        raise ArigValueError(f"v must be a value the device handed out (1, 2, ...) or 0, got {value}")
    return value


def check_alloc(nbytes: Any, kind: Any) -> int:
    """``alloc``'s size (a positive int) and kind (None or a str)."""
    n = check_index(nbytes, "nbytes")
    if n <= 0:
        raise ArigValueError(f"nbytes must be positive, got {n}")
    if n > MAX_NBYTES:
        raise ArigValueError(f"nbytes is too large: {n} bytes (at most 2**63-1)")
    if kind is not None and not isinstance(kind, str):
        raise ArigTypeError(f"kind must be a str, got {type(kind).__name__}")
    return n


def owned(buf: Buffer, device: Any) -> Buffer:
    """Mark ``buf`` as made by ``device`` (the object itself, held weakly), for :func:`check_buffer`.

    Names are not enough: two open host devices are both ``HOST``, and two
    devices of one GPU share its name, yet one's buffer is no memory of the other."""
    buf._arig_owner = weakref.ref(device)  # type: ignore[attr-defined]
    return buf


def check_buffer(buf: Any, device: Any) -> Buffer:
    """``buf`` if it is an open buffer made by ``device`` (a ``Device``: compared by identity).

    A buffer no device made (built by hand, for a backend's own use) is known
    by its device's name alone, as before devices marked theirs."""
    if isinstance(buf, Buffer) and buf.closed and buf.device == device.name:
        # First: "its device stopped" says more than "another device's" of a stopped device's buffer.
        raise ArigValueError(f"buffer is closed{buf._held.why}: no new work may use it")
    owner = getattr(buf, "_arig_owner", None)
    if not isinstance(buf, Buffer) or (owner() is not device if owner is not None else buf.device != device.name):
        other = f" (a buffer of another {device.name} device)" if isinstance(buf, Buffer) and buf.device == device.name else ""
        raise ArigTypeError(f"expected a buffer of {device.name}, got {safe_repr(buf)}{other}")
    return buf


def check_copy(buf: Any, array: Any, device: Any, writable: bool) -> np.ndarray[Any, Any]:
    """``array`` if ``upload`` (``writable=False``) or ``download`` may copy between it and ``buf``."""
    check_buffer(buf, device)
    if not isinstance(array, np.ndarray):
        raise ArigTypeError(f"expected a numpy array, got {type(array).__name__}")
    if array.dtype.hasobject:
        # Its bytes are pointers to Python objects: a copy would write raw bytes over them.
        raise ArigTypeError(f"an array of dtype {array.dtype} holds Python objects, not data: copy arrays of plain numbers or bytes")
    if not array.flags.c_contiguous or (writable and not array.flags.writeable):
        raise ArigValueError("the array must be C-contiguous" + (" and writable" if writable else ""))
    if array.nbytes > buf.nbytes:
        raise ArigValueError(f"array of {array.nbytes} bytes does not fit the buffer of {buf.nbytes}")
    return array


def check_buffer_copy(dst: Any, src: Any, nbytes: Any, device: Any) -> tuple[Any, int]:
    """``copy``'s source device and byte count: ``dst`` a buffer of ``device``, ``src`` an open buffer
    of any open device of the same loop (``device`` included), ``nbytes`` from 1 to both sizes
    (``src``'s size if None)."""
    check_buffer(dst, device)
    owner = getattr(src, "_arig_owner", None)
    src_dev = owner() if owner is not None else None
    if not isinstance(src, Buffer) or src_dev is None:
        raise ArigTypeError(f"copy's source must be a buffer of an open device (arig.open's), got {safe_repr(src)}")
    check_buffer(src, src_dev)  # closed: refused by name
    if src_dev._loop is not device._loop:
        raise WrongLoopError(f"copy's source is a buffer of {src_dev.name}, a device of another event loop: a copy spans one loop's devices")
    n = src.nbytes if nbytes is None else check_index(nbytes, "nbytes")
    if n <= 0 or n > src.nbytes or n > dst.nbytes:
        raise ArigValueError(f"copy of {n} bytes: it must be at least 1 and fit both the source ({src.nbytes} bytes) and the destination ({dst.nbytes})")
    return src_dev, n


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
    check_timeout(stop_timeout, "stop_timeout")
    return name


def check_timeout(value: Any, what: str) -> float:
    """A timeout in seconds: a positive real number (``math.inf`` waits for ever), as a float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ArigTypeError(f"{what} must be a number of seconds, got {type(value).__name__}")
    try:
        seconds = float(value)
    except OverflowError:
        raise ArigValueError(f"{what} is too large: a number of seconds past the float range (give math.inf to wait for ever)") from None
    if not seconds > 0:
        raise ArigValueError(f"{what} must be positive, got {value}")
    return seconds


# ---------------------------------------------------------------------------------------------
# A Python fill's signature


def _code_refuses(fn: FunctionType, bound: int) -> bool:
    """Can a plain function (``bound`` of its arguments already given) not take (queue, arg, v)?

    Read from its code object: a few attribute reads, cheap enough for every submission
    (``inspect.signature`` costs some 15 us, several times a whole submit)."""
    c = fn.__code__
    positional = c.co_argcount - bound
    required = positional - len(fn.__defaults__ or ())
    required_kw = c.co_kwonlyargcount - len(fn.__kwdefaults__ or ())
    return required > 3 or required_kw > 0 or (positional < 3 and not c.co_flags & inspect.CO_VARARGS)


def _refuses(fill: Any) -> bool:
    """Can ``fill`` not be called with three positional arguments, as far as can be read?"""
    t = type(fill)
    if t is FunctionType:
        return _code_refuses(fill, 0)
    if t is MethodType and type(fill.__func__) is FunctionType:
        return _code_refuses(fill.__func__, 1)
    if t is functools.partial and type(fill.func) is FunctionType and not fill.keywords:
        return _code_refuses(fill.func, len(fill.args))
    call = getattr(t, "__call__", None)  # noqa: B004 - the type's own def __call__, read from its code
    if type(call) is FunctionType and t is not type:
        return _code_refuses(call, 1)
    try:
        sig = inspect.signature(fill)
    except (TypeError, ValueError):  # no signature to read: the call decides
        return False
    try:
        sig.bind(None, None, 0)
    except TypeError:
        return True
    return False


def check_fill_args(fill: Any) -> None:
    """Refuse a Python fill that cannot be called as ``fill(queue, arg, v)``, where that can be read.

    Called on the submit thread, a fill of another arity would raise there and
    lose the device; refused here, before a value is assigned, the device is
    kept.  A callable whose signature cannot be read (many builtins) passes:
    the call decides."""
    if type(fill) is FunctionType and (c := fill.__code__).co_argcount == 3 and not c.co_kwonlyargcount:
        return  # the usual fill, in three reads
    if not _refuses(fill):
        return
    name = getattr(fill, "__qualname__", None) or safe_repr(fill)
    try:
        takes = f"takes {inspect.signature(fill)}"
    except (TypeError, ValueError):  # a partial whose own arguments do not fit its function
        takes = "cannot take its own bound arguments"
    raise ArigTypeError(f"fill {name} {takes}: it cannot be called as fill(queue, arg, v), with 3 positional arguments")
