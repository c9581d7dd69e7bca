"""The execution path's pure layer (arig.nvrm._exec_params, arig.nvrm._push), checked against NVIDIA's headers.

tests/data/nv/ holds unmodified copies of NVIDIA's MIT-licensed headers:

* from open-gpu-kernel-modules tag 580.142 (commit 1a5075f): nvos.h, alloc_channel.h, cl0005.h,
  cl0070.h, cl83de.h, cl2080_notification.h, clc56f.h, clc86f.h, ctrla06c.h, ctrla06fgpfifo.h,
  ctrlc36f.h, ctrl0080gpu.h, nv_escape.h, nv-ioctl.h, nv-ioctl-numbers.h,
  nv-unix-nvos-params-wrappers.h, uvm_ioctl.h, uvm_linux_ioctl.h, uvm_types.h;
* from open-gpu-doc: classes/compute/clcbc0.h (commit 5d957df) and classes/dma-copy/clc8b5.h (c8607fe).

The struct layouts are computed here from the headers' own typedefs (natural x86-64 alignment)
and compared with every ctypes field; they were also compiled with gcc against the full 580.142
tree, which gave the same 233 sizes and offsets.  Method offsets, field ranges and values are
read from the ``#define``s and compared with every entry of the module's tables.
"""

from __future__ import annotations

import ast
import ctypes
import re
import struct
from pathlib import Path

import pytest

from arig import ArigValueError
from arig.nvrm import _exec_params as E
from arig.nvrm import _params as P
from arig.nvrm import _push as pb
from arig.nvrm import _qmd as q
from arig.nvrm._cubin import parse

DATA = Path(__file__).resolve().parent / "data" / "nv"
HEADER_NAMES = [
    "nvos.h", "alloc_channel.h", "cl0005.h", "cl0070.h", "cl83de.h", "cl2080_notification.h",
    "clc56f.h", "clc86f.h", "ctrla06c.h", "ctrla06fgpfifo.h", "ctrlc36f.h", "ctrl0080gpu.h",
    "nv_escape.h", "nv-ioctl.h", "nv-ioctl-numbers.h", "nv-unix-nvos-params-wrappers.h",
    "uvm_ioctl.h", "uvm_linux_ioctl.h", "uvm_types.h", "clcbc0.h", "clc8b5.h",
]
RAW = {name: (DATA / name).read_text() for name in HEADER_NAMES}


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


CODE = {name: _strip_comments(text) for name, text in RAW.items()}
ALL_CODE = "\n".join(CODE.values())
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+([^\n]+?)[ \t]*$", re.M)


def _defines(code: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, value in _DEFINE.findall(code):
        found.setdefault(name, value.strip())
    return found


DEFINES = {name: _defines(code) for name, code in CODE.items()}
ALL_DEFINES = _defines(ALL_CODE)
# Defined in nvlimits.h, which these headers include but which is not copied here.
EXTRA = {"NV_MAX_SUBDEVICES": "8", "NV_MAX_DEVICES": "32"}


def _value(expr: str, defines: dict[str, str] | None = None) -> int | tuple[int, int]:
    """A #define's value: an integer expression (U suffixes, BIT(n), other #defines) or a ``hi:lo`` range."""
    table = {**EXTRA, **(defines if defines is not None else ALL_DEFINES)}
    expr = expr.strip()
    rng = re.fullmatch(r"(\d+)\s*:\s*(\d+)", expr)
    if rng:
        return int(rng.group(1)), int(rng.group(2))
    expr = re.sub(r"\bBIT\((\d+)\)", r"(1 << \1)", expr)
    expr = re.sub(r"\(\s*Nv[US]\d+\s*\)", "", expr)  # a cast such as (NvU64)
    expr = re.sub(r"\bUVM_IOCTL_BASE\((\d+)\)", r"\1", expr)  # Linux: the plain number (checked below)
    expr = re.sub(r"\b(0x[0-9A-Fa-f]+|\d+)[uU][lL]*\b", r"\1", expr)

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name):
            got = _value(table[node.id], defines)
            assert isinstance(got, int)
            return got
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.LShift):
                return a << b
            ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b, ast.BitOr: a | b}
            return ops[type(node.op)]
        raise AssertionError(f"unexpected #define expression {expr!r}")

    return ev(ast.parse(expr, mode="eval"))


# ---------------------------------------------------------------------------------------------
# (1) struct layouts, computed from the headers' typedefs

_SCALARS = {"NvU8": 1, "NvBool": 1, "char": 1, "NvU16": 2, "NvU32": 4, "NvS32": 4, "NvV32": 4,
            "NvHandle": 4, "NV_STATUS": 4, "int": 4, "NvU64": 8, "NvP64": 8}
_UUID = "NvProcessorUuid"  # typedef NvUuid NvProcessorUuid; struct NvUuid { NvU8 uuid[16]; }


def _layout(name: str) -> tuple[int, int, dict[str, int]]:
    """(size, alignment, {field: offset}) of typedef ``name``, laid out as the x86-64 C ABI does."""
    alias = re.search(r"typedef\s+(\w+)\s+" + name + r"\s*;", ALL_CODE)
    if alias:
        return _layout(alias.group(1))
    m = re.search(r"typedef\s+(?:volatile\s+)?struct\s*\w*\s*\{([^{}]*)\}\s*(?:\w+\s*,\s*)*" + name + r"\b[^;]*;", ALL_CODE)
    assert m, f"typedef {name} not found in the headers"
    body = "\n".join(line for line in m.group(1).splitlines() if not line.strip().startswith("#"))
    body = re.sub(r"NV_DECLARE_ALIGNED\((.*?),\s*\d+\)", r"\1", body)
    body = re.sub(r"NV_ALIGN_BYTES\(\d+\)", "", body)
    offset, align, fields = 0, 1, {}
    for decl in (d.strip() for d in body.split(";")):
        if not decl:
            continue
        d = re.fullmatch(r"(?:volatile\s+)?(?:struct\s+)?(\w+)\s+(\w+)\s*(?:\[([^\]]+)\])?", decl)
        assert d, f"{name}: cannot read the declaration {decl!r}"
        ctype, field, dim = d.groups()
        if ctype in _SCALARS:
            size = falign = _SCALARS[ctype]
        elif ctype == _UUID:
            size, falign = 16, 1
        else:
            size, falign, _ = _layout(ctype)
        count = 1 if dim is None else _value(dim)
        assert isinstance(count, int)
        offset = -(-offset // falign) * falign
        fields[field] = offset
        offset += size * count
        align = max(align, falign)
    return -(-offset // align) * align, align, fields


STRUCTS = {
    "NV_MEMORY_ALLOCATION_PARAMS": (E.NvMemoryAllocationParams, 128),
    "NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS": (E.NvMemoryVirtualAllocationParams, 24),
    "NV_VASPACE_ALLOCATION_PARAMETERS": (E.NvVaspaceAllocationParameters, 56),
    "NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS": (E.NvChannelGroupAllocationParameters, 20),
    "NV_CTXSHARE_ALLOCATION_PARAMETERS": (E.NvCtxshareAllocationParameters, 12),
    "NV_MEMORY_DESC_PARAMS": (E.NvMemoryDescParams, 24),
    "NV_CHANNEL_ALLOC_PARAMS": (E.NvChannelAllocParams, 368),
    "NV_HOPPER_USERMODE_A_PARAMS": (E.NvHopperUsermodeAParams, 2),
    "NV83DE_ALLOC_PARAMETERS": (E.Nv83deAllocParameters, 12),
    "NVOS02_PARAMETERS": (E.Nvos02, 48),
    "nv_ioctl_nvos02_parameters_with_fd": (E.Nvos02WithFd, 56),
    "NVOS33_PARAMETERS": (E.Nvos33, 48),
    "nv_ioctl_nvos33_parameters_with_fd": (E.Nvos33WithFd, 56),
    "NVOS34_PARAMETERS": (E.Nvos34, 32),
    "NVOS46_PARAMETERS": (E.Nvos46, 64),
    "NVOS47_PARAMETERS": (E.Nvos47, 48),
    "nv_ioctl_alloc_os_event_t": (E.AllocOsEvent, 16),
    "nv_ioctl_free_os_event_t": (E.FreeOsEvent, 16),
    "NV0005_ALLOC_PARAMETERS": (E.Nv0005AllocParameters, 24),
    "NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS": (E.GpfifoScheduleParams, 3),
    "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS": (E.WorkSubmitTokenParams, 4),
    "NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS": (E.ClassListV2, 804),
    "UVM_INITIALIZE_PARAMS": (E.UvmInitializeParams, 16),
    "UVM_MM_INITIALIZE_PARAMS": (E.UvmMmInitializeParams, 8),
    "UVM_REGISTER_GPU_PARAMS": (E.UvmRegisterGpuParams, 40),
    "UVM_UNREGISTER_GPU_PARAMS": (E.UvmUnregisterGpuParams, 20),
    "UVM_REGISTER_GPU_VASPACE_PARAMS": (E.UvmRegisterGpuVaspaceParams, 32),
    "UVM_UNREGISTER_GPU_VASPACE_PARAMS": (E.UvmUnregisterGpuVaspaceParams, 20),
    "UVM_REGISTER_CHANNEL_PARAMS": (E.UvmRegisterChannelParams, 56),
    "UVM_UNREGISTER_CHANNEL_PARAMS": (E.UvmUnregisterChannelParams, 28),
    "UVM_CREATE_EXTERNAL_RANGE_PARAMS": (E.UvmCreateExternalRangeParams, 24),
    "UvmGpuMappingAttributes": (E.UvmGpuMappingAttributes, 36),
    "UVM_MAP_EXTERNAL_ALLOCATION_PARAMS": (E.UvmMapExternalAllocationParams, 9264),
    "UVM_FREE_PARAMS": (E.UvmFreeParams, 24),
}


@pytest.mark.parametrize("c_name", sorted(STRUCTS))
def test_struct_layout_is_the_headers(c_name: str) -> None:
    py, size = STRUCTS[c_name]
    c_size, _align, c_fields = _layout(c_name)
    assert ctypes.sizeof(py) == c_size == size
    py_fields = {f: getattr(py, f).offset for f, *_ in py._fields_}
    assert py_fields == c_fields


def test_layouts_the_research_measured() -> None:
    # shared/research/nvrm_api.md §1 and §5, tinygrad_nv.md §7: sizes and offsets seen on the H200.
    assert (E.Nvos46.dmaOffset.offset, ctypes.sizeof(E.Nvos46)) == (48, 64)
    assert ctypes.sizeof(E.NvVaspaceAllocationParameters) == 56 and E.NvVaspaceAllocationParameters.pasid.offset == 48
    assert E.NvVaspaceAllocationParameters.vaBase.offset == 40
    assert ctypes.sizeof(E.GpfifoScheduleParams) == 3
    assert ctypes.sizeof(E.NvChannelAllocParams) == 368
    assert ctypes.sizeof(E.UvmFreeParams) == 24
    assert (E.Nvos33WithFd.fd.offset, E.Nvos33.pLinearAddress.offset, E.Nvos33.flags.offset) == (48, 32, 44)
    m = E.NvMemoryAllocationParams
    assert (m.attr.offset, m.attr2.offset, m.format.offset, m.size.offset, m.alignment.offset,
            m.offset.offset, m.limit.offset, m.address.offset, m.hVASpace.offset) == (24, 28, 32, 64, 72, 80, 88, 96, 108)
    u = E.UvmMapExternalAllocationParams
    assert (u.perGpuAttributes.offset, u.gpuAttributesCount.offset, u.rmCtrlFd.offset, u.hClient.offset,
            u.hMemory.offset, u.rmStatus.offset) == (24, 9240, 9248, 9252, 9256, 9260)
    assert (E.UvmRegisterGpuParams.rmCtrlFd.offset, E.UvmRegisterGpuParams.rmStatus.offset) == (24, 36)
    assert (E.UvmRegisterChannelParams.base.offset, E.UvmRegisterChannelParams.rmStatus.offset) == (32, 48)
    assert (E.Nv0005AllocParameters.notifyIndex.offset, E.Nv0005AllocParameters.data.offset) == (12, 16)
    c = E.NvChannelAllocParams
    assert (c.gpFifoOffset.offset, c.gpFifoEntries.offset, c.hContextShare.offset, c.hUserdMemory.offset,
            c.userdOffset.offset, c.engineType.offset) == (8, 16, 24, 32, 64, 128)


# ---------------------------------------------------------------------------------------------
# (2) constants: every one the headers define is the headers' value


def _module_constants() -> dict[str, int | tuple[int, int]]:
    return {k: v for k, v in vars(E).items()
            if k.isupper() and not k.endswith("_CLASSES") and (type(v) is int or (isinstance(v, tuple) and len(v) == 2 and all(type(x) is int for x in v)))}


# Values the copied headers do not define (their class headers were not copied, or the value is
# the research's measured sequence); each is checked against the research instead.
RESEARCH_ONLY = {
    "NV01_ROOT_CLIENT": 0x41, "NV01_DEVICE_0": 0x80, "NV20_SUBDEVICE_0": 0x2080, "NV01_MEMORY_SYSTEM": 0x3E,
    "NV1_MEMORY_USER": 0x40, "NV01_MEMORY_LOCAL_USER": 0x40, "NV01_MEMORY_SYSTEM_OS_DESCRIPTOR": 0x71,
    "NV01_EVENT_OS_EVENT": 0x79, "FERMI_CONTEXT_SHARE_A": 0x9067, "FERMI_VASPACE_A": 0x90F1,
    "KEPLER_CHANNEL_GROUP_A": 0xA06C, "HOPPER_USERMODE_A": 0xC661, "AMPERE_USERMODE_A": 0xC561,
    "TURING_USERMODE_A": 0xC461, "VOLTA_CHANNEL_GPFIFO_A": 0xC36F, "AMPERE_COMPUTE_A": 0xC6C0,
    "AMPERE_COMPUTE_B": 0xC7C0, "ADA_COMPUTE_A": 0xC9C0, "AMPERE_DMA_COPY_A": 0xC6B5, "AMPERE_DMA_COPY_B": 0xC7B5,
    "NV2080_CTRL_CMD_GPU_GET_GID_INFO": 0x2080014A, "NV2080_NOTIFIERS_GR0": 12,
    "VRAM_ALLOC_FLAGS": 0x1C101, "VRAM_FORMAT": 6, "USERMODE_MAP_BYTES": 0x10000,
    "USERMODE_NOTIFY_CHANNEL_PENDING": 0x90, "USERD_BYTES": 0x200, "UVM_MAX_GPUS": 256,
    "GID_FLAGS_BINARY_SHA1": 2, "UVM_GPU_MAPPING_TYPE_DEFAULT": 0, "UVM_GPU_MAPPING_TYPE_READ_WRITE_ATOMIC": 1,
    "UVM_GPU_CACHING_TYPE_DEFAULT": 0, "NV_MAX_SUBDEVICES": 8, "USERD_GP_GET": 0x88, "USERD_GP_PUT": 0x8C,
    "UVM_INIT_FLAGS_MULTI_PROCESS_SHARING_MODE": 0x2,
}


def test_every_constant_is_the_headers_or_the_researchs() -> None:
    unchecked = []
    for name, value in _module_constants().items():
        if name in RESEARCH_ONLY:
            assert value == RESEARCH_ONLY[name], name
        elif name in ALL_DEFINES:
            assert value == _value(ALL_DEFINES[name]), name
        else:
            unchecked.append(name)
    assert not unchecked, f"constants neither in the headers nor in RESEARCH_ONLY: {unchecked}"


def test_header_class_ids() -> None:
    assert _value(DEFINES["clc86f.h"]["HOPPER_CHANNEL_GPFIFO_A"]) == E.HOPPER_CHANNEL_GPFIFO_A == 0xC86F
    assert _value(DEFINES["clc56f.h"]["AMPERE_CHANNEL_GPFIFO_A"]) == E.AMPERE_CHANNEL_GPFIFO_A
    assert _value(DEFINES["clcbc0.h"]["HOPPER_COMPUTE_A"]) == E.HOPPER_COMPUTE_A == 0xCBC0
    assert _value(DEFINES["clc8b5.h"]["HOPPER_DMA_COPY_A"]) == E.HOPPER_DMA_COPY_A == 0xC8B5
    assert E.GT200_DEBUGGER == 0x83DE  # cl83de.h defines it as (0x83deU) /* finn: ... */
    assert re.search(r"#define GT200_DEBUGGER \(0x83deU\)", RAW["cl83de.h"])


def test_research_sequence_values() -> None:
    # tinygrad_nv.md §1 / nvrm_api.md §5: flags 0x1C101, attr (3<<27)|(3<<23), attr2 0x100005 for 2 MiB VRAM.
    attr = E.field(*E.NVOS32_ATTR_PHYSICALITY, E.NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS) | E.field(
        *E.NVOS32_ATTR_PAGE_SIZE, E.NVOS32_ATTR_PAGE_SIZE_HUGE)
    attr2 = (E.field(*E.NVOS32_ATTR2_ZBC, E.NVOS32_ATTR2_ZBC_PREFER_NO_ZBC)
             | E.field(*E.NVOS32_ATTR2_GPU_CACHEABLE, E.NVOS32_ATTR2_GPU_CACHEABLE_YES)
             | E.field(*E.NVOS32_ATTR2_PAGE_SIZE_HUGE, E.NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB))
    assert (E.VRAM_ALLOC_FLAGS, attr, attr2) == (0x1C101, (3 << 27) | (3 << 23), 0x100005)
    assert E.field(*E.NVOS33_FLAGS_CACHING_TYPE, E.NVOS33_FLAGS_CACHING_TYPE_WRITECOMBINED) == 2 << 23
    va = E.NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING | E.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED
    assert va == 0x48
    notify = (E.NV2080_NOTIFIERS_FIFO_EVENT_MTHD | E.NV01_EVENT_NONSTALL_INTR | E.NV01_EVENT_WITHOUT_EVENT_DATA
              | E.NV01_EVENT_SUBDEVICE_SPECIFIC)
    assert notify == 35 | 0x08000000 | 0x10000000 | 0x20000000
    with pytest.raises(ValueError):
        E.field(1, 0, 4)


def test_ioctl_numbers() -> None:
    # nvrm_api.md §0's request codes, from _IOWR('F', nr, sizeof).
    assert P.request(E.NV_ESC_RM_MAP_MEMORY, E.Nvos33WithFd()) == 0xC038464E
    assert P.request(E.NV_ESC_RM_UNMAP_MEMORY, E.Nvos34()) == 0xC020464F
    assert P.request(E.NV_ESC_RM_ALLOC_MEMORY, E.Nvos02WithFd()) == 0xC0384627
    assert P.request(E.NV_ESC_ALLOC_OS_EVENT, E.AllocOsEvent()) == 0xC01046CE
    assert P.request(E.NV_ESC_FREE_OS_EVENT, E.FreeOsEvent()) == 0xC01046CF
    assert P.request(E.NV_ESC_RM_MAP_MEMORY_DMA, E.Nvos46()) == 0xC0404657  # 64 bytes since 580.65
    assert P.request(E.NV_ESC_RM_UNMAP_MEMORY_DMA, E.Nvos47()) == 0xC0304658
    # The numbers themselves, from nv_escape.h and nv-ioctl-numbers.h.
    for name in ("NV_ESC_RM_ALLOC_MEMORY", "NV_ESC_RM_FREE", "NV_ESC_RM_CONTROL", "NV_ESC_RM_ALLOC",
                 "NV_ESC_RM_MAP_MEMORY", "NV_ESC_RM_UNMAP_MEMORY", "NV_ESC_RM_GET_EVENT_DATA",
                 "NV_ESC_RM_MAP_MEMORY_DMA", "NV_ESC_RM_UNMAP_MEMORY_DMA"):
        assert getattr(E, name) == _value(DEFINES["nv_escape.h"][name]), name
    numbers = DEFINES["nv-ioctl-numbers.h"]
    for name in ("NV_ESC_CARD_INFO", "NV_ESC_REGISTER_FD", "NV_ESC_ALLOC_OS_EVENT", "NV_ESC_FREE_OS_EVENT"):
        assert getattr(E, name) == _value(numbers[name], numbers), name
    assert (E.NV_ESC_RM_ALLOC, E.NV_ESC_RM_CONTROL, E.NV_ESC_RM_FREE) == (P.NV_ESC_RM_ALLOC, P.NV_ESC_RM_CONTROL, P.NV_ESC_RM_FREE)


def test_uvm_ioctl_numbers_are_plain() -> None:
    base = re.compile(r"#define\s+(UVM_\w+)\s+UVM_IOCTL_BASE\((\d+)\)")
    numbers = {name: int(n) for name, n in base.findall(RAW["uvm_ioctl.h"])}
    for name in ("UVM_REGISTER_GPU_VASPACE", "UVM_UNREGISTER_GPU_VASPACE", "UVM_REGISTER_CHANNEL",
                 "UVM_UNREGISTER_CHANNEL", "UVM_MAP_EXTERNAL_ALLOCATION", "UVM_FREE", "UVM_REGISTER_GPU",
                 "UVM_UNREGISTER_GPU", "UVM_CREATE_EXTERNAL_RANGE", "UVM_MM_INITIALIZE"):
        assert getattr(E, name) == numbers[name], name
    assert re.search(r"#\s*define UVM_IOCTL_BASE\(i\) i\b", RAW["uvm_ioctl.h"])  # the Linux branch
    assert (E.UVM_INITIALIZE, E.UVM_DEINITIALIZE) == (0x30000001, 0x30000002)


def test_classlist_and_gid_helpers() -> None:
    cl = E.ClassListV2(numClasses=3)
    cl.classList[0], cl.classList[1], cl.classList[2] = 0xC86F, 0xCBC0, 0xC8B5
    assert cl.classes() == [0xC86F, 0xCBC0, 0xC8B5]
    g = E.GidInfoBinary(length=16)
    g.data[0], g.data[15] = 0xAB, 0xCD
    assert g.uuid()[0] == 0xAB and g.uuid()[15] == 0xCD and ctypes.sizeof(g) == ctypes.sizeof(P.GidInfo)


# ---------------------------------------------------------------------------------------------
# (3) the pushbuffer tables: every method offset, field range and value is the headers'


def _table(cls: type) -> dict[str, int | tuple[int, int]]:
    return {k: v for k, v in vars(cls).items() if k.isupper() and not k.startswith("_")}


@pytest.mark.parametrize(("cls", "prefixes"), [(pb.C86F, ("NVC86F_", "NVC56F_")), (pb.CBC0, ("NVCBC0_",)),
                                               (pb.C8B5, ("NVC8B5_",))], ids=["C86F", "CBC0", "C8B5"])
def test_class_tables_are_the_headers(cls: type, prefixes: tuple[str, ...]) -> None:
    headers = {"NVC86F_": "clc86f.h", "NVC56F_": "clc56f.h", "NVCBC0_": "clcbc0.h", "NVC8B5_": "clc8b5.h"}
    for name, value in _table(cls).items():
        for prefix in prefixes:
            defines = DEFINES[headers[prefix]]
            if prefix + name in defines:
                assert value == _value(defines[prefix + name], defines), f"{prefix}{name}"
                break
        else:
            raise AssertionError(f"{cls.__name__}.{name} is in none of {prefixes}")


def test_hopper_gpfifo_agrees_with_ampere_where_both_define() -> None:
    # What clc86f.h leaves out is taken from clc56f.h: it is safe only if nothing both define differs.
    c86f, c56f = DEFINES["clc86f.h"], DEFINES["clc56f.h"]
    common = [n[len("NVC86F_"):] for n in c86f if n.startswith("NVC86F_") and "NVC56F_" + n[len("NVC86F_"):] in c56f]
    assert len(common) > 30
    differ = [n for n in common if _value(c86f["NVC86F_" + n], c86f) != _value(c56f["NVC56F_" + n], c56f)]
    # MEM_OP_* changed meaning on Hopper (TLB invalidate fields; none is used here), and Hopper's
    # SEM_ADDR_HI is 25 bits (57-bit addresses) where Ampere's was 8: the module takes clc86f.h's.
    assert set(differ) == {"MEM_OP_A_TLB_INVALIDATE_CANCEL_MMU_ENGINE_ID", "SEM_ADDR_HI_OFFSET"}, differ
    assert not any(n.startswith("MEM_OP_") for n in _table(pb.C86F))
    assert pb.C86F.SEM_ADDR_HI_OFFSET == _value(c86f["NVC86F_SEM_ADDR_HI_OFFSET"]) == (24, 0)
    assert "NVC86F_NON_STALL_INTERRUPT" not in c86f and c56f["NVC56F_NON_STALL_INTERRUPT"] == "(0x00000020)"


def test_method_header_encoding() -> None:
    # tinygrad_nv.md §2: (2<<28) | (count<<16) | (subch<<13) | (method>>2), incrementing.
    for subch, mthd, count in ((0, 0x5C, 5), (1, 0x2B4, 1), (4, 0x400, 4), (7, 0x3FFC, 0x1FFF)):
        assert pb.method_header(subch, mthd, count) == (2 << 28) | (count << 16) | (subch << 13) | (mthd >> 2)
        assert pb.method_header(subch, mthd, count, incrementing=False) == (3 << 29) | (count << 16) | (subch << 13) | (mthd >> 2)
    for bad in ((8, 0, 1), (0, 2, 1), (0, 0x4000, 1), (0, 0, 0x2000)):
        with pytest.raises(ArigValueError):
            pb.method_header(*bad)


def test_gpfifo_entry_encoding() -> None:
    # tinygrad_nv.md §2: addr | 1<<41 (LEVEL_SUBROUTINE) | ndwords<<42, addresses below 2**40.
    for addr, n in ((0x1000, 1), (0x20_0000_0000, 0x123), ((1 << 40) - 4, (1 << 21) - 1)):
        assert pb.gpfifo_entry(addr, n) == addr | 1 << 41 | n << 42
        assert pb.gpfifo_entry(addr, n, subroutine=False) == addr | n << 42
    for addr, n in ((1 << 40, 1), (0x1002, 1), (0x1000, 0), (0x1000, 1 << 21)):
        with pytest.raises(ArigValueError):
            pb.gpfifo_entry(addr, n)


def _hdr(subch: int, mthd: int, count: int) -> int:
    # The header from clc56f.h's fields: SEC_OP 31:29 = INC_METHOD (1), COUNT 28:16, SUBCHANNEL 15:13, ADDRESS 11:0.
    return 1 << 29 | count << 16 | subch << 13 | mthd >> 2


def test_golden_launch_then_release_with_interrupt() -> None:
    qmd, sem, value = 0x20_0040_0100, 0x10_0000_0010, 0x1_2345_6789
    got = pb.launch_and_signal(qmd, sem, value).words
    execute = 1 | 1 << 20 | 1 << 24 | 1 << 25  # RELEASE | RELEASE_WFI_EN | PAYLOAD_SIZE_64BIT | RELEASE_TIMESTAMP_EN
    want = [
        _hdr(1, 0x1698, 1), 1 | 1 << 4 | 1 << 12,  # INVALIDATE_SHADER_CACHES_NO_WFI: INSTRUCTION, GLOBAL_DATA, CONSTANT
        _hdr(1, 0x02B4, 1), qmd >> 8,  # SEND_PCAS_A: QMD_ADDRESS_SHIFTED8
        _hdr(1, 0x02C0, 1), 9,  # SEND_SIGNALING_PCAS2_B: PCAS_ACTION_PREFETCH_SCHEDULE
        _hdr(0, 0x005C, 5), sem & 0xFFFFFFFF, sem >> 32, value & 0xFFFFFFFF, value >> 32, execute,
        _hdr(0, 0x0020, 1), 0,  # NON_STALL_INTERRUPT
    ]
    assert got == want
    assert [hex(w) for w in want[:2]] == ["0x200125a6", "0x1011"]
    push = pb.launch_and_signal(qmd, sem, value)
    assert pb.words_of(push.data()) == tuple(want)
    assert pb.gpfifo_entry(0x20_0000_0000, len(push)) == 0x20_0000_0000 | 1 << 41 | len(want) << 42


def test_release_and_acquire_variants() -> None:
    assert pb.Push().release(0x1008, 7, timestamp=False).words[-1] == 1 | 1 << 20 | 1 << 24
    assert pb.Push().release(0x1004, 7, payload64=False, timestamp=False, wfi=False).words[-1] == 1
    acq = pb.Push().acquire(0x1008, 5).words
    assert acq[0] == _hdr(0, 0x5C, 5) and acq[-1] == 3 | 1 << 12 | 1 << 24  # ACQ_CIRC_GEQ | SWITCH_TSG_EN | 64BIT
    for bad in (lambda: pb.Push().release(0x1008, 1), lambda: pb.Push().release(0x1000, 1 << 64),
                lambda: pb.Push().acquire(0x1004, 1), lambda: pb.Push().launch(0x1080),
                lambda: pb.Push().method(0, 0x100), lambda: pb.Push().method(0, 0x100, 1 << 32)):
        with pytest.raises(ArigValueError):
            bad()


def test_setup_push() -> None:
    words = pb.setup(E.HOPPER_COMPUTE_A, E.HOPPER_DMA_COPY_A, local_address=0x20_0100_0000, local_per_tpc=0x240000).words
    want = [
        _hdr(1, 0x0, 1), 0xCBC0, _hdr(4, 0x0, 1), 0xC8B5,
        _hdr(1, 0x2A0, 2), 0x7294, 0, _hdr(1, 0x7B0, 2), 0x7293, 0,
        _hdr(1, 0x790, 2), 0x20, 0x0100_0000, _hdr(1, 0x2E4, 3), 0, 0x240000, 0xFF,
    ]
    assert words == want


def test_local_memory_size_formula() -> None:
    # tinygrad_nv.md §2: round_up(round_up(slm*32, 0x200) * warps_per_SM * SMs_per_TPC, 0x8000).
    assert pb.local_bytes_per_tpc(0x240) == 0x240000
    assert pb.local_bytes_per_tpc(0) == 0
    assert pb.local_bytes_per_tpc(1) == 0x10000  # 32 B -> 512 per warp, x128 = 64 KiB


def test_copy_and_copy_release() -> None:
    w = pb.Push().copy(0x1_0000_2000, 0x2_0000_4000, 0x1000).words
    launch = 2 | 1 << 2 | 1 << 7 | 1 << 8  # NON_PIPELINED | FLUSH | SRC PITCH | DST PITCH
    assert w == [_hdr(4, 0x400, 4), 2, 0x4000, 1, 0x2000, _hdr(4, 0x418, 1), 0x1000, _hdr(4, 0x300, 1), launch]
    big = pb.Push().copy(0, 1 << 32, (1 << 31) + 10).words
    assert len(big) == 18 and big[6] == (1 << 31) - 1 and big[15] == 11
    r = pb.Push().copy_release(0x3000, 1 << 33 | 5, interrupt=True).words
    assert r == [_hdr(4, 0x240, 4), 0, 0x3000, 5, 2, _hdr(4, 0x300, 1), 1 << 2 | 2 << 3 | 1 << 27 | 2 << 5]
    with pytest.raises(ArigValueError):
        pb.Push().copy_release(0x3008, 1)
    with pytest.raises(ArigValueError):
        pb.Push().copy(0, 0, 0)


def test_probe_launch_builds() -> None:
    # What scripts/nv_probe.py builds for axpy: the QMD packs and its bank 0 carries the parameters.
    axpy = parse((DATA / "probe.sm_90.cubin").read_bytes()).kernels["axpy"]
    params = struct.pack("<f4xQQi4x", 2.0, 0x20_0000_0000, 0x20_0001_0000, 1000)[: axpy.param_size]
    cb0 = q.cbank0(axpy, 4, 256, params, shared_window=pb.SHARED_WINDOW, local_window=pb.LOCAL_WINDOW)
    fields = q.kernel_qmd(axpy, grid=4, block=256, program_address=0x20_0200_0000, cbank0_address=0x20_0300_0000,
                          cbank0_size=len(cb0), release=q.Release(0x10_0000_0000, 1))
    assert len(q.pack(fields)) == q.QMD_BYTES
    assert struct.unpack_from("<6I", cb0, 0) == (256, 1, 1, 4, 1, 1)
