"""The NV device: a backend that runs work on an NVIDIA GPU through the kernel driver alone (no libcuda).

Two queues, two GPFIFO channels of one channel group: ``dev.queues[0]``
(compute: launches) and ``dev.queues[1]`` (the copy engine,
HOPPER_DMA_COPY_A on subchannel 4: ``queue.copy(dst, src, nbytes)``).
Each has its own pushbuffer, timeline word and progress word.  **The two
queues are ordered with each other**, unlike CUDA's independent streams,
because copies feed kernels: before a queue takes new work it submits the
other queue's pending words and acquires (ACQ_CIRC_GEQ) the other queue's
progress word at the value last submitted there, unless the GPU is already
past it (:class:`NvQueue`).  So ``upload``, ``submit(launch)``,
``download`` give the kernel's result whatever queues they are on.

``upload`` and ``download`` take memory of every kind through a pinned
staging area of the device (``STAGING_BYTES``, cut into ``STAGING_SLOTS``
slots), a chunk per copy-engine copy: an upload memcpys each chunk into a
slot the GPU no longer reads, then copies slot -> buffer; a download copies
buffer -> slot, waits for it (bounded) and memcpys out, with every slot in
flight at once.  Both run in the fill, on the submit thread.

Threads, and what each may do:

* the device's **submit thread** opens the device (``NvBackend.__init__``),
  runs Python fills (which append to the queues' pushbuffers), stages
  copies, allocates, loads, frees and closes: every RM and UVM call is made
  here (``arig.nvrm._rm``);
* with the native core (``arig/_native/core.c``; ``arig.nvrm._nvq``), the
  core's **native thread** runs prepared launches, marks and compiled fills,
  submits (GPFIFO entry, GP_PUT, doorbell) and releases each burst's value,
  watches the timeline words, and asks for an interrupt where its watch
  ends; the queues' state is the core's (``arig_nvq``), which the submit
  thread touches only at open and inside a Python fill, while the native
  thread waits at that fill's place;
* without it, the submit thread also submits at each ``signal``;
* the **event loop** never calls the driver: it reads both queues' timeline
  words (pinned host memory the GPU releases values into) when the OS event
  fd wakes it, when the native core tells it, and (without the core) on a
  20 ms check while values are outstanding, which also reads the channels'
  error notifiers (the native thread reads them after 20 ms without progress).

A value's completion is the GPU's own semaphore release after its work
(compute: a host release with RELEASE_WFI; copy: the copy engine's
four-word release, flushed, then a host acquire of it), followed by
NON_STALL_INTERRUPT, which wakes the event fd.  The fd merges wakes and
carries no identity; the words are the only truth.  ``nvidia_poll`` clears
the driver's pending flag on every poll, so the fd is registered once
(``add_reader`` at bind) and the words are read in the callback, after the
selector's poll re-armed it.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _log, _native
from .._errors import ArigError, ArigTypeError, ArigValueError, DeviceHang, DeviceStopped, FillError, OpenError, safe_repr
from .._memory import Buffer, Image, never_free
from .._backend import Backend, fill_result
from . import _cubin, _fd, _rm
from . import _exec_params as E
from . import _push as pb
from ._launch import LOCAL_BYTES_PER_THREAD, Launch, LoadedKernel, Ring, Slots, copy_chunks, launch_words, register, unregister
from . import abi as _abi
from .._launchspec import c_arg

__all__ = ["NvBackend", "NvQueue", "NvChannelError", "KINDS", "STAGING_BYTES", "STAGING_SLOTS"]

#: Memory kinds: VRAM for the GPU only, VRAM also mapped to the CPU through BAR1, host memory.
KINDS = ("device", "mapped", "pinned")
PUSHBUFFER_BYTES = 2 << 20  # the probe's pushbuffer (each queue has one)
#: The pinned staging area every upload and download goes through, cut into slots (one copy-engine copy each).
STAGING_BYTES = 64 << 20
STAGING_SLOTS = 4
ARGS_BYTES = 16 << 20  # the research's argument ring
#: Pending pushbuffer words before a fill's launches are submitted without waiting for the signal.
PENDING_MAX_WORDS = 16 << 10
MAX_TPCS = 72  # GH100's full TPC count: local memory is sized for every TPC index the GPU may use
#: The loop's check of the timeline word and the error notifier while values are outstanding.
CHECK_S = 0.02
#: Longest a submit-thread wait for the GPU (ring room, a drain) lasts before the device is lost.
WAIT_S = 30.0
OPEN_WAIT_S = 5.0
#: The native core's bounded spin for a completion (µs) before the interrupt backstop.
SPIN_US = 40
#: How long close waits for the loop to stop reading the device's memory before freeing it.
QUIESCE_S = 2.0
#: Offsets in a queue's part of the device's page of pinned host memory (queue i's part starts at
#: i * WORDS_STRIDE): the timeline word, the internal progress word (16 bytes each: value, GPU time).
TIMELINE_OFFSET, PROGRESS_OFFSET, WORDS_STRIDE = 0, 16, 32


class NvChannelError(ArigError):
    """The RM reported an error of the device's channel (a fault the GPU's work made): the device is lost."""


def wait_words(address: int, value: int) -> list[int]:
    """A host acquire (ACQ_CIRC_GEQ, u64) that spins in its channel rather than switching the channel group out.

    What the queues' ordering rule and the copy queue's interrupt use: the
    channels that wait for each other are in one group, and the wait is
    tinygrad's (which waits across its compute and copy channels of one group
    this way).  ``NvQueue.acquire`` keeps ACQUIRE_SWITCH_TSG for waits on
    anything else."""
    execute = ((pb.C86F.SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ << pb.C86F.SEM_EXECUTE_OPERATION[1])
               | (pb.C86F.SEM_EXECUTE_PAYLOAD_SIZE_64BIT << pb.C86F.SEM_EXECUTE_PAYLOAD_SIZE[1]))  # fmt: skip
    if address % 8 or not 0 <= address < 1 << 57 or not 0 <= value < 1 << 64:
        raise ArigValueError(f"a wait on {address:#x} for {value:#x}: the address must be 8-byte aligned in 57 bits, the value 64 bits")
    return pb.Push().method(pb.SUBCH_HOST, pb.C86F.SEM_ADDR_LO, address & 0xFFFFFFFC, address >> 32, value & 0xFFFFFFFF, value >> 32, execute).words


def _no_fill(queue: Any, arg: Any, v: int) -> None:
    """``submit(None)``: nothing to enqueue; the value marks the queue's earlier work."""


def _launch_fill(queue: NvQueue, launch: Launch, v: int) -> None:
    queue.launch(launch)


class Dmabuf:
    """A dma-buf of an NV device's memory (``await dev.dma(buf)``): ``fd`` (this object owns it:
    ``close()``, or ``with``), the region's ``offset`` in it and its ``size``.

    The dma-buf holds the RM object the region lies in until its last reference goes, freed or
    not; an importer (a NIC's RDMA driver, another GPU's) maps it where it registers the fd.
    """

    def __init__(self, fd: int, offset: int, size: int) -> None:
        self.fd, self.offset, self.size = fd, offset, size
        self._finalizer = weakref.finalize(self, os.close, fd)

    def fileno(self) -> int:
        return self.fd

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> Dmabuf:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<arig.nvrm.Dmabuf fd {self.fd} offset {self.offset} size {self.size}{' closed' if self.closed else ''}>"


class NvQueue:
    """A queue of an NV device: what Python fills receive (submit thread only).

    Queue 0 is the compute channel, queue 1 the copy channel (HOPPER_DMA_COPY_A
    on subchannel 4).  ``launch(l)`` enqueues a prepared :class:`Launch` on
    the compute channel, ``copy(dst, src, nbytes)`` a copy-engine copy
    (pitch, non-pipelined, flushed) on the copy channel, whichever queue it
    is called on; ``release(address, value)`` (u64 payload, 16-byte aligned,
    the GPU time after it; a host release after WFI on the compute channel,
    the copy engine's four-word release on the copy one) and
    ``acquire(address, value)`` (ACQ_CIRC_GEQ) go to this queue's channel.
    Nothing reaches the GPU until the device signals (or a copy is staged).

    **The two queues are ordered with each other** (unlike CUDA's independent
    streams, because copies feed kernels): before a queue takes new work (a
    launch, a copy, a release, a signal) it submits the other queue's pending
    words and, unless the GPU is already past them, acquires the other
    queue's progress word at the value last submitted there.  So
    ``upload``, ``submit(launch)``, ``download`` give the kernel's result,
    and every value of either queue completes after the work of both queues
    submitted before it.
    """

    def __init__(self, owner: int, channel: Any, doorbell: int, pushbuf: _rm.Mem, args: _rm.Mem | None, words: _rm.Mem,
                 *, index: int = 0, copy: bool = False, error: Callable[[], str | None] | None = None) -> None:
        self.index = index
        self.engine = "copy" if copy else "compute"
        self._is_copy = copy
        self._owner = owner
        self._ch = channel  # a _rm.Gpfifo: ring, entries, userd_offset, token
        self._error: Callable[[], str | None] = channel.error if error is None else error
        self._doorbell = ctypes.c_uint32.from_address(doorbell + E.USERMODE_NOTIFY_CHANNEL_PENDING)
        self._gp_put = channel.ring.u32(channel.userd_offset + E.USERD_GP_PUT)
        self._pb, self._args = pushbuf, args
        base = index * WORDS_STRIDE
        self.timeline_address = words.va + base + TIMELINE_OFFSET
        self.progress_address = words.va + base + PROGRESS_OFFSET
        self._timeline = words.u64(base + TIMELINE_OFFSET)
        self._progress = words.u64(base + PROGRESS_OFFSET)
        self._pb_ring = Ring(pushbuf.size)
        self._arg_ring = Ring(args.size) if args is not None else None
        self._gp_fences: deque[tuple[int, int]] = deque()  # (seq, entries put after it)
        self._gp_done = 0
        self.words: list[int] = []  # pending pushbuffer words
        self.seq = 0  # submissions made (the progress word's values)
        self.put = 0  # GPFIFO entries written
        self.aborted = False
        #: The device's other queue (the ordering rule), and its submission this queue last waited for.
        self.peer: NvQueue | None = None
        self.peer_acquired = 0
        self._fence = threading.Lock()  # acquiring it is a locked instruction: the WC writes are out before the doorbell

    # -- what fills call -------------------------------------------------------------
    def launch(self, launch: Launch) -> None:
        """Enqueue ``launch`` on the compute channel: its bank 0 and QMD into the argument ring, the launch methods into the pushbuffer."""
        if self._is_copy:
            if self.peer is None:
                raise ArigTypeError("this copy queue has no compute queue to launch on")
            self.peer.launch(launch)
            return
        if type(launch) is not Launch:
            raise ArigTypeError(f"queue.launch takes an arig.nvrm.Launch, got {type(launch).__name__}")
        if launch.owner != self._owner:
            raise ArigValueError(f"{launch!r} is of a kernel another NV device loaded")
        assert self._arg_ring is not None and self._args is not None
        self._after_peer()
        if len(self.words) > PENDING_MAX_WORDS:
            self.kick()
        off = self._reserve(self._arg_ring, launch.slot_bytes)
        at = self._args.va + off
        image = launch.slot_image(at)
        ctypes.memmove(at, image, len(image))
        self.words += launch_words(at + launch.qmd_offset)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Enqueue a copy-engine copy of ``nbytes`` from GPU address ``src`` to ``dst`` on the copy channel (pieces under 2 GiB)."""
        if not self._is_copy:
            if self.peer is None:
                raise ArigTypeError("this compute queue has no copy queue to copy on")
            self.peer.copy(dst, src, nbytes)
            return
        pb.check_copy_args(dst, src, nbytes)
        if nbytes == 0:
            return
        words = pb.Push().copy(dst, src, nbytes).words  # checks the addresses before anything is enqueued
        self._after_peer()
        if len(self.words) > PENDING_MAX_WORDS:
            self.kick()
        self.words += words

    def release(self, address: int, value: int) -> None:
        """A semaphore release of ``value`` at ``address`` (16-byte aligned) after the work before it (u64, GPU time)."""
        words = (pb.Push().copy_release(address, value) if self._is_copy else pb.Push().release(address, value)).words
        self._after_peer()
        if len(self.words) > PENDING_MAX_WORDS:
            self.kick()
        self.words += words

    def acquire(self, address: int, value: int) -> None:
        """Make the queue wait until the u64 at ``address`` is >= ``value`` (ACQ_CIRC_GEQ)."""
        if len(self.words) > PENDING_MAX_WORDS:
            self.kick()
        self.words += pb.Push().acquire(address, value).words

    def put_words(self, words: list[int]) -> None:
        """Append pushbuffer words as they are (the channel's first pushbuffer)."""
        self.words += words

    # -- submission (the device's submit thread) ------------------------------------
    def _after_peer(self) -> None:
        """The ordering rule: the other queue's pending words go out, and this queue waits for them on the GPU."""
        p = self.peer
        if p is None:
            return
        if p.words:
            p.kick()
        s = p.seq
        if s > self.peer_acquired:
            self.peer_acquired = s
            if p._progress.value < s:  # already done: nothing to wait for
                self.words += wait_words(p.progress_address, s)

    def signal(self, v: int, *, interrupt: bool = True) -> None:
        """Release ``v`` into the timeline word after the work so far (then NON_STALL_INTERRUPT), and submit."""
        self._after_peer()
        self.kick(value=v, interrupt=interrupt)

    def tail(self, value: int | None, interrupt: bool, seq: int) -> pb.Push:
        """The words that end a GPFIFO entry: the timeline release (and its interrupt), then the progress release.

        Compute: host releases after WFI, then NON_STALL_INTERRUPT.  Copy: the copy
        engine's four-word releases (flushed, after its copies); the host then
        acquires the timeline value it released, so the NON_STALL_INTERRUPT that
        wakes the event fd comes after the value is in memory."""
        p = pb.Push()
        if self._is_copy:
            if value is not None:
                p.copy_release(self.timeline_address, value)
                if interrupt:
                    p.extend(wait_words(self.timeline_address, value))
            if interrupt:
                p.non_stall_interrupt()
            return p.copy_release(self.progress_address, seq)
        if value is not None:
            p.release(self.timeline_address, value)
        if interrupt:
            p.non_stall_interrupt()
        return p.release(self.progress_address, seq)

    def kick(self, value: int | None = None, interrupt: bool = False) -> None:
        """Submit the pending words (and a timeline release) as one GPFIFO entry ending in a progress release."""
        seq = self.seq + 1
        p = pb.Push().extend(self.words).extend(self.tail(value, interrupt, seq).words)
        data = p.data()
        self._retire()
        while self.put - self._gp_done >= self._ch.entries - 1:
            self._wait_progress(self._gp_fences[0][0], "GPFIFO ring room")
        off = self._reserve(self._pb_ring, -(-len(data) // 256) * 256, tag=seq)
        seg = self._pb.va + off
        ctypes.memmove(seg, data, len(data))
        self._ch.ring.u64((self.put % self._ch.entries) * 8).value = pb.gpfifo_entry(seg, len(p))
        self.put += 1
        self._gp_fences.append((seq, self.put))
        self.words = []
        self.seq = seq
        self._gp_put.value = self.put % self._ch.entries
        _ = self._gp_put.value  # read back, as the probe: the WC writes are out
        with self._fence:
            pass
        self._doorbell.value = self._ch.token

    def drain(self) -> None:
        """Submit what is pending and wait (bounded) until the GPU has done all of it."""
        if self.words or self.seq > self._progress.value:
            if self.words:
                self.kick()
            self._wait_progress(self.seq, "the queue's work to finish")

    def wait(self, seq: int, what: str) -> None:
        """Wait (bounded, submit thread) until the GPU has done this queue's submission ``seq``."""
        if seq > self.seq:
            raise ArigValueError(f"submission {seq} of {self!r} was never made")
        if self._progress.value < seq:
            self._wait_progress(seq, what)

    def _retire(self) -> None:
        done = self._progress.value
        self._pb_ring.retire(done)
        if self._arg_ring is not None:
            self._arg_ring.retire(done)
        fences = self._gp_fences
        while fences and fences[0][0] <= done:
            self._gp_done = fences.popleft()[1]

    def _reserve(self, ring: Ring, n: int, tag: int | None = None) -> int:
        tag = self.seq + 1 if tag is None else tag
        while True:
            self._retire()
            off = ring.alloc(n, tag)
            if off is not None:
                return off
            oldest = ring.oldest()
            assert oldest is not None  # alloc refused n > size already
            if oldest > self.seq:  # the room is held by what is not submitted yet: submit it
                self.kick()
                tag = self.seq + 1 if tag <= self.seq else tag
                continue
            self._wait_progress(oldest, "ring room")

    def _wait_progress(self, target: int, what: str) -> None:
        """Wait on the submit thread until the progress word reaches ``target``: bounded, and a lost device ends it."""
        deadline = time.monotonic() + WAIT_S
        pause = 20e-6
        while self._progress.value < target:
            if self.aborted:
                raise DeviceStopped("the NV device was lost while its submit thread waited for the GPU")
            err = self._error()
            if err is not None:
                raise NvChannelError(err)
            if time.monotonic() > deadline:
                raise DeviceHang(f"waiting for {what}: the GPU did not reach submission {target} of the {self.engine} queue in {WAIT_S} s (it is at {self._progress.value})")
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)
        self._retire()

    def __repr__(self) -> str:
        return f"<arig.nvrm.NvQueue {self.index} ({self.engine}) submitted={self.seq}>"


def _upload_fill(queue: NvQueue, arg: tuple[NvBackend, int, np.ndarray[Any, Any]], v: int) -> None:
    arg[0].stage_in(arg[1], arg[2])


def _download_fill(queue: NvQueue, arg: tuple[NvBackend, int, np.ndarray[Any, Any]], v: int) -> None:
    arg[0].stage_out(arg[1], arg[2])


class _Submitter:
    """The submit thread's hand-off, plus arming the loop's check when values are outstanding."""

    __slots__ = ("full", "wait_space", "wake_space", "_put", "_backend")

    def __init__(self, st: Any, backend: NvBackend) -> None:
        self.full, self.wait_space, self.wake_space, self._put = st.full, st.wait_space, st.wake_space, st.put
        self._backend = backend

    def put(self, qi: int, item: Any, v: int) -> None:
        self._put(qi, item, v)
        if self._backend._tick is None:
            self._backend._arm_tick()


class NvBackend(Backend):
    """GPU ``index`` through NVIDIA's kernel driver: a compute and a copy queue, memory, cubins, completion by the OS event fd."""

    #: The native core's loop side (NvCompletion), or None on the pure path.
    completion: Any = None

    def __init__(self, name: str, bus: str) -> None:
        self.name = name
        self._closed = False
        self._mem: dict[int, _rm.Mem] = {}  # live buffers and images' code, by key
        self._orphans: list[_rm.Mem] = []  # freed while the device was lost: freed at close if the channel was
        self._images: dict[int, tuple[_rm.Mem, list[int]]] = {}
        self._keys = 0
        self._tick: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reader = False
        self._seen = [0, 0]
        self._lost_told = False
        self._quiet = threading.Event()
        self.native = _native.library() is not None
        self.completion = None
        self.submit_thread: Any = None
        self._deferred: dict[int, _rm.Mem] = {}  # native: freed by the user, freed here once the GPU is past them
        self._tasks: set[Any] = set()
        self._pins: dict[int, Any] = {}  # id(Mem) of map_host's memory -> the object that owns it, until unmapped
        self.capabilities = {}
        proc = _rm.process()
        gpu = self.gpu = proc.gpu(bus)
        gpu.claim(name)
        self._event_undo = _rm.Undo()
        self._own: list[_rm.Mem] = []
        self.channel: _rm.Channel | None = None
        self._ev = -1
        try:
            self._open(gpu)
        except BaseException:
            if self.completion is not None:
                self.completion.stop_thread()
                self.completion.close(True)
            self._event_undo.unwind()
            if self._ev >= 0:
                _close_fd(self._ev)
                self._ev = -1
            failures: list[str] = self.channel.free() if self.channel is not None else []
            if not failures:
                for m in reversed(self._own):
                    m.free()
            self._destroy_queues()
            gpu.unclaim()
            raise

    # -- open (the probe's steps from "channel group" on) ---------------------------------
    def _open(self, gpu: _rm.Gpu) -> None:
        facts = gpu.facts
        self.arch = str(facts.get("arch") or "sm_90")
        if gpu.compute_cls != E.HOPPER_COMPUTE_A or self.arch != "sm_90":
            raise OpenError(f"cannot open {self.name}: arig's NV path launches with Hopper's QMD V04 (sm_90); GPU {gpu.bus} is {self.arch} with compute class {gpu.compute_cls:#x}")
        self.hang_ms = facts.get("hang_ms")
        self.channel = ch = _rm.Channel(gpu, copy=True)
        assert ch.copy is not None and gpu.copy_cls is not None
        self._ev = gpu.os_event(self._event_undo)
        words = self._keep(gpu.host("timeline", _rm.PAGE_4K))
        per_tpc = pb.local_bytes_per_tpc(LOCAL_BYTES_PER_THREAD)
        local = self._keep(gpu.vram("local", per_tpc * MAX_TPCS, cpu=False))
        pushbuf = self._keep(gpu.vram("pushbuffer", PUSHBUFFER_BYTES))
        args = self._keep(gpu.vram("arguments", ARGS_BYTES))
        copy_pushbuf = self._keep(gpu.vram("copy pushbuffer", PUSHBUFFER_BYTES))
        self.staging = self._keep(gpu.host("staging", STAGING_BYTES))
        self._slots = Slots(STAGING_SLOTS, STAGING_BYTES // STAGING_SLOTS)
        self.queue_handles: list[Any] = []
        if self.native:
            from ._nvq import NativeNvQueue, spec

            self.queue: Any = NativeNvQueue(id(self), spec(pushbuf=pushbuf, args=args, fifo=ch.fifo, doorbell=gpu.doorbell, words=words, base=0, copy=False),
                                       index=0, copy=False, error=ch.error)  # fmt: skip
            self.queue_handles.append(self.queue)
            self.copy_queue: Any = NativeNvQueue(id(self), spec(pushbuf=copy_pushbuf, args=None, fifo=ch.copy, doorbell=gpu.doorbell, words=words,
                                                           base=WORDS_STRIDE, copy=True), index=1, copy=True, error=ch.error)  # fmt: skip
            self.queue_handles.append(self.copy_queue)
            self.queue.pair(self.copy_queue)
        else:
            self.queue = NvQueue(id(self), ch.fifo, gpu.doorbell, pushbuf, args, words, error=ch.error)
            self.copy_queue = NvQueue(id(self), ch.copy, gpu.doorbell, copy_pushbuf, None, words, index=1, copy=True, error=ch.error)
            self.queue.peer, self.copy_queue.peer = self.copy_queue, self.queue
            self.queue_handles = [self.queue, self.copy_queue]
        self._words = [q._timeline for q in self.queue_handles]
        # Each channel's first pushbuffer: bind its engine (compute: subchannel 1, with the windows
        # and local memory; copy: subchannel 4).  Added as words: the ordering rule is not involved yet.
        self.queue.put_words(pb.setup(gpu.compute_cls, None, local_address=local.va, local_per_tpc=per_tpc).words)
        self.queue.kick()
        self.copy_queue.put_words(pb.Push().set_object(pb.SUBCH_COPY, gpu.copy_cls).words)
        self.copy_queue.kick()
        t0 = time.monotonic()
        while self.queue._progress.value < 1 or self.copy_queue._progress.value < 1:
            err = ch.error()
            if err is not None:
                raise NvChannelError(err)
            if time.monotonic() - t0 > OPEN_WAIT_S:
                late = [q.engine for q in self.queue_handles if q._progress.value < 1]
                raise DeviceHang(f"the new {' and '.join(late)} channel(s) did not run their first pushbuffer within {OPEN_WAIT_S} s")
            time.sleep(50e-6)
        if self.native:
            from ._nvq import NvCompletion

            self.completion = NvCompletion(self, self.queue_handles, SPIN_US)
            self.capabilities = dict([_abi.declare(_abi.NvAbi.native())])
        classes = {"usermode": gpu.usermode_cls, "gpfifo": gpu.gpfifo_cls, "compute": gpu.compute_cls, "copy": gpu.copy_cls}
        p = gpu.p
        assert p.va is not None
        self.facts = {
            "name": facts.get("name"), "bus": gpu.bus, "uuid": facts.get("uuid"), "chip": facts.get("chip"),
            "memory_total": facts.get("memory_total"), "bar1_size": facts.get("bar1_size"), "hang_ms": self.hang_ms,
            "driver": p.release, "classes": {k: f"0x{v:04x}" for k, v in classes.items()}, "queues": 2,
            "kinds": KINDS,
            "completion": self.completion.description if self.completion is not None
            else "OS event fd (NON_STALL_INTERRUPT) + 20 ms check of both queues' timeline words",
            "core": _native.status(),
            "error_notifier": "read" if ch.notifier.cpu else "not CPU-mapped: channel errors are seen only as hangs",
            "reservation": f"{p.va.base:#x}+{p.va.size:#x}",
            "copies": (f"every kind, by the copy engine (queue 1, HOPPER_DMA_COPY_A) through a {STAGING_BYTES >> 20} MiB pinned staging area "
                       f"in {STAGING_BYTES // STAGING_SLOTS >> 20} MiB chunks; the two queues are ordered with each other"),
        }  # fmt: skip

    def _keep(self, m: _rm.Mem) -> _rm.Mem:
        self._own.append(m)
        return m

    # -- loop thread --------------------------------------------------------------------
    def bind(self, timeline: Any, post: Callable[..., None]) -> None:
        super().bind(timeline, post)
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._ev, self._on_wake)
        self._reader = True

    def submitter(self, st: Any, limit: int) -> Any:
        """Loop thread, at open: who takes submissions (the native core, or the submit thread)."""
        self.submit_thread = st
        if self.completion is not None:
            self.completion.bind(st._loop, limit)
            return self.completion
        return _Submitter(st, self)

    def prepare(self, fill: Any, arg: Any) -> Any:
        """Check a submission on the loop (no driver call) and make the item the submitter takes."""
        native = self.completion is not None
        if type(fill) is Launch:
            if arg is not None:
                raise ArigValueError("a Launch submitted as the fill takes no arg (it carries its arguments)")
            if fill.owner != id(self):
                raise ArigValueError(f"{fill!r} is of a kernel another NV device loaded")
            return fill._item if native else (_launch_fill, fill)
        if fill is None:
            return (_native.MARK, 0, 0, 0) if native else (_no_fill, None)
        if isinstance(fill, (int, ctypes._CFuncPtr)) and not isinstance(fill, bool):  # type: ignore[attr-defined]
            if not native:
                raise ArigTypeError(f"{self.name} runs compiled fills on its native core, which is not loaded here ({_native.status()})")
            return (_native.CFILL, _abi.fill_address(fill), c_arg(arg), 0)
        self.check_fill(fill)
        return (_native.PY, fill, arg) if native else (fill, arg)

    def _on_wake(self) -> None:
        # The selector's poll re-armed the driver's flag before this callback: the word read now is fresh.
        if self.completion is not None:
            if not self._closed:
                self.completion.deliver()
            return
        self._poll()

    def channel_error(self) -> str | None:
        ch = self.channel
        return ch.error() if ch is not None and not self._closed else None

    def _poll(self) -> None:
        tl = self.timeline
        if self._closed or tl.lost is not None:
            return
        seen = self._seen
        for i, word in enumerate(self._words):
            v = word.value
            if v > seen[i]:
                seen[i] = v
                tl.report_local(i, v)
        ch = self.channel
        err = ch.error() if ch is not None else None
        if err is not None and not self._lost_told:
            self._lost_told = True
            tl.fail(NvChannelError(f"{self.name}: {err}"))

    def _arm_tick(self) -> None:
        if self._loop is not None and not self._closed:
            self._tick = self._loop.call_later(CHECK_S, self._on_tick)

    def _on_tick(self) -> None:
        self._tick = None
        self._poll()
        tl = self.timeline
        if tl.lost is None and tl.assigned > tl.reached:
            self._arm_tick()

    def abort(self) -> None:
        if self.completion is not None:
            self.completion.abort()  # the core runs nothing more; its queues' waits end
        for q in self.queue_handles:
            q.aborted = True

    def _quiesce(self) -> None:
        """Loop thread, asked by close: read the device's memory no more (the submit thread then frees it)."""
        if self.completion is not None:
            self.completion.detach()
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        if self._reader and self._loop is not None:
            try:
                self._loop.remove_reader(self._ev)
            except (RuntimeError, ValueError):
                pass
            self._reader = False
        self._quiet.set()

    def _stop_loop_reads(self) -> None:
        """Submit thread: make sure the loop reads neither the timeline word nor the notifier while they are freed."""
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running():
            return
        try:
            loop.call_soon_threadsafe(self._quiesce)
        except RuntimeError:  # closed meanwhile
            return
        self._quiet.wait(QUIESCE_S)

    def detach(self) -> None:
        if self.completion is not None:
            self.completion.detach()
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        if self._reader and self._loop is not None:
            try:
                self._loop.remove_reader(self._ev)
            except (RuntimeError, ValueError):  # the loop is closed
                pass
            self._reader = False
        if self._closed and self._ev >= 0:
            _close_fd(self._ev)  # after the reader is gone: the number is never reused under the loop
            self._ev = -1

    # -- the submit thread ---------------------------------------------------------------
    def call_fill(self, qi: int, fill: Any, arg: Any, v: int) -> None:
        if self.completion is not None:
            self.completion.call_fill(self.queue_handles[qi], fill, arg, v)  # at its place in the core's ring
            return
        r = fill(self.queue_handles[qi], arg, v)
        if r is not None:
            fill_result(r, v, _fill_error)

    def signal(self, qi: int, v: int) -> None:
        if self.completion is None:  # the native core signals its own
            self.queue_handles[qi].signal(v)

    def mark(self, qi: int, v: int) -> None:
        """Nothing: values are released at ``signal`` (at least every 32 fills); the rings track progress on their own."""

    # -- memory and images (submit thread) ---------------------------------------------
    def _key(self) -> int:
        self._keys += 1
        return self._keys

    def alloc(self, nbytes: int, kind: str | None) -> Buffer:
        kind = "device" if kind is None else kind
        if kind not in KINDS:
            raise ArigValueError(f"{self.name} has memory of kinds {', '.join(repr(k) for k in KINDS)}, not {safe_repr(kind)}")
        g = self.gpu
        if kind == "pinned":
            m = g.host("pinned", nbytes)
        else:
            m = g.vram(kind, nbytes, cpu=kind == "mapped")
        key = self._key()
        self._mem[key] = m
        host = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(m.va)) if kind != "device" else None
        post = self.post
        return Buffer(self.name, kind, m.va, nbytes, lambda: post(self._free_mem, key), host=host)

    def map_host(self, address: int, nbytes: int, owner: Any) -> Buffer:
        """Submit thread: the program's memory at ``address`` mapped for the GPU (``Device.map_host``)."""
        m, gpu_address = self.gpu.map_host("host", address, nbytes)
        key = self._key()
        self._mem[key] = m
        self._pins[id(m)] = owner  # its memory must outlive the GPU's mapping of it, which the free undoes later
        host = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))
        post = self.post
        return Buffer(self.name, "host", gpu_address, nbytes, lambda: post(self._free_mem, key), host=host, keep=owner)

    def _free_mem(self, key: int) -> None:
        m = self._mem.pop(key, None)
        if m is None or self._closed:
            return
        self._free_after_gpu(m)

    def _free_after_gpu(self, m: _rm.Mem) -> None:
        """Free ``m`` once the GPU is done with everything submitted; while lost, keep it until close."""
        if self.timeline.lost is not None or self.queue.aborted:
            self._orphans.append(m)
            return
        if self.completion is not None:
            # The native thread owns the queues: the loop waits for the value submitted last, then frees here.
            self._deferred[id(m)] = m
            loop = self._loop
            try:
                assert loop is not None
                loop.call_soon_threadsafe(self._free_when_reached, m)
            except (RuntimeError, AssertionError):  # no loop: close frees it
                pass
            return
        try:
            for q in self.queue_handles:
                q.drain()
        except Exception:  # noqa: BLE001 - the GPU may still use it: keep it until close
            self._orphans.append(m)
            return
        failures = m.free()
        self._pins.pop(id(m), None)
        if failures:
            _log.fallback(f"{self.name}: freeing {m.what} memory: {'; '.join(failures)}")

    def _free_when_reached(self, m: _rm.Mem) -> None:
        """Loop thread: free ``m`` (on the submit thread) once every value assigned so far is reached."""
        tl = self.timeline
        if self._closed or tl.lost is not None:
            return  # close frees it, or keeps it if the channel stays
        target = tl.assigned
        if tl.reached >= target:
            self.post(self._free_deferred, m)
            return

        async def later() -> None:
            try:
                await tl.wait(target)
            except ArigError:
                return  # lost: close decides
            self.post(self._free_deferred, m)

        task = asyncio.ensure_future(later())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _free_deferred(self, m: _rm.Mem) -> None:
        if self._deferred.pop(id(m), None) is None or self._closed:
            return
        failures = m.free()
        self._pins.pop(id(m), None)
        if failures:
            _log.fallback(f"{self.name}: freeing {m.what} memory: {'; '.join(failures)}")

    def copy_fill(self, buf: Buffer, array: np.ndarray[Any, Any], to_device: bool) -> tuple[Any, Any]:
        """Any kind of memory: the copy engine, through the staging area (``stage_in`` / ``stage_out`` on the submit thread)."""
        flat = array.reshape(-1).view(np.uint8)
        return (_upload_fill if to_device else _download_fill), (self, buf.address, flat)

    def stage_in(self, address: int, src: np.ndarray[Any, Any]) -> None:
        """Copy ``src`` (flat bytes) to GPU address ``address``: per chunk, a CPU memcpy into a staging slot the
        GPU no longer reads, then a copy-engine copy from it (each chunk its own submission of the copy queue).

        Returns once the copies are submitted; the queues' ordering makes later work wait for them."""
        cq, slots, base = self.copy_queue, self._slots, self.staging.va
        at_src = src.ctypes.data
        for off, n in copy_chunks(src.nbytes, slots.size):
            i, busy = slots.take()
            cq.wait(busy, "a staging slot the copy engine reads")
            at = base + slots.offset(i)
            ctypes.memmove(at, at_src + off, n)
            cq.copy(address + off, at, n)
            cq.kick()
            slots.used(i, cq.seq)

    def stage_out(self, address: int, dst: np.ndarray[Any, Any]) -> None:
        """Copy ``dst.nbytes`` bytes from GPU address ``address`` into ``dst`` (flat bytes): per chunk, a copy-engine
        copy into a staging slot, a bounded wait for it, a CPU memcpy out; up to every slot in flight at once."""
        cq, slots, base = self.copy_queue, self._slots, self.staging.va
        at_dst = dst.ctypes.data
        flight: deque[tuple[int, int, int, int]] = deque()  # (slot, submission, offset, size)

        def finish() -> None:
            i, seq, off, n = flight.popleft()
            cq.wait(seq, "a copy into the staging area")
            ctypes.memmove(at_dst + off, base + slots.offset(i), n)

        for off, n in copy_chunks(dst.nbytes, slots.size):
            if len(flight) == slots.count:
                finish()
            i, busy = slots.take()
            cq.wait(busy, "a staging slot the copy engine reads")
            cq.copy(base + slots.offset(i), address + off, n)
            cq.kick()
            slots.used(i, cq.seq)
            flight.append((i, cq.seq, off, n))
        while flight:
            finish()

    def dma(self, buf: Buffer, offset: int, nbytes: int) -> Dmabuf:
        """Submit thread: the RM object ``buf`` lies in, exported as a new dma-buf (vidmem only)."""
        m = next((m for m in self._mem.values() if m.va <= buf.address < m.va + m.size), None)
        if m is None:
            raise ArigValueError(f"{buf!r} is no memory this device allocated")
        if buf.kind == "pinned":
            raise ArigValueError("pinned memory is the host's: the kernel driver exports only the GPU's own memory (kinds 'device' and 'mapped') as a dma-buf")
        fd = self.gpu.export_dmabuf(m, 0, m.size)
        return Dmabuf(fd, buf.address - m.va + offset, nbytes)

    def load(self, image: bytes) -> Image:
        cubin = _cubin.parse(image)
        if cubin.sm != 90:
            raise ArigValueError(f"{self.name} runs sm_90 cubins; this one is sm_{cubin.sm}")
        if not cubin.kernels:
            raise ArigValueError("the cubin has no kernels")
        for k in cubin.kernels.values():
            if k.relocations:
                kinds = sorted({f"type {r.type} of {r.symbol!r}" for r in k.relocations})
                raise ArigValueError(f"kernel {k.name!r} needs {len(k.relocations)} relocation(s) ({', '.join(kinds)}), which arig.nvrm does not apply yet")
        offsets, at = {}, 0
        for name, k in cubin.kernels.items():
            offsets[name] = at
            at += -(-max(len(k.text), 1) // 256) * 256
        m = self.gpu.vram("code", at + 256)
        try:
            for name, k in cubin.kernels.items():
                m.write(offsets[name], k.text)
            ids = {name: register(LoadedKernel(k, m.va + offsets[name], id(self))) for name, k in cubin.kernels.items()}
        except BaseException:
            m.free()
            raise
        key = self._key()
        self._images[key] = (m, list(ids.values()))
        post = self.post
        return Image(self.name, key, ids, lambda: post(self._unload, key))

    def _unload(self, key: int) -> None:
        found = self._images.pop(key, None)
        if found is None or self._closed:
            return
        m, ids = found
        for fid in ids:
            unregister(fid)
        self._free_after_gpu(m)

    # -- the end --------------------------------------------------------------------
    def _destroy_queues(self) -> None:
        for q in getattr(self, "queue_handles", []):
            if hasattr(q, "destroy"):
                q.destroy()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop_loop_reads()
        if self.completion is not None:
            self.completion.stop_thread()  # the native thread is joined: nothing is submitted after this
        for _m, ids in self._images.values():
            for fid in ids:
                unregister(fid)
        failures = self._event_undo.unwind()
        if not self._reader and self._ev >= 0:  # the loop reads it no more (quiesced): close it here, off the loop
            _close_fd(self._ev)
            self._ev = -1
        # else detach closes it, on the loop, once the reader is gone: the number is never reused under the loop
        ch = self.channel
        ch_failures = ch.free() if ch is not None else []
        if ch_failures:
            # The GPU may still run work that uses the memory: keep it for the process.
            never_free(*[*self._mem.values(), *(m for m, _ in self._images.values()), *self._orphans, *self._deferred.values(), *self._own,
                             *self._pins.values()])  # fmt: skip
            _log.fallback(f"{self.name}: the RM did not free the channel ({'; '.join(ch_failures)}): its memory stays for the process")
        else:
            for m in [*self._mem.values(), *(m for m, _ in self._images.values()), *self._orphans, *self._deferred.values(), *reversed(self._own)]:
                failures += m.free()
        self._mem.clear()
        self._images.clear()
        self._orphans.clear()
        self._deferred.clear()
        self._pins.clear()
        if self.completion is not None:
            self.completion.close(True)  # the core and its eventfd (detached from the loop already, or closed by detach)
        if ch_failures:
            never_free(*(q for q in self.queue_handles if hasattr(q, "destroy")))  # the GPU may still read their rings
        else:
            self._destroy_queues()
        self._own.clear()
        self.gpu.unclaim()
        if failures:
            _log.fallback(f"{self.name}: freeing at close: {'; '.join(failures)}")
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self.detach)  # a device never stopped is closed without Device.stop's detach
            except RuntimeError:
                pass
        elif not self._reader and self._ev >= 0:
            _close_fd(self._ev)
            self._ev = -1


def _fill_error(code: int, v: int) -> BaseException:
    return FillError(code)


def _close_fd(fd: int) -> None:
    """The event fd's one close (``_rm.Gpu.os_event`` leaves it to the device), through the driver seam."""
    _fd.close(fd)




def open_backend(name: str, bus: str) -> NvBackend:
    """Make the backend on the submit thread (``NvOpener.make``)."""
    return NvBackend(name, bus)
