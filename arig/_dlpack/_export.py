"""Exporting arig memory as DLPack capsules, and the lifetime of every export still out.

:func:`export` builds a ``"dltensor"`` capsule (``DLManagedTensor``) or,
when the consumer passes ``max_version=(1, x)``, a ``"dltensor_versioned"``
one (``DLManagedTensorVersioned``, DLPack 1.0/1.1).  The managed tensor and
its shape and strides live in ctypes objects held in :data:`_live`,
together with the ``owner`` (an arig ``Buffer``): the owner stays alive
until the consumer calls the deleter, or until the capsule dies unconsumed
(its destructor then releases it, as the DLPack Python specification
requires).  :func:`buffer_dlpack` and :func:`buffer_dlpack_device` are
``Buffer.__dlpack__`` and ``Buffer.__dlpack_device__``.

Why the callbacks are written as they are
    The deleter and the capsule destructor are ctypes callbacks called from
    C, from any thread (ctypes takes the GIL), possibly during interpreter
    shutdown.  So: the thunks are referenced from the module *and* given one
    extra reference that is never dropped, so they outlive the module's
    teardown; every Python object they use is bound as a default argument,
    not looked up as a global (globals may be cleared at shutdown); and at
    exit every deleter still armed is set to NULL (``_disarm``), so a
    consumer that calls it after the interpreter has finalized (a C++ static
    destructor holding a tensor) finds no deleter -- which the DLPack header
    allows -- instead of jumping into a dead interpreter.

    One limit cannot be lifted without compiled code: a ctypes callback
    cannot leave an exception in flight.  When C code destroys an
    unconsumed capsule while an exception is propagating (numpy's
    ``from_dlpack`` refusing a CUDA tensor drops the capsule with its own
    error set), the destructor still releases the owner, but the
    pending exception is reported through ``sys.unraisablehook`` and the
    caller sees a ``SystemError`` in its place.  Asking for a device the
    exporter cannot give is therefore refused before any capsule exists
    (:func:`check_request`).
"""

from __future__ import annotations

import atexit
import ctypes
import math
from collections.abc import Callable, Sequence
from ctypes import c_int64, c_void_p
from typing import Any

import numpy as np

from .._errors import ArigTypeError, ArigValueError, safe_repr
from ._abi import (
    _DELETER_T,
    _DESTRUCTOR_T,
    _NAME_LEGACY,
    _NAME_VERSIONED,
    _OUR_NAMES,
    _VERSION,
    DLManagedTensor,
    DLManagedTensorVersioned,
    _as_index,
    _forever,
    _kDLBool,
    _kDLComplex,
    _kDLFloat,
    _kDLInt,
    _kDLUInt,
    _PyCapsule_GetName_raw,
    _PyCapsule_GetPointer_raw,
    _PyCapsule_New,
    kDLCPU,
    kDLCUDAHost,
)


class _Export:
    """What one exported tensor keeps alive: the managed struct, its shape and strides, and the owner."""

    __slots__ = ("managed", "shape", "strides", "owner")

    def __init__(
        self, managed: DLManagedTensor | DLManagedTensorVersioned, shape: ctypes.Array[c_int64], strides: ctypes.Array[c_int64], owner: object
    ) -> None:
        self.managed = managed
        self.shape = shape
        self.strides = strides
        self.owner = owner


#: Live exports by the address of their managed struct: the deleter's key.
_live: dict[int, _Export] = {}


def _deleter(ptr: int | None, _live: dict[int, _Export] = _live) -> None:
    """DLPack deleter of every arig export: drop the export (and so the owner).

    A pop: idempotent, and atomic under the GIL whatever thread the consumer
    calls from.  Even when entered with an exception in flight (which ctypes
    then reports as unraisable, see the module doc) the pop has happened.
    """
    if ptr is not None:
        _live.pop(ptr, None)


def _release_unconsumed(
    cap: int | None,
    _live: dict[int, _Export] = _live,
    _ours: frozenset[int] = _OUR_NAMES,
    _get_name: Any = _PyCapsule_GetName_raw,
    _get_pointer: Any = _PyCapsule_GetPointer_raw,
) -> None:
    """Release the export of a dying capsule if nobody consumed it (it still has our name)."""
    name = _get_name(cap)
    if name in _ours:
        ptr = _get_pointer(cap, name)
        if ptr is not None:
            _live.pop(ptr, None)


def _capsule_destructor(cap: int | None, _release: Callable[[int | None], None] = _release_unconsumed) -> None:
    """PyCapsule destructor of every arig capsule.

    A consumer renames the capsule (``used_dltensor``) and calls the deleter
    itself later; a capsule that still has our name dies unconsumed and its
    export is released here.  If an exception was in flight when the
    capsule died, the first C call in ``_release`` raises it (as the cause
    of a ctypes error) without having done anything, and clears it: the
    release is then done again and the exception re-raised, which ctypes
    reports through ``sys.unraisablehook`` -- the only place left for it.
    """
    try:
        _release(cap)
    except BaseException:
        _release(cap)  # should this fail too, ctypes reports it, with the first as its context
        raise


_DELETER = _DELETER_T(_deleter)
_DESTRUCTOR = _DESTRUCTOR_T(_capsule_destructor)
_forever(_DELETER)
_forever(_DESTRUCTOR)
_DELETER_ADDR: int = ctypes.cast(_DELETER, c_void_p).value or 0
_DESTRUCTOR_ADDR: int = ctypes.cast(_DESTRUCTOR, c_void_p).value or 0


def _disarm(_live: dict[int, _Export] = _live) -> None:
    """At exit: NULL the deleter of every export still out.

    A consumer that outlives the interpreter (a C++ static holding a tensor)
    then skips the call (the DLPack header says a NULL deleter is not
    called) instead of calling into a finalized interpreter.  The exports
    themselves stay in ``_live``: their memory must stay valid.
    """
    for rec in list(_live.values()):
        rec.managed.deleter = None


atexit.register(_disarm)


def _dl_dtype(dtype: Any) -> tuple[np.dtype[Any], int]:
    """numpy dtype and its DLPack type code; ``BufferError`` where DLPack has none (as numpy does)."""
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise ArigTypeError(f"dtype {safe_repr(dtype)} is not a numpy dtype: {exc}") from None
    if not dt.isnative:
        raise BufferError(f"DLPack has native byte order only, not dtype {dt}")
    codes = {"b": _kDLBool, "i": _kDLInt, "u": _kDLUInt, "f": _kDLFloat, "c": _kDLComplex}
    code = codes.get(dt.kind)
    limit = 8 if dt.kind == "f" else 16  # longdouble is not IEEE binary128 where DLPack would say so
    if code is None or dt.itemsize > limit or dt.fields is not None or dt.subdtype is not None:
        raise BufferError(f"DLPack has no type for dtype {dt} (bool, ints, IEEE floats and complex only)")
    return dt, code


def _c_strides(shape: Sequence[int], unit: int) -> list[int]:
    """C-contiguous strides of ``shape`` in multiples of ``unit``."""
    strides = [0] * len(shape)
    step = unit
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = step
        step *= max(shape[i], 1)
    return strides



def _export_dims(nbytes: int, dt: np.dtype[Any], shape: Sequence[int] | None) -> list[int]:
    """The shape of an export of ``nbytes`` bytes of ``dt``: ``shape``, checked, or 1-D of the whole."""
    if shape is None:
        if nbytes % dt.itemsize:
            raise ArigValueError(f"{nbytes} bytes are not a whole number of {dt} items ({dt.itemsize} bytes each)")
        return [nbytes // dt.itemsize]
    dims = [_as_index(n, "a shape's length") for n in (shape if isinstance(shape, Sequence) else [shape])]
    if any(n < 0 for n in dims):
        raise ArigValueError(f"shape {tuple(dims)} has a negative length")
    if math.prod(dims) * dt.itemsize != nbytes:
        raise ArigValueError(f"shape {tuple(dims)} of {dt} is {math.prod(dims) * dt.itemsize} bytes, not the {nbytes} bytes exported")
    return dims


def _capsule_minor(max_version: tuple[int, int] | None) -> int | None:
    """The 1.x minor of the versioned capsule the consumer's ``max_version`` asks for; None: a legacy one."""
    if max_version is None:
        return None
    try:
        major, want_minor = (_as_index(v, "max_version's parts") for v in max_version)
    except (TypeError, ValueError):
        raise ArigTypeError(f"max_version must be None or (major, minor), not {safe_repr(max_version)}") from None
    if major < 1:
        return None
    return min(want_minor, _VERSION[1]) if major == 1 else _VERSION[1]


def export(
    address: int,
    nbytes: int,
    device_type: int,
    device_id: int,
    owner: object,
    *,
    dtype: Any = np.uint8,
    shape: Sequence[int] | None = None,
    max_version: tuple[int, int] | None = None,
) -> Any:
    """A DLPack capsule of the ``nbytes`` bytes at ``address`` that keeps ``owner`` alive.

    The tensor is 1-D ``uint8`` of ``nbytes`` elements unless ``dtype``
    (bool, ints, floats, complex) or ``shape`` (C-contiguous; its elements
    times the item size must be ``nbytes``) say otherwise; strides are
    always written out, for consumers that do not accept NULL strides.
    ``max_version`` is the consumer's: ``None`` or a major below 1 gets the
    legacy ``"dltensor"`` capsule, a major of 1 or more a
    ``"dltensor_versioned"`` one of version 1.0 or 1.1 (the lower of the
    consumer's and ours) with flags 0 (writable, not a copy).

    ``owner`` is released when the consumer calls the deleter, or when the
    capsule is destroyed without being consumed.
    """
    address = _as_index(address, "address")
    nbytes = _as_index(nbytes, "nbytes")
    device_type = _as_index(device_type, "device_type")
    device_id = _as_index(device_id, "device_id")
    if address < 0 or nbytes < 0:
        raise ArigValueError(f"address and nbytes must be >= 0, not {address} and {nbytes}")
    dt, code = _dl_dtype(dtype)
    dims = _export_dims(nbytes, dt, shape)
    minor = _capsule_minor(max_version)
    versioned = minor is not None

    ndim = len(dims)
    shape_arr = (c_int64 * max(ndim, 1))(*dims)
    strides_arr = (c_int64 * max(ndim, 1))(*_c_strides(dims, 1))
    managed: DLManagedTensor | DLManagedTensorVersioned
    if minor is not None:
        managed = DLManagedTensorVersioned()
        managed.version.major = 1
        managed.version.minor = max(minor, 0)
        managed.flags = 0
    else:
        managed = DLManagedTensor()
    t = managed.dl_tensor
    t.data = address or None
    t.device.device_type = device_type
    t.device.device_id = device_id
    t.ndim = ndim
    t.dtype.code = code
    t.dtype.bits = dt.itemsize * 8
    t.dtype.lanes = 1
    t.shape = ctypes.addressof(shape_arr) if ndim else None
    t.strides = ctypes.addressof(strides_arr) if ndim else None
    t.byte_offset = 0
    managed.manager_ctx = None
    managed.deleter = _DELETER_ADDR
    key = ctypes.addressof(managed)
    _live[key] = _Export(managed, shape_arr, strides_arr, owner)
    name = _NAME_VERSIONED if versioned else _NAME_LEGACY
    try:
        return _PyCapsule_New(key, ctypes.addressof(name), _DESTRUCTOR_ADDR)
    except BaseException:
        _live.pop(key, None)
        raise


def dlpack_device(device_type: int | np.integer[Any], device_id: int | np.integer[Any]) -> tuple[int, int]:
    """``__dlpack_device__``'s answer: ``(device_type, device_id)`` as plain ints."""
    return (_as_index(device_type, "device_type"), _as_index(device_id, "device_id"))


def check_request(
    device: tuple[int, int],
    *,
    stream: Any = None,
    max_version: Any = None,
    dl_device: Any = None,
    copy: bool | None = None,
) -> None:
    """Refuse a ``__dlpack__`` request arig cannot serve, before any capsule exists.

    arig's convention for ``__dlpack__(*, stream=None, max_version=None,
    dl_device=None, copy=None)`` (Python array API standard):

    * ``stream``: ``None``, ``-1`` or any int, and ignored.  The standard
      asks a CUDA producer to make the consumer's stream wait for pending
      work on the array; arig has no such hidden work: its work on a buffer
      is ordered by awaiting the device's timeline, so export *after*
      awaiting the last submit that writes the buffer, and the memory is
      final.  Nothing is synchronized here.
    * ``max_version``: see :func:`export`.
    * ``dl_device``: ``None`` or the buffer's own device; host-visible
      memory (``kDLCPU`` or ``kDLCUDAHost``) is also given as
      ``(kDLCPU, 0)``.  Anything else needs a copy: ``BufferError``.
    * ``copy``: ``None`` or ``False``; arig exports its memory, never a
      copy, so ``copy=True`` is a ``BufferError`` (``download()`` or
      ``numpy().copy()`` make copies).
    """
    if stream is not None and (isinstance(stream, bool) or not isinstance(stream, int)):
        raise ArigTypeError(f"stream must be None or an int, not {safe_repr(stream)}")
    if max_version is not None and not (isinstance(max_version, tuple) and len(max_version) == 2):
        raise ArigTypeError(f"max_version must be None or (major, minor), not {safe_repr(max_version)}")
    if copy:
        raise BufferError("arig exports its memory without copying; copy=True is not supported (download() or numpy().copy() copy)")
    if dl_device is not None:
        try:
            want = (int(dl_device[0]), int(dl_device[1]))
        except (TypeError, ValueError, IndexError):
            raise ArigTypeError(f"dl_device must be None or (device_type, device_id), not {safe_repr(dl_device)}") from None
        host_visible = device[0] in (kDLCPU, kDLCUDAHost)
        if want != tuple(device) and not (host_visible and want == (kDLCPU, 0)):
            raise BufferError(f"this memory is on DLPack device {tuple(device)}; exporting it to {want} would need a copy")


def buffer_dlpack_device(buf: Any) -> tuple[int, int]:
    """``Buffer.__dlpack_device__``: where the buffer's bytes are, for DLPack.

    A driver's buffer of memory the host cannot see carries ``_dl``, its
    ``(device type, id)`` (``arig.cuda``'s device memory: ``(kDLCUDA,
    ordinal)``); host-visible memory (host, pinned, mapped) is ``(kDLCPU,
    0)``.  Memory that is neither is refused: no consumer could find it.
    """
    dl = getattr(buf, "_dl", None)
    if dl is not None:
        return dlpack_device(dl[0], dl[1])
    if getattr(buf, "_host", None) is not None:
        return (kDLCPU, 0)
    raise ArigTypeError(f"{safe_repr(buf)} has no DLPack device (the buffer does not know its GPU's ordinal)")


def buffer_dlpack(
    buf: Any,
    stream: Any = None,
    max_version: Any = None,
    dl_device: Any = None,
    copy: bool | None = None,
    *,
    dtype: Any = np.uint8,
    shape: Sequence[int] | None = None,
) -> Any:
    """``Buffer.__dlpack__``: a capsule of the buffer's bytes that keeps the buffer alive.

    The arguments are the standard's (see :func:`check_request` for what
    each means here); ``dtype`` and ``shape`` give a typed view, as
    ``Buffer.numpy`` does.  The capsule holds the buffer, not just its
    memory, so the buffer's finalizer cannot free the memory under a
    consumer; an explicit ``close()`` still does, as it does under a
    ``numpy()`` view.
    """
    if getattr(buf, "closed", False):
        raise ArigValueError("buffer is closed")
    device = buffer_dlpack_device(buf)
    check_request(device, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
    return export(buf.address, buf.nbytes, device[0], device[1], buf, dtype=dtype, shape=shape, max_version=max_version)
