"""CUDA cubins (sm_90 ELF), parsed for a device that launches without libcuda.

Pure: bytes in, facts out; no file descriptor, no driver, any thread.  What
a launch through the kernel driver needs of each kernel: its code
(``.text.<k>``), its resources (registers, stack, static shared memory,
barriers), its constant bank 0 and where the parameters sit in it
(``.nv.info.<k>``'s PARAM_CBANK, 0x210 on sm_90), each parameter's offset
and size (KPARAM_INFO), and the relocations its code needs.

``.nv.info`` records are ``(u8 format, u8 attribute, u16 value-or-size)``;
format 4 carries a payload of that size.  Global ``.nv.info`` records name
their kernel by symbol index, which is mapped through ``.symtab`` (never
assumed to be the only kernel).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from types import MappingProxyType
from collections.abc import Mapping

from .._errors import ArigValueError

__all__ = ["CubinError", "Cubin", "Kernel", "Relocation", "parse"]

SHT_SYMTAB, SHT_RELA, SHT_NOBITS = 2, 4, 8
STT_FUNC, STB_GLOBAL, STO_CUDA_ENTRY = 2, 1, 0x10
EM_CUDA = 190
# .nv.info attributes
EIATTR_PARAM_CBANK = 0x0A
EIATTR_FRAME_SIZE = 0x11
EIATTR_MIN_STACK_SIZE = 0x12
EIATTR_KPARAM_INFO = 0x17
EIATTR_CBANK_PARAM_SIZE = 0x19
EIATTR_EXIT_INSTR_OFFSETS = 0x1C
EIATTR_REGCOUNT = 0x2F
EIATTR_NUM_BARRIERS = 0x4C
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4


class CubinError(ArigValueError):
    """The bytes are not a cubin this parser understands; the message says where."""


@dataclass(frozen=True)
class Relocation:
    """One relocation of a kernel's code: patch ``offset`` with ``symbol``'s address (+ ``addend``)."""

    offset: int
    type: int
    symbol: str
    addend: int


@dataclass(frozen=True)
class Kernel:
    name: str
    text: bytes
    registers: int
    frame: int  # bytes of stack frame (local memory the kernel itself uses)
    stack: int  # bytes of stack including callees (what a launch must provide)
    shared: int  # bytes of static shared memory, the system-reserved part included
    barriers: int
    param_base: int  # where the parameters start in constant bank 0
    param_size: int
    params: tuple[tuple[int, int], ...]  # (offset, size) of each parameter, in order
    cbank0: bytes  # the kernel's constant bank 0 image (parameters go at param_base)
    exits: tuple[int, ...]  # offsets of the EXIT instructions in text
    relocations: tuple[Relocation, ...]


@dataclass(frozen=True)
class Cubin:
    sm: int  # e.g. 90
    kernels: Mapping[str, Kernel] = field(default_factory=dict)


@dataclass(frozen=True)
class _Section:
    name: str
    type: int
    offset: int
    size: int
    link: int
    info: int


class _Elf:
    def __init__(self, data: bytes) -> None:
        if len(data) < 64 or data[:4] != b"\x7fELF":
            raise CubinError("not an ELF file (a cubin starts with \\x7fELF)")
        if data[4] != 2 or data[5] != 1:
            raise CubinError("not a little-endian 64-bit ELF")
        self.data = data
        machine = self._u("<H", 0x12)
        if machine != EM_CUDA:
            raise CubinError(f"ELF machine {machine}, not CUDA ({EM_CUDA})")
        flags = self._u("<I", 0x30)
        self.sm = (flags >> 8) & 0xFF if data[8] >= 8 else flags & 0xFF  # CUDA 13 moved the SM to bits 8..15
        shoff = self._u("<Q", 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        if shentsize != 64 or shoff + shnum * 64 > len(data) or shstrndx >= shnum:
            raise CubinError("the section header table is cut short or malformed")
        raw = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * 64) for i in range(shnum)]
        names = raw[shstrndx][4]
        self.sections = []
        for r in raw:
            if r[1] != SHT_NOBITS and r[4] + r[5] > len(data):
                raise CubinError(f"section {self.str(names + r[0])!r} runs past the end of the file")
            self.sections.append(_Section(self.str(names + r[0]), r[1], r[4], r[5], r[6], r[7]))
        self.by_name = {s.name: s for s in self.sections}
        symtabs = [s for s in self.sections if s.type == SHT_SYMTAB]
        if len(symtabs) != 1:
            raise CubinError(f"{len(symtabs)} symbol tables, expected 1")
        st = symtabs[0]
        strtab = self.sections[st.link].offset
        self.symbols: list[tuple[str, int, int, int, int]] = []  # (name, info, other, shndx, size)
        for at in range(st.offset, st.offset + st.size, 24):
            n, info, other, shndx, _value, size = struct.unpack_from("<IBBHQQ", data, at)
            self.symbols.append((self.str(strtab + n), info, other, shndx, size))

    def _u(self, fmt: str, at: int) -> int:
        value: int = struct.unpack_from(fmt, self.data, at)[0]
        return value

    def str(self, at: int) -> str:
        end = self.data.find(b"\0", at)
        if end < 0:
            raise CubinError("a name runs past the end of the file")
        return self.data[at:end].decode("utf-8", "replace")

    def body(self, s: _Section) -> bytes:
        return b"" if s.type == SHT_NOBITS else self.data[s.offset : s.offset + s.size]

    def records(self, s: _Section) -> list[tuple[int, bytes]]:
        """``(attribute, payload)`` of a ``.nv.info`` section (a 2-byte value for formats 1-3)."""
        out, data, at, end = [], self.data, s.offset, s.offset + s.size
        while at < end:
            if at + 4 > end:
                raise CubinError(f"{s.name}: a record is cut short")
            fmt, attr = data[at], data[at + 1]
            if fmt == EIFMT_SVAL:
                (n,) = struct.unpack_from("<H", data, at + 2)
                if at + 4 + n > end:
                    raise CubinError(f"{s.name}: attribute {attr:#x} runs past its section")
                out.append((attr, data[at + 4 : at + 4 + n]))
                at += 4 + n
            elif fmt in (EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL):
                out.append((attr, data[at + 2 : at + 4]))
                at += 4
            else:
                raise CubinError(f"{s.name}: unknown record format {fmt} at {at - s.offset}")
        return out


def parse(data: bytes) -> Cubin:
    """The kernels of a cubin (``bytes`` of an sm_XX ELF as nvcc ``-cubin`` writes it)."""
    elf = _Elf(bytes(data))
    per_symbol: dict[int, dict[int, int]] = {}  # symbol index -> {attribute: value} from the global .nv.info
    info = elf.by_name.get(".nv.info")
    for attr, payload in elf.records(info) if info is not None else []:
        if attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE, EIATTR_MIN_STACK_SIZE) and len(payload) == 8:
            sym, value = struct.unpack("<II", payload)
            per_symbol.setdefault(sym, {})[attr] = value
    kernels = {}
    for index, (name, sinfo, other, shndx, _size) in enumerate(elf.symbols):
        if sinfo >> 4 != STB_GLOBAL or sinfo & 0xF != STT_FUNC or not other & STO_CUDA_ENTRY:
            continue
        if not 0 < shndx < len(elf.sections) or elf.sections[shndx].name != f".text.{name}":
            raise CubinError(f"kernel {name!r}: its code is not in .text.{name}")
        kernels[name] = _kernel(elf, name, elf.sections[shndx], per_symbol.get(index, {}))
    return Cubin(elf.sm, MappingProxyType(kernels))


def _kernel(elf: _Elf, name: str, text: _Section, glob: dict[int, int]) -> Kernel:
    s = elf.by_name.get(f".nv.info.{name}")
    if s is None:
        raise CubinError(f"kernel {name!r} has no .nv.info.{name}")
    params: dict[int, tuple[int, int]] = {}
    base = size = barriers = 0
    exits: tuple[int, ...] = ()
    for attr, payload in elf.records(s):
        if attr == EIATTR_KPARAM_INFO and len(payload) == 12:
            _index, ordinal, offset, word = struct.unpack("<IHHI", payload)
            params[ordinal] = (offset, (word >> 18) & 0x3FFF)
        elif attr == EIATTR_PARAM_CBANK and len(payload) == 8:
            _sym, base, size = struct.unpack("<IHH", payload)
        elif attr == EIATTR_NUM_BARRIERS:
            barriers = payload[0]
        elif attr == EIATTR_EXIT_INSTR_OFFSETS:
            exits = struct.unpack(f"<{len(payload) // 4}I", payload)
    if sorted(params) != list(range(len(params))):
        raise CubinError(f"kernel {name!r}: parameter ordinals {sorted(params)} are not 0..n-1")
    layout = tuple(params[i] for i in range(len(params)))
    if layout and max(o + n for o, n in layout) > size:
        raise CubinError(f"kernel {name!r}: parameters {layout} overrun their {size}-byte area")
    shared = elf.by_name.get(f".nv.shared.{name}")
    cbank0 = elf.by_name.get(f".nv.constant0.{name}")
    return Kernel(
        name=name,
        text=elf.body(text),
        registers=glob.get(EIATTR_REGCOUNT, 0),
        frame=glob.get(EIATTR_FRAME_SIZE, 0),
        stack=glob.get(EIATTR_MIN_STACK_SIZE, 0),
        shared=shared.size if shared is not None else 0,
        barriers=barriers,
        param_base=base,
        param_size=size,
        params=layout,
        cbank0=elf.body(cbank0) if cbank0 is not None else b"",
        exits=exits,
        relocations=_relocations(elf, f".rela.text.{name}"),
    )


def _relocations(elf: _Elf, section: str) -> tuple[Relocation, ...]:
    s = elf.by_name.get(section)
    if s is None or s.type != SHT_RELA:
        return ()
    out = []
    for at in range(s.offset, s.offset + s.size, 24):
        offset, info, addend = struct.unpack_from("<QQq", elf.data, at)
        sym = info >> 32
        if sym >= len(elf.symbols):
            raise CubinError(f"{section}: relocation of symbol {sym}, which does not exist")
        out.append(Relocation(offset, info & 0xFFFFFFFF, elf.symbols[sym][0], addend))
    return tuple(out)
