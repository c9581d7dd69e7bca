"""What both GPUs share about a launch and a compiled fill: one rule for each.

A kernel's grid and block, a compiled fill's address and its arg mean the
same on a CUDA device and on an NV device; each device makes its own record
(a ``cuLaunchKernel`` record, a QMD) from them.  Written once here so that
the two devices cannot accept different things.  Pure functions: any thread.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from ctypes import c_int, c_uint64, c_void_p
from typing import Any

import numpy as np

from ._errors import ArigTypeError, ArigValueError, safe_repr
from ._memory import Buffer

__all__ = ["dims", "c_arg", "fill_address", "is_c_fill", "FILL_ARGS", "U32"]

U32 = (1 << 32) - 1
#: The argument types of ``int fill(void *queue, void *arg, uint64_t v)`` (``arig.cuda_abi.FILL``).
FILL_ARGS = (c_void_p, c_void_p, c_uint64)


def dims(value: Any, what: str) -> tuple[int, int, int]:
    """A grid or block size as (x, y, z), each 1 .. 2**32-1; an int ``n`` means (n, 1, 1).

    Exactly three sizes otherwise: a shorter tuple is as likely a mistake as a shorthand."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (int(value), 1, 1)
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)) or len(value) != 3:
        raise ArigValueError(f"{what} must be an int or (x, y, z), got {safe_repr(value)}")
    out = []
    for d in value:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise ArigTypeError(f"{what} sizes must be ints, got {safe_repr(value)}")
        if not 1 <= d <= U32:
            raise ArigValueError(f"{what} sizes must be in 1..2**32-1, got {safe_repr(value)}")
        out.append(int(d))
    return out[0], out[1], out[2]


def c_arg(arg: Any) -> int:
    """A C fill's arg as the address (or number) the fill receives: None is 0 (NULL)."""
    if arg is None:
        return 0
    if type(arg) is int:
        if not 0 <= arg < 1 << 64:
            raise ArigValueError(f"a C fill's int arg is passed as a void *: it must be in 0..2**64-1, got {arg}")
        return arg
    if isinstance(arg, ctypes.Structure):
        return ctypes.addressof(arg)
    if isinstance(arg, int) and not isinstance(arg, bool):
        return c_arg(int(arg))
    if isinstance(arg, Buffer):
        return arg.address
    if isinstance(arg, ctypes._Pointer):  # type: ignore[attr-defined,unused-ignore]
        return ctypes.cast(arg, c_void_p).value or 0
    if isinstance(arg, (ctypes._SimpleCData, ctypes.Structure, ctypes.Array, ctypes.Union)):  # type: ignore[attr-defined,unused-ignore]
        return ctypes.addressof(arg)
    raise ArigTypeError(f"a C fill's arg must be None, an int address, a Buffer or a ctypes object, got {type(arg).__name__}")


def is_c_fill(fill: Any) -> bool:
    """Is ``fill`` meant as a compiled fill (an address, or a ctypes function)?"""
    return (isinstance(fill, int) and not isinstance(fill, bool)) or isinstance(fill, ctypes._CFuncPtr)  # type: ignore[attr-defined]


def fill_address(fill: Any) -> int:
    """The address of a compiled fill: an int, or a ctypes function of the prototype ``arig.cuda_abi.FILL``."""
    if isinstance(fill, int) and not isinstance(fill, bool):
        if fill == 0:
            raise ArigValueError("a C fill's address must not be 0")
        if not 0 < fill < 1 << 64:
            raise ArigValueError(f"a C fill's address must be in 1..2**64-1, got {fill}")
        return fill
    if getattr(fill, "_restype_", None) is not c_int or tuple(getattr(fill, "_argtypes_", None) or ()) != FILL_ARGS:
        raise ArigTypeError("a C fill must have the prototype arig.cuda_abi.FILL: int fill(void *queue, void *arg, uint64_t v)")
    return ctypes.cast(fill, c_void_p).value or 0
