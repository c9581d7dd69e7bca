"""The NV device's parts without a GPU: launches, addresses, the queues' pushbuffer words (the native core's
queues over CPU memory), copies through staging."""

from __future__ import annotations

import ctypes
import struct
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import arig
import arig.nvrm as nvrm
import arig._native
from arig._errors import ArigTypeError, ArigValueError, OpenError
from arig.nvrm import _cubin, _device, _queue, _rm, _staging
from arig.nvrm import _exec_params as E
from arig.nvrm import _push as pb
from arig.nvrm import _qmd as q
from arig.nvrm._faults import NvChannelError
from arig.nvrm._images import LoadedKernel, kernel_of, register, unregister
from arig.nvrm._launch import LOCAL_BYTES_PER_THREAD, Launch, launch_words
from arig.nvrm._staging import NvCopy, copy_chunks

DATA = Path(__file__).resolve().parent / "data" / "nv"
CUBIN = _cubin.parse((DATA / "probe.sm_90.cubin").read_bytes())
LOW = 0x20_0000_0000  # below 2**40, where GPFIFO segments and QMDs must lie
OWNER = 12345


@pytest.fixture
def axpy() -> Any:
    fid = register(LoadedKernel(CUBIN.kernels["axpy"], 0x10_0020_0000, OWNER))
    yield fid
    unregister(fid)


def args_of(a: float, x: int, y: int, n: int) -> bytes:
    return struct.pack("<f4xQQi", a, x, y, n)


# --- Launch ----------------------------------------------------------------------------


def test_launch_checks_arguments_against_the_layout(axpy: int) -> None:
    with pytest.raises(ArigValueError, match=r"axpy.*28 bytes.*\(0, 4\), \(8, 8\), \(16, 8\), \(24, 4\).*got 24"):
        Launch(axpy, 1, 32, b"\0" * 24)
    with pytest.raises(ArigTypeError, match="bytes"):
        Launch(axpy, 1, 32, [1, 2])  # type: ignore[arg-type]
    with pytest.raises(ArigValueError, match="no kernel of an image loaded"):
        Launch(987654321, 1, 32, args_of(1, 0, 0, 0))
    with pytest.raises(ArigTypeError):
        Launch("axpy", 1, 32, b"")  # type: ignore[arg-type]
    for bad in (0, (1, 0), (1, 2, 3, 4), "x"):
        with pytest.raises((ArigValueError, ArigTypeError)):
            Launch(axpy, bad, 32, args_of(1, 0, 0, 0))
    with pytest.raises(ArigValueError, match="block"):
        Launch(axpy, 1, 2048, args_of(1, 0, 0, 0))  # more threads than a block has
    with pytest.raises(ArigValueError, match="shared"):
        Launch(axpy, 1, 32, args_of(1, 0, 0, 0), shared=-1)


def test_launch_slot_holds_bank0_and_a_qmd_pointing_at_it(axpy: int) -> None:
    params = args_of(2.5, 0x10_0040_0000, 0x10_0060_0000, 1000)
    launch = Launch(axpy, (4, 1, 1), (256, 1, 1), params)
    k = CUBIN.kernels["axpy"]
    assert launch.slot_bytes % 256 == 0 and launch.qmd_offset % 256 == 0
    slot = 0x10_0400_0100
    image = launch.slot_image(slot)
    assert len(image) == launch.slot_bytes
    assert image[k.param_base : k.param_base + len(params)] == params
    assert struct.unpack_from("<6I", image, 0) == (256, 1, 1, 4, 1, 1)  # blockDim then gridDim at c[0][0]
    f = q.unpack(image[launch.qmd_offset : launch.qmd_offset + q.QMD_BYTES])
    assert f["CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)"] == (slot >> 6) & 0xFFFFFFFF
    assert f["CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(0)"] == slot >> 38
    assert f["GRID_WIDTH"] == 4 and f["CTA_THREAD_DIMENSION0"] == 256
    assert (f["PROGRAM_ADDRESS_UPPER"] << 32 | f["PROGRAM_ADDRESS_LOWER"]) == 0x10_0020_0000
    assert f["QMD_MAJOR_VERSION"] == 4
    with pytest.raises(ArigValueError, match="aligned"):
        launch.slot_image(slot + 64)


def test_kernels_needing_more_local_memory_are_refused() -> None:
    k = CUBIN.kernels["deep"]
    big = type(k)(**{**k.__dict__, "stack": LOCAL_BYTES_PER_THREAD})
    fid = register(LoadedKernel(big, 0x10_0020_0000, OWNER))
    try:
        with pytest.raises(ArigValueError, match="local memory"):
            Launch(fid, 1, 1, b"\0" * k.param_size)
    finally:
        unregister(fid)
    assert kernel_of(fid) is None


def test_launch_words() -> None:
    # WAIT_FOR_IDLE first: a queue's grids run one after another (two launches in one fill, at once,
    # left y = a*x + y applied once on the H200)
    assert launch_words(0x10_0000_0300) == pb.Push().wait_for_idle().invalidate_shader_caches().launch(0x10_0000_0300).words
    assert pb.method_header(pb.SUBCH_COMPUTE, pb.CBC0.WAIT_FOR_IDLE, 1) == launch_words(0x10_0000_0300)[0]
    with pytest.raises(ArigValueError):
        launch_words(0x10_0000_0310)


# --- addresses ----------------------------------------------------------------------------


def test_va_allocator_aligns_reuses_and_merges() -> None:
    va = _rm.VaAllocator(0x1000_0000, 16 << 20)
    a = va.alloc(3 << 20)
    b = va.alloc(4096, 4096)
    c = va.alloc(2 << 20)
    assert a == 0x1000_0000 and a % (2 << 20) == 0 and c % (2 << 20) == 0 and b == a + (3 << 20)
    va.free(b)
    va.free(a)
    assert va.alloc(3 << 20) == a
    va.free(a)
    va.free(c)
    assert va.used == 0 and va._free == [(0x1000_0000, 16 << 20)]
    with pytest.raises(nvrm.DriverError, match="no room"):
        va.alloc(32 << 20)


def test_undo_runs_every_step_in_reverse_and_reports_failures() -> None:
    seen: list[str] = []
    u = _rm.Undo()
    u.push("a", lambda: seen.append("a"))
    u.push("b", lambda: (_ for _ in ()).throw(nvrm.RmError("free b", 0x1F)))
    u.push("c", lambda: seen.append("c"))
    failures = u.unwind()
    assert seen == ["c", "a"] and len(failures) == 1 and "free b" in failures[0] and len(u) == 0


# --- the queue's pushbuffer (the native core's queue), against memory at low addresses --------------

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


def _queue_of(ch: FakeChannel, doorbell: int, pushbuf: _rm.Mem, args: _rm.Mem | None, words: _rm.Mem, index: int) -> _queue.NvQueue:
    s = _queue.spec(pushbuf=pushbuf, args=args, fifo=ch, doorbell=doorbell, words=words, base=index * _queue.WORDS_STRIDE, copy=args is None)
    return _queue.NvQueue(OWNER, s, index=index, copy=args is None, error=ch.error)


def _gp_put(ch: FakeChannel) -> int:
    return ch.ring.u32(ch.userd_offset + E.USERD_GP_PUT).value


@pytest.fixture
def queue() -> Any:
    size = 8 << 20
    base = _rm._mmap(LOW, size, _rm.PROT_RW, _rm.MAP_PRIVATE | _rm.MAP_ANONYMOUS | _rm.MAP_FIXED_NOREPLACE)
    nq = None
    try:
        def mem(what: str, off: int, n: int) -> _rm.Mem:
            return _rm.Mem(what, 0, base + off, n, True, _rm.Undo())

        ch = FakeChannel(mem("gpfifo", 0, 1 << 20), mem("notifier", 7 << 20, 4096))
        doorbell = base + (1 << 20)
        args = mem("args", 4 << 20, 8 << 10)
        nq = _queue_of(ch, doorbell, mem("pushbuffer", 2 << 20, 64 << 10), args, mem("words", 6 << 20, 4096), 0)
        yield nq, ch, doorbell, args
    finally:
        if nq is not None:
            nq.destroy()
        _rm._munmap(base, size)


def segment(ch: FakeChannel, i: int) -> list[int]:
    entry = ch.ring.u64(i * 8).value
    lo, hi = entry & 0xFFFFFFFF, entry >> 32
    address = (lo & ~3) | (hi & 0xFF) << 32
    n = (hi >> 10) & 0x1FFFFF
    return list(pb.words_of(ctypes.string_at(address, 4 * n)))


def _progress(nq: _queue.NvQueue, seq: int) -> None:
    """What the GPU does at the end of a queue's submission ``seq``."""
    ctypes.c_uint64.from_address(nq.progress_address).value = seq


@needs_native
def test_launch_then_release_makes_one_gpfifo_entry(queue: Any, axpy: int) -> None:
    nq, ch, doorbell, args = queue
    launch = Launch(axpy, 2, 256, args_of(1.0, 0x10_0000_0000, 0x10_0010_0000, 512))
    launch.owner = OWNER
    nq.launch(launch)
    assert _gp_put(ch) == 0  # nothing submitted before the value's release
    nq.submit(7, interrupt=True)
    slot = args.va  # the first slot of the argument ring
    tl = nq.timeline_address
    want = (launch_words(slot + launch.qmd_offset)
            + pb.Push().release(tl, 7).extend(pb.wait_words(tl, 7)).non_stall_interrupt().release(nq.progress_address, 1).words)  # fmt: skip
    assert segment(ch, 0) == want
    assert ctypes.string_at(slot, launch.slot_bytes) == launch.slot_image(slot)
    assert _gp_put(ch) == 1
    assert ctypes.c_uint32.from_address(doorbell + E.USERMODE_NOTIFY_CHANNEL_PENDING).value == FakeChannel.token
    nq.release(args.va + 64, 3)
    nq.acquire(args.va + 64, 3)
    nq.submit(8)
    assert segment(ch, 1) == (pb.Push().release(args.va + 64, 3).acquire(args.va + 64, 3)
                              .release(tl, 8).release(nq.progress_address, 2).words)  # fmt: skip


@needs_native
def test_a_full_argument_ring_waits_for_the_gpu(queue: Any, axpy: int) -> None:
    nq, ch, _, args = queue
    launch = Launch(axpy, 1, 32, args_of(1.0, 0, 0, 0))
    launch.owner = OWNER
    for _ in range(args.size // launch.slot_bytes):
        nq.launch(launch)
    # The next launch submits what is pending and waits until the GPU reports that submission done.
    def gpu() -> None:
        time.sleep(0.05)
        _progress(nq, 1)

    t = threading.Thread(target=gpu)
    t.start()
    t0 = time.monotonic()
    nq.launch(launch)
    t.join()
    assert time.monotonic() - t0 >= 0.04
    assert nq.seq == 1 and _gp_put(ch) == 1


@needs_native
def test_a_wait_for_the_gpu_ends_on_a_channel_error(queue: Any) -> None:
    nq, ch, _, args = queue
    nq.release(args.va, 1)
    nq.submit()
    with pytest.raises(ArigValueError, match="never made"):
        nq.wait(2, "a submission")
    ch.fail(13)
    t0 = time.monotonic()
    with pytest.raises(NvChannelError, match="Xid 13"):
        nq.wait(1, "the release")
    assert time.monotonic() - t0 < 1.0


def test_launches_of_one_shape_share_a_template_but_never_each_others_arguments(axpy: int) -> None:
    """A Launch copies a template of its shape (bank 0 and the QMD, built once) and writes its own arguments:
    every slot image is the one built from scratch, whatever launch of that shape came before."""
    from arig.nvrm._images import kernel_of

    loaded = kernel_of(axpy)
    assert loaded is not None
    k = loaded.kernel

    def from_scratch(grid: int, params: bytes) -> bytes:
        cb0 = q.cbank0(k, (grid, 1, 1), (256, 1, 1), params + bytes(k.param_size - len(params)), shared_window=pb.SHARED_WINDOW, local_window=pb.LOCAL_WINDOW)
        off = -(-len(cb0) // 256) * 256
        fields = q.kernel_qmd(k, grid=(grid, 1, 1), block=(256, 1, 1), program_address=loaded.program_address, cbank0_address=0, cbank0_size=len(cb0), shared_bytes=0)
        image = bytearray(-(-(off + q.QMD_BYTES) // 256) * 256)
        image[: len(cb0)] = cb0
        image[off : off + q.QMD_BYTES] = q.pack(fields)
        return bytes(image)

    for grid, a in ((4, 2.5), (4, -1.0), (9, 3.0), (4, 7.0)):
        params = args_of(a, 0x10_0040_0000 + grid, 0x10_0060_0000, 1000 + grid)
        launch = Launch(axpy, grid, 256, params)
        assert launch.slot_image(0) == from_scratch(grid, params), (grid, a)


@needs_native
def test_queue_launch_refuses_other_devices_kernels(queue: Any, axpy: int) -> None:
    nq = queue[0]
    launch = Launch(axpy, 1, 32, args_of(1.0, 0, 0, 0))
    launch.owner = OWNER + 1
    with pytest.raises(ArigValueError, match="another NV device"):
        nq.launch(launch)
    with pytest.raises(ArigTypeError):
        nq.launch("axpy")


# --- the backend's loop-side checks ------------------------------------------------------------


def test_backend_copies_every_kind_and_refuses_bad_submissions(axpy: int) -> None:
    """A copy of any kind is one item of the core (the native thread runs it): no Python fill, no submit thread."""
    b = object.__new__(_device.NvBackend)
    b.name = "NV"
    b.staging = object.__new__(_staging.Staging)
    for kind in _device.KINDS:
        buf = arig.Buffer("NV", kind, 0x10_0000_0000, 64, lambda: None)
        a = np.arange(4, dtype=np.float32)
        fill, arg = b.copy_fill(buf, a, True)
        assert type(fill) is NvCopy and arg is None
        assert b.prepare(fill, arg) == (arig._native.H2D, 0x10_0000_0000, a.ctypes.data, 16)
        fill, arg = b.copy_fill(buf, a, False)
        assert b.prepare(fill, arg) == (arig._native.D2H, a.ctypes.data, 0x10_0000_0000, 16)
        with pytest.raises(ArigValueError, match="no arg"):
            b.prepare(fill, 1)
    launch = Launch(axpy, 1, 32, args_of(1.0, 0, 0, 0))
    with pytest.raises(ArigValueError, match="no arg"):
        b.prepare(launch, 1)
    with pytest.raises(ArigValueError, match="another NV device"):
        b.prepare(launch, None)
    with pytest.raises(ArigTypeError):
        b.prepare("axpy", None)
    assert b.prepare(None, None) == (arig._native.MARK, 0, 0, 0)
    mine = Launch(axpy, 1, 32, args_of(1.0, 0, 0, 0))
    mine.owner = id(b)
    assert b.prepare(mine, None) is mine._item  # the core's item, made once with the launch


def test_open_without_a_gpu_is_an_open_error() -> None:
    if nvrm.count() > 0:
        pytest.skip("this machine has an NVIDIA GPU")
    with pytest.raises(OpenError, match="no GPU 0"):
        nvrm.gpu(0).make()
    assert nvrm.Launch is Launch


# --- the copy queue: chunks, words, the ordering rule, staging through a CPU copy engine ----------


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


# --- frees: the ledger waits for the GPU; the NV memory frees what reaches it ---------------------------


class _Freed:
    what = "test"

    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def free(self) -> list[str]:
        self.log.append(self.name)
        return []


class _Timeline:
    def __init__(self) -> None:
        self.assigned = self.reached = 0
        self.lost: BaseException | None = None


def test_a_free_the_ledger_posts_is_done_at_once_and_a_lost_device_keeps_it_for_close() -> None:
    """The device's ledger (arig._memory.Ledger) waits for the work before a close; what reaches the NV
    memory is freed at once, with no post of its own, unless the device is lost: then close decides."""
    from arig.nvrm._memory import NvMemory

    freed: list[str] = []
    posts: list[Any] = []
    tl = _Timeline()
    mem = NvMemory("NV", object())  # type: ignore[arg-type]
    mem.bind(tl, lambda fn, *a: posts.append((fn, a)))  # type: ignore[arg-type]
    tl.assigned, tl.reached = 5, 3  # work pending: the ledger, not the memory, waits for it
    mem.free(_Freed(freed, "a"))  # type: ignore[arg-type]
    assert freed == ["a"] and posts == []
    tl.lost = RuntimeError("lost")
    mem.free(_Freed(freed, "b"))  # type: ignore[arg-type]
    assert freed == ["a"]  # lost: close decides
    assert [m.name for m in mem.close()] == ["b"]  # type: ignore[attr-defined]
