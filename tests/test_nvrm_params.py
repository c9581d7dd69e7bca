"""The pure layer of arig.nvrm: layouts, request codes, status names, parsing.

Sizes and offsets are those of open-gpu-kernel-modules 580 as compiled and
checked on the H200; none of this needs a GPU.
"""

from __future__ import annotations

import ctypes
import math
import random
import struct

import pytest

import arig.nvrm as nvrm
from arig._errors import ArigError
from arig.nvrm import _params as P

SIZES = [
    (P.Nvos21, 32), (P.Nvos54, 32), (P.Nvos00, 16), (P.CardInfo, 72), (P.VersionStr, 72),
    (P.XferCmd, 16), (P.RegisterFd, 4), (P.Nv0080Alloc, 56), (P.Nv2080Alloc, 4),
    (P.IdInfoV2, 32), (P.FbInfoV2, 1028), (P.UtilSamplesV2, 55888), (P.UtilSample, 776),
    (P.EngineUtil, 128), (P.NameString, 132), (P.ArchInfo, 16), (P.GidInfo, 268),
    (P.WatchdogInfo, 4),
]


@pytest.mark.parametrize(("struct_type", "size"), SIZES, ids=lambda v: getattr(v, "__name__", v))
def test_struct_sizes(struct_type: type, size: int) -> None:
    assert ctypes.sizeof(struct_type) == size


OFFSETS = [
    (P.Nvos21, {"hRoot": 0, "hObjectParent": 4, "hObjectNew": 8, "hClass": 12,
                "pAllocParms": 16, "paramsSize": 24, "status": 28}),
    (P.Nvos54, {"hClient": 0, "hObject": 4, "cmd": 8, "flags": 12, "params": 16,
                "paramsSize": 24, "status": 28}),
    (P.Nvos00, {"hRoot": 0, "hObjectParent": 4, "hObjectOld": 8, "status": 12}),
    (P.CardInfo, {"valid": 0, "pci_info": 4, "gpu_id": 16, "interrupt_line": 20,
                  "reg_address": 24, "reg_size": 32, "fb_address": 40, "fb_size": 48,
                  "minor_number": 56, "dev_name": 60}),
    (P.PciInfo, {"domain": 0, "bus": 4, "slot": 5, "function": 6, "vendor_id": 8,
                 "device_id": 10}),
    (P.VersionStr, {"cmd": 0, "reply": 4, "versionString": 8}),
    (P.XferCmd, {"cmd": 0, "size": 4, "ptr": 8}),
    (P.Nv0080Alloc, {"deviceId": 0, "hClientShare": 4, "hTargetClient": 8,
                     "hTargetDevice": 12, "flags": 16, "vaSpaceSize": 24,
                     "vaStartInternal": 32, "vaLimitInternal": 40, "vaMode": 48}),
    (P.IdInfoV2, {"gpuId": 0, "deviceInstance": 8, "numaId": 28}),
    (P.FbInfoV2, {"fbInfoListSize": 0, "fbInfoList": 4}),
    (P.UtilSamplesV2, {"type": 0, "bufSize": 4, "count": 8, "tracker": 12, "samples": 16}),
    (P.UtilSample, {"timeStamp": 0, "fb": 8, "gr": 136, "nvenc": 264, "nvdec": 392,
                    "nvjpg": 520, "nvofa": 648}),
    (P.EngineUtil, {"util": 0, "vgpuScale": 4, "procId": 8, "subProcessID": 12,
                    "subProcessName": 16, "pOsPidInfo": 120}),
    (P.NameString, {"gpuNameStringFlags": 0, "gpuNameString": 4}),
    (P.ArchInfo, {"architecture": 0, "implementation": 4, "revision": 8, "subRevision": 12}),
    (P.GidInfo, {"index": 0, "flags": 4, "length": 8, "data": 12}),
]


@pytest.mark.parametrize(("struct_type", "offsets"), OFFSETS,
                         ids=lambda v: getattr(v, "__name__", "offsets"))
def test_field_offsets(struct_type: type, offsets: dict[str, int]) -> None:
    assert {name: getattr(struct_type, name).offset for name in offsets} == offsets


@pytest.mark.parametrize(("nr", "size", "code"), [
    (P.NV_ESC_RM_ALLOC, 32, 0xC020462B),
    (P.NV_ESC_RM_CONTROL, 32, 0xC020462A),
    (P.NV_ESC_RM_FREE, 16, 0xC0104629),
    (P.NV_ESC_CARD_INFO, 32 * 72, 0xC90046C8),
    (P.NV_ESC_REGISTER_FD, 4, 0xC00446C9),
    (P.NV_ESC_CHECK_VERSION_STR, 72, 0xC04846D2),
    (P.NV_ESC_IOCTL_XFER_CMD, 16, 0xC01046D3),
    (0xD9, 2608, 0xCA3046D9),  # dma-buf export: the size needs all 14 bits' room
])
def test_request_codes(nr: int, size: int, code: int) -> None:
    assert P.iowr(nr, size) == code


def test_request_of_params_uses_their_size() -> None:
    assert P.request(P.NV_ESC_CARD_INFO, P.CardInfoArray()) == 0xC90046C8
    assert P.request(P.NV_ESC_RM_CONTROL, P.Nvos54()) == 0xC020462A


def test_request_size_over_14_bits_is_refused() -> None:
    assert P.iowr(1, 0x3FFF) >> 16 & 0x3FFF == 0x3FFF
    with pytest.raises(ValueError, match="XFER"):
        P.iowr(P.NV_ESC_RM_CONTROL, 0x4000)
    with pytest.raises(ValueError):
        P.iowr(0x100, 4)


@pytest.mark.parametrize(("code", "name"), [
    (0x00, "NV_OK"), (0x01, "NV_ERR_BROKEN_FB"), (0x16, "NV_ERR_ILLEGAL_ACTION"),
    (0x1B, "NV_ERR_INSUFFICIENT_PERMISSIONS"), (0x1F, "NV_ERR_INVALID_ARGUMENT"),
    (0x22, "NV_ERR_INVALID_CLASS"), (0x31, "NV_ERR_INVALID_OBJECT"),
    (0x33, "NV_ERR_INVALID_OBJECT_HANDLE"), (0x3A, "NV_ERR_INVALID_PARAM_STRUCT"),
    (0x40, "NV_ERR_INVALID_STATE"), (0x51, "NV_ERR_NO_MEMORY"),
    (0x56, "NV_ERR_NOT_SUPPORTED"), (0x57, "NV_ERR_OBJECT_NOT_FOUND"),
    (0x65, "NV_ERR_TIMEOUT"), (0x68, "NV_ERR_UVM_ADDRESS_IN_USE"),
    (0x8A, "NV_ERR_MC_FLA_OFFSET_TABLE_FULL"), (0xFFFF, "NV_ERR_GENERIC"),
    (0x10006, "NV_WARN_NOTHING_TO_DO"), (0x10009, "NV_WARN_THRESHOLD_CROSSED"),
    (0x8B, "NV_STATUS_UNKNOWN_0x8B"), (0x1000A, "NV_STATUS_UNKNOWN_0x1000A"),
])
def test_status_names(code: int, name: str) -> None:
    assert P.status_name(code) == name


def test_rm_error_names_operation_code_and_name() -> None:
    with pytest.raises(P.RmError) as caught:
        P.check_status("RM control 0x20801303", 0x1B)
    e = caught.value
    assert isinstance(e, ArigError)
    assert (e.status, e.status_name, e.op) == (0x1B, "NV_ERR_INSUFFICIENT_PERMISSIONS",
                                               "RM control 0x20801303")
    assert "RM control 0x20801303" in str(e)
    assert "0x0000001B" in str(e) and "NV_ERR_INSUFFICIENT_PERMISSIONS" in str(e)


def test_status_ok_passes() -> None:
    P.check_status("anything", 0)


# --- utilization samples ---------------------------------------------------

SECOND = 1_000_000_000


def _samples(points: list[tuple[int, int]], shuffle: int = 1) -> P.UtilSamplesV2:
    """Params holding (timestamp ns, gr util x100) in shuffled ring slots."""
    p = P.UtilSamplesV2.asking()
    slots = list(range(P.UTIL_SAMPLES))
    random.Random(shuffle).shuffle(slots)
    for slot, (stamp, util) in zip(slots, points):
        p.samples[slot].timeStamp = stamp
        p.samples[slot].gr.util = util
        p.samples[slot].fb.util = 9999  # memory busy must not leak into busy
    return p


def test_asking_sets_type_and_ring_size() -> None:
    p = P.UtilSamplesV2.asking()
    assert (p.type, p.bufSize) == (2, 72 * 776)


def test_busy_is_none_without_samples() -> None:
    assert P.busy_percent(P.UtilSamplesV2.asking(), 1.0) is None


def test_busy_mean_over_window_by_sample_clock() -> None:
    base = 1_796_029_407 * SECOND  # wall-clock-like stamps, far from host monotonic
    points = [(base + k * SECOND // 5, 100 * k) for k in range(20)]  # 0%, 1%, ... 19%
    p = _samples(points)
    # Newest is k=19; window 1 s reaches back to k=14 inclusive: mean 16.5 %.
    assert P.busy_percent(p, 1.0) == pytest.approx(16.5)
    assert P.busy_percent(p, 0.1) == pytest.approx(19.0)
    assert P.busy_percent(p, 100.0) == pytest.approx(9.5)
    assert P.busy_percent(p, math.inf) == pytest.approx(9.5)


def test_busy_ignores_unused_slots_and_tracker_order() -> None:
    p = _samples([(5 * SECOND, 10000), (4 * SECOND, 0), (0, 10000)], shuffle=7)
    p.tracker = 24056
    assert P.busy_percent(p, 0.5) == pytest.approx(100.0)
    assert P.busy_percent(p, 1.0) == pytest.approx(50.0)


def test_busy_is_clamped_to_100() -> None:
    assert P.busy_percent(_samples([(SECOND, 12000)]), 1.0) == 100.0


def test_busy_from_raw_bytes() -> None:
    """The same answer from bytes laid out by hand, not through ctypes."""
    raw = bytearray(55888)
    struct.pack_into("<BxxxIII", raw, 0, 2, 72 * 776, 0, 3)
    for slot, (stamp, util) in {3: (10 * SECOND, 5000), 40: (9 * SECOND, 1500),
                                71: (11 * SECOND, 2500)}.items():
        struct.pack_into("<Q", raw, 16 + slot * 776, stamp)
        struct.pack_into("<I", raw, 16 + slot * 776 + 136, util)
    p = P.UtilSamplesV2.from_buffer_copy(raw)
    assert P.busy_percent(p, 1.0) == pytest.approx(37.5)
    assert P.busy_percent(p, 2.0) == pytest.approx(30.0)


# --- memory, names, arch, versions ----------------------------------------


def _fb(values: dict[int, int]) -> P.FbInfoV2:
    p = P.FbInfoV2.asking(values)
    for k in range(p.fbInfoListSize):
        p.fbInfoList[k].data = values[p.fbInfoList[k].index]
    return p


def test_fb_asking_lists_indexes() -> None:
    p = P.FbInfoV2.asking([P.FB_RAM_SIZE, P.FB_HEAP_FREE])
    assert p.fbInfoListSize == 2
    assert [p.fbInfoList[k].index for k in range(2)] == [0x07, 0x16]
    with pytest.raises(ValueError):
        P.FbInfoV2.asking(range(129))


def test_usage_from_h200_values() -> None:
    fb = _fb({P.FB_RAM_SIZE: 147_221_504, P.FB_HEAP_FREE: 146_591_680})
    u = P.usage_of(fb, _samples([(SECOND, 1)]), 1.0)
    assert u.memory_total == 147_221_504 * 1024  # nvidia-smi: 143771 MiB
    assert u.memory_total // 2**20 == 143_771
    assert u.memory_free == 146_591_680 * 1024
    assert u.busy == pytest.approx(0.01)
    assert P.usage_of(fb, None, 1.0).busy is None
    with pytest.raises(AttributeError):
        u.busy = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(("arch", "impl", "chip", "sm"), [
    (0x180, 0x0, "GH100", "sm_90"), (0x170, 0x0, "GA100", "sm_80"),
    (0x170, 0x2, "GA102", "sm_86"), (0x170, 0xB, "GA10B", "sm_87"),
    (0x190, 0x2, "AD102", "sm_89"), (0x160, 0x4, "TU104", "sm_75"),
    (0x160, 0x8, "TU116", "sm_75"), (0x1A0, 0x0, "GB100", "sm_100"),
    (0x1B0, 0x2, "GB202", "sm_120"), (0x140, 0x0, "GV100", "sm_70"),
])
def test_arch_of(arch: int, impl: int, chip: str, sm: str) -> None:
    assert P.arch_of(arch, impl) == (chip, sm)


def test_unknown_arch_keeps_its_code() -> None:
    chip, sm = P.arch_of(0x1F0, 0x3)
    assert "0x1F0" in chip and sm == "nv_arch_0x1F0"


def test_name_and_uuid_text() -> None:
    name = P.NameString()
    name.gpuNameString[:11] = list(b"NVIDIA H200")
    assert name.text() == "NVIDIA H200"
    gid = P.GidInfo()
    text = b"GPU-7cc9fa83-3b2e-3e5a-008a-f824f2af7a22\0"
    gid.data[: len(text)] = list(text)
    gid.length = len(text)
    assert gid.text() == "GPU-7cc9fa83-3b2e-3e5a-008a-f824f2af7a22"


def test_bus_name_of_card_info() -> None:
    card = P.CardInfo()
    card.pci_info.domain, card.pci_info.bus, card.pci_info.slot = 0x1, 0xA, 0x1F
    card.pci_info.function = 1
    assert P.bus_name(card.pci_info) == "0001:0a:1f.1"


def test_release_parsing() -> None:
    assert P.release_major("580.159.04") == "580"
    assert P.release_major("  575.51.03\n") == "575"
    proc = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  "
            "Release Build  (nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC)\n")
    assert P.release_from_proc(proc) == "580.159.04"
    old = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 2024\n"
    assert P.release_from_proc(old) == "535.183.01"
    assert P.release_from_proc("garbage") is None


@pytest.mark.parametrize("window", [0, -1.0, math.nan, -math.inf, "1", None, True])
def test_bad_windows(window: object) -> None:
    with pytest.raises(ValueError):
        nvrm._check_window(window)  # type: ignore[arg-type]


def test_good_windows() -> None:
    assert nvrm._check_window(2) == 2.0 and nvrm._check_window(0.25) == 0.25
    assert nvrm._check_window(math.inf) == math.inf


@pytest.mark.parametrize("index", [-1, 1.0, "0", None, False])
def test_bad_indexes(index: object) -> None:
    with pytest.raises(ValueError):
        nvrm._check_index(index)  # type: ignore[arg-type]
