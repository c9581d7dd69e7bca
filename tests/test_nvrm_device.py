"""The NV device's parts without a GPU: launches, addresses, the compute queue's pushbuffer words (the native
core's queue over CPU memory), the backend's checks, frees (the copy queue: test_nv_copy_queue_and_staging.py)."""

from __future__ import annotations

import ctypes
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import arig
import arig.nvrm as nvrm
import arig._native
from arig._errors import ArigTypeError, ArigValueError, OpenError
from arig.nvrm import _device, _rm, _staging
from arig.nvrm import _exec_params as E
from arig.nvrm import _push as pb
from arig.nvrm import _qmd as q
from arig.nvrm._faults import NvChannelError
from arig.nvrm._images import LoadedKernel, kernel_of, register, unregister
from arig.nvrm._launch import LOCAL_BYTES_PER_THREAD, Launch, launch_words
from arig.nvrm._staging import NvCopy

from _nv_queues import CUBIN, LOW, OWNER, FakeChannel, args_of, needs_native, segment
from _nv_queues import gp_put as _gp_put
from _nv_queues import progress as _progress
from _nv_queues import queue_of as _queue_of
from _nv_queues import registered_axpy


@pytest.fixture
def axpy() -> Iterator[int]:
    with registered_axpy() as fid:
        yield fid

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
