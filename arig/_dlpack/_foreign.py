"""The memory of foreign arrays, for import: where it is, how big, and what keeps it valid.

:func:`foreign` reads address, size, device and writability of a torch
tensor, a CuPy or numpy array, anything with ``__cuda_array_interface__``,
``__dlpack__`` or ``__array_interface__``, and returns a :class:`Foreign`
whose ``keep`` holds the memory valid: the array itself, or for a consumed
DLPack capsule a :class:`_DLPackHold` whose finalizer calls the producer's
deleter (from whatever thread drops the last reference).  Any thread may
call it; it calls no GPU driver.
"""

from __future__ import annotations

import ctypes
import math
import weakref
from collections.abc import Mapping
from ctypes import c_int64
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._errors import ArigTypeError, ArigValueError, safe_repr
from ._abi import (
    _DELETER_T,
    _FLAG_READ_ONLY,
    _FLAG_SUBBYTE_PADDED,
    _NAME_USED_LEGACY,
    _NAME_USED_VERSIONED,
    _VERSION,
    DLManagedTensor,
    DLManagedTensorVersioned,
    _as_index,
    _is_c_contiguous,
    _PyCapsule_GetPointer,
    _PyCapsule_IsValid,
    _PyCapsule_SetName,
    kDLCPU,
    kDLCUDA,
    kDLCUDAHost,
)


@dataclass(frozen=True, eq=False)
class Foreign:
    """Memory of a foreign array: where, how big, on which DLPack device, and what keeps it valid.

    ``keep`` must stay referenced for as long as the memory is used: it is
    the array itself, or for a consumed DLPack capsule a holder whose
    finalizer calls the producer's deleter.  ``device_id`` is ``-1`` where
    the object does not say (a bare ``__cuda_array_interface__``: ask the
    driver, ``CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL``).  ``stream`` is the
    ``__cuda_array_interface__`` v3 stream the producer's work is on (``1``:
    legacy default, ``2``: per-thread default, else a ``CUstream``), to be
    waited on before the memory is read; ``None`` when there is none.
    """

    address: int
    nbytes: int
    device_type: int
    device_id: int
    readonly: bool
    keep: object
    stream: int | None = None

    # ``keep`` is compared by identity: it is what holds the memory, often the array itself, whose
    # ``==`` is elementwise (a dataclass's own ``__eq__`` compares it with ``==`` from Python 3.13 on).
    def _key(self) -> tuple[int, int, int, int, bool, int | None]:
        return (self.address, self.nbytes, self.device_type, self.device_id, self.readonly, self.stream)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Foreign):
            return NotImplemented
        return self._key() == other._key() and self.keep is other.keep

    def __hash__(self) -> int:
        return hash((self._key(), id(self.keep)))


class _DLPackHold:
    """Owns a consumed DLPack tensor: dropping it (or ``release()``) calls the producer's deleter once."""

    __slots__ = ("_finalizer", "__weakref__")

    def __init__(self, deleter: int | None, managed: int) -> None:
        self._finalizer = weakref.finalize(self, _call_deleter, deleter, managed)

    def release(self) -> None:
        self._finalizer()

    @property
    def alive(self) -> bool:
        return self._finalizer.alive

    def __repr__(self) -> str:
        return f"<arig DLPack hold {'alive' if self.alive else 'released'}>"


def _call_deleter(deleter: int | None, managed: int) -> None:
    """Call a producer's deleter; CFUNCTYPE releases the GIL, which the deleter may take itself."""
    if deleter:
        _DELETER_T(deleter)(managed)


def _shape_of(value: Any, what: str) -> tuple[int, ...]:
    try:
        dims = tuple(_as_index(n, f"{what}'s lengths") for n in value)
    except TypeError:
        raise ArigTypeError(f"{what} must be a tuple of ints, not {safe_repr(value)}") from None
    if any(n < 0 for n in dims):
        raise ArigValueError(f"{what} {dims} has a negative length")
    return dims


def _from_interface(obj: Any, iface: Any, device_type: int, device_id: int, which: str) -> Foreign:
    """Memory described by an ``__array_interface__`` or ``__cuda_array_interface__`` dict."""
    if not isinstance(iface, Mapping):
        raise ArigTypeError(f"{which} of {safe_repr(obj)} is not a dict: {safe_repr(iface)}")
    try:
        data, shape_v, typestr = iface["data"], iface["shape"], iface["typestr"]
    except KeyError as exc:
        raise ArigValueError(f"{which} of {safe_repr(obj)} has no {exc.args[0]!r}") from None
    if iface.get("mask") is not None:
        raise ArigValueError(f"{which} of {safe_repr(obj)} has a mask; masked arrays cannot be imported")
    if not (isinstance(data, tuple) and len(data) == 2):
        raise ArigTypeError(f"{which}['data'] of {safe_repr(obj)} must be (pointer, readonly), not {safe_repr(data)}")
    address = _as_index(data[0], f"{which}['data'][0]")
    shape = _shape_of(shape_v, f"{which}['shape']")
    try:
        itemsize = np.dtype(typestr).itemsize
    except TypeError:
        raise ArigValueError(f"{which}['typestr'] {safe_repr(typestr)} is not a type string") from None
    strides_v = iface.get("strides")
    if strides_v is not None:
        try:
            strides = tuple(_as_index(s, f"{which}['strides'] items") for s in strides_v)
        except TypeError:
            raise ArigTypeError(f"{which}['strides'] must be None or a tuple of ints, not {safe_repr(strides_v)}") from None
        if len(strides) != len(shape) or not _is_c_contiguous(shape, strides, itemsize):
            raise ArigValueError(
                f"{safe_repr(obj)} is not contiguous: strides {tuple(strides_v)} for shape {shape} of {itemsize}-byte items; make a contiguous copy first"
            )
    stream_v = iface.get("stream")
    stream = None if stream_v is None else _as_index(stream_v, f"{which}['stream']")
    return Foreign(address, math.prod(shape) * itemsize, device_type, device_id, bool(data[1]), obj, stream)


def _from_ndarray(arr: np.ndarray[Any, Any], keep: object) -> Foreign:
    if not arr.flags.c_contiguous:
        raise ArigValueError(f"array of shape {arr.shape} is not contiguous: strides {arr.strides}; make a contiguous copy first (np.ascontiguousarray)")
    return Foreign(int(arr.ctypes.data), int(arr.nbytes), kDLCPU, 0, not arr.flags.writeable, keep)


def _dlpack_device_of(obj: Any) -> tuple[int, int] | None:
    """``obj.__dlpack_device__()`` if it answers with two ints, else ``None``."""
    method = getattr(obj, "__dlpack_device__", None)
    if method is None:
        return None
    try:
        dev = method()
        return (int(dev[0]), int(dev[1]))
    except (AttributeError, TypeError, ValueError, IndexError, BufferError):
        return None


def _capsule_of(obj: Any, stream: int | None) -> tuple[Any, bool, int]:
    """``obj.__dlpack__()``'s capsule, whether it is versioned, and its tensor's address (not yet consumed)."""
    dev = _dlpack_device_of(obj)
    kwargs: dict[str, Any] = {}
    if dev is not None and dev[0] not in (kDLCPU, kDLCUDAHost):
        kwargs["stream"] = stream  # the standard: None is the legacy default stream, -1 no synchronization
    try:
        cap = obj.__dlpack__(max_version=_VERSION, **kwargs)
    except TypeError:  # a producer older than DLPack 1.0's max_version
        cap = obj.__dlpack__(**kwargs)
    if _PyCapsule_IsValid(cap, b"dltensor_versioned"):
        versioned = True
        ptr = _PyCapsule_GetPointer(cap, b"dltensor_versioned")
    elif _PyCapsule_IsValid(cap, b"dltensor"):
        versioned = False
        ptr = _PyCapsule_GetPointer(cap, b"dltensor")
    else:
        raise ArigTypeError(f"__dlpack__ of {safe_repr(obj)} returned {safe_repr(cap)}, not an unconsumed DLPack capsule")
    if not ptr:
        raise ArigValueError(f"__dlpack__ of {safe_repr(obj)} returned a capsule of a NULL tensor")
    return cap, versioned, ptr


def _managed_at(obj: Any, ptr: int, versioned: bool) -> tuple[DLManagedTensor | DLManagedTensorVersioned, int]:
    """The managed tensor at ``ptr`` and its flags (0 for a legacy one); ``BufferError`` past DLPack 1.x."""
    if not versioned:
        return DLManagedTensor.from_address(ptr), 0
    managed = DLManagedTensorVersioned.from_address(ptr)
    if managed.version.major != 1:
        raise BufferError(f"__dlpack__ of {safe_repr(obj)} gave DLPack {managed.version.major}.{managed.version.minor}; arig reads 1.x")
    return managed, int(managed.flags)


def _contiguous_shape(obj: Any, t: Any) -> tuple[int, ...]:
    """The shape of the DLPack tensor ``t``, refused unless its memory is one contiguous run."""
    ndim = int(t.ndim)
    if ndim < 0:
        raise ArigValueError(f"DLPack tensor of {safe_repr(obj)} has ndim {ndim}")
    if ndim and not t.shape:
        raise ArigValueError(f"DLPack tensor of {safe_repr(obj)} has ndim {ndim} and no shape")
    shape = tuple((c_int64 * ndim).from_address(t.shape)) if ndim else ()
    if any(n < 0 for n in shape):
        raise ArigValueError(f"DLPack tensor of {safe_repr(obj)} has shape {shape}")
    if ndim and t.strides:
        strides = tuple((c_int64 * ndim).from_address(t.strides))
        if not _is_c_contiguous(shape, strides, 1):
            raise ArigValueError(f"{safe_repr(obj)} is not contiguous: strides {strides} (in items) for shape {shape}; make a contiguous copy first")
    return shape


def _nbytes(t: Any, numel: int, flags: int) -> int:
    """The bytes of ``numel`` items of ``t``'s dtype: sub-byte items packed unless the flags say padded."""
    bits = int(t.dtype.bits) * max(int(t.dtype.lanes), 1)
    if bits % 8 == 0:
        return numel * (bits // 8)
    if flags & _FLAG_SUBBYTE_PADDED:
        return numel * ((bits + 7) // 8)
    return (numel * bits + 7) // 8


def _from_dlpack(obj: Any, stream: int | None) -> Foreign:
    """Consume ``obj.__dlpack__()``'s capsule; the producer's deleter runs when ``keep`` is dropped."""
    cap, versioned, ptr = _capsule_of(obj, stream)
    # Everything is checked before the capsule is renamed: a refused capsule
    # stays unconsumed and its own destructor gives it back to the producer.
    managed, flags = _managed_at(obj, ptr, versioned)
    t = managed.dl_tensor
    nbytes = _nbytes(t, math.prod(_contiguous_shape(obj, t)), flags)
    address = (t.data or 0) + int(t.byte_offset)
    device_type, device_id = int(t.device.device_type), int(t.device.device_id)
    readonly = bool(flags & _FLAG_READ_ONLY)
    deleter = managed.deleter
    # Consume: the producer's capsule destructor now leaves the tensor to us.
    _PyCapsule_SetName(cap, ctypes.addressof(_NAME_USED_VERSIONED if versioned else _NAME_USED_LEGACY))
    hold = _DLPackHold(deleter, ptr)
    return Foreign(address, nbytes, device_type, device_id, readonly, hold)


def foreign(obj: Any, *, stream: int | None = None) -> Foreign:
    """The memory of a foreign array (contiguous only), and what keeps it valid.

    Tried in this order: a numpy array itself; ``__cuda_array_interface__``
    (no capsule to manage; device ``kDLCUDA``); ``__dlpack__`` (the capsule
    is consumed, and ``keep`` calls its deleter when dropped; ``stream`` is
    passed to a CUDA producer as the standard says: ``None`` the legacy
    default stream, ``-1`` no synchronization, else a ``CUstream``); then
    ``__array_interface__`` (host memory).  A producer that refuses DLPack
    (``BufferError``: numpy 1.x with a read-only array) falls through to its
    ``__array_interface__`` if it has one.

    Non-contiguous arrays are refused with :class:`ArigValueError` naming
    their strides: arig copies flat bytes.
    """
    if isinstance(obj, np.ndarray):
        return _from_ndarray(obj, obj)
    # Each interface read once: a property may build its dict on every access.
    cuda_iface = getattr(obj, "__cuda_array_interface__", None)  # AttributeError where absent, by the protocol
    if cuda_iface is not None:
        dev = _dlpack_device_of(obj)
        device_id = dev[1] if dev is not None and dev[0] == kDLCUDA else -1
        return _from_interface(obj, cuda_iface, kDLCUDA, device_id, "__cuda_array_interface__")
    if hasattr(obj, "__dlpack__"):
        try:
            return _from_dlpack(obj, stream)
        except BufferError:
            if not hasattr(obj, "__array_interface__"):
                raise
    iface = getattr(obj, "__array_interface__", None)
    if iface is not None:
        if isinstance(iface, Mapping) and iface.get("data") is None:
            # No pointer: the memory is obj's buffer, which numpy reads from this same interface.
            return _from_ndarray(np.asarray(obj), obj)
        return _from_interface(obj, iface, kDLCPU, 0, "__array_interface__")
    raise ArigTypeError(
        f"cannot read the memory of {safe_repr(obj)}: it has no __cuda_array_interface__, __dlpack__ or __array_interface__ (a torch tensor, CuPy or numpy array has)"
    )
