"""The QMD V04 packer of the NV device (arig.nvrm._qmd), checked against NVIDIA's own header.

tests/data/nv/clcbc0qmd.h is NVIDIA's MIT-licensed public header (open-gpu-doc,
classes/compute/clcbc0qmd.h, commit 5d957df, 2025-04-09), kept unmodified: the tests
parse its ``MW(hi:lo)`` macros and compare every field of the module's table with it.
The kernels come from tests/data/nv/probe.sm_90.cubin (nvcc 13.0, probe.cu).
"""

from __future__ import annotations

import ast
import dataclasses
import re
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arig import ArigValueError
from arig.nvrm import _qmd as q
from arig.nvrm._cubin import Kernel, parse

DATA = Path(__file__).resolve().parent / "data" / "nv"
HEADER = (DATA / "clcbc0qmd.h").read_text()
KERNELS = parse((DATA / "probe.sm_90.cubin").read_bytes()).kernels
_MACRO = re.compile(r"^#define NVCBC0_QMD(V\d\d_\d\d)_(\w+?)(\(i\))?\s+MW\((.+)\)\s*$", re.M)
_VALUE = re.compile(r"^#define NVCBC0_QMDV04_00_(\w+)\s+(0x[0-9A-Fa-f]+)\s*$", re.M)


def _eval(expr: str, i: int) -> int:
    """An MW() bound such as ``(320+(i)*16)``, with ``i`` given: integers, +, -, * and parentheses only."""

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult):
            a, b = ev(node.left), ev(node.right)
            return a + b if isinstance(node.op, ast.Add) else a - b if isinstance(node.op, ast.Sub) else a * b
        raise AssertionError(f"unexpected MW() expression {expr!r}")

    return ev(ast.parse(expr.replace("(i)", f"({i})"), mode="eval"))


def _header(version: str) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[str, str]]]:
    """The header's fields of one QMD version: scalar name -> (hi, lo), indexed name -> (hi, lo) expressions."""
    scalar: dict[str, tuple[int, int]] = {}
    indexed: dict[str, tuple[str, str]] = {}
    for ver, name, index, body in _MACRO.findall(HEADER):
        if ver != version:
            continue
        hi, lo = body.split(":")
        if index:
            indexed[name] = (hi, lo)
        else:
            scalar[name] = (_eval(hi, 0), _eval(lo, 0))
    return scalar, indexed


V04, V04_INDEXED = _header("V04_00")


def _width(name: str) -> int:
    hi, lo = q.FIELDS[name]
    return hi - lo + 1


def _mask(name: str) -> int:
    return ((1 << _width(name)) - 1) << q.FIELDS[name][1]


# ---------------------------------------------------------------------------------------------
# (1) the table is the header's


def test_the_header_is_nvidias_mit_licensed_file() -> None:
    assert HEADER.startswith("/****")
    assert "Copyright (c) 2023, NVIDIA CORPORATION" in HEADER
    assert "Permission is hereby granted, free of charge" in HEADER
    assert "Queue Meta Data, Version 04_00" in HEADER
    assert len(V04) > 100 and len(V04_INDEXED) == 19


def test_every_field_is_where_the_header_puts_it() -> None:
    for name, (hi, lo) in q.FIELDS.items():
        m = re.fullmatch(r"(\w+)\((\d+)\)", name)
        if m is None:
            assert V04[name] == (hi, lo), name
        else:
            hi_expr, lo_expr = V04_INDEXED[m[1]]
            i = int(m[2])
            assert (_eval(hi_expr, i), _eval(lo_expr, i)) == (hi, lo), name


def test_every_header_field_is_in_the_table() -> None:
    assert set(V04) <= set(q.FIELDS)
    assert {f"{name}(0)" for name in V04_INDEXED} <= set(q.FIELDS)


def test_indexed_fields_have_every_index_that_fits() -> None:
    """The header gives no index counts: the table has each indexed group (the fields of one release
    semaphore, dependent QMD, constant bank...) as often as fits, so index ``count`` of some member
    of the group would run into another field or past the QMD."""
    groups: dict[tuple[int, int], list[str]] = {}
    for base, (_hi_expr, lo_expr) in V04_INDEXED.items():
        count = sum(1 for name in q.FIELDS if name.startswith(base + "("))
        assert count >= 1 and f"{base}({count - 1})" in q.FIELDS
        groups.setdefault((_eval(lo_expr, 1) - _eval(lo_expr, 0), count), []).append(base)
    assert sorted(groups) == [(4, 8), (5, 2), (16, 3), (32, 18), (64, 8)]
    for (_stride, count), bases in groups.items():
        others = [span for name, span in q.FIELDS.items() if not name.startswith(tuple(b + "(" for b in bases))]
        assert any(_collides(b, count, others) for b in bases), f"index {count} of {bases} would still fit"


def _collides(base: str, i: int, others: list[tuple[int, int]]) -> bool:
    hi, lo = (_eval(e, i) for e in V04_INDEXED[base])
    return hi >= q.QMD_BYTES * 8 or any(lo <= other_hi and other_lo <= hi for other_hi, other_lo in others)


def test_fields_are_disjoint_and_fill_exactly_the_qmd() -> None:
    spans = sorted((lo, hi) for hi, lo in q.FIELDS.values())
    for (_lo0, hi0), (lo1, hi1) in zip(spans, spans[1:]):
        assert hi0 < lo1 <= hi1
    assert spans[0][0] == 0 and spans[-1][1] == q.QMD_BYTES * 8 - 1


def test_named_values_are_the_headers() -> None:
    values = {name: int(v, 16) for name, v in _VALUE.findall(HEADER)}
    for name, value in q.VALUES.items():
        assert values[name] == value, name
    assert [values[f"RELEASE_REDUCTION_OP_{r.name}"] for r in q.Reduction] == [r.value for r in q.Reduction]


def test_the_fields_the_probe_set_are_where_the_research_says() -> None:
    """shared/research/tinygrad_nv.md lists the V04 fields an H200 probe launched with; they agree."""
    research = {
        "QMD_GROUP_ID": (21, 16),
        "QMD_TYPE": (25, 23),
        "QMD_MAJOR_VERSION": (583, 580),
        "SASS_VERSION": (543, 536),
        "PROGRAM_ADDRESS_LOWER": (1247, 1216),
        "PROGRAM_ADDRESS_UPPER": (1272, 1248),
        "PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED": (1375, 1344),
        "PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED": (1392, 1376),
        "PROGRAM_PREFETCH_SIZE": (1401, 1393),
        "GRID_WIDTH": (1055, 1024),
        "GRID_HEIGHT": (1071, 1056),
        "GRID_DEPTH": (1103, 1088),
        "CTA_THREAD_DIMENSION0": (1167, 1152),
        "REGISTER_COUNT": (1208, 1200),
        "BARRIER_COUNT": (1215, 1211),
        "SHARED_MEMORY_SIZE": (601, 584),
        "MIN_SM_CONFIG_SHARED_MEM_SIZE": (613, 608),
        "MAX_SM_CONFIG_SHARED_MEM_SIZE": (619, 614),
        "TARGET_SM_CONFIG_SHARED_MEM_SIZE": (625, 620),
        "SHADER_LOCAL_MEMORY_HIGH_SIZE": (567, 544),
        "INVALIDATE_TEXTURE_HEADER_CACHE": (602, 602),
        "INVALIDATE_SHADER_DATA_CACHE": (605, 605),
        "CWD_MEMBAR_TYPE": (1137, 1136),
        "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)": (1567, 1536),
        "CONSTANT_BUFFER_SIZE_SHIFTED4(1)": (1599 + 64, 1587 + 64),
        "CONSTANT_BUFFER_VALID(2)": (424, 424),
        "CONSTANT_BUFFER_INVALIDATE(2)": (427, 427),
        "RELEASE_ENABLE(0)": (320, 320),
        "RELEASE_SEMAPHORE0_ADDR_LOWER": (671, 640),
        "RELEASE_SEMAPHORE0_ADDR_UPPER": (696, 672),
        "RELEASE_SEMAPHORE0_PAYLOAD_LOWER": (735, 704),
        "RELEASE_SEMAPHORE0_PAYLOAD_UPPER": (767, 736),
    }
    assert {name: q.FIELDS[name] for name in research} == research


def test_v04_differs_from_v03_in_size_and_in_what_it_dropped() -> None:
    """V03 (Ampere/Ada, also in this header) is 256 bytes; V04 is 384 and has no SM_GLOBAL_CACHING_ENABLE."""
    v03, _ = _header("V03_00")
    assert max(hi for hi, _lo in v03.values()) == 256 * 8 - 1
    assert "SM_GLOBAL_CACHING_ENABLE" in v03 and "SM_GLOBAL_CACHING_ENABLE" not in q.FIELDS
    assert "L1_CONFIGURATION" not in q.FIELDS


# ---------------------------------------------------------------------------------------------
# (1) bit-exact packing, (2) round trips


@given(st.sampled_from(sorted(q.FIELDS)))
def test_all_ones_sets_exactly_the_fields_bits(name: str) -> None:
    hi, lo = q.FIELDS[name]
    packed = int.from_bytes(q.pack({name: (1 << (hi - lo + 1)) - 1}), "little")
    assert packed == _mask(name)


@given(st.data())
def test_a_value_lands_in_its_bits_only(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(q.FIELDS)))
    hi, lo = q.FIELDS[name]
    value = data.draw(st.integers(0, (1 << (hi - lo + 1)) - 1))
    packed = q.pack({name: value})
    assert len(packed) == q.QMD_BYTES
    assert int.from_bytes(packed, "little") == value << lo
    word, bit = divmod(lo, 32)
    if hi < (word + 1) * 32:  # a field within one 32-bit word, as the hardware reads it
        assert (struct.unpack_from("<I", packed, word * 4)[0] >> bit) & ((1 << (hi - lo + 1)) - 1) == value


@st.composite
def _field_values(draw: st.DrawFn) -> dict[str, int]:
    names = draw(st.lists(st.sampled_from(sorted(q.FIELDS)), unique=True, max_size=40))
    return {n: draw(st.integers(0, (1 << (q.FIELDS[n][0] - q.FIELDS[n][1] + 1)) - 1)) for n in names}


@given(_field_values())
def test_pack_unpack_round_trip(fields: dict[str, int]) -> None:
    packed = q.pack(fields)
    out = q.unpack(packed)
    assert out == {name: fields.get(name, 0) for name in q.FIELDS}
    assert q.pack(out) == packed


@settings(max_examples=50)
@given(st.binary(min_size=q.QMD_BYTES, max_size=q.QMD_BYTES))
def test_any_qmd_round_trips_but_its_reserved_bits(data: bytes) -> None:
    fields = 0
    for name in q.FIELDS:
        fields |= _mask(name)
    assert int.from_bytes(q.pack(q.unpack(data)), "little") == int.from_bytes(data, "little") & fields


def test_patch_in_place_at_an_offset() -> None:
    buf = bytearray(b"\xaa" * (q.QMD_BYTES + 64))
    before = bytes(buf)
    q.patch(memoryview(buf), {"GRID_WIDTH": 7, "RELEASE_SEMAPHORE0_PAYLOAD_LOWER": 0}, offset=64)
    assert buf[:64] == before[:64]
    out = q.unpack(buf[64:])
    assert out["GRID_WIDTH"] == 7 and out["RELEASE_SEMAPHORE0_PAYLOAD_LOWER"] == 0
    assert out["GRID_HEIGHT"] == 0xAAAA
    changed = int.from_bytes(buf[64:], "little") ^ int.from_bytes(before[64:], "little")
    assert changed & ~(_mask("GRID_WIDTH") | _mask("RELEASE_SEMAPHORE0_PAYLOAD_LOWER")) == 0


# ---------------------------------------------------------------------------------------------
# (3) errors


@pytest.mark.parametrize("name", ["GRID_HEIGHT", "BARRIER_COUNT", "RELEASE_ENABLE(2)", "PROGRAM_ADDRESS_UPPER", "TPC_DISABLE_MASK(17)"])
def test_values_out_of_range_are_refused_naming_field_and_range(name: str) -> None:
    hi, lo = q.FIELDS[name]
    top = (1 << (hi - lo + 1)) - 1
    for bad in (-1, top + 1):
        with pytest.raises(ArigValueError, match=rf"{re.escape(name)} is bits {hi}:{lo}: {bad} is not in 0\.\.{top:#x}"):
            q.pack({name: bad})


def test_unknown_names_and_non_ints_are_refused() -> None:
    with pytest.raises(KeyError, match="no field 'GRID_WIDHT'.*GRID_WIDTH"):
        q.pack({"GRID_WIDHT": 1})
    with pytest.raises(ArigValueError, match="RELEASE_ENABLE"):  # the header's spelling is NAME(i)
        q.pack({"RELEASE0_ENABLE": 1})
    with pytest.raises(TypeError, match="GRID_WIDTH takes an int, not float"):
        q.pack({"GRID_WIDTH": 1.0})  # type: ignore[dict-item]


def test_a_refused_patch_writes_nothing() -> None:
    buf = bytearray(q.QMD_BYTES)
    with pytest.raises(ArigValueError):
        q.patch(buf, {"GRID_WIDTH": 5, "GRID_HEIGHT": 1 << 16})
    assert buf == bytes(q.QMD_BYTES)
    with pytest.raises(ArigValueError, match="needs 384 bytes"):
        q.patch(bytearray(400), {"GRID_WIDTH": 1}, offset=17)


def test_unpack_refuses_other_sizes() -> None:
    with pytest.raises(ArigValueError, match="384 bytes, not 256"):
        q.unpack(bytes(256))


# ---------------------------------------------------------------------------------------------
# (4) a launch


def _launch(kernel: Kernel, **kw: object) -> dict[str, int]:
    args: dict[str, object] = dict(grid=(4, 3, 2), block=(32, 4, 1), program_address=0x7F12_3456_7800, cbank0_address=0x7F00_0000_1040, cbank0_size=0x240)
    args.update(kw)
    return q.unpack(q.pack(q.kernel_qmd(kernel, **args)))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name, registers, barriers, shared, local",
    [
        ("axpy", 10, 1, 0, 0x240),  # no barrier used: the probe's BARRIER_COUNT 1
        ("tile", 10, 1, 2048, 0x240),  # 1 KiB of buf + the system's 1 KiB
        ("deep", 40, 1, 0, 0x100 + 0x240),  # its 256-byte local array lives on the stack
    ],
)
def test_kernel_qmd_of_the_probe_kernels(name: str, registers: int, barriers: int, shared: int, local: int) -> None:
    k = KERNELS[name]
    f = _launch(k)
    assert (f["REGISTER_COUNT"], f["BARRIER_COUNT"], f["SHARED_MEMORY_SIZE"]) == (registers, barriers, shared)
    assert (f["SHADER_LOCAL_MEMORY_HIGH_SIZE"], f["SHADER_LOCAL_MEMORY_LOW_SIZE"]) == (local, 0)
    assert (f["GRID_WIDTH"], f["GRID_HEIGHT"], f["GRID_DEPTH"]) == (4, 3, 2)
    assert (f["CTA_THREAD_DIMENSION0"], f["CTA_THREAD_DIMENSION1"], f["CTA_THREAD_DIMENSION2"]) == (32, 4, 1)
    # what the probe set to mark a V04 grid for sm_90
    assert (f["QMD_GROUP_ID"], f["QMD_TYPE"], f["QMD_MAJOR_VERSION"], f["QMD_MINOR_VERSION"], f["SASS_VERSION"]) == (0x3F, 2, 4, 0, 0x90)
    assert f["API_VISIBLE_CALL_LIMIT"] == 1 and f["CWD_MEMBAR_TYPE"] == 1
    assert [f[n] for n in q.FIELDS if n.startswith("INVALIDATE_")] == [1, 1, 1, 1, 0, 0]  # bits 602..605
    assert (f["MIN_SM_CONFIG_SHARED_MEM_SIZE"], f["TARGET_SM_CONFIG_SHARED_MEM_SIZE"], f["MAX_SM_CONFIG_SHARED_MEM_SIZE"]) == (9, 9, 0x1A)
    # the code, unshifted; its prefetch, >> 8
    assert f["PROGRAM_ADDRESS_UPPER"] << 32 | f["PROGRAM_ADDRESS_LOWER"] == 0x7F12_3456_7800
    assert (f["PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED"] << 32 | f["PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED"]) << 8 == 0x7F12_3456_7800
    assert f["PROGRAM_PREFETCH_SIZE"] == len(k.text) >> 8
    # constant bank 0 and nothing else
    cb = f["CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(0)"] << 32 | f["CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)"]
    assert (cb << 6, f["CONSTANT_BUFFER_SIZE_SHIFTED4(0)"] << 4) == (0x7F00_0000_1040, 0x240)
    assert f["CONSTANT_BUFFER_VALID(0)"] == f["CONSTANT_BUFFER_INVALIDATE(0)"] == 1
    assert not any(f[f"CONSTANT_BUFFER_VALID({i})"] for i in range(1, 8))
    assert not any(f[n] for n in f if n.startswith(("DEPENDENT_QMD", "RELEASE")))


def test_dynamic_shared_memory_and_the_carveout() -> None:
    axpy, tile = KERNELS["axpy"], KERNELS["tile"]
    assert _launch(axpy, shared_bytes=4096)["SHARED_MEMORY_SIZE"] == 1024 + 4096  # the reserve comes with it
    assert _launch(tile, shared_bytes=100)["SHARED_MEMORY_SIZE"] == 2048 + 256  # rounded to 256
    f = _launch(axpy, shared_bytes=40 * 1024)
    assert (f["MIN_SM_CONFIG_SHARED_MEM_SIZE"], f["MAX_SM_CONFIG_SHARED_MEM_SIZE"]) == (64 // 4 + 1, 0x1A)
    f = _launch(axpy, shared_bytes=200 * 1024)
    assert (f["MIN_SM_CONFIG_SHARED_MEM_SIZE"], f["TARGET_SM_CONFIG_SHARED_MEM_SIZE"], f["MAX_SM_CONFIG_SHARED_MEM_SIZE"]) == (58, 58, 58)
    assert _launch(axpy, max_carveout=228 * 1024)["MAX_SM_CONFIG_SHARED_MEM_SIZE"] == 58


def test_releases_and_chaining() -> None:
    axpy = KERNELS["axpy"]
    f = _launch(axpy, release=q.Release(0x7F00_1234_5670, (1 << 40) + 5))
    assert f["RELEASE_ENABLE(0)"] == 1 and f["RELEASE_ENABLE(1)"] == 0
    assert (f["RELEASE_STRUCTURE_SIZE(0)"], f["RELEASE_PAYLOAD64B(0)"], f["RELEASE_MEMBAR_TYPE(0)"], f["RELEASE_REDUCTION_ENABLE(0)"]) == (0, 1, 0, 0)
    assert f["RELEASE_SEMAPHORE0_ADDR_UPPER"] << 32 | f["RELEASE_SEMAPHORE0_ADDR_LOWER"] == 0x7F00_1234_5670
    assert f["RELEASE_SEMAPHORE0_PAYLOAD_UPPER"] << 32 | f["RELEASE_SEMAPHORE0_PAYLOAD_LOWER"] == (1 << 40) + 5
    two = [q.Release(0x1000, 1), q.Release(0x2004, 9, payload64=False, timestamp=False, sysmembar=True, reduction=q.Reduction.RED_ADD)]
    f = _launch(axpy, release=two)
    assert (f["RELEASE_ENABLE(1)"], f["RELEASE_STRUCTURE_SIZE(1)"], f["RELEASE_MEMBAR_TYPE(1)"]) == (1, 1, 1)
    assert (f["RELEASE_REDUCTION_ENABLE(1)"], f["RELEASE_REDUCTION_OP(1)"], f["RELEASE_SEMAPHORE1_ADDR_LOWER"]) == (1, 0, 0x2004)
    c = q.unpack(q.pack(q.chain(0x7F_0000_2300)))
    assert (c["DEPENDENT_QMD0_POINTER"] << 8, c["DEPENDENT_QMD_ENABLE(0)"], c["DEPENDENT_QMD_ACTION(0)"]) == (0x7F_0000_2300, 1, 1)
    assert c["DEPENDENT_QMD_ENABLE(1)"] == 0


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"block": (1025,)}, "block"),
        ({"block": (32, 32, 2)}, "1024 threads"),
        ({"block": (1, 1, 65)}, "block"),
        ({"block": (0, 1)}, "positive"),
        ({"block": "x"}, "positive"),
        ({"grid": (1, 1 << 16)}, "grid"),
        ({"grid": 1 << 31}, "grid"),
        ({"grid": (1, 2, 3, 4)}, "1 to 3"),
        ({"program_address": 0x1040}, "128-byte"),
        ({"program_address": 1 << 57}, "PROGRAM_ADDRESS_UPPER"),
        ({"cbank0_address": 0x1010}, "64-byte"),
        ({"cbank0_size": 0x200}, "constant bank 0 size"),
        ({"cbank0_size": 0x10010}, "constant bank 0 size"),
        ({"shared_bytes": 228 * 1024}, "shared memory"),
        ({"shared_bytes": -1}, "negative"),
        ({"release": [q.Release(0x1000, 1)] * 4}, "3 release"),
        ({"release": q.Release(0x1008, 1)}, "16-byte aligned"),
        ({"release": q.Release(0x1000, 1 << 32, payload64=False)}, "32 bits"),
        ({"release": q.Release(1 << 57, 1)}, "RELEASE_SEMAPHORE0_ADDR_UPPER"),
    ],
)
def test_bad_launches_are_refused(kw: dict[str, object], match: str) -> None:
    with pytest.raises(ArigValueError, match=match):
        _launch(KERNELS["axpy"], **kw)


def test_too_many_registers_for_the_block() -> None:
    fat = dataclasses.replace(KERNELS["axpy"], registers=128)
    assert _launch(fat, block=512)["REGISTER_COUNT"] == 128
    with pytest.raises(ArigValueError, match="registers"):
        _launch(fat, block=1024)
    with pytest.raises(ArigValueError, match="dependent QMDs 0 and 1"):
        q.chain(0x100, index=2)
    with pytest.raises(ArigValueError, match="256-byte"):
        q.chain(0x180)
    with pytest.raises(ArigValueError, match="below 2\\*\\*40"):
        q.chain(1 << 40)


def test_cbank0_layout() -> None:
    for k in KERNELS.values():
        params = bytes(range(1, k.param_size + 1))
        image = q.cbank0(k, (5, 6, 7), (32, 2), params, shared_window=0x7294_0000_0000, local_window=0x7293_0000_0000)
        assert len(image) % 16 == 0 and 0 <= len(image) - (k.param_base + k.param_size) < 16
        assert struct.unpack_from("<6I", image, 0x0) == (32, 2, 1, 5, 6, 7)  # blockDim then gridDim
        assert struct.unpack_from("<QQI", image, 0x18) == (0x7294_0000_0000, 0x7293_0000_0000, 0xFFFDC0)
        assert image[k.param_base : k.param_base + k.param_size] == params
        assert image[0x2C : k.param_base] == k.cbank0[0x2C : k.param_base]  # the rest is the cubin's
        size = q.kernel_qmd(k, grid=1, block=1, program_address=0, cbank0_address=0, cbank0_size=len(image))["CONSTANT_BUFFER_SIZE_SHIFTED4(0)"]
        assert size << 4 == len(image)
    empty = parse((DATA.parent.parent.parent / "arig" / "kernels" / "kernels.cubin").read_bytes()).kernels["empty"]
    assert (empty.param_base, empty.param_size) == (0, 0)
    image = q.cbank0(empty, 2, 3, b"")
    assert len(image) == q.CB0_PREFIX and struct.unpack_from("<6I", image) == (3, 1, 1, 2, 1, 1)
    with pytest.raises(ArigValueError, match="not in 528"):
        q.kernel_qmd(empty, grid=1, block=1, program_address=0, cbank0_address=0, cbank0_size=0x100)
    plain = q.cbank0(KERNELS["axpy"], 1, 1, bytes(28))
    assert plain[0x18:0x28] == bytes(16), "windows left as the cubin has them unless given"
    with pytest.raises(ArigValueError, match="takes 28 bytes of parameters, not 24"):
        q.cbank0(KERNELS["axpy"], 1, 1, bytes(24))


def test_local_memory_and_shared_helpers() -> None:
    assert q.local_bytes_per_thread(KERNELS["deep"]) == 256 + 0x240
    assert q.shared_bytes_total(KERNELS["axpy"]) == 0
    assert q.shared_bytes_total(KERNELS["tile"], 1) == 2048 + 256


# ---------------------------------------------------------------------------------------------
# (5) sizes


def test_sizes() -> None:
    assert q.QMD_BYTES == 384 == (max(hi for hi, _lo in V04.values()) + 1) // 8
    assert len(q.pack({})) == q.QMD_BYTES and q.pack({}) == bytes(384)
    assert len(q.FIELDS) == len(V04) + 9 * 3 + 3 * 2 + 6 * 8 + 18
    assert q.CB0_DIMS.size == 24 and q.CB0_DIMS_OFFSET + q.CB0_DIMS.size == q.CB0_WINDOWS_OFFSET
    assert q.CB0_WINDOWS.size == 16 and q.CB0_WINDOWS_OFFSET + q.CB0_WINDOWS.size == q.CB0_STACK_OFFSET
    assert q.CB0_STACK.size == 4 and q.CB0_STACK_OFFSET + q.CB0_STACK.size <= 0x208 < 0x210
    assert q.STACK_TOP == 0xFFFDC0
    # the limits kernel_qmd checks fit the fields that carry them
    assert _width("SHADER_LOCAL_MEMORY_HIGH_SIZE") == q.LOCAL_SPACE_BYTES.bit_length() - 1
    assert q.SHARED_MAX.bit_length() <= _width("SHARED_MEMORY_SIZE")
    assert (q.CBANK_MAX >> 4).bit_length() <= _width("CONSTANT_BUFFER_SIZE_SHIFTED4(0)")
    assert q.MAX_THREADS_PER_BLOCK.bit_length() <= _width("CTA_THREAD_DIMENSION0")
