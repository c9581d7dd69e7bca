"""The DLPack ABI as ctypes sees it, and the layout rules export and import share.

The structs of ``dlpack.h``, the capsule names, and private prototypes of
the ``PyCapsule`` C API.  Import-time constants only, with no state that
changes: any thread may use them.  The capsule names are given a
reference that is never dropped (``_forever``), since capsules, and C
code holding a renamed one, may outlive this module's teardown.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from ctypes import CFUNCTYPE, PYFUNCTYPE, Structure, c_char_p, c_int, c_int32, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p, py_object

import numpy as np

from .._errors import ArigTypeError, safe_repr

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
