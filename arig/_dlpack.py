"""DLPack export of arig memory, and the memory of foreign arrays for import.

Pure Python over ctypes: no compiled code, so it works wherever arig does
(``ARIG_PURE=1`` included).

Export (:func:`export`, :func:`buffer_dlpack`)
    builds a ``"dltensor"`` capsule (``DLManagedTensor``) or, when the
    consumer passes ``max_version=(1, x)``, a ``"dltensor_versioned"`` one
    (``DLManagedTensorVersioned``, DLPack 1.0/1.1).  The managed tensor and
    its shape and strides live in ctypes objects held in :data:`_live`,
    together with the ``owner`` (an arig ``Buffer``): the owner stays alive
    until the consumer calls the deleter, or until the capsule dies
    unconsumed (its destructor then releases it, as the DLPack Python
    specification requires).

Import (:func:`foreign`)
    reads address, size, device and writability of a torch tensor, a CuPy
    or numpy array, anything with ``__cuda_array_interface__``,
    ``__dlpack__`` or ``__array_interface__``, and returns what keeps that
    memory valid.

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
import weakref
from collections.abc import Callable, Mapping, Sequence
from ctypes import CFUNCTYPE, PYFUNCTYPE, Structure, c_char_p, c_int, c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p, py_object
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._errors import ArigTypeError, ArigValueError, safe_repr

__all__ = [
    "kDLCPU",
    "kDLCUDA",
    "kDLCUDAHost",
    "Foreign",
    "export",
    "dlpack_device",
    "check_request",
    "buffer_dlpack",
    "buffer_dlpack_device",
    "foreign",
]

kDLCPU = 1
kDLCUDA = 2
kDLCUDAHost = 3

# DLDataTypeCode
_kDLInt, _kDLUInt, _kDLFloat, _kDLComplex, _kDLBool = 0, 1, 2, 5, 6

# DLManagedTensorVersioned.flags
_FLAG_READ_ONLY = 1 << 0
_FLAG_SUBBYTE_PADDED = 1 << 2

#: The newest DLPack this module writes and reads (1.1 changed no layout: it added dtypes and a flag).
_VERSION = (1, 1)


# -- the DLPack ABI (dlpack.h) --------------------------------------------------
class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    # shape and strides are int64_t*; kept as addresses, read with (c_int64 * n).from_address.
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", c_void_p),
        ("strides", c_void_p),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", c_void_p)]


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", c_void_p),
        ("deleter", c_void_p),
        ("flags", c_uint64),
        ("dl_tensor", DLTensor),
    ]


# -- the C API, through private prototypes --------------------------------------
# Private function objects, not ctypes.pythonapi's shared attributes: setting
# argtypes there would change them for every other user in the process.
_api = ctypes.pythonapi
_PyCapsule_New = PYFUNCTYPE(py_object, c_void_p, c_void_p, c_void_p)(("PyCapsule_New", _api))
_PyCapsule_IsValid = PYFUNCTYPE(c_int, py_object, c_char_p)(("PyCapsule_IsValid", _api))
_PyCapsule_GetPointer = PYFUNCTYPE(c_void_p, py_object, c_char_p)(("PyCapsule_GetPointer", _api))
_PyCapsule_SetName = PYFUNCTYPE(c_int, py_object, c_void_p)(("PyCapsule_SetName", _api))
# The destructor gets the dying capsule as a raw pointer: a py_object there
# would take a reference to an object whose count is already 0.
_PyCapsule_GetName_raw = PYFUNCTYPE(c_void_p, c_void_p)(("PyCapsule_GetName", _api))
_PyCapsule_GetPointer_raw = PYFUNCTYPE(c_void_p, c_void_p, c_void_p)(("PyCapsule_GetPointer", _api))
_Py_IncRef = PYFUNCTYPE(None, py_object)(("Py_IncRef", _api))

_DELETER_T = CFUNCTYPE(None, c_void_p)  # void (*)(DLManagedTensor[Versioned] *)
_DESTRUCTOR_T = CFUNCTYPE(None, c_void_p)  # PyCapsule_Destructor: void (*)(PyObject *)


def _forever(obj: object) -> None:
    """Give ``obj`` a reference that is never dropped: C may use it until the process ends."""
    _Py_IncRef(obj)


# Capsule names must outlive every capsule (and a renamed capsule keeps our
# "used_" name), hence static buffers that are never freed.
_NAME_LEGACY = ctypes.create_string_buffer(b"dltensor")
_NAME_VERSIONED = ctypes.create_string_buffer(b"dltensor_versioned")
_NAME_USED_LEGACY = ctypes.create_string_buffer(b"used_dltensor")
_NAME_USED_VERSIONED = ctypes.create_string_buffer(b"used_dltensor_versioned")
for _name in (_NAME_LEGACY, _NAME_VERSIONED, _NAME_USED_LEGACY, _NAME_USED_VERSIONED):
    _forever(_name)
_OUR_NAMES = frozenset({ctypes.addressof(_NAME_LEGACY), ctypes.addressof(_NAME_VERSIONED)})


# -- export ---------------------------------------------------------------------
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


def _is_c_contiguous(shape: Sequence[int], strides: Sequence[int], unit: int) -> bool:
    """Whether ``strides`` (in multiples of ``unit``) lay ``shape`` out row-major without gaps.

    numpy's rule: the stride of an axis of length 1 does not matter, and an
    empty array is contiguous whatever its strides.
    """
    if any(n == 0 for n in shape):
        return True
    step = unit
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != step:
            return False
        step *= n
    return True


def _as_index(value: object, what: str) -> int:
    """``value`` as an int (not a bool); ``ArigTypeError`` naming ``what`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ArigTypeError(f"{what} must be an int, not {safe_repr(value)}")
    return int(value)


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
    if shape is None:
        if nbytes % dt.itemsize:
            raise ArigValueError(f"{nbytes} bytes are not a whole number of {dt} items ({dt.itemsize} bytes each)")
        dims = [nbytes // dt.itemsize]
    else:
        dims = [_as_index(n, "a shape's length") for n in (shape if isinstance(shape, Sequence) else [shape])]
        if any(n < 0 for n in dims):
            raise ArigValueError(f"shape {tuple(dims)} has a negative length")
        if math.prod(dims) * dt.itemsize != nbytes:
            raise ArigValueError(f"shape {tuple(dims)} of {dt} is {math.prod(dims) * dt.itemsize} bytes, not the {nbytes} bytes exported")
    versioned = False
    minor = 0
    if max_version is not None:
        try:
            major, want_minor = (_as_index(v, "max_version's parts") for v in max_version)
        except (TypeError, ValueError):
            raise ArigTypeError(f"max_version must be None or (major, minor), not {safe_repr(max_version)}") from None
        versioned = major >= 1
        minor = min(want_minor, _VERSION[1]) if major == 1 else _VERSION[1]

    ndim = len(dims)
    shape_arr = (c_int64 * max(ndim, 1))(*dims)
    strides_arr = (c_int64 * max(ndim, 1))(*_c_strides(dims, 1))
    managed: DLManagedTensor | DLManagedTensorVersioned
    if versioned:
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


# -- import ---------------------------------------------------------------------
@dataclass(frozen=True)
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


def _from_dlpack(obj: Any, stream: int | None) -> Foreign:
    """Consume ``obj.__dlpack__()``'s capsule; the producer's deleter runs when ``keep`` is dropped."""
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
    # Everything is checked before the capsule is renamed: a refused capsule
    # stays unconsumed and its own destructor gives it back to the producer.
    managed: DLManagedTensor | DLManagedTensorVersioned
    flags = 0
    if versioned:
        managed = DLManagedTensorVersioned.from_address(ptr)
        if managed.version.major != 1:
            raise BufferError(f"__dlpack__ of {safe_repr(obj)} gave DLPack {managed.version.major}.{managed.version.minor}; arig reads 1.x")
        flags = int(managed.flags)
    else:
        managed = DLManagedTensor.from_address(ptr)
    t = managed.dl_tensor
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
    bits = int(t.dtype.bits) * max(int(t.dtype.lanes), 1)
    numel = math.prod(shape)
    if bits % 8 == 0:
        nbytes = numel * (bits // 8)
    elif flags & _FLAG_SUBBYTE_PADDED:
        nbytes = numel * ((bits + 7) // 8)
    else:
        nbytes = (numel * bits + 7) // 8
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
