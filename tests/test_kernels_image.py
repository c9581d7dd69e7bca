"""The kernels arig ships (``arig/kernels/kernels.fatbin``), checked without a GPU or nvcc
(one test, skipped without CUDA 13.0's nvcc, also checks the fatbin is built from this kernels.cu).

``scripts/build_kernels.sh`` builds one fatbin from ``arig/kernels/kernels.cu``: SASS for each
architecture in its ``SASS_ARCHS`` and PTX for its ``PTX_ARCH``. These tests parse the committed
fatbin in Python and check that it holds exactly those entries (so the script and the file cannot
drift), that every SASS entry is a CUDA ELF for its architecture whose symbol table has each kernel
of ``kernels.cu`` as an entry point, and that each kernel's parameters have the layout the tests
and benchmarks pack (``.nv.info.<kernel>``'s KPARAM_INFO records, in every architecture).

Layouts, as nvcc 13.0 writes them (checked against the built file):

* fatbin header, 16 bytes: u32 magic 0xBA55ED50, u16 version 1, u16 header size (16),
  u64 size of the entries that follow;
* each entry: a header (64 bytes, longer when it carries options) of u16 kind (1 PTX, 2 ELF),
  u16 0x0101, u32 header size, u64 payload size, u32 compressed size, u32 options offset,
  u16 minor, u16 major (1.8 for an ELF, the PTX ISA for PTX), u32 arch (75 for sm_75), u32 name offset,
  u32 name size, u64 flags (1: 64-bit, 0x10: Linux, 0x2000 / 0x8000: compressed),
  u64 zero, u64 uncompressed size; then the payload (PTX text padded with NULs, or an ELF).
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "arig" / "kernels"
FATBIN = KERNELS / "kernels.fatbin"
CUBIN = KERNELS / "kernels.cubin"
SOURCE = KERNELS / "kernels.cu"
SCRIPT = ROOT / "scripts" / "build_kernels.sh"

#: What the tests and benchmarks launch: each kernel's parameters as (offset, size) in bytes,
#: the layout ``pack`` must produce. kernels.cu must declare exactly these (checked below).
CONTRACT: dict[str, tuple[tuple[int, int], ...]] = {
    "saxpy": ((0, 4), (8, 8), (16, 8), (24, 4)),  # float a, const float *x, float *y, int32_t n
    "empty": (),
    "spin": ((0, 8),),  # uint64_t ns
    "spin_stamped": ((0, 8), (8, 8), (16, 4)),  # uint64_t ns, uint64_t *out, uint32_t index
    "store": ((0, 8), (8, 4), (16, 8)),  # uint64_t *out, uint32_t index, uint64_t value
    "step": ((0, 8), (8, 4), (16, 8)),  # uint64_t *out, uint32_t index, uint64_t value
    "trap": (),
    "illegal": ((0, 8),),  # uint64_t *p
}

#: GPUs arig must load on without a JIT: Turing, A100, A10/RTX 30xx, L4/RTX 4090, H100/H200,
#: B200, RTX 50xx. The script may list more (it lists all CUDA 13.0 builds), never fewer.
REQUIRED_SASS = {75, 80, 86, 89, 90, 100, 120}

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX, KIND_ELF = 1, 2
_HEADER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
_FLAG_64BIT = 0x1
_FLAGS_COMPRESSED = 0x2000 | 0x8000  # LZ4 (older nvcc), zstd (CUDA 13)

EM_CUDA = 190
SHT_SYMTAB = 2
STT_FUNC, STB_GLOBAL = 2, 1
STO_CUDA_ENTRY = 0x10  # st_other of a __global__ function
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
EIATTR_KPARAM_INFO = 0x17

_C_SIZES = {"float": 4, "double": 8, "int": 4, "int32_t": 4, "uint32_t": 4, "int64_t": 8, "uint64_t": 8}


# -- parsing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    kind: int
    arch: int
    flags: int
    payload: bytes


def parse_fatbin(data: bytes) -> list[Entry]:
    """The entries of one fatbin container (the whole of ``data``)."""
    assert len(data) >= _HEADER.size, "shorter than a fatbin header"
    magic, version, header_size, size = _HEADER.unpack_from(data, 0)
    assert magic == FATBIN_MAGIC, f"not a fatbin: magic {magic:#x}"
    assert version == 1, f"fatbin version {version}"
    assert header_size == _HEADER.size, f"fatbin header size {header_size}"
    assert header_size + size == len(data), "the fatbin's size is not the file's: truncated, or several containers"
    entries = []
    off = header_size
    while off < len(data):
        assert off + _ENTRY.size <= len(data), f"entry header at {off} runs past the end"
        kind, _, ehsize, psize, csize, _, _, _, arch, _, _, flags, _, usize = _ENTRY.unpack_from(data, off)
        assert ehsize >= _ENTRY.size, f"entry header at {off} is {ehsize} bytes"
        start = off + ehsize
        assert start + psize <= len(data), f"entry at {off} runs past the end"
        assert not (flags & _FLAGS_COMPRESSED or csize or usize), (
            f"entry sm_{arch} is compressed (flags {flags:#x}): build with --no-compress (scripts/build_kernels.sh)"
        )
        entries.append(Entry(kind, arch, flags, data[start : start + psize]))
        off = start + psize
    assert off == len(data)
    return entries


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    offset: int
    size: int
    link: int


class Elf:
    """Just enough of a little-endian ELF64 for a cubin: sections, symbols, ``.nv.info``."""

    def __init__(self, data: bytes) -> None:
        assert data[:4] == b"\x7fELF", "not an ELF"
        assert data[4] == 2 and data[5] == 1, "not a little-endian ELF64"
        self.data = data
        self.machine: int = struct.unpack_from("<H", data, 0x12)[0]
        self.flags: int = struct.unpack_from("<I", data, 0x30)[0]
        shoff = struct.unpack_from("<Q", data, 0x28)[0]
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        raw = [struct.unpack_from("<IIQQQQII", data, shoff + i * shentsize) for i in range(shnum)]
        names = raw[shstrndx][4]
        self.sections = [Section(self._str(names + r[0]), r[1], r[4], r[5], r[6]) for r in raw]

    def _str(self, at: int) -> str:
        return self.data[at : self.data.index(b"\0", at)].decode()

    @property
    def sm(self) -> int:
        """The SM the ELF is for, from e_flags: bits 8-15 from ELF ABI version 8 (CUDA 13), else bits 0-7."""
        return (self.flags >> 8) & 0xFF if self.data[8] >= 8 else self.flags & 0xFF

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def entry_points(self) -> dict[str, int]:
        """Global functions marked as kernels (STO_CUDA_ENTRY), each with its size in bytes, whose
        code is in their own ``.text.<name>``."""
        (symtab,) = [s for s in self.sections if s.type == SHT_SYMTAB]
        strtab = self.sections[symtab.link].offset
        found = {}
        for at in range(symtab.offset, symtab.offset + symtab.size, 24):
            name_at, info, other, shndx, _, size = struct.unpack_from("<IBBHQQ", self.data, at)
            if info >> 4 == STB_GLOBAL and info & 0xF == STT_FUNC and other & STO_CUDA_ENTRY:
                name = self._str(strtab + name_at)
                if 0 < shndx < len(self.sections) and self.sections[shndx].name == f".text.{name}":
                    found[name] = size
        return found

    def params(self, kernel: str) -> tuple[tuple[int, int], ...]:
        """A kernel's parameters as (offset, size), by ordinal, from its ``.nv.info.<kernel>``
        EIATTR_KPARAM_INFO records (u32 index, u16 ordinal, u16 offset, u32 with size << 18)."""
        s = self.section(f".nv.info.{kernel}")
        assert s is not None, f"no .nv.info.{kernel}"
        by_ordinal = {}
        at, end = s.offset, s.offset + s.size
        while at < end:
            fmt, attr = self.data[at], self.data[at + 1]
            if fmt == EIFMT_SVAL:
                (n,) = struct.unpack_from("<H", self.data, at + 2)
                if attr == EIATTR_KPARAM_INFO:
                    assert n == 12, f"{kernel}: KPARAM_INFO of {n} bytes"
                    _, ordinal, offset, word = struct.unpack_from("<IHHI", self.data, at + 4)
                    by_ordinal[ordinal] = (offset, (word >> 18) & 0x3FFF)
                at += 4 + n
            elif fmt in (EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL):
                at += 4  # u8 format, u8 attribute, u16 value (0 for NVAL)
            else:
                raise AssertionError(f"{kernel}: .nv.info record format {fmt} at {at - s.offset}")
        assert sorted(by_ordinal) == list(range(len(by_ordinal))), f"{kernel}: ordinals {sorted(by_ordinal)}"
        return tuple(by_ordinal[i] for i in range(len(by_ordinal)))


def script_settings(text: str) -> dict[str, str]:
    """The ``NAME="value"`` lines of build_kernels.sh the tests rely on."""
    settings = {}
    for name in ("CUDA_RELEASE", "SASS_ARCHS", "PTX_ARCH", "NVCC_FLAGS"):
        found = re.findall(rf'^{name}="([^"]*)"\s*$', text, re.M)
        assert len(found) == 1, f"build_kernels.sh must set {name}=\"...\" once, on one line"
        settings[name] = found[0]
    return settings


def script_archs(text: str) -> tuple[list[int], int]:
    """(SASS_ARCHS, PTX_ARCH) of build_kernels.sh."""
    s = script_settings(text)
    sass = [int(a) for a in s["SASS_ARCHS"].split()]
    assert len(set(sass)) == len(sass), f"SASS_ARCHS repeats an architecture: {sass}"
    return sass, int(s["PTX_ARCH"])


def source_kernels(text: str) -> dict[str, tuple[tuple[int, int], ...]]:
    """Each ``__global__`` function of kernels.cu with its parameters as (offset, size)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)
    kernels = {}
    for name, params in re.findall(r"__global__\s+void\s+(\w+)\s*\(([^)]*)\)", text):
        layout, offset = [], 0
        for p in filter(None, (p.strip() for p in params.split(","))):
            if p == "void":
                continue
            if "*" in p:
                size = 8
            else:
                words = [w for w in p.split() if w not in ("const", "volatile")]
                assert len(words) == 2 and words[0] in _C_SIZES, f"{name}: parameter {p!r} (teach the test its size)"
                size = _C_SIZES[words[0]]
            offset = (offset + size - 1) // size * size
            layout.append((offset, size))
            offset += size
        assert name not in kernels, f"kernels.cu defines {name} twice"
        kernels[name] = tuple(layout)
    return kernels


def ptx_entries(text: str) -> set[str]:
    return set(re.findall(r"^\s*\.visible\s+\.entry\s+(\w+)\s*\(", text, re.M))


def normalized_ptx(text: str) -> list[str]:
    """PTX without comments, blank lines or spacing (fatbinary strips them from what it stores)."""
    lines = (" ".join(line.split("//")[0].split()) for line in text.splitlines())
    return [line for line in lines if line]


# -- the checks (functions of the bytes, so a test can feed them a broken fatbin) -----------


def check_fatbin(data: bytes, script: str, source: str) -> None:
    """Everything the tests below assert about one fatbin, its build script and its source."""
    sass_archs, ptx_arch = script_archs(script)
    kernels = source_kernels(source)
    entries = parse_fatbin(data)

    elf_archs = sorted(e.arch for e in entries if e.kind == KIND_ELF)
    ptx_archs = sorted(e.arch for e in entries if e.kind == KIND_PTX)
    assert {e.kind for e in entries} <= {KIND_PTX, KIND_ELF}, f"entry kinds {sorted({e.kind for e in entries})}"
    assert elf_archs == sorted(sass_archs), f"SASS in the fatbin: {elf_archs}, build_kernels.sh: {sorted(sass_archs)}"
    assert ptx_archs == [ptx_arch], f"PTX in the fatbin for {ptx_archs}, build_kernels.sh asks for [{ptx_arch}]"
    assert all(e.flags & _FLAG_64BIT for e in entries), "an entry is not 64-bit"

    for e in entries:
        if e.kind == KIND_ELF:
            elf = Elf(e.payload)
            assert elf.machine == EM_CUDA, f"sm_{e.arch}: e_machine {elf.machine}"
            assert elf.sm == e.arch, f"the sm_{e.arch} entry's ELF is for sm_{elf.sm}"
            found = elf.entry_points()
            assert set(found) == set(kernels), f"sm_{e.arch} has kernels {sorted(found)}, kernels.cu {sorted(kernels)}"
            for name, size in found.items():
                assert size > 0, f"sm_{e.arch}: {name} has no code"
                assert elf.params(name) == kernels[name], f"sm_{e.arch}: {name} takes {elf.params(name)}"
        else:
            text = e.payload.rstrip(b"\0").decode()
            assert re.search(rf"^\s*\.target\s+sm_{ptx_arch}\b", text, re.M), f"the PTX lacks .target sm_{ptx_arch}"
            found_ptx = ptx_entries(text)
            assert found_ptx == set(kernels), f"PTX has kernels {sorted(found_ptx)}, kernels.cu {sorted(kernels)}"


# -- tests -----------------------------------------------------------------------------------


def test_fatbin_matches_script_and_source() -> None:
    check_fatbin(FATBIN.read_bytes(), SCRIPT.read_text(), SOURCE.read_text())


def test_script_covers_the_gpus_and_ships_ptx_of_the_newest() -> None:
    sass, ptx = script_archs(SCRIPT.read_text())
    assert set(sass) >= REQUIRED_SASS, f"build_kernels.sh lacks {sorted(REQUIRED_SASS - set(sass))}"
    assert ptx == max(sass), f"PTX for compute_{ptx}, but the newest SASS is sm_{max(sass)}"
    flags = script_settings(SCRIPT.read_text())["NVCC_FLAGS"].split()
    assert "--no-compress" in flags, f"NVCC_FLAGS {flags}: without --no-compress nvcc zstd-compresses the PTX"


def test_source_declares_the_contract() -> None:
    declared = source_kernels(SOURCE.read_text())
    assert declared == CONTRACT, f"kernels.cu declares {declared}, the tests and benchmarks pack {CONTRACT}"


def test_shipped_image_is_the_fatbin() -> None:
    from arig.cuda._demo import shipped_image

    data = shipped_image()
    assert data == FATBIN.read_bytes()
    assert data[:4] == b"\x50\xed\x55\xba"  # what the load path passes on untouched (no NUL added)
    assert len(data) < 1 << 20, f"{len(data)} bytes: the fatbin is committed to git, keep it small"


def test_cubin_while_kept_is_the_fatbins_sm_90() -> None:
    if not CUBIN.exists():
        pytest.skip("no kernels.cubin")
    (sm90,) = [e.payload for e in parse_fatbin(FATBIN.read_bytes()) if e.kind == KIND_ELF and e.arch == 90]
    assert CUBIN.read_bytes() == sm90, "kernels.cubin is stale: run scripts/build_kernels.sh"


def test_the_nv_loader_reads_the_contract_and_pack_fills_it() -> None:
    """The NV device's loader reads each kernel's layout from the sm_90 cubin (a CUDA device asks
    the driver for the same): both must find the contract, and ``pack`` of the values the tests
    pass must fill it exactly, or a launch of the shipped kernels would be refused."""
    if not CUBIN.exists():
        pytest.skip("no kernels.cubin")
    from arig._launchspec import args_size
    from arig.cuda import pack
    from arig.nvrm import _cubin

    kernels = _cubin.parse(CUBIN.read_bytes()).kernels
    assert {name: k.params for name, k in kernels.items()} == CONTRACT
    assert all(k.param_size == args_size(k.params) for k in kernels.values())
    u32, u64 = np.uint32(1), np.uint64(1)
    packed = {"saxpy": pack(np.float32(1), u64, u64, np.int32(1)), "store": pack(u64, u32, u64), "spin": pack(u64), "empty": pack()}
    assert {name: len(b) for name, b in packed.items()} == {name: args_size(CONTRACT[name]) for name in packed}


def test_fatbin_is_built_from_this_source(tmp_path: Path) -> None:
    """With the script's nvcc on PATH, the PTX it makes from kernels.cu now is the PTX in the
    fatbin: kernels.cu was not changed without a rebuild (about a second)."""
    s = script_settings(SCRIPT.read_text())
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc")
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    if f"release {s['CUDA_RELEASE']}," not in version:
        pytest.skip(f"nvcc is not CUDA {s['CUDA_RELEASE']}")
    arch = s["PTX_ARCH"]
    out = tmp_path / "kernels.ptx"
    gencode = f"arch=compute_{arch},code=compute_{arch}"
    cmd = [nvcc, "-ptx", *s["NVCC_FLAGS"].split(), "-gencode", gencode, "-o", str(out), str(SOURCE)]
    subprocess.run(cmd, check=True)
    (stored,) = [e.payload for e in parse_fatbin(FATBIN.read_bytes()) if e.kind == KIND_PTX]
    assert normalized_ptx(stored.rstrip(b"\0").decode()) == normalized_ptx(out.read_text()), (
        "kernels.fatbin is not built from this kernels.cu: run scripts/build_kernels.sh"
    )
