"""The pure layer of the kernel-driver path: structs, codes and parsing.

Nothing here opens a file or calls ``ioctl``.  It says what bytes go to the
NVIDIA kernel driver and what the bytes that come back mean, so all of it can
be tested on a machine without a GPU (the protocol kept apart from the I/O).
The layouts are those of NVIDIA's open-gpu-kernel-modules at the 580 release,
checked on an H200 with driver 580.159.04.

Every struct is a :class:`ctypes.Structure` with natural (C) alignment, which
is what the driver's x86-64 build uses, so ``ctypes.sizeof`` and
``Struct.field.offset`` are the layout's own test.
"""

from __future__ import annotations

import ctypes
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from arig._errors import ArigError, ArigValueError

__all__ = [
    "RmError", "DriverError", "NoGpuError", "status_name", "iowr", "request", "check_status",
    "Nvos21", "Nvos54", "Nvos00", "CardInfo", "VersionStr", "XferCmd",
    "Nv0080Alloc", "Nv2080Alloc", "IdInfoV2", "FbInfoV2", "UtilSamplesV2",
    "NameString", "ArchInfo", "GidInfo", "WatchdogInfo", "RegisterFd",
    "busy_percent", "fb_values", "arch_of", "bus_name", "release_major",
    "release_from_proc", "Usage", "usage_of",
]

u8, u16, u32, u64 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64


# --- NV_STATUS codes (nvstatuscodes.h, 580) ----------------------------------

# The NV_ERR_* names of codes 0x01.. in order; the header numbers them densely.
_ERR_NAMES: tuple[str, ...] = (
    "BROKEN_FB", "BUFFER_TOO_SMALL", "BUSY_RETRY", "CALLBACK_NOT_SCHEDULED",
    "CARD_NOT_PRESENT", "CYCLE_DETECTED", "DMA_IN_USE", "DMA_MEM_NOT_LOCKED",
    "DMA_MEM_NOT_UNLOCKED", "DUAL_LINK_INUSE", "ECC_ERROR", "FIFO_BAD_ACCESS",
    "FREQ_NOT_SUPPORTED", "GPU_DMA_NOT_INITIALIZED", "GPU_IS_LOST",
    "GPU_IN_FULLCHIP_RESET", "GPU_NOT_FULL_POWER", "GPU_UUID_NOT_FOUND", "HOT_SWITCH",
    "I2C_ERROR", "I2C_SPEED_TOO_HIGH", "ILLEGAL_ACTION", "IN_USE",
    "INFLATE_COMPRESSED_DATA_FAILED", "INSERT_DUPLICATE_NAME", "INSUFFICIENT_RESOURCES",
    "INSUFFICIENT_PERMISSIONS", "INSUFFICIENT_POWER", "INVALID_ACCESS_TYPE",
    "INVALID_ADDRESS", "INVALID_ARGUMENT", "INVALID_BASE", "INVALID_CHANNEL",
    "INVALID_CLASS", "INVALID_CLIENT", "INVALID_COMMAND", "INVALID_DATA",
    "INVALID_DEVICE", "INVALID_DMA_SPECIFIER", "INVALID_EVENT", "INVALID_FLAGS",
    "INVALID_FUNCTION", "INVALID_HEAP", "INVALID_INDEX", "INVALID_IRQ_LEVEL",
    "INVALID_LIMIT", "INVALID_LOCK_STATE", "INVALID_METHOD", "INVALID_OBJECT",
    "INVALID_OBJECT_BUFFER", "INVALID_OBJECT_HANDLE", "INVALID_OBJECT_NEW",
    "INVALID_OBJECT_OLD", "INVALID_OBJECT_PARENT", "INVALID_OFFSET",
    "INVALID_OPERATION", "INVALID_OWNER", "INVALID_PARAM_STRUCT", "INVALID_PARAMETER",
    "INVALID_PATH", "INVALID_POINTER", "INVALID_REGISTRY_KEY", "INVALID_REQUEST",
    "INVALID_STATE", "INVALID_STRING_LENGTH", "INVALID_READ", "INVALID_WRITE",
    "INVALID_XLATE", "IRQ_NOT_FIRING", "IRQ_EDGE_TRIGGERED", "MEMORY_TRAINING_FAILED",
    "MISMATCHED_SLAVE", "MISMATCHED_TARGET", "MISSING_TABLE_ENTRY",
    "MODULE_LOAD_FAILED", "MORE_DATA_AVAILABLE", "MORE_PROCESSING_REQUIRED",
    "MULTIPLE_MEMORY_TYPES", "NO_FREE_FIFOS", "NO_INTR_PENDING", "NO_MEMORY",
    "NO_SUCH_DOMAIN", "NO_VALID_PATH", "NOT_COMPATIBLE", "NOT_READY", "NOT_SUPPORTED",
    "OBJECT_NOT_FOUND", "OBJECT_TYPE_MISMATCH", "OPERATING_SYSTEM",
    "OTHER_DEVICE_FOUND", "OUT_OF_RANGE", "OVERLAPPING_UVM_COMMIT",
    "PAGE_TABLE_NOT_AVAIL", "PID_NOT_FOUND", "PROTECTION_FAULT", "RC_ERROR",
    "REJECTED_VBIOS", "RESET_REQUIRED", "STATE_IN_USE", "SIGNAL_PENDING", "TIMEOUT",
    "TIMEOUT_RETRY", "TOO_MANY_PRIMARIES", "UVM_ADDRESS_IN_USE",
    "MAX_SESSION_LIMIT_REACHED", "LIB_RM_VERSION_MISMATCH", "PRIV_SEC_VIOLATION",
    "GPU_IN_DEBUG_MODE", "FEATURE_NOT_ENABLED", "RESOURCE_LOST", "PMU_NOT_READY",
    "FLCN_ERROR", "FATAL_ERROR", "MEMORY_ERROR", "INVALID_LICENSE", "NVLINK_INIT_ERROR",
    "NVLINK_MINION_ERROR", "NVLINK_CLOCK_ERROR", "NVLINK_TRAINING_ERROR",
    "NVLINK_CONFIGURATION_ERROR", "RISCV_ERROR", "FABRIC_MANAGER_NOT_PRESENT",
    "ALREADY_SIGNALLED", "QUEUE_TASK_SLOT_NOT_AVAILABLE", "KEY_ROTATION_IN_PROGRESS",
    "TEST_ONLY_CODE_NOT_ENABLED", "SECURE_BOOT_FAILED", "INSUFFICIENT_ZBC_ENTRY",
    "NVLINK_FABRIC_NOT_READY", "NVLINK_FABRIC_FAILURE", "GPU_MEMORY_ONLINING_FAILURE",
    "REDUCTION_MANAGER_NOT_AVAILABLE", "THRESHOLD_CROSSED", "RESOURCE_RETIREMENT_ERROR",
    "FABRIC_STATE_OUT_OF_SYNC", "BUFFER_FULL", "BUFFER_EMPTY",
    "MC_FLA_OFFSET_TABLE_FULL",
)
_WARN_NAMES = ("HOT_SWITCH", "INCORRECT_PERFMON_DATA", "MISMATCHED_SLAVE",
               "MISMATCHED_TARGET", "MORE_PROCESSING_REQUIRED", "NOTHING_TO_DO",
               "NULL_OBJECT", "OUT_OF_RANGE", "THRESHOLD_CROSSED")  # 0x10001..


def status_name(status: int) -> str:
    """The header's name of an NV_STATUS code, e.g. 0x1B -> NV_ERR_INSUFFICIENT_PERMISSIONS."""
    if status == 0:
        return "NV_OK"
    if status == 0xFFFF:
        return "NV_ERR_GENERIC"
    if 1 <= status <= len(_ERR_NAMES):
        return "NV_ERR_" + _ERR_NAMES[status - 1]
    if 0x10001 <= status < 0x10001 + len(_WARN_NAMES):
        return "NV_WARN_" + _WARN_NAMES[status - 0x10001]
    return f"NV_STATUS_UNKNOWN_0x{status:X}"


# --- errors ---------------------------------------------------------------


class PinRefused(ArigValueError):
    """The kernel driver will not pin these host pages for the GPU (``Device.map_host``): it would refuse them again."""


class RmError(ArigError):
    """The RM refused a command: its NV_STATUS code is ``status``.

    The driver answers most calls with ioctl success and the real result in
    the struct's ``status`` field, so this is what a refusal looks like.
    """

    def __init__(self, op: str, status: int) -> None:
        self.op = op
        self.status = status
        self.status_name = status_name(status)
        super().__init__(f"{op}: the RM refused it with 0x{status:08X} {self.status_name}")


class DriverError(ArigError):
    """The machine's NVIDIA files could not be used as needed.

    That is the PCI functions under /sys, the driver's device files under
    /dev, an ioctl the kernel itself failed, or a driver release arig does not
    accept.  ``errno`` is the OS error number where there was one.
    """

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


class NoGpuError(ArigError, LookupError):
    """The machine has no GPU of that index (the message says how many)."""


def check_status(op: str, status: int) -> None:
    """Raise :class:`RmError` for a nonzero NV_STATUS; NV_OK passes."""
    if status != 0:
        raise RmError(op, status)


# --- ioctl request codes --------------------------------------------------

_IOC_WRITE_READ = 3
_NV_IOCTL_MAGIC = ord("F")
SIZE_MASK = 0x3FFF  # _IOC_SIZEBITS is 14 on x86
MAX_IOCTL_SIZE = SIZE_MASK  # bigger payloads go through NV_ESC_IOCTL_XFER_CMD

NV_ESC_RM_FREE = 0x29
NV_ESC_RM_CONTROL = 0x2A
NV_ESC_RM_ALLOC = 0x2B
NV_ESC_CARD_INFO = 200
NV_ESC_REGISTER_FD = 201
NV_ESC_CHECK_VERSION_STR = 210
NV_ESC_IOCTL_XFER_CMD = 211


def iowr(nr: int, size: int) -> int:
    """``_IOWR('F', nr, size)``: the request code the driver expects.

    The driver reads only the number and the size from it, and copies
    ``size`` bytes each way, so the size must be the struct's exact size.
    """
    if not 0 <= nr <= 0xFF:
        raise ArigValueError(f"ioctl number {nr} is out of range")
    if not 0 <= size <= SIZE_MASK:
        raise ArigValueError(f"ioctl size {size} does not fit in 14 bits; use the XFER escape")
    return (_IOC_WRITE_READ << 30) | (size << 16) | (_NV_IOCTL_MAGIC << 8) | nr


def request(nr: int, params: ctypes.Structure | ctypes.Array) -> int:  # type: ignore[type-arg]
    """The request code for sending ``params`` as escape ``nr``."""
    return iowr(nr, ctypes.sizeof(params))


# --- escape structs (nv-ioctl.h, nvos.h) -----------------------------------


class Nvos21(ctypes.Structure):
    """NV_ESC_RM_ALLOC's argument: make an RM object of ``hClass``."""

    _fields_ = [("hRoot", u32), ("hObjectParent", u32), ("hObjectNew", u32),
                ("hClass", u32), ("pAllocParms", u64), ("paramsSize", u32),
                ("status", u32)]


class Nvos54(ctypes.Structure):
    """NV_ESC_RM_CONTROL's argument; ``params`` points at the control's struct.

    The RM copies the control's params itself through the pointer, so a
    control bigger than the ioctl size limit still goes in this 32-byte call.
    """

    _fields_ = [("hClient", u32), ("hObject", u32), ("cmd", u32), ("flags", u32),
                ("params", u64), ("paramsSize", u32), ("status", u32)]


class Nvos00(ctypes.Structure):
    """NV_ESC_RM_FREE's argument."""

    _fields_ = [("hRoot", u32), ("hObjectParent", u32), ("hObjectOld", u32),
                ("status", u32)]


class PciInfo(ctypes.Structure):
    """The PCI address and ids inside a card-info entry."""

    _fields_ = [("domain", u32), ("bus", u8), ("slot", u8), ("function", u8),
                ("vendor_id", u16), ("device_id", u16)]


class CardInfo(ctypes.Structure):
    """One entry of NV_ESC_CARD_INFO: a GPU the driver holds."""

    _fields_ = [("valid", u8), ("pci_info", PciInfo), ("gpu_id", u32),
                ("interrupt_line", u16), ("reg_address", u64), ("reg_size", u64),
                ("fb_address", u64), ("fb_size", u64), ("minor_number", u32),
                ("dev_name", ctypes.c_char * 10)]


CARD_INFO_ENTRIES = 32  # NV_MAX_DEVICES: fewer entries than GPUs fails with EINVAL
CardInfoArray = CardInfo * CARD_INFO_ENTRIES

VERSION_QUERY = ord("2")  # NV_RM_API_VERSION_CMD_QUERY: report, compare nothing


class VersionStr(ctypes.Structure):
    """NV_ESC_CHECK_VERSION_STR's argument: the driver's release string."""

    _fields_ = [("cmd", u32), ("reply", u32), ("versionString", ctypes.c_char * 64)]


class XferCmd(ctypes.Structure):
    """NV_ESC_IOCTL_XFER_CMD: carries a payload bigger than the size field."""

    _fields_ = [("cmd", u32), ("size", u32), ("ptr", u64)]


class RegisterFd(ctypes.Structure):
    """NV_ESC_REGISTER_FD's argument, sent on /dev/nvidiaN."""

    _fields_ = [("ctl_fd", ctypes.c_int)]


# --- object classes and their alloc params ---------------------------------

NV01_ROOT_CLIENT = 0x41
NV01_DEVICE_0 = 0x80
NV20_SUBDEVICE_0 = 0x2080
VAMODE_MULTIPLE_VASPACES = 2


class Nv0080Alloc(ctypes.Structure):
    """NV0080_ALLOC_PARAMETERS: the RM device of one GPU."""

    _fields_ = [("deviceId", u32), ("hClientShare", u32), ("hTargetClient", u32),
                ("hTargetDevice", u32), ("flags", u32), ("vaSpaceSize", u64),
                ("vaStartInternal", u64), ("vaLimitInternal", u64), ("vaMode", u32)]


class Nv2080Alloc(ctypes.Structure):
    """NV2080_ALLOC_PARAMETERS: the subdevice, where the GPU's controls live."""

    _fields_ = [("subDeviceId", u32)]


# --- controls ---------------------------------------------------------------

CTRL_GPU_GET_ID_INFO_V2 = 0x205        # on the client
CTRL_GPU_GET_NAME_STRING = 0x20800110  # the rest on the subdevice
CTRL_GPU_GET_GID_INFO = 0x2080014A
CTRL_FB_GET_INFO_V2 = 0x20801303
CTRL_MC_GET_ARCH_INFO = 0x20801701
CTRL_PERF_UTIL_SAMPLES_V2 = 0x20802096
CTRL_RC_GET_WATCHDOG_INFO = 0x20802209


class IdInfoV2(ctypes.Structure):
    """NV0000_CTRL_GPU_GET_ID_INFO_V2: gives the device instance of a gpuId."""

    _fields_ = [("gpuId", u32), ("gpuFlags", u32), ("deviceInstance", u32),
                ("subDeviceInstance", u32), ("sliStatus", u32), ("boardId", u32),
                ("gpuInstance", u32), ("numaId", ctypes.c_int32)]


class FbInfo(ctypes.Structure):
    """One (index, value) pair of the framebuffer query."""

    _fields_ = [("index", u32), ("data", u32)]


FB_INFO_MAX = 128
FB_BAR1_SIZE = 0x05   # KiB
FB_RAM_SIZE = 0x07    # KiB: the physical memory, what nvidia-smi calls total
FB_HEAP_SIZE = 0x09   # KiB: what the RM can hand out, total
FB_HEAP_FREE = 0x16   # KiB: what the RM can still hand out


class FbInfoV2(ctypes.Structure):
    """NV2080_CTRL_FB_GET_INFO_V2: ask for values by index, KiB unless noted."""

    _fields_ = [("fbInfoListSize", u32), ("fbInfoList", FbInfo * FB_INFO_MAX)]

    @classmethod
    def asking(cls, indexes: Iterable[int]) -> FbInfoV2:
        """The params asking for ``indexes``, in that order."""
        wanted = list(indexes)
        if len(wanted) > FB_INFO_MAX:
            raise ArigValueError(f"at most {FB_INFO_MAX} FB info indexes")
        p = cls(fbInfoListSize=len(wanted))
        for slot, index in enumerate(wanted):
            p.fbInfoList[slot].index = index
        return p


def fb_values(p: FbInfoV2) -> dict[int, int]:
    """The answered FB info as {index: value}."""
    return {p.fbInfoList[k].index: p.fbInfoList[k].data for k in range(p.fbInfoListSize)}


class EngineUtil(ctypes.Structure):
    """One engine's share of a utilization sample; ``util`` is percent × 100."""

    _fields_ = [("util", u32), ("vgpuScale", u32), ("procId", u32),
                ("subProcessID", u32), ("subProcessName", ctypes.c_char * 100),
                ("pOsPidInfo", u64)]


class UtilSample(ctypes.Structure):
    """One sample of the RM's perfmon ring (taken about every 200 ms)."""

    _fields_ = [("timeStamp", u64), ("fb", EngineUtil), ("gr", EngineUtil),
                ("nvenc", EngineUtil), ("nvdec", EngineUtil), ("nvjpg", EngineUtil),
                ("nvofa", EngineUtil)]


UTIL_SAMPLES = 72
UTIL_TYPE_PERFMON = 2


class UtilSamplesV2(ctypes.Structure):
    """NV2080_CTRL_PERF_GET_GPUMON_PERFMON_UTIL_SAMPLES_V2 (55,888 bytes)."""

    _fields_ = [("type", u8), ("bufSize", u32), ("count", u32), ("tracker", u32),
                ("samples", UtilSample * UTIL_SAMPLES)]

    @classmethod
    def asking(cls) -> UtilSamplesV2:
        """Params set up as the RM wants them: type and the ring's byte size."""
        return cls(type=UTIL_TYPE_PERFMON,
                   bufSize=UTIL_SAMPLES * ctypes.sizeof(UtilSample))


def busy_percent(p: UtilSamplesV2, window: float) -> float | None:
    """The mean graphics/compute busy share, in percent, over ``window`` seconds.

    The ring's ``tracker`` did not give chronological order on the target, so
    the samples are ordered by their own timestamps (nanoseconds), unused
    slots (timestamp 0) skipped.  The window ends at the newest sample, so it
    is measured by the clock that took the samples, not the host's.  None
    when the RM took no sample.
    """
    taken = sorted((s.timeStamp, s.gr.util) for s in p.samples if s.timeStamp != 0)
    if not taken:
        return None
    # Integer nanoseconds: as floats, stamps near 2**60 round to 256 ns steps,
    # enough to drop a sample on the window's edge.  Infinite: the whole ring.
    oldest = 0 if math.isinf(window) else taken[-1][0] - round(window * 1e9)
    chosen = [util for stamp, util in taken if stamp >= oldest]
    mean = sum(chosen) / len(chosen) / 100.0
    return float(min(100.0, max(0.0, mean)))


class NameString(ctypes.Structure):
    """NV2080_CTRL_GPU_GET_NAME_STRING: flags 0 asks for ASCII."""

    _fields_ = [("gpuNameStringFlags", u32), ("gpuNameString", u8 * 128)]

    def text(self) -> str:
        """The ASCII name, without its NUL padding."""
        return bytes(self.gpuNameString).split(b"\0", 1)[0].decode("ascii", "replace")


class ArchInfo(ctypes.Structure):
    """NV2080_CTRL_MC_GET_ARCH_INFO: the chip's architecture and implementation."""

    _fields_ = [("architecture", u32), ("implementation", u32), ("revision", u32),
                ("subRevision", u8)]


GID_FLAGS_ASCII = 0  # the "GPU-xxxxxxxx-…" text; 2 would be the 16 raw bytes


class GidInfo(ctypes.Structure):
    """NV2080_CTRL_GPU_GET_GID_INFO: the GPU's UUID."""

    _fields_ = [("index", u32), ("flags", u32), ("length", u32), ("data", u8 * 256)]

    def text(self) -> str:
        """The UUID as text, for the ASCII form."""
        raw = bytes(self.data[: min(self.length, 256)])
        return raw.split(b"\0", 1)[0].decode("ascii", "replace")


WATCHDOG_RUNNING = 0x2


class WatchdogInfo(ctypes.Structure):
    """NV2080_CTRL_RC_GET_WATCHDOG_INFO: bits 1 DISABLED, 2 RUNNING, 4 INITIALIZED."""

    _fields_ = [("watchdogStatusFlags", u32)]


# --- meanings ----------------------------------------------------------------

# architecture code -> (chip family prefix, default sm, {implementation: sm})
_ARCHES: dict[int, tuple[str, str, dict[int, str]]] = {
    0x130: ("GP10", "sm_61", {0x0: "sm_60", 0xB: "sm_62"}),
    0x140: ("GV10", "sm_70", {}),
    0x160: ("TU10", "sm_75", {}),
    0x170: ("GA10", "sm_86", {0x0: "sm_80", 0xB: "sm_87"}),
    0x180: ("GH10", "sm_90", {}),
    0x190: ("AD10", "sm_89", {}),
    0x1A0: ("GB10", "sm_100", {}),
    0x1B0: ("GB20", "sm_120", {}),
}
_TU_NAMES = {0x7: "TU117", 0x8: "TU116"}  # Turing's only names off the pattern


def arch_of(architecture: int, implementation: int) -> tuple[str, str]:
    """(chip, sm) for an MC arch-info answer, e.g. (0x180, 0) -> ("GH100", "sm_90").

    The chip name is the family's prefix and the implementation digit (GA102
    is 0x170/0x2).  An architecture this table does not know keeps its code,
    so a newer GPU is still described rather than refused.
    """
    known = _ARCHES.get(architecture)
    if known is None:
        code = f"0x{architecture:X}"
        return f"arch {code} impl 0x{implementation:X}", f"nv_arch_{code}"
    prefix, default_sm, by_impl = known
    chip = _TU_NAMES.get(implementation) if architecture == 0x160 else None
    return chip or f"{prefix}{implementation:X}", by_impl.get(implementation, default_sm)


def bus_name(pci: PciInfo) -> str:
    """The sysfs-style address of a card-info entry, e.g. ``0000:00:06.0``."""
    return f"{pci.domain:04x}:{pci.bus:02x}:{pci.slot:02x}.{pci.function:x}"


_PROC_VERSION = re.compile(r"Kernel Module\b.*?\s(\d+\.\d+(?:\.\d+)*)\s")


def release_from_proc(text: str) -> str | None:
    """The version in /proc/driver/nvidia/version's text, or None.

    The line reads e.g. ``NVRM version: NVIDIA UNIX Open Kernel Module for
    x86_64  580.159.04  Release Build …``.
    """
    match = _PROC_VERSION.search(text)
    return match.group(1) if match else None


def release_major(version: str) -> str:
    """The release branch of a driver version: ``"580.159.04"`` -> ``"580"``."""
    return version.strip().split(".", 1)[0]


@dataclass(frozen=True, slots=True)
class Usage:
    """What a GPU's RM reports of its use, by every process on it.

    ``memory_total`` is the GPU's memory in bytes (what nvidia-smi calls
    total).  ``memory_free`` is the bytes the RM still has free to allocate;
    the rest is held by every process on the GPU and by the RM and its
    firmware.  ``busy`` is how busy the graphics/compute engine was, from 0.0
    to 100.0, over the window asked for, or None when the RM took no sample.
    """

    memory_total: int
    memory_free: int
    busy: float | None


def usage_of(fb: FbInfoV2, util: UtilSamplesV2 | None, window: float) -> Usage:
    """A :class:`Usage` from the answered FB info and utilization samples.

    Total is RAM_SIZE, the physical memory, which is nvidia-smi's total to
    the MiB on the H200 (147,221,504 KiB = 143,771 MiB).  Free is HEAP_FREE,
    what the RM can still hand out: it excludes the memory the RM and its
    firmware reserve (RAM_SIZE - HEAP_SIZE, about 615 MiB there), which
    nvidia-smi also leaves out of its free.
    """
    values = fb_values(fb)
    busy = None if util is None else busy_percent(util, window)
    return Usage(memory_total=values.get(FB_RAM_SIZE, 0) * 1024,
                 memory_free=values.get(FB_HEAP_FREE, 0) * 1024, busy=busy)
