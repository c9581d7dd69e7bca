"""What the NV path makes, recorded: undo lists, the CPU=GPU address allocator, memory objects.

Pure Python on memory the caller owns; :class:`VaAllocator` is thread-safe,
an :class:`Undo` belongs to one thread at a time (its maker's, then its freer's).
"""

from __future__ import annotations

import bisect
import ctypes
import threading
from collections.abc import Callable
from dataclasses import dataclass

from .._errors import ArigValueError, describe
from . import _fd
from . import _params
from ._fd import MAP_ANONYMOUS, MAP_FIXED, MAP_NORESERVE, MAP_PRIVATE, PROT_NONE

__all__ = ["Undo", "VaAllocator", "Mem", "round_up", "PAGE_2M", "PAGE_4K", "MIB"]

MIB = 1 << 20
PAGE_2M = 2 * MIB
PAGE_4K = 4096


def round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def _rereserve(d: _fd.Driver, va: int, size: int) -> None:
    """Back to a PROT_NONE reservation: the region stays the process's until the reservation ends."""
    d.mmap(va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED)


class Undo:
    """What was made, as ``(what, free)`` steps, freed in reverse order."""

    __slots__ = ("steps",)

    def __init__(self) -> None:
        self.steps: list[tuple[str, Callable[[], None]]] = []

    def push(self, what: str, fn: Callable[[], None]) -> None:
        self.steps.append((what, fn))

    def unwind(self) -> list[str]:
        """Run every step, last first; every step runs even after a failure.  The failures, as text."""
        return self.unwind_to(0)

    def unwind_to(self, mark: int) -> list[str]:
        """``unwind`` of the steps pushed since ``len(undo)`` was ``mark``."""
        failures: list[str] = []
        while len(self.steps) > mark:
            what, fn = self.steps.pop()
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - keep freeing the rest
                failures.append(f"{what}: {describe(e)}")
        return failures

    def __len__(self) -> int:
        return len(self.steps)


class VaAllocator:
    """First-fit ranges of ``[base, base + size)``, aligned; freed ranges merge with their neighbours.  Thread-safe."""

    def __init__(self, base: int, size: int) -> None:
        self.base, self.size = base, size
        self._free: list[tuple[int, int]] = [(base, size)]  # (start, length), sorted by start
        self._used: dict[int, int] = {}
        self._lock = threading.Lock()

    def alloc(self, size: int, align: int = PAGE_2M) -> int:
        if size <= 0 or align <= 0 or align & (align - 1):
            raise ArigValueError(f"bad allocation of {size} bytes aligned {align}")
        with self._lock:
            for i, (start, length) in enumerate(self._free):
                at = round_up(start, align)
                if at + size <= start + length:
                    pieces = [(s, n) for s, n in ((start, at - start), (at + size, start + length - at - size)) if n > 0]
                    self._free[i : i + 1] = pieces
                    self._used[at] = size
                    return at
        raise _params.DriverError(f"the process's CPU=GPU address reservation ({self.size >> 20} MiB at {self.base:#x}) has no room for {size} bytes")

    def free(self, at: int) -> None:
        with self._lock:
            size = self._used.pop(at)
            i = bisect.bisect_left(self._free, (at, 0))
            self._free.insert(i, (at, size))
            # merge with the next, then the previous
            if i + 1 < len(self._free) and at + size == self._free[i + 1][0]:
                self._free[i] = (at, size + self._free[i + 1][1])
                del self._free[i + 1]
            if i > 0 and self._free[i - 1][0] + self._free[i - 1][1] == at:
                self._free[i - 1] = (self._free[i - 1][0], self._free[i - 1][1] + self._free[i][1])
                del self._free[i]

    @property
    def used(self) -> int:
        return sum(self._used.values())


def _unmapper(d: _fd.Driver, addr: int, size: int) -> Callable[[], None]:
    return lambda: d.munmap(addr, size)


def _made_or_undone(undo: Undo, make: Callable[[], None]) -> None:
    """Run ``make``, which pushes onto ``undo``; if it fails, what it pushed is undone (what was there stays)."""
    mark = len(undo)
    try:
        make()
    except BaseException:
        undo.unwind_to(mark)
        raise


@dataclass
class Mem:
    """An RM memory object where it lies: the GPU (= CPU, where mapped) address, size, handle, and its undo list."""

    what: str
    handle: int
    va: int
    size: int
    cpu: bool
    undo: Undo

    def free(self) -> list[str]:
        return self.undo.unwind()

    def u32(self, offset: int) -> ctypes.c_uint32:
        return ctypes.c_uint32.from_address(self.va + offset)

    def u64(self, offset: int) -> ctypes.c_uint64:
        return ctypes.c_uint64.from_address(self.va + offset)

    def write(self, offset: int, data: bytes | bytearray) -> None:
        ctypes.memmove(self.va + offset, bytes(data), len(data))
