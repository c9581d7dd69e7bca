"""What the NV queue tests share: queues of the native core over CPU memory at low addresses, a stand-in
for a GPFIFO channel's parts, and the probe cubin's axpy kernel registered as if an image were loaded."""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import arig._native
from arig.nvrm import _cubin, _queue, _rm
from arig.nvrm import _exec_params as E
from arig.nvrm import _push as pb
from arig.nvrm._images import LoadedKernel, register, unregister

__all__ = ["CUBIN", "LOW", "OWNER", "FakeChannel", "args_of", "registered_axpy", "gp_put", "needs_native", "progress", "queue_of", "segment"]

DATA = Path(__file__).resolve().parent / "data" / "nv"
CUBIN = _cubin.parse((DATA / "probe.sm_90.cubin").read_bytes())
LOW = 0x20_0000_0000  # below 2**40, where GPFIFO segments and QMDs must lie
OWNER = 12345


@contextmanager
def registered_axpy() -> Iterator[int]:
    """The probe cubin's axpy as a kernel of an image loaded on device ``OWNER``: its function id."""
    fid = register(LoadedKernel(CUBIN.kernels["axpy"], 0x10_0020_0000, OWNER))
    try:
        yield fid
    finally:
        unregister(fid)


def args_of(a: float, x: int, y: int, n: int) -> bytes:
    return struct.pack("<f4xQQi", a, x, y, n)


needs_native = pytest.mark.skipif(arig._native.library() is None, reason=f"the NV queue is the native core's: {arig._native.status()}")


class FakeChannel:
    """A GPFIFO channel's parts the queue uses: the ring (with USERD after its entries) and the error notifier."""

    entries = 16
    userd_offset = 16 * 8
    token = 0x2A
    notifier_base = bytes(16)

    def __init__(self, ring: _rm.Mem, notifier: _rm.Mem) -> None:
        self.ring, self.notifier = ring, notifier

    def error(self) -> str | None:
        now = ctypes.string_at(self.notifier.va, 16)
        return None if now == self.notifier_base else f"Xid {int.from_bytes(now[8:12], 'little')}"

    def fail(self, xid: int) -> None:
        """What the RM does when it ends the channel: a new notifier."""
        ctypes.memmove(self.notifier.va + 8, xid.to_bytes(4, "little"), 4)


def queue_of(ch: FakeChannel, doorbell: int, pushbuf: _rm.Mem, args: _rm.Mem | None, words: _rm.Mem, index: int) -> _queue.NvQueue:
    s = _queue.spec(pushbuf=pushbuf, args=args, fifo=ch, doorbell=doorbell, words=words, base=index * _queue.WORDS_STRIDE, copy=args is None)
    return _queue.NvQueue(OWNER, s, index=index, copy=args is None, error=ch.error)


def gp_put(ch: FakeChannel) -> int:
    return ch.ring.u32(ch.userd_offset + E.USERD_GP_PUT).value


def segment(ch: FakeChannel, i: int) -> list[int]:
    entry = ch.ring.u64(i * 8).value
    lo, hi = entry & 0xFFFFFFFF, entry >> 32
    address = (lo & ~3) | (hi & 0xFF) << 32
    n = (hi >> 10) & 0x1FFFFF
    return list(pb.words_of(ctypes.string_at(address, 4 * n)))


def progress(nq: _queue.NvQueue, seq: int) -> None:
    """What the GPU does at the end of a queue's submission ``seq``."""
    ctypes.c_uint64.from_address(nq.progress_address).value = seq
