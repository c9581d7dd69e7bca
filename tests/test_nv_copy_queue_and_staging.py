"""The NV copy queue and the staging area without a GPU: copy chunks and words, the ordering rule between the
two queues, staged uploads and downloads through a copy engine on the CPU (the native core's queues over CPU
memory at low addresses)."""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from arig._errors import ArigValueError
from arig.nvrm import _queue, _rm, _staging
from arig.nvrm import _push as pb
from arig.nvrm._faults import NvChannelError
from arig.nvrm._launch import Launch, launch_words
from arig.nvrm._staging import copy_chunks

from _nv_queues import LOW, OWNER, FakeChannel, args_of, needs_native, segment
from _nv_queues import gp_put as _gp_put
from _nv_queues import progress as _progress
from _nv_queues import queue_of as _queue_of
from _nv_queues import registered_axpy


@pytest.fixture
def axpy() -> Iterator[int]:
    with registered_axpy() as fid:
        yield fid


def test_copy_chunks_cover_the_copy_in_order() -> None:
    assert copy_chunks(0, 16) == []
    assert copy_chunks(1, 16) == [(0, 1)]
    assert copy_chunks(16, 16) == [(0, 16)]
    assert copy_chunks(17, 16) == [(0, 16), (16, 1)]
    assert copy_chunks(48, 16) == [(0, 16), (16, 16), (32, 16)]
    gib, chunk = 1 << 30, _staging.STAGING_BYTES // _staging.STAGING_SLOTS
    pieces = copy_chunks(gib + 5, chunk)
    assert len(pieces) == gib // chunk + 1 and pieces[-1] == (gib, 5)
    assert all(n == chunk for _, n in pieces[:-1]) and all(o == i * chunk for i, (o, _) in enumerate(pieces))
    for bad in ((-1, 16), (16, 0)):
        with pytest.raises(ArigValueError):
            copy_chunks(*bad)


def test_wait_words_are_an_acquire_without_the_tsg_switch() -> None:
    at, v = 0x60_0000_0030, 0x1_0000_0002
    switching = pb.Push().acquire(at, v).words
    w = pb.wait_words(at, v)
    # SEM_ADDR_LO (0x5c) + 4 incrementing on subchannel 0, then SEM_EXECUTE = ACQ_CIRC_GEQ (3) | PAYLOAD_SIZE 64BIT (1<<24)
    assert w == [0x2005_0017, 0x30, 0x60, 2, 1, 0x0100_0003]
    assert w[:-1] == switching[:-1] and switching[-1] == w[-1] | 1 << 12  # ACQUIRE_SWITCH_TSG is bit 12
    with pytest.raises(ArigValueError):
        pb.wait_words(at + 4, v)


def test_copy_words_are_the_headers_bits() -> None:
    dst, src, n = 0x12_3456_7800, 0x60_0000_1000, 0x1234
    w = pb.Push().copy(dst, src, n).words
    # OFFSET_IN_UPPER (0x400) + 3 incrementing, subchannel 4: SEC_OP 1, COUNT 4, SUBCH 4, ADDRESS 0x100
    assert w == [0x2004_8100, 0x60, 0x1000, 0x12, 0x3456_7800,
                 0x2001_8106, n,  # LINE_LENGTH_IN (0x418)
                 0x2001_80C0, 0x186]  # LAUNCH_DMA (0x300): NON_PIPELINED 2 | FLUSH 1<<2 | SRC PITCH 1<<7 | DST PITCH 1<<8  # fmt: skip
    r = pb.Push().copy_release(0x60_0000_0020, 0x1_0000_0005).words
    # SET_SEMAPHORE_A (0x240) .. PAYLOAD_UPPER, then LAUNCH_DMA: FLUSH | FOUR_WORD (2<<3) | PAYLOAD TWO_WORD (1<<27)
    assert r == [0x2004_8090, 0x60, 0x20, 5, 1, 0x2001_80C0, 0x0800_0014]


@pytest.fixture
def pair() -> Any:
    """A compute and a copy queue over CPU memory at low addresses, paired (the ordering rule)."""
    size = 16 << 20
    base = _rm._mmap(LOW, size, _rm.PROT_RW, _rm.MAP_PRIVATE | _rm.MAP_ANONYMOUS | _rm.MAP_FIXED_NOREPLACE)
    queues: list[_queue.NvQueue] = []
    try:
        def mem(what: str, off: int, n: int) -> _rm.Mem:
            return _rm.Mem(what, 0, base + off, n, True, _rm.Undo())

        cch = FakeChannel(mem("gpfifo", 0, 4096), mem("notifier", 0x4000, 4096))
        kch = FakeChannel(mem("copy gpfifo", 0x1000, 4096), mem("copy notifier", 0x5000, 4096))
        doorbell, words, args = base + 0x2000, mem("words", 0x3000, 4096), mem("args", 2 << 20, 64 << 10)
        cq = _queue_of(cch, doorbell, mem("pushbuffer", 1 << 20, 64 << 10), args, words, 0)
        queues.append(cq)
        kq = _queue_of(kch, doorbell, mem("copy pushbuffer", 3 << 20, 256 << 10), None, words, 1)
        queues.append(kq)
        cq.pair(kq)
        yield cq, kq, cch, kch, base, args
    finally:
        for nq in queues:
            nq.destroy()
        _rm._munmap(base, size)


@needs_native
def test_copy_queue_words_and_completion(pair: Any) -> None:
    cq, kq, _, kch, base, _ = pair
    assert kq.timeline_address == cq.timeline_address + 32 and kq.progress_address == cq.progress_address + 32
    kq.copy(base + (5 << 20), base + (4 << 20), 100)
    kq.copy(base, base, 0)  # nothing
    kq.release(base + (6 << 20), 3)
    kq.submit(9, interrupt=True)
    want = (pb.Push().copy(base + (5 << 20), base + (4 << 20), 100).copy_release(base + (6 << 20), 3)
            .copy_release(kq.timeline_address, 9).extend(pb.wait_words(kq.timeline_address, 9)).non_stall_interrupt()
            .copy_release(kq.progress_address, 1).words)  # fmt: skip
    assert segment(kch, 0) == want
    assert cq.seq == 0  # the compute queue had nothing: no submission, no acquire
    with pytest.raises(ArigValueError):
        kq.copy(-1, 0, 4)
    with pytest.raises(ArigValueError):
        kq.copy(1 << 60, 0, 4)  # beyond the copy engine's 57 bits
    with pytest.raises(ArigValueError, match="aligned"):
        kq.release(base + 8, 1)


@needs_native
def test_the_queues_wait_for_each_other(pair: Any, axpy: int) -> None:
    cq, kq, cch, kch, base, args = pair
    launch = Launch(axpy, 1, 32, args_of(1.0, 0, 0, 0))
    launch.owner = OWNER
    cq.launch(launch)  # pending on the compute queue
    kq.copy(base + (5 << 20), base + (4 << 20), 64)
    # the copy queue submitted the compute queue's pending launch, and waits for it on the GPU
    assert cq.seq == 1 and segment(cch, 0)[: len(launch_words(0))] == launch_words(args.va + launch.qmd_offset)
    kq.submit()
    acq = pb.wait_words(cq.progress_address, 1)
    assert segment(kch, 0)[: len(acq)] == acq
    # the compute queue's next work waits for the copy
    cq.release(base + (6 << 20), 4)
    cq.submit()
    acq = pb.wait_words(kq.progress_address, 1)
    assert segment(cch, 1)[: len(acq)] == acq
    # once the GPU is past the other queue's work, no acquire is needed
    _progress(kq, 1)
    _progress(cq, 2)
    kq.copy(base + (5 << 20), base + (4 << 20), 64)
    kq.submit()
    assert segment(kch, 1) == pb.Push().copy(base + (5 << 20), base + (4 << 20), 64).copy_release(kq.progress_address, 2).words
    # launch on the copy queue goes to the compute queue; copy on the compute queue to the copy queue
    _progress(kq, 2)
    kq.launch(launch)
    cq.submit()
    lw = launch_words(args.va + launch.slot_bytes + launch.qmd_offset)  # the argument ring's second slot
    assert segment(cch, 2)[: len(lw)] == lw
    _progress(cq, 3)
    cq.copy(base + 64, base, 8)
    kq.submit()
    assert segment(kch, 2)[: 9] == pb.Push().copy(base + 64, base, 8).words


class CpuCopyEngine(threading.Thread):
    """Runs a copy queue's segments on the CPU: the copy engine's copies and releases, the host's semaphores."""

    def __init__(self, nq: Any, ch: FakeChannel) -> None:
        super().__init__(daemon=True)
        self.nq, self.ch = nq, ch
        self.halt = threading.Event()
        self.copied = 0

    def run(self) -> None:
        done = 0  # entries run, modulo the ring's: GP_PUT is where the queue put its next one
        while not self.halt.is_set():
            if done == _gp_put(self.ch):
                time.sleep(1e-4)
                continue
            self.execute(segment(self.ch, done))
            done = (done + 1) % self.ch.entries

    def execute(self, words: list[int]) -> None:
        state: dict[tuple[int, int], int] = {}
        i = 0
        while i < len(words):
            h = words[i]
            count, subch, mthd = (h >> 16) & 0x1FFF, (h >> 13) & 7, (h & 0xFFF) << 2
            assert h >> 29 == 1, f"{h:#x} is not an incrementing method"
            vals = words[i + 1 : i + 1 + count]
            i += 1 + count
            for k, v in enumerate(vals):
                state[(subch, mthd + 4 * k)] = v
            last, v = mthd + 4 * (count - 1), vals[-1]
            if subch == pb.SUBCH_COPY and last == pb.C8B5.LAUNCH_DMA:
                if v & 3:
                    src = state[(4, pb.C8B5.OFFSET_IN_UPPER)] << 32 | state[(4, pb.C8B5.OFFSET_IN_LOWER)]
                    dst = state[(4, pb.C8B5.OFFSET_OUT_UPPER)] << 32 | state[(4, pb.C8B5.OFFSET_OUT_LOWER)]
                    n = state[(4, pb.C8B5.LINE_LENGTH_IN)]
                    ctypes.memmove(dst, src, n)
                    self.copied += n
                if (v >> 3) & 3 == 2:
                    at = state[(4, pb.C8B5.SET_SEMAPHORE_A)] << 32 | state[(4, pb.C8B5.SET_SEMAPHORE_B)]
                    ctypes.c_uint64.from_address(at).value = state[(4, pb.C8B5.SET_SEMAPHORE_PAYLOAD)] | state[(4, pb.C8B5.SET_SEMAPHORE_PAYLOAD_UPPER)] << 32
            elif subch == pb.SUBCH_HOST and last == pb.C86F.SEM_EXECUTE:
                at = state[(0, pb.C86F.SEM_ADDR_HI)] << 32 | state[(0, pb.C86F.SEM_ADDR_LO)]
                payload = state[(0, pb.C86F.SEM_PAYLOAD_LO)] | state[(0, pb.C86F.SEM_PAYLOAD_HI)] << 32
                if v & 7 == pb.C86F.SEM_EXECUTE_OPERATION_RELEASE:
                    ctypes.c_uint64.from_address(at).value = payload
                else:
                    assert ctypes.c_uint64.from_address(at).value >= payload, "an acquire that would block"


@needs_native
@pytest.mark.parametrize("nbytes", [1, 4096 * 3 + 5, 4 * 4096, 19 * 4096 + 7])
def test_staging_round_trip_through_a_cpu_copy_engine(pair: Any, nbytes: int) -> None:
    """Upload then download through 4 slots of 4 KiB: copies bigger than the staging area go chunk by chunk, slots reused."""
    _, kq, _, kch, base, _ = pair
    staging = _staging.Staging(kq, _rm.Mem("staging", 0, base + (4 << 20), 4 * 4096, True, _rm.Undo()), 4)
    engine = CpuCopyEngine(kq, kch)
    engine.start()
    try:
        data = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
        buf = base + (5 << 20)
        staging.stage_in(buf, data)
        assert kq.seq == len(copy_chunks(nbytes, 4096))  # a submission per chunk
        out = np.zeros(nbytes, np.uint8)
        staging.stage_out(buf, out)  # waits for each chunk's copy: the upload's are before it on the queue
        assert np.array_equal(out, data)
        assert ctypes.string_at(buf, nbytes) == data.tobytes()
        assert engine.copied == 2 * nbytes
    finally:
        engine.halt.set()
        engine.join()


@needs_native
def test_staging_slots_are_reused_only_once_the_gpu_is_done_with_them(pair: Any) -> None:
    """Four slots: an upload of five chunks fills slots 0-3, then waits for the GPU to finish submission 1
    (slot 0's copy) before it memcpys the fifth chunk into slot 0."""
    _, kq, _, _, base, _ = pair
    area = base + (4 << 20)
    staging = _staging.Staging(kq, _rm.Mem("staging", 0, area, 4 * 4096, True, _rm.Undo()), 4)
    data = np.random.default_rng(5).integers(0, 256, 5 * 4096, dtype=np.uint8)
    done = threading.Event()

    def upload() -> None:
        staging.stage_in(base + (5 << 20), data)
        done.set()

    th = threading.Thread(target=upload)
    th.start()
    try:
        deadline = time.monotonic() + 10
        while kq.seq < 4 and time.monotonic() < deadline:
            time.sleep(1e-3)
        assert kq.seq == 4 and not done.is_set()  # no copy engine ran: slot 0 is still the GPU's
        assert ctypes.string_at(area, 4 * 4096) == data[: 4 * 4096].tobytes()
        _progress(kq, 1)
    finally:
        th.join(10)
    assert done.is_set() and kq.seq == 5
    assert ctypes.string_at(area, 4096) == data[4 * 4096 :].tobytes()


@needs_native
def test_a_copy_without_a_staging_area_is_refused(pair: Any) -> None:
    cq, kq, _, _, base, _ = pair
    staging = object.__new__(_staging.Staging)
    staging.queue, staging._lib = cq, cq._lib  # no arig_nv_staging: the pair has no staging area
    with pytest.raises(ArigValueError, match="an upload: a bad argument"):
        staging.stage_in(base + (5 << 20), np.zeros(8, np.uint8))
    assert kq.seq == 0


@needs_native
def test_a_staging_wait_ends_on_a_channel_error(pair: Any) -> None:
    _, kq, _, kch, base, _ = pair
    staging = _staging.Staging(kq, _rm.Mem("staging", 0, base + (4 << 20), 4 * 4096, True, _rm.Undo()), 4)
    kch.fail(31)
    with pytest.raises(NvChannelError, match="Xid 31"):  # no copy engine runs: the first chunk never arrives
        staging.stage_out(base + (5 << 20), np.zeros(100, np.uint8))


