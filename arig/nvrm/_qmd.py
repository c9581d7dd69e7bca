"""The QMD (Queue Meta Data) of HOPPER_COMPUTE_A, version 04_00, and constant bank 0.

Pure: field values in, bytes out; no file descriptor, no driver, any thread.
A compute launch through the kernel driver is a 384-byte QMD in GPU memory
that ``SEND_PCAS_A`` hands to the GPU by address: it says where the code is
(``PROGRAM_ADDRESS``), the launch shape (``GRID_*``, ``CTA_THREAD_DIMENSION*``),
the resources a block needs (registers, barriers, shared and local memory),
where constant bank 0 is (the parameters, blockDim/gridDim, the stack
pointer), and which semaphores to write when the grid completes.

Hopper takes QMD V04 only: Ampere's V03 (256 bytes) sent to HOPPER_COMPUTE_A
never completes (measured on an H200).

The field table (``arig.nvrm._qmd_fields``) is transcribed from NVIDIA's header; this module
encodes with it.

V04 has no ``SM_GLOBAL_CACHING_ENABLE`` and no ``L1_CONFIGURATION`` (V03 and
older did): the L1/shared split is the three ``*_SM_CONFIG_SHARED_MEM_SIZE``.
"""

from __future__ import annotations

import difflib
import operator
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .._errors import ArigKeyError, ArigTypeError, ArigValueError, safe_repr
from ._cubin import Kernel
from ._qmd_fields import FIELDS, QMD_BYTES, VALUES, Reduction

__all__ = [
    "QMD_BYTES",
    "FIELDS",
    "VALUES",
    "Reduction",
    "Release",
    "pack",
    "patch",
    "unpack",
    "kernel_qmd",
    "chain",
    "cbank0",
    "local_bytes_per_thread",
    "shared_bytes_total",
]

# ---------------------------------------------------------------------------------------------
# Bits


def _where(name: str) -> tuple[int, int]:
    try:
        return FIELDS[name]
    except KeyError:
        close = difflib.get_close_matches(str(name), FIELDS, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ArigKeyError(f"QMD V04 has no field {name!r}{hint}") from None


def _checked(fields: Mapping[str, int]) -> list[tuple[int, int, int]]:
    """``(hi, lo, value)`` of each field, every name and value checked before anything is written."""
    out = []
    for name, value in fields.items():
        hi, lo = _where(name)
        try:
            value = operator.index(value)
        except TypeError:
            raise ArigTypeError(f"QMD field {name} takes an int, not {type(value).__name__}") from None
        top = (1 << (hi - lo + 1)) - 1
        if not 0 <= value <= top:
            raise ArigValueError(f"QMD field {name} is bits {hi}:{lo}: {value} is not in 0..{top:#x}")
        out.append((hi, lo, value))
    return out


def patch(qmd: bytearray | memoryview, fields: Mapping[str, int], offset: int = 0) -> None:
    """Set ``fields`` in a QMD already in memory (a bytearray, or a memoryview of mapped memory).

    For what changes between launches of one prepared QMD (grid size, the
    release payload, the dependent pointer); all other bits stay as they are.
    Nothing is written unless every name and value is valid.
    """
    if offset < 0 or offset + QMD_BYTES > len(qmd):
        raise ArigValueError(f"a QMD at offset {offset} needs {QMD_BYTES} bytes; the buffer has {len(qmd)}")
    for hi, lo, value in _checked(fields):
        first, last = offset + (lo >> 3), offset + (hi >> 3) + 1
        shift = lo & 7
        mask = ((1 << (hi - lo + 1)) - 1) << shift
        word = int.from_bytes(bytes(qmd[first:last]), "little")
        qmd[first:last] = ((word & ~mask) | (value << shift)).to_bytes(last - first, "little")


def pack(fields: Mapping[str, int]) -> bytes:
    """The 384 bytes of a QMD with ``fields`` set and every other bit zero.

    Unknown names raise :class:`~arig.ArigKeyError` naming the name; values
    that do not fit raise :class:`~arig.ArigValueError` naming field and range.
    """
    out = bytearray(QMD_BYTES)
    patch(out, fields)
    return bytes(out)


def unpack(data: bytes | bytearray | memoryview) -> dict[str, int]:
    """Every field of a QMD (zeros included), in bit order: for tests and for reading what the GPU left."""
    if len(data) != QMD_BYTES:
        raise ArigValueError(f"a V04 QMD is {QMD_BYTES} bytes, not {len(data)}")
    bits = int.from_bytes(bytes(data), "little")
    return {name: (bits >> lo) & ((1 << (hi - lo + 1)) - 1) for name, (hi, lo) in FIELDS.items()}


# ---------------------------------------------------------------------------------------------
# Constant bank 0
#
# What sm_90 code compiled by nvcc reads from c[0] besides its parameters (measured on an
# H200): blockDim.xyz then gridDim.xyz as u32 at 0x0..0x14,
# the shared and local memory windows (u64) at 0x18 and 0x20, the initial stack pointer at 0x28
# (every kernel starts with LDC R1, c[0x0][0x28]), a memory descriptor at 0x208 (zero works),
# and the parameters at the kernel's PARAM_CBANK offset (0x210).

#: blockDim.x, .y, .z, gridDim.x, .y, .z at c[0][0x0].
CB0_DIMS = struct.Struct("<6I")
CB0_DIMS_OFFSET = 0x0
#: The shared window, then the local window, as GPU virtual addresses.
CB0_WINDOWS = struct.Struct("<QQ")
CB0_WINDOWS_OFFSET = 0x18
#: The stack pointer a thread starts with, a local-memory address.
CB0_STACK = struct.Struct("<I")
CB0_STACK_OFFSET = 0x28
#: A thread's local address space is 16 MiB (SHADER_LOCAL_MEMORY_*_SIZE are 24 bits); the stack
#: grows down from 0x240 under its top, the value tinygrad writes at 0x28 (0xfffdc0), which worked.
LOCAL_SPACE_BYTES = 1 << 24
STACK_RESERVE = 0x240
STACK_TOP = LOCAL_SPACE_BYTES - STACK_RESERVE
#: The part of bank 0 before sm_90's parameters that the launcher and driver own: a bank is never
#: smaller, even for a kernel without parameters (whose cubin says PARAM_CBANK 0, size 0).
CB0_PREFIX = 0x210
#: Constant bank sizes are in units of 16 bytes (SIZE_SHIFTED4); 64 KiB is a bank's most.
CBANK_ALIGN = 16
CBANK_MAX = 0x10000

Dim3 = int | Sequence[int]


def _dim3(what: str, value: Dim3) -> tuple[int, int, int]:
    """The encoder's own reading of a size (1 to 3 positive ints): ``arig.nvrm.Launch`` has already
    applied the devices' one rule (``arig._launchspec.dims``); this keeps the encoder whole on its own."""
    try:
        sizes = tuple(operator.index(d) for d in (value if isinstance(value, Sequence) else (value,)))
    except TypeError:
        sizes = ()
    if not 1 <= len(sizes) <= 3 or min(sizes) < 1:
        raise ArigValueError(f"{what} must be 1 to 3 positive ints, not {safe_repr(value)}")
    x, y, z = (*sizes, 1, 1)[:3]
    return x, y, z


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def _cbank0_min(kernel: Kernel) -> int:
    return max(CB0_PREFIX, kernel.param_base + kernel.param_size)


def cbank0(
    kernel: Kernel,
    grid: Dim3,
    block: Dim3,
    params: bytes,
    *,
    shared_window: int | None = None,
    local_window: int | None = None,
) -> bytes:
    """The constant bank 0 image of one launch, padded to 16 bytes (its length is the QMD's size).

    Starts from the cubin's own bank 0 and writes what nvcc's code expects
    the launcher to supply: block and grid sizes (without them only block 0
    computes right, measured), the stack pointer, the memory windows when
    given (the channel chose them: SET_SHADER_*_MEMORY_WINDOW), and the
    parameters, which must be exactly the kernel's ``param_size`` bytes.
    """
    if len(params) != kernel.param_size:
        raise ArigValueError(f"kernel {kernel.name!r} takes {kernel.param_size} bytes of parameters, not {len(params)}")
    image = bytearray(kernel.cbank0)
    image.extend(bytes(max(0, _cbank0_min(kernel) - len(image))))
    CB0_DIMS.pack_into(image, CB0_DIMS_OFFSET, *_dim3("block", block), *_dim3("grid", grid))
    if shared_window is not None or local_window is not None:
        CB0_WINDOWS.pack_into(image, CB0_WINDOWS_OFFSET, shared_window or 0, local_window or 0)
    CB0_STACK.pack_into(image, CB0_STACK_OFFSET, STACK_TOP)
    image[kernel.param_base : kernel.param_base + kernel.param_size] = params
    image.extend(bytes(_round_up(len(image), CBANK_ALIGN) - len(image)))
    return bytes(image)


# ---------------------------------------------------------------------------------------------
# A launch

#: sm_90 keeps 1 KiB of every block's shared memory for the system (ptxas's smem plus 0x400 is
#: what .nv.shared.<k> holds); a block with only dynamic shared memory needs it too.
SHARED_RESERVE = 0x400
#: The most shared memory one block may have on sm_90, the reserve included (228 KiB per SM).
SHARED_MAX = 228 * 1024
#: The SM's L1/shared carve-outs, in KiB.  Up to 100 KiB the ones tinygrad uses, which ran on an
#: H200; the larger ones are Hopper's (CUDA's documented 132..228 KiB) and untested here.
_CARVEOUTS_KIB = (32, 64, 100, 132, 164, 196, 228)
#: Default upper bound of the carve-out (MAX_SM_CONFIG_SHARED_MEM_SIZE): 100 KiB, as tinygrad (0x1a).
DEFAULT_MAX_CARVEOUT = 100 * 1024
MAX_THREADS_PER_BLOCK = 1024
REGISTERS_PER_SM = 65536


def _sm_config(nbytes: int) -> int:
    """``*_SM_CONFIG_SHARED_MEM_SIZE`` encoding of the smallest carve-out holding ``nbytes``: KiB/4 + 1."""
    for kib in _CARVEOUTS_KIB:
        if nbytes <= kib * 1024:
            return kib // 4 + 1
    raise ArigValueError(f"{nbytes} bytes of shared memory is more than an sm_90 SM has ({SHARED_MAX})")


def shared_bytes_total(kernel: Kernel, dynamic: int = 0) -> int:
    """SHARED_MEMORY_SIZE of a launch: static (with the system's 1 KiB) plus dynamic, in 256-byte units."""
    if dynamic < 0:
        raise ArigValueError(f"dynamic shared memory cannot be negative ({dynamic})")
    static = kernel.shared if kernel.shared or not dynamic else SHARED_RESERVE
    return _round_up(static + dynamic, 0x100)


def local_bytes_per_thread(kernel: Kernel) -> int:
    """SHADER_LOCAL_MEMORY_HIGH_SIZE: the stack (callees included) plus the 0x240 above STACK_TOP.

    The stack is at the top of the thread's local space, so it is the
    "high" region; the channel's local memory (SET_SHADER_LOCAL_MEMORY_A)
    must be sized for at least this many bytes per thread.
    """
    return _round_up(kernel.stack + STACK_RESERVE, 0x10)


@dataclass(frozen=True, slots=True)
class Release:
    """A semaphore the GPU writes when the grid has completed (RELEASE_SEMAPHORE0..2).

    Defaults suit arig's 16-byte signal (u64 value, then u64 GPU time):
    a four-word structure with a 64-bit payload.  ``sysmembar`` adds a
    front-end SYSMEMBAR before the write; the launch's CWD_MEMBAR_TYPE
    already orders the kernel's own writes.  ``reduction`` combines the
    payload with the word instead (unsigned).
    """

    address: int
    payload: int
    payload64: bool = True
    timestamp: bool = True
    sysmembar: bool = False
    reduction: Reduction | None = None

    def fields(self, i: int) -> dict[str, int]:
        if self.timestamp:
            size, align = VALUES["RELEASE_STRUCTURE_SIZE_SEMAPHORE_FOUR_WORDS"], 16
        elif self.payload64:
            size, align = VALUES["RELEASE_STRUCTURE_SIZE_SEMAPHORE_TWO_WORDS"], 8
        else:
            size, align = VALUES["RELEASE_STRUCTURE_SIZE_SEMAPHORE_ONE_WORD"], 4
        if self.address % align:
            raise ArigValueError(f"release {i}: address {self.address:#x} is not {align}-byte aligned")
        if not 0 <= self.payload < (1 << (64 if self.payload64 else 32)):
            raise ArigValueError(f"release {i}: payload {self.payload} does not fit {64 if self.payload64 else 32} bits")
        return {
            f"RELEASE_ENABLE({i})": 1,
            f"RELEASE_STRUCTURE_SIZE({i})": size,
            f"RELEASE_PAYLOAD64B({i})": int(self.payload64),
            f"RELEASE_MEMBAR_TYPE({i})": VALUES["RELEASE_MEMBAR_TYPE_FE_SYSMEMBAR" if self.sysmembar else "RELEASE_MEMBAR_TYPE_FE_NONE"],
            f"RELEASE_REDUCTION_ENABLE({i})": int(self.reduction is not None),
            f"RELEASE_REDUCTION_OP({i})": int(self.reduction or 0),
            f"RELEASE_REDUCTION_FORMAT({i})": VALUES["RELEASE_REDUCTION_FORMAT_UNSIGNED"],
            f"RELEASE_SEMAPHORE{i}_ADDR_LOWER": self.address & 0xFFFFFFFF,
            f"RELEASE_SEMAPHORE{i}_ADDR_UPPER": self.address >> 32,
            f"RELEASE_SEMAPHORE{i}_PAYLOAD_LOWER": self.payload & 0xFFFFFFFF,
            f"RELEASE_SEMAPHORE{i}_PAYLOAD_UPPER": self.payload >> 32,
        }


def kernel_qmd(
    kernel: Kernel,
    *,
    grid: Dim3,
    block: Dim3,
    program_address: int,
    cbank0_address: int,
    cbank0_size: int,
    shared_bytes: int = 0,
    release: Release | Sequence[Release] | None = None,
    sm: int = 90,
    max_carveout: int = DEFAULT_MAX_CARVEOUT,
) -> dict[str, int]:
    """The QMD fields of one launch of ``kernel`` (``pack()`` them), as they ran on an H200.

    ``program_address`` is the GPU address of the kernel's code (128-byte
    aligned, as cubins lay code out), ``cbank0_address``/``cbank0_size``
    where :func:`cbank0`'s image was written (64-byte aligned, at most 64
    KiB), ``shared_bytes`` the dynamic shared memory, ``release`` up to
    three semaphores written at completion.  Launch limits are checked here
    so that a bad launch is refused instead of faulting on the GPU.
    """
    gx, gy, gz = _dim3("grid", grid)
    bx, by, bz = _dim3("block", block)
    if gx >= 1 << 31 or gy > 0xFFFF or gz > 0xFFFF:
        raise ArigValueError(f"grid {(gx, gy, gz)} exceeds (2**31 - 1, 65535, 65535)")
    threads = bx * by * bz
    if bx > 1024 or by > 1024 or bz > 64 or threads > MAX_THREADS_PER_BLOCK:
        raise ArigValueError(f"block {(bx, by, bz)} exceeds (1024, 1024, 64) or {MAX_THREADS_PER_BLOCK} threads")
    if _round_up(kernel.registers, 8) * _round_up(threads, 32) > REGISTERS_PER_SM:
        raise ArigValueError(f"kernel {kernel.name!r}: {threads} threads of {kernel.registers} registers exceed an SM's {REGISTERS_PER_SM}")
    shared = shared_bytes_total(kernel, shared_bytes)
    if shared > SHARED_MAX:
        raise ArigValueError(f"kernel {kernel.name!r}: {shared} bytes of shared memory exceed sm_90's {SHARED_MAX} per block")
    if program_address % 128:
        raise ArigValueError(f"program address {program_address:#x} is not 128-byte aligned")
    if cbank0_address % 64:
        raise ArigValueError(f"constant bank 0 address {cbank0_address:#x} is not 64-byte aligned (ADDR_SHIFTED6)")
    if not _cbank0_min(kernel) <= cbank0_size <= CBANK_MAX:
        raise ArigValueError(f"constant bank 0 size {cbank0_size} is not in {_cbank0_min(kernel)}..{CBANK_MAX}")
    releases = () if release is None else (release,) if isinstance(release, Release) else tuple(release)
    if len(releases) > 3:
        raise ArigValueError(f"a V04 QMD has 3 release semaphores, not {len(releases)}")
    prefetch = program_address >> 8
    fields = {
        # What the QMD is: a plain grid of CTAs, V04.0, for this SASS (sm_90 -> 0x90).
        "QMD_GROUP_ID": 0x3F,  # all ones, as kernels ran on an H200; arig uses no QMD group lists
        "QMD_TYPE": VALUES["QMD_TYPE_GRID_CTA"],
        "QMD_MAJOR_VERSION": 4,
        "QMD_MINOR_VERSION": 0,
        "SASS_VERSION": (sm // 10) << 4 | sm % 10,
        "API_VISIBLE_CALL_LIMIT": VALUES["API_VISIBLE_CALL_LIMIT_NO_CHECK"],  # no 32-deep call limit check
        "SAMPLER_INDEX": VALUES["SAMPLER_INDEX_INDEPENDENTLY"],
        # The code, and a prefetch of it at launch (address >> 8; size in 256-byte units, at most 0x1ff).
        "PROGRAM_ADDRESS_LOWER": program_address & 0xFFFFFFFF,
        "PROGRAM_ADDRESS_UPPER": program_address >> 32,
        "PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED": prefetch & 0xFFFFFFFF,
        "PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED": prefetch >> 32,
        "PROGRAM_PREFETCH_SIZE": min((program_address + len(kernel.text) - (prefetch << 8)) >> 8, 0x1FF),
        "PROGRAM_PREFETCH_TYPE": VALUES["PROGRAM_PREFETCH_TYPE_PREFETCH_LAUNCH"],
        # The launch shape.
        "GRID_WIDTH": gx,
        "GRID_HEIGHT": gy,
        "GRID_DEPTH": gz,
        "CTA_THREAD_DIMENSION0": bx,
        "CTA_THREAD_DIMENSION1": by,
        "CTA_THREAD_DIMENSION2": bz,
        # Per-block resources.  At least one barrier, also for a kernel that uses none (it ran so on an H200).
        "REGISTER_COUNT": kernel.registers,
        "BARRIER_COUNT": max(kernel.barriers, 1),
        "SHARED_MEMORY_SIZE": shared,
        "MIN_SM_CONFIG_SHARED_MEM_SIZE": _sm_config(shared),
        "TARGET_SM_CONFIG_SHARED_MEM_SIZE": _sm_config(shared),
        "MAX_SM_CONFIG_SHARED_MEM_SIZE": _sm_config(max(shared, max_carveout)),
        "SHADER_LOCAL_MEMORY_LOW_SIZE": 0,
        "SHADER_LOCAL_MEMORY_HIGH_SIZE": local_bytes_per_thread(kernel),
        # Caches: drop texture/shader data the previous launch may have left, and
        # bank 0's cached contents (ring slices are reused); a sysmembar when the grid ends so
        # the host sees the kernel's writes before any release.
        "INVALIDATE_TEXTURE_HEADER_CACHE": 1,
        "INVALIDATE_TEXTURE_SAMPLER_CACHE": 1,
        "INVALIDATE_TEXTURE_DATA_CACHE": 1,
        "INVALIDATE_SHADER_DATA_CACHE": 1,
        "CWD_MEMBAR_TYPE": VALUES["CWD_MEMBAR_TYPE_L1_SYSMEMBAR"],
        # Constant bank 0.
        "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)": (cbank0_address >> 6) & 0xFFFFFFFF,
        "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(0)": cbank0_address >> 38,
        "CONSTANT_BUFFER_SIZE_SHIFTED4(0)": _round_up(cbank0_size, CBANK_ALIGN) >> 4,
        "CONSTANT_BUFFER_VALID(0)": 1,
        "CONSTANT_BUFFER_INVALIDATE(0)": 1,
        # Nothing launched from this QMD unless chain() says so.
        "DEPENDENT_QMD_ENABLE(0)": 0,
        "DEPENDENT_QMD_ENABLE(1)": 0,
    }
    for i, r in enumerate(releases):
        fields.update(r.fields(i))
    _checked(fields)  # addresses too wide for their fields are refused here, not at pack()
    return fields


def chain(next_qmd_address: int, index: int = 0) -> dict[str, int]:
    """Fields that make a QMD schedule the QMD at ``next_qmd_address`` when it completes.

    Consecutive kernels of one queue run in order without host methods this
    way (DEPENDENT_QMD0, action SCHEDULE).  The pointer is the address >> 8,
    as SEND_PCAS_A takes it (that V04 shifts it too is not yet measured), so
    QMDs must lie below 2**40.
    """
    if next_qmd_address % 256 or not 0 <= next_qmd_address < 1 << 40:
        raise ArigValueError(f"a chained QMD must be 256-byte aligned and below 2**40 (a 32-bit pointer >> 8), not at {next_qmd_address:#x}")
    if index not in (0, 1):
        raise ArigValueError(f"a V04 QMD has dependent QMDs 0 and 1, not {index}")
    fields = {
        f"DEPENDENT_QMD{index}_POINTER": next_qmd_address >> 8,
        f"DEPENDENT_QMD_ENABLE({index})": 1,
        f"DEPENDENT_QMD_ACTION({index})": VALUES["DEPENDENT_QMD_ACTION_QMD_SCHEDULE"],
        f"DEPENDENT_QMD_PREFETCH({index})": 0,
    }
    _checked(fields)
    return fields
