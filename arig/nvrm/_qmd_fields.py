"""The fields of HOPPER_COMPUTE_A's QMD, version 04_00: where each lies, and the values used.

Pure data (any thread); ``arig.nvrm._qmd`` encodes launches with it.

The field table is data from NVIDIA's MIT-licensed ``clcbc0qmd.h``
(open-gpu-doc ``classes/compute/``, blob dd023ba, 2025-04-09), whose macros
``NVCBC0_QMDV04_00_<NAME> MW(hi:lo)`` give bit positions within the whole QMD
(bit ``b`` is bit ``b % 32`` of little-endian word ``b // 32``).  Names here
are the header's minus that prefix; an indexed macro ``NAME(i)`` becomes one
field per index, ``"NAME(0)"``, ``"NAME(1)"`` ...  The tests parse a copy of the
header (``tests/data/nv/clcbc0qmd.h``) and compare every entry.

V04 has no ``SM_GLOBAL_CACHING_ENABLE`` and no ``L1_CONFIGURATION`` (V03 and
older did): the L1/shared split is the three ``*_SM_CONFIG_SHARED_MEM_SIZE``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["QMD_BYTES", "FIELDS", "VALUES", "Reduction"]

#: The V04 QMD is 3072 bits: its last field, OUTER_STICKY_OVERFLOW, is bit 3071.
QMD_BYTES = 384

# Scalar fields, transcribed from clcbc0qmd.h: name -> (hi, lo), inclusive bit numbers.
_SCALAR: dict[str, tuple[int, int]] = {
    "DEPENDENCE_COUNTER": (15, 0),
    "QMD_GROUP_ID": (21, 16),
    "ADD_TO_HEAD_OF_QMD_GROUP_LINKED_LIST": (22, 22),
    "QMD_TYPE": (25, 23),
    "ARRIVE_AT_LATCH_VALID": (28, 28),
    "WAIT_ON_LATCH_VALID": (29, 29),
    "REQUIRE_SCHEDULING_PCAS": (30, 30),
    "TPC_DISABLE_MASK_VALID": (31, 31),
    "CIRCULAR_QUEUE_SIZE": (56, 32),
    "INNER_GET": (94, 64),
    "INNER_OVERFLOW": (95, 95),
    "INNER_PUT": (126, 96),
    "INNER_STICKY_OVERFLOW": (127, 127),
    "HW_ONLY_INNER_GET": (190, 160),
    "HW_ONLY_INNER_PUT": (222, 192),
    "HW_ONLY_SPAN_LIST_HEAD_INDEX": (253, 224),
    "HW_ONLY_SPAN_LIST_HEAD_INDEX_VALID": (254, 254),
    "HW_ONLY_SKED_NEXT_QMD_POINTER": (287, 256),
    "HW_ONLY_DEPENDENCE_COUNTER": (303, 288),
    "HW_ONLY_REQUIRE_SCHEDULING_PCAS": (304, 304),
    "SELF_COPY_ON_COMPLETION": (378, 378),
    "DEMOTE_L2_EVICT_LAST": (379, 379),
    "DISABLE_AUTO_INVALIDATE": (380, 380),
    "CORRELATION_ID_INTERNAL": (381, 381),
    "CWD_MEMBAR_TASK_CHASING_ENABLE": (382, 382),
    "CORRELATION_ID": (415, 384),
    "DEPENDENT_QMD0_POINTER": (479, 448),
    "DEPENDENT_QMD1_POINTER": (511, 480),
    "SHADER_LOCAL_MEMORY_LOW_SIZE": (535, 512),
    "SASS_VERSION": (543, 536),
    "SHADER_LOCAL_MEMORY_HIGH_SIZE": (567, 544),
    "API_VISIBLE_CALL_LIMIT": (568, 568),
    "SAMPLER_INDEX": (569, 569),
    "CONSTANT_BUFFER_PREFETCH_PRE_MAX_SIZE_SHIFTED8": (575, 570),
    "QMD_MINOR_VERSION": (579, 576),
    "QMD_MAJOR_VERSION": (583, 580),
    "SHARED_MEMORY_SIZE": (601, 584),
    "INVALIDATE_TEXTURE_HEADER_CACHE": (602, 602),
    "INVALIDATE_TEXTURE_SAMPLER_CACHE": (603, 603),
    "INVALIDATE_TEXTURE_DATA_CACHE": (604, 604),
    "INVALIDATE_SHADER_DATA_CACHE": (605, 605),
    "INVALIDATE_INSTRUCTION_CACHE": (606, 606),
    "INVALIDATE_SHADER_CONSTANT_CACHE": (607, 607),
    "MIN_SM_CONFIG_SHARED_MEM_SIZE": (613, 608),
    "MAX_SM_CONFIG_SHARED_MEM_SIZE": (619, 614),
    "TARGET_SM_CONFIG_SHARED_MEM_SIZE": (625, 620),
    "SHARED_ALLOCATION_ENABLE": (626, 626),
    "RELEASE_SEMAPHORE0_ADDR_LOWER": (671, 640),
    "RELEASE_SEMAPHORE0_ADDR_UPPER": (696, 672),
    "RELEASE_SEMAPHORE0_PAYLOAD_LOWER": (735, 704),
    "RELEASE_SEMAPHORE0_PAYLOAD_UPPER": (767, 736),
    "RELEASE_SEMAPHORE1_ADDR_LOWER": (799, 768),
    "RELEASE_SEMAPHORE1_ADDR_UPPER": (824, 800),
    "RELEASE_SEMAPHORE1_PAYLOAD_LOWER": (863, 832),
    "RELEASE_SEMAPHORE1_PAYLOAD_UPPER": (895, 864),
    "RELEASE_SEMAPHORE2_ADDR_LOWER": (927, 896),
    "RELEASE_SEMAPHORE2_ADDR_UPPER": (952, 928),
    "RELEASE_SEMAPHORE2_PAYLOAD_LOWER": (991, 960),
    "RELEASE_SEMAPHORE2_PAYLOAD_UPPER": (1023, 992),
    "GRID_WIDTH": (1055, 1024),
    "GRID_HEIGHT": (1071, 1056),
    "GRID_DEPTH": (1103, 1088),
    "CWD_REFERENCE_COUNT_DELTA_MINUS_ONE": (1127, 1120),
    "CWD_REFERENCE_COUNT_ID": (1133, 1128),
    "CWD_REFERENCE_COUNT_INCR_ENABLE": (1134, 1134),
    "CWD_REFERENCE_COUNT_DECR_ENABLE": (1135, 1135),
    "CWD_MEMBAR_TYPE": (1137, 1136),
    "SEQUENTIALLY_RUN_CTAS": (1138, 1138),
    "CTA_LAUNCH_QUEUE": (1139, 1139),
    "FREE_CTA_SLOTS_EMPTY_SM": (1147, 1140),
    "SYNC_DOMAIN_ID": (1149, 1148),
    "PRE_EXIT_AT_LAST_CTA_LAUNCH": (1150, 1150),
    "ENABLE_PROGRAM_PRE_EXIT": (1151, 1151),
    "CTA_THREAD_DIMENSION0": (1167, 1152),
    "CTA_THREAD_DIMENSION1": (1183, 1168),
    "CTA_THREAD_DIMENSION2": (1199, 1184),
    "REGISTER_COUNT": (1208, 1200),
    "BARRIER_COUNT": (1215, 1211),
    "PROGRAM_ADDRESS_LOWER": (1247, 1216),
    "PROGRAM_ADDRESS_UPPER": (1272, 1248),
    "OCCUPANCY_THRESHOLD_WARP": (1287, 1280),
    "OCCUPANCY_MAX_WARP": (1295, 1288),
    "OCCUPANCY_THRESHOLD_REGISTER": (1303, 1296),
    "OCCUPANCY_MAX_REGISTER": (1311, 1304),
    "OCCUPANCY_THRESHOLD_SHARED_MEM": (1319, 1312),
    "OCCUPANCY_MAX_SHARED_MEM": (1327, 1320),
    "PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED": (1375, 1344),
    "PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED": (1392, 1376),
    "PROGRAM_PREFETCH_SIZE": (1401, 1393),
    "PROGRAM_PREFETCH_TYPE": (1403, 1402),
    "LATCH_ACQUIRE_INVALIDATE_SHADER_DATA_CACHE": (1406, 1406),
    "LATCH_ACQUIRE_INVALIDATE_TEXTURE_DATA_CACHE": (1407, 1407),
    "GRID_WIDTH_RESUME": (1439, 1408),
    "GRID_HEIGHT_RESUME": (1455, 1440),
    "GRID_DEPTH_RESUME": (1471, 1456),
    "ARRIVE_AT_LATCH_ID": (1503, 1472),
    "WAIT_ON_LATCH_ID": (1535, 1504),
    "CIRCULAR_QUEUE_ADDR_LOWER": (2079, 2048),
    "CIRCULAR_QUEUE_ADDR_UPPER": (2087, 2080),
    "CIRCULAR_QUEUE_ENTRY_SIZE": (2127, 2112),
    "COALESCE_WAITING_PERIOD": (2135, 2128),
    "QUEUE_ENTRIES_PER_CTA_LOG2": (2140, 2136),
    "GPC_CGA_WIDTH": (2149, 2144),
    "GPC_CGA_HEIGHT": (2157, 2152),
    "GPC_CGA_DEPTH": (2165, 2160),
    "CGA_CTA_DISTRIBUTION_MODE": (2207, 2207),
    "GPU_CGA_WIDTH": (2223, 2208),
    "GPU_CGA_HEIGHT": (2239, 2224),
    "GPU_CGA_DEPTH": (2255, 2240),
    "DEBUG_ID_LOWER": (2399, 2368),
    "DEBUG_ID_UPPER": (2431, 2400),
    "OUTER_PUT": (3038, 3008),
    "OUTER_OVERFLOW": (3039, 3039),
    "OUTER_GET": (3070, 3040),
    "OUTER_STICKY_OVERFLOW": (3071, 3071),
}

# Indexed fields ``NAME(i)``: the header's MW((hi0 + i*stride):(lo0 + i*stride)) as
# name -> (hi0, lo0, stride, count).  The header gives no count; each is the most
# indices that fit before the next field (3 release semaphores, 2 dependent QMDs,
# 8 constant banks, 18 words of TPC mask); the tests check that index `count`
# would collide with another field.
_INDEXED: dict[str, tuple[int, int, int, int]] = {
    "RELEASE_ENABLE": (320, 320, 16, 3),
    "RELEASE_STRUCTURE_SIZE": (322, 321, 16, 3),
    "RELEASE_MEMBAR_TYPE": (323, 323, 16, 3),
    "RELEASE_REDUCTION_ENABLE": (324, 324, 16, 3),
    "RELEASE_REDUCTION_OP": (327, 325, 16, 3),
    "RELEASE_REDUCTION_FORMAT": (329, 328, 16, 3),
    "RELEASE_TRAP_TYPE": (331, 330, 16, 3),
    "RELEASE_PAYLOAD64B": (332, 332, 16, 3),
    "RELEASE_RESERVED_INFO": (335, 333, 16, 3),
    "DEPENDENT_QMD_ENABLE": (368, 368, 5, 2),
    "DEPENDENT_QMD_ACTION": (371, 369, 5, 2),
    "DEPENDENT_QMD_PREFETCH": (372, 372, 5, 2),
    "CONSTANT_BUFFER_VALID": (416, 416, 4, 8),
    "CONSTANT_BUFFER_PREFETCH": (418, 417, 4, 8),
    "CONSTANT_BUFFER_INVALIDATE": (419, 419, 4, 8),
    "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6": (1567, 1536, 64, 8),
    "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6": (1586, 1568, 64, 8),
    "CONSTANT_BUFFER_SIZE_SHIFTED4": (1599, 1587, 64, 8),
    "TPC_DISABLE_MASK": (2463, 2432, 32, 18),
}


def _table() -> dict[str, tuple[int, int]]:
    out = dict(_SCALAR)
    for name, (hi, lo, stride, count) in _INDEXED.items():
        for i in range(count):
            out[f"{name}({i})"] = (hi + i * stride, lo + i * stride)
    return dict(sorted(out.items(), key=lambda kv: kv[1][1]))


#: Every V04 field: name -> (hi, lo) bit numbers within the QMD, in bit order.
FIELDS: Mapping[str, tuple[int, int]] = MappingProxyType(_table())

#: The header's named values this module uses (``NVCBC0_QMDV04_00_<FIELD>_<VALUE>``).
VALUES: Mapping[str, int] = MappingProxyType(
    {
        "QMD_TYPE_GRID_CTA": 2,
        "API_VISIBLE_CALL_LIMIT_NO_CHECK": 1,
        "SAMPLER_INDEX_INDEPENDENTLY": 0,
        "CWD_MEMBAR_TYPE_L1_SYSMEMBAR": 1,
        "RELEASE_STRUCTURE_SIZE_SEMAPHORE_FOUR_WORDS": 0,
        "RELEASE_STRUCTURE_SIZE_SEMAPHORE_ONE_WORD": 1,
        "RELEASE_STRUCTURE_SIZE_SEMAPHORE_TWO_WORDS": 2,
        "RELEASE_MEMBAR_TYPE_FE_NONE": 0,
        "RELEASE_MEMBAR_TYPE_FE_SYSMEMBAR": 1,
        "RELEASE_REDUCTION_FORMAT_UNSIGNED": 0,
        "DEPENDENT_QMD_ACTION_QMD_SCHEDULE": 1,
        "PROGRAM_PREFETCH_TYPE_PREFETCH_LAUNCH": 0,
    }
)


class Reduction(enum.IntEnum):
    """``RELEASE_REDUCTION_OP``: a release that combines its payload with the word instead of storing it."""

    RED_ADD = 0
    RED_MIN = 1
    RED_MAX = 2
    RED_INC = 3
    RED_DEC = 4
    RED_AND = 5
    RED_OR = 6
    RED_XOR = 7
