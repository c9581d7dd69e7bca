"""The pure layer of the execution path: the structs, codes and bits to open a channel and launch.

Nothing here opens a file or calls ``ioctl``; like :mod:`arig.nvrm._params` it
only says what bytes go to the NVIDIA kernel driver.  The layouts are those of
open-gpu-kernel-modules tag 580.142 (the newest 580 tag; the 580 layouts are
unchanged in the H200's 580.159.04), read from these headers:

* ``src/common/sdk/nvidia/inc/nvos.h``: NVOS02/33/34/46/47, memory, VA space,
  channel group and context share alloc params, the NVOS02/NVOS32/NVOS33/
  NVOS46 flag fields and the NV01_EVENT_* bits;
* ``src/common/sdk/nvidia/inc/alloc/alloc_channel.h``: NV_CHANNEL_ALLOC_PARAMS;
* ``src/common/sdk/nvidia/inc/class/cl0070.h``, ``cl0005.h``,
  ``cl2080_notification.h``: virtual memory, event alloc params, notifiers;
* ``src/common/sdk/nvidia/inc/ctrl/``: ``ctrla06c.h``/``ctrla06f/ctrla06fgpfifo.h``
  (schedule), ``ctrlc36f.h`` (work submit token), ``ctrl0080/ctrl0080gpu.h`` (class list);
* ``src/nvidia/arch/nvalloc/unix/include/``: ``nv_escape.h``, ``nv-ioctl.h``,
  ``nv-ioctl-numbers.h``, ``nv-unix-nvos-params-wrappers.h``;
* ``kernel-open/nvidia-uvm/uvm_ioctl.h``, ``uvm_linux_ioctl.h``, ``uvm_types.h``.

Copies of these headers are in ``tests/data/nv/``; the tests parse the structs
there and compare every offset and size.  Every struct is a
:class:`ctypes.Structure` with natural alignment (the driver's x86-64 build).

Layouts that change between driver branches:
NVOS46 is 64 bytes since 580.65 (56 before), NV_VASPACE_ALLOCATION_PARAMETERS
56 since 580 (48 before), the GPFIFO schedule params 3 bytes since 575,
NV_CHANNEL_ALLOC_PARAMS becomes 376 bytes at 610 and UVM_FREE_PARAMS 16 at
610.  These are the 580 ones only.
"""

from __future__ import annotations

import ctypes

__all__ = [
    "NvMemoryAllocationParams", "NvMemoryVirtualAllocationParams", "NvVaspaceAllocationParameters",
    "NvChannelGroupAllocationParameters", "NvCtxshareAllocationParameters",
    "NvMemoryDescParams", "NvChannelAllocParams", "Nvos02", "Nvos02WithFd", "Nvos33", "Nvos33WithFd",
    "Nvos34", "Nvos46", "Nvos47", "GpfifoScheduleParams", "WorkSubmitTokenParams",
    "ClassListV2", "Nv0005AllocParameters", "AllocOsEvent", "FreeOsEvent",
    "UvmInitializeParams", "UvmMmInitializeParams", "UvmRegisterGpuParams",
    "UvmRegisterGpuVaspaceParams", "UvmRegisterChannelParams", "UvmUnregisterGpuParams",
    "UvmUnregisterGpuVaspaceParams", "UvmUnregisterChannelParams",
    "UvmCreateExternalRangeParams", "UvmGpuMappingAttributes", "UvmMapExternalAllocationParams",
    "UvmFreeParams", "Nv83deAllocParameters", "NvHopperUsermodeAParams", "GidInfoBinary",
    "field",
]

u8, u16, u32, u64 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64
s32 = ctypes.c_int32
NvBool = ctypes.c_uint8
NvHandle = ctypes.c_uint32
NvP64 = ctypes.c_uint64  # a user pointer carried as a u64, 8-byte aligned
NvProcessorUuid = ctypes.c_uint8 * 16  # struct { NvU8 uuid[16]; }: 1-byte aligned


def field(hi: int, lo: int, value: int) -> int:
    """``value`` placed in bits ``hi:lo`` of a word, as the headers' ``DRF_NUM`` does; checked to fit."""
    width = hi - lo + 1
    if not 0 <= value < (1 << width):
        raise ValueError(f"{value:#x} does not fit bits {hi}:{lo}")
    return value << lo


# --- escape numbers (nv_escape.h, nv-ioctl-numbers.h) --------------------------

NV_ESC_RM_ALLOC_MEMORY = 0x27
NV_ESC_RM_FREE = 0x29
NV_ESC_RM_CONTROL = 0x2A
NV_ESC_RM_ALLOC = 0x2B
NV_ESC_RM_MAP_MEMORY = 0x4E
NV_ESC_RM_UNMAP_MEMORY = 0x4F
NV_ESC_RM_GET_EVENT_DATA = 0x52
NV_ESC_RM_MAP_MEMORY_DMA = 0x57
NV_ESC_RM_UNMAP_MEMORY_DMA = 0x58
NV_IOCTL_BASE = 200
NV_ESC_CARD_INFO = NV_IOCTL_BASE + 0
NV_ESC_REGISTER_FD = NV_IOCTL_BASE + 1
NV_ESC_ALLOC_OS_EVENT = NV_IOCTL_BASE + 6
NV_ESC_FREE_OS_EVENT = NV_IOCTL_BASE + 7

# --- class ids (src/common/sdk/nvidia/inc/class/cl*.h) --------------------------

NV01_ROOT_CLIENT = 0x41
NV01_DEVICE_0 = 0x80
NV20_SUBDEVICE_0 = 0x2080
NV01_MEMORY_SYSTEM = 0x3E
NV1_MEMORY_USER = 0x40  # alias NV01_MEMORY_LOCAL_USER: video memory
NV01_MEMORY_LOCAL_USER = 0x40
NV01_MEMORY_VIRTUAL = 0x70
NV01_MEMORY_SYSTEM_OS_DESCRIPTOR = 0x71
NV01_EVENT_OS_EVENT = 0x79
GT200_DEBUGGER = 0x83DE
FERMI_CONTEXT_SHARE_A = 0x9067
FERMI_VASPACE_A = 0x90F1
KEPLER_CHANNEL_GROUP_A = 0xA06C
TURING_USERMODE_A = 0xC461
AMPERE_USERMODE_A = 0xC561
HOPPER_USERMODE_A = 0xC661
VOLTA_CHANNEL_GPFIFO_A = 0xC36F
AMPERE_CHANNEL_GPFIFO_A = 0xC56F
HOPPER_CHANNEL_GPFIFO_A = 0xC86F
AMPERE_COMPUTE_A = 0xC6C0
AMPERE_COMPUTE_B = 0xC7C0
ADA_COMPUTE_A = 0xC9C0
HOPPER_COMPUTE_A = 0xCBC0
AMPERE_DMA_COPY_A = 0xC6B5
AMPERE_DMA_COPY_B = 0xC7B5
HOPPER_DMA_COPY_A = 0xC8B5

#: Preferences, newest first: the first one the GPU's class list holds is used.
USERMODE_CLASSES = (HOPPER_USERMODE_A, AMPERE_USERMODE_A, TURING_USERMODE_A)
GPFIFO_CLASSES = (HOPPER_CHANNEL_GPFIFO_A, AMPERE_CHANNEL_GPFIFO_A)
COMPUTE_CLASSES = (HOPPER_COMPUTE_A, ADA_COMPUTE_A, AMPERE_COMPUTE_B, AMPERE_COMPUTE_A)
COPY_CLASSES = (HOPPER_DMA_COPY_A, AMPERE_DMA_COPY_B, AMPERE_DMA_COPY_A)

# --- control commands ------------------------------------------------------------

NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2 = 0x800292  # on the device
NV2080_CTRL_CMD_GPU_GET_GID_INFO = 0x2080014A  # on the subdevice
NVA06C_CTRL_CMD_GPFIFO_SCHEDULE = 0xA06C0101  # on the channel group
NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN = 0xC36F0108  # on the channel

# --- engines and notifiers (cl2080_notification.h) --------------------------------

NV2080_ENGINE_TYPE_GRAPHICS = 0x1
NV2080_ENGINE_TYPE_COPY0 = 0x9
NV2080_NOTIFIERS_GR0 = 12
NV2080_NOTIFIERS_FIFO_EVENT_MTHD = 35
NV2080_NOTIFIERS_RC_ERROR = 37

# NV01_EVENT_* bits of notifyIndex (nvos.h)
NV01_EVENT_NONSTALL_INTR = 0x08000000
NV01_EVENT_WITHOUT_EVENT_DATA = 0x10000000
NV01_EVENT_SUBDEVICE_SPECIFIC = 0x20000000
NV01_EVENT_BROADCAST = 0x80000000

# --- NVOS02 flags (RM_ALLOC_MEMORY) -------------------------------------------------

NVOS02_FLAGS_PHYSICALITY = (7, 4)
NVOS02_FLAGS_PHYSICALITY_CONTIGUOUS = 0
NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS = 1
NVOS02_FLAGS_LOCATION = (11, 8)
NVOS02_FLAGS_LOCATION_PCI = 0
NVOS02_FLAGS_COHERENCY = (15, 12)
NVOS02_FLAGS_COHERENCY_UNCACHED = 0
NVOS02_FLAGS_COHERENCY_CACHED = 1
NVOS02_FLAGS_MAPPING = (31, 30)
NVOS02_FLAGS_MAPPING_NO_MAP = 1

# --- NVOS32 type, attr, attr2 and alloc flags (NV_MEMORY_ALLOCATION_PARAMS) ---------

NVOS32_TYPE_IMAGE = 0
NVOS32_ATTR_PAGE_SIZE = (24, 23)
NVOS32_ATTR_PAGE_SIZE_4KB = 1
NVOS32_ATTR_PAGE_SIZE_BIG = 2
NVOS32_ATTR_PAGE_SIZE_HUGE = 3
NVOS32_ATTR_LOCATION = (26, 25)
NVOS32_ATTR_LOCATION_VIDMEM = 0
NVOS32_ATTR_LOCATION_PCI = 1
NVOS32_ATTR_PHYSICALITY = (28, 27)
NVOS32_ATTR_PHYSICALITY_NONCONTIGUOUS = 1
NVOS32_ATTR_PHYSICALITY_CONTIGUOUS = 2
NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS = 3
NVOS32_ATTR_COHERENCY = (31, 29)
NVOS32_ATTR_COHERENCY_UNCACHED = 0
NVOS32_ATTR_COHERENCY_CACHED = 1
NVOS32_ATTR2_ZBC = (1, 0)
NVOS32_ATTR2_ZBC_PREFER_NO_ZBC = 1
NVOS32_ATTR2_GPU_CACHEABLE = (3, 2)
NVOS32_ATTR2_GPU_CACHEABLE_YES = 1
NVOS32_ATTR2_GPU_CACHEABLE_NO = 2
NVOS32_ATTR2_PAGE_SIZE_HUGE = (21, 20)
NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB = 1
NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT = 0x00000001
NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE = 0x00000100
NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED = 0x00004000
NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED = 0x00008000
NVOS32_ALLOC_FLAGS_PERSISTENT_VIDMEM = 0x00010000
NVOS32_ALLOC_FLAGS_VIRTUAL = 0x00080000

#: The VRAM alloc flags (0x1C101, which the RM accepts on the H200).
VRAM_ALLOC_FLAGS = (NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT | NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE
                    | NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED | NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED
                    | NVOS32_ALLOC_FLAGS_PERSISTENT_VIDMEM)
#: Format 6, the value passed in ``format`` (a kind the RM accepts for VRAM).
VRAM_FORMAT = 6

# --- NVOS33 flags (RM_MAP_MEMORY, CPU mappings) --------------------------------------

NVOS33_FLAGS_ACCESS = (1, 0)
NVOS33_FLAGS_ACCESS_READ_WRITE = 0
NVOS33_FLAGS_CACHING_TYPE = (25, 23)
NVOS33_FLAGS_CACHING_TYPE_UNCACHED = 1
NVOS33_FLAGS_CACHING_TYPE_WRITECOMBINED = 2
NVOS33_FLAGS_CACHING_TYPE_DEFAULT = 6

# --- NVOS46 flags (RM_MAP_MEMORY_DMA, GPU mappings) ----------------------------------

NVOS46_FLAGS_CACHE_SNOOP = (4, 4)
NVOS46_FLAGS_CACHE_SNOOP_ENABLE = 1
NVOS46_FLAGS_PAGE_SIZE = (11, 8)
NVOS46_FLAGS_PAGE_SIZE_4KB = 1
NVOS46_FLAGS_DMA_OFFSET_FIXED = (15, 15)
NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE = 1

# --- VA space and context share flags (nvos.h) ---------------------------------------

NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED = 1 << 3
NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING = 1 << 6
NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT = (1, 0)
NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SYNC = 0
NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC = 1

# --- the doorbell (usermode class) and USERD (clc86f.h's Nvc86fControl) --------------

#: HOPPER_USERMODE_A's mapping is 64 KiB; the doorbell register is at +0x90 (NOTIFY_CHANNEL_PENDING).
USERMODE_MAP_BYTES = 0x10000
USERMODE_NOTIFY_CHANNEL_PENDING = 0x90
#: USERD (Nvc86fControl) offsets: GPGet read by the host, GPPut written to submit.
USERD_GP_GET = 0x88
USERD_GP_PUT = 0x8C
#: The RM's USERD size per channel (Nvc86fControl is 0x200 bytes).
USERD_BYTES = 0x200

# --- UVM ioctl numbers (uvm_ioctl.h, uvm_linux_ioctl.h): plain numbers on Linux -------

UVM_INITIALIZE = 0x30000001
UVM_DEINITIALIZE = 0x30000002
UVM_REGISTER_GPU_VASPACE = 25
UVM_UNREGISTER_GPU_VASPACE = 26
UVM_REGISTER_CHANNEL = 27
UVM_UNREGISTER_CHANNEL = 28
UVM_MAP_EXTERNAL_ALLOCATION = 33
UVM_FREE = 34
UVM_REGISTER_GPU = 37
UVM_UNREGISTER_GPU = 38
UVM_CREATE_EXTERNAL_RANGE = 73
UVM_MM_INITIALIZE = 75
UVM_INIT_FLAGS_DISABLE_HMM = 0x1
UVM_INIT_FLAGS_MULTI_PROCESS_SHARING_MODE = 0x2
UVM_MAX_GPUS = 256  # NV_MAX_DEVICES (32) * UVM_PARENT_ID_MAX_SUB_PROCESSORS (8)
UVM_GPU_MAPPING_TYPE_DEFAULT = 0
UVM_GPU_MAPPING_TYPE_READ_WRITE_ATOMIC = 1
UVM_GPU_CACHING_TYPE_DEFAULT = 0

NV_MAX_SUBDEVICES = 8
NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE = 200
GID_FLAGS_BINARY_SHA1 = 2  # NV2080_GPU_CMD_GPU_GET_GID_FLAGS: FORMAT_BINARY | TYPE_SHA1: 16 raw bytes


# --- memory (nvos.h, cl0070.h) ---------------------------------------------------


class NvMemoryAllocationParams(ctypes.Structure):
    """NV_MEMORY_ALLOCATION_PARAMS (nvos.h, 128 B): RM_ALLOC of NV1_MEMORY_USER (VRAM) or NV01_MEMORY_SYSTEM."""

    _fields_ = [("owner", u32), ("type", u32), ("flags", u32), ("width", u32), ("height", u32),
                ("pitch", ctypes.c_int32), ("attr", u32), ("attr2", u32), ("format", u32),
                ("comprCovg", u32), ("zcullCovg", u32), ("rangeLo", u64), ("rangeHi", u64),
                ("size", u64), ("alignment", u64), ("offset", u64), ("limit", u64), ("address", NvP64),
                ("ctagOffset", u32), ("hVASpace", NvHandle), ("internalflags", u32), ("tag", u32),
                ("numaNode", ctypes.c_int32)]


class NvMemoryVirtualAllocationParams(ctypes.Structure):
    """NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS (cl0070.h, 24 B): RM_ALLOC of NV01_MEMORY_VIRTUAL (hVASpace 0: the default)."""

    _fields_ = [("offset", u64), ("limit", u64), ("hVASpace", NvHandle)]


class NvVaspaceAllocationParameters(ctypes.Structure):
    """NV_VASPACE_ALLOCATION_PARAMETERS (nvos.h, 56 B at 580: ``pasid`` added): RM_ALLOC of FERMI_VASPACE_A."""

    _fields_ = [("index", u32), ("flags", u32), ("vaSize", u64), ("vaStartInternal", u64),
                ("vaLimitInternal", u64), ("bigPageSize", u32), ("vaBase", u64), ("pasid", u32)]


class NvChannelGroupAllocationParameters(ctypes.Structure):
    """NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS (nvos.h, 20 B): RM_ALLOC of KEPLER_CHANNEL_GROUP_A (a TSG)."""

    _fields_ = [("hObjectError", NvHandle), ("hObjectEccError", NvHandle), ("hVASpace", NvHandle),
                ("engineType", u32), ("bIsCallingContextVgpuPlugin", NvBool)]


class NvCtxshareAllocationParameters(ctypes.Structure):
    """NV_CTXSHARE_ALLOCATION_PARAMETERS (nvos.h, 12 B): RM_ALLOC of FERMI_CONTEXT_SHARE_A (a subcontext)."""

    _fields_ = [("hVASpace", NvHandle), ("flags", u32), ("subctxId", u32)]


class NvMemoryDescParams(ctypes.Structure):
    """NV_MEMORY_DESC_PARAMS (alloc_channel.h, 24 B): nested in NV_CHANNEL_ALLOC_PARAMS (reserved, zero)."""

    _fields_ = [("base", u64), ("size", u64), ("addressSpace", u32), ("cacheAttrib", u32)]


CC_CHAN_ALLOC_IV_SIZE_DWORD = 3
CC_CHAN_ALLOC_NONCE_SIZE_DWORD = 8


class NvChannelAllocParams(ctypes.Structure):
    """NV_CHANNEL_ALLOC_PARAMS (alloc_channel.h, 368 B at 580): RM_ALLOC of a GPFIFO channel class (0xc86f)."""

    _fields_ = [("hObjectError", NvHandle), ("hObjectBuffer", NvHandle), ("gpFifoOffset", u64),
                ("gpFifoEntries", u32), ("flags", u32), ("hContextShare", NvHandle),
                ("hVASpace", NvHandle), ("hUserdMemory", NvHandle * NV_MAX_SUBDEVICES),
                ("userdOffset", u64 * NV_MAX_SUBDEVICES), ("engineType", u32), ("cid", u32),
                ("subDeviceId", u32), ("hObjectEccError", NvHandle),
                ("instanceMem", NvMemoryDescParams), ("userdMem", NvMemoryDescParams),
                ("ramfcMem", NvMemoryDescParams), ("mthdbufMem", NvMemoryDescParams),
                ("hPhysChannelGroup", NvHandle), ("internalFlags", u32),
                ("errorNotifierMem", NvMemoryDescParams), ("eccErrorNotifierMem", NvMemoryDescParams),
                ("ProcessID", u32), ("SubProcessID", u32),
                ("encryptIv", u32 * CC_CHAN_ALLOC_IV_SIZE_DWORD),
                ("decryptIv", u32 * CC_CHAN_ALLOC_IV_SIZE_DWORD),
                ("hmacNonce", u32 * CC_CHAN_ALLOC_NONCE_SIZE_DWORD), ("tpcConfigID", u32)]


class NvHopperUsermodeAParams(ctypes.Structure):
    """NV_HOPPER_USERMODE_A_PARAMS (nvos.h, 2 B): optional RM_ALLOC params of HOPPER_USERMODE_A (zero: BAR0, non-priv)."""

    _fields_ = [("bBar1Mapping", NvBool), ("bPriv", NvBool)]


class Nv83deAllocParameters(ctypes.Structure):
    """NV83DE_ALLOC_PARAMETERS (cl83de.h, 12 B): RM_ALLOC of GT200_DEBUGGER on a channel's compute object."""

    _fields_ = [("hDebuggerClient_Obsolete", NvHandle), ("hAppClient", NvHandle),
                ("hClass3dObject", NvHandle)]


# --- escapes (nvos.h, nv-unix-nvos-params-wrappers.h, nv-ioctl.h) ----------------------


class Nvos02(ctypes.Structure):
    """NVOS02_PARAMETERS (nvos.h, 48 B): NV_ESC_RM_ALLOC_MEMORY's params (OS descriptor, client-chosen handle)."""

    _fields_ = [("hRoot", NvHandle), ("hObjectParent", NvHandle), ("hObjectNew", NvHandle),
                ("hClass", u32), ("flags", u32), ("pMemory", NvP64), ("limit", u64), ("status", u32)]


class Nvos02WithFd(ctypes.Structure):
    """nv_ioctl_nvos02_parameters_with_fd (56 B): NV_ESC_RM_ALLOC_MEMORY, sent on /dev/nvidiaN."""

    _fields_ = [("params", Nvos02), ("fd", ctypes.c_int)]


class Nvos33(ctypes.Structure):
    """NVOS33_PARAMETERS (nvos.h, 48 B): RM_MAP_MEMORY, a CPU mapping of an RM memory object."""

    _fields_ = [("hClient", NvHandle), ("hDevice", NvHandle), ("hMemory", NvHandle),
                ("offset", u64), ("length", u64), ("pLinearAddress", NvP64), ("status", u32),
                ("flags", u32)]


class Nvos33WithFd(ctypes.Structure):
    """nv_ioctl_nvos33_parameters_with_fd (56 B): NV_ESC_RM_MAP_MEMORY on the ctl fd; ``fd`` is the file to mmap."""

    _fields_ = [("params", Nvos33), ("fd", ctypes.c_int)]


class Nvos34(ctypes.Structure):
    """NVOS34_PARAMETERS (nvos.h, 32 B): NV_ESC_RM_UNMAP_MEMORY, the CPU mapping's undo."""

    _fields_ = [("hClient", NvHandle), ("hDevice", NvHandle), ("hMemory", NvHandle),
                ("pLinearAddress", NvP64), ("status", u32), ("flags", u32)]


class Nvos46(ctypes.Structure):
    """NVOS46_PARAMETERS (nvos.h, 64 B at 580: ``flags2``, ``kindOverride``): NV_ESC_RM_MAP_MEMORY_DMA."""

    _fields_ = [("hClient", NvHandle), ("hDevice", NvHandle), ("hDma", NvHandle),
                ("hMemory", NvHandle), ("offset", u64), ("length", u64), ("flags", u32),
                ("flags2", u32), ("kindOverride", u32), ("dmaOffset", u64), ("status", u32)]


class Nvos47(ctypes.Structure):
    """NVOS47_PARAMETERS (nvos.h, 48 B): NV_ESC_RM_UNMAP_MEMORY_DMA, the GPU mapping's undo."""

    _fields_ = [("hClient", NvHandle), ("hDevice", NvHandle), ("hDma", NvHandle),
                ("hMemory", NvHandle), ("flags", u32), ("dmaOffset", u64), ("size", u64),
                ("status", u32)]


class AllocOsEvent(ctypes.Structure):
    """nv_ioctl_alloc_os_event_t (nv-ioctl.h, 16 B): NV_ESC_ALLOC_OS_EVENT on the event's own ctl fd."""

    _fields_ = [("hClient", NvHandle), ("hDevice", NvHandle), ("fd", u32), ("Status", u32)]


class FreeOsEvent(ctypes.Structure):
    """nv_ioctl_free_os_event_t (nv-ioctl.h, 16 B): NV_ESC_FREE_OS_EVENT."""

    _fields_ = [("hClient", NvHandle), ("hDevice", NvHandle), ("fd", u32), ("Status", u32)]


class Nv0005AllocParameters(ctypes.Structure):
    """NV0005_ALLOC_PARAMETERS (cl0005.h, 24 B): RM_ALLOC of NV01_EVENT_OS_EVENT; ``data`` is the event fd."""

    _fields_ = [("hParentClient", NvHandle), ("hSrcResource", NvHandle), ("hClass", u32),
                ("notifyIndex", u32), ("data", NvP64)]


# --- controls ------------------------------------------------------------------------


class GpfifoScheduleParams(ctypes.Structure):
    """NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS (= NVA06F's, ctrla06fgpfifo.h, 3 B since 575): NVA06C_CTRL_CMD_GPFIFO_SCHEDULE."""

    _fields_ = [("bEnable", NvBool), ("bSkipSubmit", NvBool), ("bSkipEnable", NvBool)]


class WorkSubmitTokenParams(ctypes.Structure):
    """NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS (ctrlc36f.h, 4 B): the doorbell token of a channel."""

    _fields_ = [("workSubmitToken", u32)]


class ClassListV2(ctypes.Structure):
    """NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS (ctrl0080gpu.h, 804 B): NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2 on the device."""

    _fields_ = [("numClasses", u32), ("classList", u32 * NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE)]

    def classes(self) -> list[int]:
        """The class ids the GPU offers."""
        return [int(c) for c in self.classList[: min(self.numClasses, NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE)]]


class GidInfoBinary(ctypes.Structure):
    """NV2080_CTRL_GPU_GET_GID_INFO_PARAMS (ctrl2080gpu.h, 268 B), for flags 2: the 16 raw UUID bytes UVM wants."""

    _fields_ = [("index", u32), ("flags", u32), ("length", u32), ("data", u8 * 256)]

    def uuid(self) -> bytes:
        """The binary UUID (the first 16 bytes)."""
        return bytes(self.data[:16])


# --- UVM (uvm_ioctl.h, uvm_linux_ioctl.h, uvm_types.h) ----------------------------------


class UvmInitializeParams(ctypes.Structure):
    """UVM_INITIALIZE_PARAMS (uvm_linux_ioctl.h, 16 B): the first ioctl on a /dev/nvidia-uvm fd."""

    _fields_ = [("flags", u64), ("rmStatus", u32)]


class UvmMmInitializeParams(ctypes.Structure):
    """UVM_MM_INITIALIZE_PARAMS (uvm_ioctl.h, 8 B): sent on a second uvm fd naming the first."""

    _fields_ = [("uvmFd", s32), ("rmStatus", u32)]


class UvmRegisterGpuParams(ctypes.Structure):
    """UVM_REGISTER_GPU_PARAMS (uvm_ioctl.h, 40 B): UVM_REGISTER_GPU (rmCtrlFd -1 when not MIG)."""

    _fields_ = [("gpu_uuid", NvProcessorUuid), ("numaEnabled", NvBool), ("numaNodeId", s32),
                ("rmCtrlFd", s32), ("hClient", NvHandle), ("hSmcPartRef", NvHandle), ("rmStatus", u32)]


class UvmUnregisterGpuParams(ctypes.Structure):
    """UVM_UNREGISTER_GPU_PARAMS (uvm_ioctl.h, 20 B)."""

    _fields_ = [("gpu_uuid", NvProcessorUuid), ("rmStatus", u32)]


class UvmRegisterGpuVaspaceParams(ctypes.Structure):
    """UVM_REGISTER_GPU_VASPACE_PARAMS (uvm_ioctl.h, 32 B): hands an externally owned VA space to UVM."""

    _fields_ = [("gpuUuid", NvProcessorUuid), ("rmCtrlFd", s32), ("hClient", NvHandle),
                ("hVaSpace", NvHandle), ("rmStatus", u32)]


class UvmUnregisterGpuVaspaceParams(ctypes.Structure):
    """UVM_UNREGISTER_GPU_VASPACE_PARAMS (uvm_ioctl.h, 20 B)."""

    _fields_ = [("gpuUuid", NvProcessorUuid), ("rmStatus", u32)]


class UvmRegisterChannelParams(ctypes.Structure):
    """UVM_REGISTER_CHANNEL_PARAMS (uvm_ioctl.h, 56 B): lets UVM handle a channel's faults; before SCHEDULE."""

    _fields_ = [("gpuUuid", NvProcessorUuid), ("rmCtrlFd", s32), ("hClient", NvHandle),
                ("hChannel", NvHandle), ("base", u64), ("length", u64), ("rmStatus", u32)]


class UvmUnregisterChannelParams(ctypes.Structure):
    """UVM_UNREGISTER_CHANNEL_PARAMS (uvm_ioctl.h, 28 B)."""

    _fields_ = [("gpuUuid", NvProcessorUuid), ("hClient", NvHandle), ("hChannel", NvHandle),
                ("rmStatus", u32)]


class UvmCreateExternalRangeParams(ctypes.Structure):
    """UVM_CREATE_EXTERNAL_RANGE_PARAMS (uvm_ioctl.h, 24 B): reserves [base, base+length) for external mappings."""

    _fields_ = [("base", u64), ("length", u64), ("rmStatus", u32)]


class UvmGpuMappingAttributes(ctypes.Structure):
    """UvmGpuMappingAttributes (uvm_types.h, 36 B): one GPU's mapping of an external allocation."""

    _fields_ = [("gpuUuid", NvProcessorUuid), ("gpuMappingType", u32), ("gpuCachingType", u32),
                ("gpuFormatType", u32), ("gpuElementBits", u32), ("gpuCompressionType", u32)]


class UvmMapExternalAllocationParams(ctypes.Structure):
    """UVM_MAP_EXTERNAL_ALLOCATION_PARAMS (uvm_ioctl.h, 9264 B): maps an RM memory object at ``base`` on the GPU."""

    _fields_ = [("base", u64), ("length", u64), ("offset", u64),
                ("perGpuAttributes", UvmGpuMappingAttributes * UVM_MAX_GPUS),
                ("gpuAttributesCount", u64), ("rmCtrlFd", s32), ("hClient", u32), ("hMemory", u32),
                ("rmStatus", u32)]


class UvmFreeParams(ctypes.Structure):
    """UVM_FREE_PARAMS (uvm_ioctl.h, 24 B at 580; 16 at 610): removes a UVM range (and its mappings)."""

    _fields_ = [("base", u64), ("length", u64), ("rmStatus", u32)]


# --- dma-buf export (nv-ioctl.h, nv-ioctl-numbers.h) -----------------------------------------

#: NV_ESC_EXPORT_TO_DMABUF_FD (NV_IOCTL_BASE + 17): sent on /dev/nvidiaN (the ctl fd answers EINVAL).
NV_ESC_EXPORT_TO_DMABUF_FD = 217
NV_DMABUF_EXPORT_MAX_HANDLES = 128


class ExportToDmabufFd(ctypes.Structure):
    """``nv_ioctl_export_to_dma_buf_fd_t`` (2608 B): memory objects of this GPU (vidmem) as a new
    dma-buf (``fd`` -1 in, the new fd out).  ``bAllowMmap`` only works on GPUs coherent with the host:
    0 on the H200."""

    _fields_ = [
        ("fd", s32),
        ("hClient", NvHandle),
        ("totalObjects", u32),
        ("numObjects", u32),
        ("index", u32),
        ("totalSize", u64),
        ("mappingType", u8),
        ("bAllowMmap", NvBool),
        ("handles", NvHandle * NV_DMABUF_EXPORT_MAX_HANDLES),
        ("offsets", u64 * NV_DMABUF_EXPORT_MAX_HANDLES),
        ("sizes", u64 * NV_DMABUF_EXPORT_MAX_HANDLES),
        ("status", u32),
    ]
