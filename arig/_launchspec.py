"""What both GPUs share about a launch and a compiled fill: one rule for each.

A kernel launch (:class:`LaunchSpec`: its function, grid, block, argument
bytes and dynamic shared memory), a kernel's parameter layout, a compiled
fill's address and its arg mean the same on a CUDA device and on an NV
device; each device makes its own record (a ``cuLaunchKernel`` record, a
QMD) from a :class:`LaunchSpec` it has checked here.  Written once so that
the two devices cannot accept different things.

Threads: everything here is pure (no driver call, no lock) and may run on
any thread; a launch is usually made on the event loop.
"""

from __future__ import annotations

import bisect
import ctypes
import operator
import threading
from collections.abc import Callable, Sequence
from ctypes import c_int, c_uint64, c_void_p
from typing import Any

import numpy as np

from ._errors import ArigTypeError, ArigValueError, safe_repr
from ._memory import Buffer, Image, Ledger, _Held, owners_of, uses_of

__all__ = ["LaunchSpec", "ParamLayout", "Args", "KernelImage", "args_size", "check_params", "dims", "c_arg", "fill_address",
           "is_c_fill", "FILL_ARGS", "U32", "pack"]  # fmt: skip

U32 = (1 << 32) - 1
_U64 = 1 << 64

#: A kernel's parameters as (offset, size) in bytes, in order: what its loader read (the CUDA
#: driver's parameter query, the cubin's ``.nv.info``), and what a launch's argument bytes must fill.
ParamLayout = tuple[tuple[int, int], ...]
#: What a launch's argument bytes may be given as (copied to bytes when checked).
Args = bytes | bytearray | memoryview
#: The argument types of ``int fill(void *queue, void *arg, uint64_t v)`` (``arig.cuda_abi.FILL``).
FILL_ARGS = (c_void_p, c_void_p, c_uint64)


def dims(value: Any, what: str) -> tuple[int, int, int]:
    """A grid or block size as (x, y, z), each 1 .. 2**32-1; an int ``n`` means (n, 1, 1).

    Exactly three sizes otherwise: a shorter tuple is as likely a mistake as a shorthand."""
    # The forms a launch is usually given, checked without the general path's calls: a launch
    # is often made per call on the loop, where every microsecond of Python is the loop's.
    t = type(value)
    if t is int:
        if 1 <= value <= U32:
            return value, 1, 1
    elif t is tuple and len(value) == 3:
        x, y, z = value
        if type(x) is int and type(y) is int and type(z) is int and 1 <= x <= U32 and 1 <= y <= U32 and 1 <= z <= U32:
            return value  # type: ignore[no-any-return]
    n = _index(value)
    if n is not None:
        value = (n, 1, 1)
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)) or len(value) != 3:
        raise ArigValueError(f"{what} must be an int or (x, y, z), got {safe_repr(value)}")
    out = []
    for d in value:
        size = _index(d)
        if size is None:
            raise ArigTypeError(f"{what} sizes must be ints, got {safe_repr(value)}")
        if not 1 <= size <= U32:
            raise ArigValueError(f"{what} sizes must be in 1..2**32-1, got {safe_repr(value)}")
        out.append(size)
    return out[0], out[1], out[2]


def _index(value: Any) -> int | None:
    """``value`` as an int if it is one or has ``__index__`` (a numpy integer), not a bool; else None."""
    if type(value) is int:
        return value
    if isinstance(value, (bool, np.bool_)):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


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
    """The address of a compiled fill: an int, or a ctypes function of the prototype ``arig.cuda_abi.FILL``.

    The address must lie in executable memory of this process: any other
    number (``submit(1)``, a value passed as the fill by mistake) would be
    called by the device's thread and crash the process."""
    if isinstance(fill, int) and not isinstance(fill, bool):
        if fill == 0:
            raise ArigValueError("a C fill's address must not be 0")
        if not 0 < fill < 1 << 64:
            raise ArigValueError(f"a C fill's address must be in 1..2**64-1, got {fill}")
        return _executable(fill)
    if getattr(fill, "_restype_", None) is not c_int or tuple(getattr(fill, "_argtypes_", None) or ()) != FILL_ARGS:
        raise ArigTypeError("a C fill must have the prototype arig.cuda_abi.FILL: int fill(void *queue, void *arg, uint64_t v)")
    return _executable(ctypes.cast(fill, c_void_p).value or 0)


class _CodeRanges:
    """The process's executable mappings (``/proc/self/maps``), read once and again on a miss.

    Code is mapped rarely (a library loaded, a ctypes callback made) and checked
    on every submission of a compiled fill: a cached sorted list and a bisect
    (well under a microsecond) on the hit, one read of the maps on a miss.
    Where the maps cannot be read (not Linux) every address passes."""

    __slots__ = ("ranges", "lock", "readable")

    def __init__(self) -> None:
        # (starts, ends), sorted: one attribute, so a reader on another thread sees the old
        # pair or the new one, never half of each.
        self.ranges: tuple[list[int], list[int]] = ([], [])
        self.lock = threading.Lock()
        self.readable = True

    def contains(self, address: int) -> bool:
        starts, ends = self.ranges
        i = bisect.bisect_right(starts, address) - 1
        return i >= 0 and address < ends[i]

    def refresh(self) -> None:
        try:
            with open("/proc/self/maps", encoding="ascii", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            self.readable = False
            return
        ranges = []
        for line in lines:
            fields = line.split(None, 2)
            if len(fields) >= 2 and "x" in fields[1]:
                lo, _, hi = fields[0].partition("-")
                ranges.append((int(lo, 16), int(hi, 16)))
        ranges.sort()
        self.ranges = ([lo for lo, _ in ranges], [hi for _, hi in ranges])


_CODE = _CodeRanges()


def _executable(address: int) -> int:
    """``address`` if it lies in an executable mapping of this process; ArigValueError otherwise."""
    code = _CODE
    if code.contains(address) or not code.readable:
        return address
    with code.lock:
        code.refresh()
        if code.contains(address) or not code.readable:
            return address
    raise ArigValueError(
        f"a C fill's address must point at compiled code of this process, and {address:#x} is in no executable mapping: "
        "an int given as the fill is called as a C function (a Python fill is a function, an int arg goes in submit(fill, arg))"
    )


# ---------------------------------------------------------------------------------------------
# A kernel's parameters


#: numpy scalar types seen by ``pack``, and their alignment: ``dtype.alignment`` looked up once per type.
_ALIGN: dict[type, int] = {}


def _bytes_of(value: Any) -> tuple[bytes, int]:
    align = _ALIGN.get(type(value))
    if align is not None:
        return value.tobytes(), align
    if isinstance(value, Buffer):
        return int(value.address).to_bytes(8, "little"), 8
    if isinstance(value, np.generic) and not value.dtype.hasobject:
        if type(value).__module__ == "numpy" and not isinstance(value, np.flexible) and len(_ALIGN) < 64:  # one layout per type
            _ALIGN[type(value)] = value.dtype.alignment
        return value.tobytes(), value.dtype.alignment
    if isinstance(value, ctypes._SimpleCData):  # type: ignore[attr-defined,unused-ignore]
        return bytes(value), ctypes.alignment(value)
    raise ArigTypeError(
        f"kernel argument {value!r} has no fixed size: give numpy scalars (np.float32(2.0), np.int32(n), np.uint64(ptr)), ctypes scalars or Buffers"
    )


def pack(*values: Any) -> bytes:
    """The argument bytes of ``values``, each at its natural alignment, as a kernel's parameters lie.

    ``pack(np.float32(2.0), x_buf, y_buf, np.int32(n))`` for
    ``saxpy(float a, const float *x, float *y, int n)``: a Buffer is its
    address (8 bytes), a numpy or ctypes scalar its own bytes.  Both GPUs'
    ``Launch`` take the result and check it against the kernel's layout.  The
    bytes remember the buffers (``uses``): a launch of them is refused once one
    is closed.
    """
    out = bytearray()
    uses = []
    for value in values:
        if isinstance(value, Buffer):
            uses.append(value._held)
        data, align = _bytes_of(value)
        out += b"\0" * (-len(out) % align)
        out += data
    packed = Packed(out)
    packed.uses = tuple(uses)
    return packed


#: args_size's answers: a kernel's layout is one tuple for all its launches.
_SIZES: dict[ParamLayout, int] = {}


def args_size(layout: ParamLayout) -> int:
    """The bytes of arguments a kernel of ``layout`` takes: up to the end of its last parameter."""
    n = _SIZES.get(layout)
    if n is None:
        n = max((off + size for off, size in layout), default=0)
        if len(_SIZES) < 4096:
            _SIZES[layout] = n
    return n


def check_params(layout: ParamLayout, args: bytes, kernel: str) -> None:
    """Refuse argument bytes that do not fill ``layout`` exactly: a short or long buffer would
    hand the kernel garbage (or another value's bytes) as a parameter, silently."""
    need = args_size(layout)
    if len(args) != need:
        raise ArigValueError(
            f"argument buffer of {len(args)} bytes for kernel {kernel} (it takes {need} bytes), "
            f"whose parameters (offset, size) are {list(layout)}: {need} bytes expected, got {len(args)}"
        )


class KernelImage(Image):
    """An image of GPU kernels: beside each kernel's handle, its parameter layout as the loader read it.

    ``layouts[name]`` is what a launch of that kernel is checked against, so a
    caller can see why its argument buffer was refused (or size one) without a GPU."""

    def __init__(
        self, device: str, handle: int, functions: dict[str, int], layouts: dict[str, ParamLayout], release: Callable[[], None], ledger: Ledger | None = None
    ) -> None:
        super().__init__(device, handle, functions, release, ledger)
        self.layouts: dict[str, ParamLayout] = dict(layouts)


# ---------------------------------------------------------------------------------------------
# A launch


def _func(func: Any) -> int:
    if type(func) is int and 0 < func < _U64:
        return func
    handle = _index(func)
    if handle is None:
        raise ArigTypeError(f"func must be a kernel's handle from image.function(name), an int; got {safe_repr(func)}")
    if not 0 < handle < _U64:
        raise ArigValueError(f"func must be a kernel's handle from image.function(name), an int in 1..2**64-1; got {handle}")
    return handle


def _shared(shared: Any) -> int:
    if type(shared) is int and 0 <= shared <= U32:
        return shared
    n = _index(shared)
    if n is None or not 0 <= n <= U32:
        raise ArigValueError(f"shared must be an int in 0..2**32-1 (bytes of dynamic shared memory), got {safe_repr(shared)}")
    return n


def _args(args: Any) -> bytes:
    # Only bytes-like: bytes(5) or bytes([1, 2]) would be a buffer of another meaning, silently.
    if not isinstance(args, (bytes, bytearray, memoryview)):
        raise ArigTypeError(f"args must be bytes (arig.cuda.pack(...)), got {type(args).__name__}")
    return bytes(args)


class Packed(bytes):
    """Argument bytes that remember the buffers they name (``arig.cuda.pack``): a launch of them is
    refused at submit once one of those buffers is closed."""

    uses: tuple[_Held, ...] = ()


class LaunchSpec:
    """One kernel launch as both GPUs mean it: ``func``, ``grid``, ``block``, ``args``, ``shared``.

    ``func`` is ``image.function(name)``; ``grid`` and ``block`` an int ``n``
    (meaning ``(n, 1, 1)``) or exactly ``(x, y, z)``, each 1..2**32-1;
    ``args`` the parameter bytes as the kernel lays them out
    (``arig.cuda.pack``), exactly the kernel's size where the device knows its
    layout; ``shared`` the dynamic shared memory in bytes, 0..2**32-1.
    Everything is checked once, here, so a bad launch is refused before it can
    reach a GPU, and by the same rule on each.  A device's ``Launch`` builds on
    this and makes its own record from the checked fields.
    """

    __slots__ = ("func", "grid", "block", "args", "shared", "_uses", "_images")

    def __init__(self, func: int, grid: Any, block: Any, args: Args = b"", shared: int = 0) -> None:
        self.func = _func(func)
        self.grid = dims(grid, "grid")
        self.block = dims(block, "block")
        self.shared = _shared(shared)
        self.args = self._checked(args)

    def _params(self) -> tuple[str, ParamLayout] | None:
        """The kernel's name (for messages) and parameter layout, where the device knows them.

        None: the device cannot check (the driver will).  A device whose
        launches need the kernel's facts raises here for an unknown ``func``."""
        return None

    def _checked(self, args: Any) -> bytes:
        """``args`` as bytes, checked against the kernel's layout (when known); what the launch uses is
        noted (``_uses``: its image, the buffers ``pack`` saw), for the device to check at submit."""
        data = _args(args)
        self._uses = uses_of(self.func, args)
        self._images = owners_of(self._uses)  # its image stays loaded while this launch lives
        known = self._params()
        if known is not None:
            check_params(known[1], data, known[0])
        return data
