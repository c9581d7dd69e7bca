"""An NV queue: what Python fills on an NV device receive, over the native core's ``arig_nvq``.

The queue's submission state lives in the core (``nv_channel.h``'s ``arig_nvq``)
because two threads submit to an NV device's channels: the core's native
thread (prepared launches, marks, C fills, uploads and downloads, every
value's release) and the device's Python submit thread (the channel's first
pushbuffer at open, Python fills, which run while the native thread waits at
their gate).  Never both at once: a method of :class:`NvQueue` is called
only on the submit thread, before the core starts or inside a Python fill.

Every pushbuffer encoding stays in :mod:`arig.nvrm._push`: the core gets
each as a template (:func:`spec`) and only patches numbers in.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from typing import Any

from .. import _native
from .._errors import ArigTypeError, ArigValueError, DeviceHang, safe_repr
from . import _exec_params, _faults, _push, _rm
from ._launch import LOCAL_BYTES_PER_THREAD, Launch, launch_template

__all__ = ["NvQueue", "open_pair", "start_engines", "spec", "templates", "TEMPLATES", "TIMELINE_OFFSET", "PROGRESS_OFFSET", "WORDS_STRIDE"]

PUSHBUFFER_BYTES = 2 << 20  # each queue's pushbuffer ring
ARGS_BYTES = 16 << 20  # the compute queue's argument ring (each launch's bank 0 and QMD)
MAX_TPCS = 72  # GH100's full TPC count: local memory is sized for every TPC index the GPU may use
#: How long a new channel may take to run its first pushbuffer.
OPEN_WAIT_S = 5.0

#: Offsets in a queue's part of the device's page of pinned host memory (queue i's part starts at
#: i * WORDS_STRIDE): the timeline word, the internal progress word (16 bytes each: value, GPU time).
TIMELINE_OFFSET, PROGRESS_OFFSET, WORDS_STRIDE = 0, 16, 32

#: The templates of a queue's spec, in NvSpec's order.
TEMPLATES = ("rel_tl", "rel_prog", "wait_prog", "wait_tl", "intr", "launch", "copy", "release", "acquire")

def templates(timeline: int, progress: int, copy: bool) -> dict[str, _native.NvTemplate]:
    """The words of every kind of method a queue submits, with where the core patches numbers in
    (a host semaphore method or a copy-engine release has its payload's lo, hi at words 3, 4).

    Built by :class:`arig.nvrm._push.Push` with zeros where the numbers go
    (the tests patch random numbers in through the core and compare with ``Push``)."""
    T = _native.NvTemplate.of

    def rel(address: int, value: int) -> list[int]:
        return (_push.Push().copy_release(address, value) if copy else _push.Push().release(address, value)).words

    words, qmd_word = launch_template()
    out = {
        "rel_tl": T(rel(timeline, 0), a=(3, 4)),
        "rel_prog": T(rel(progress, 0), a=(3, 4)),
        "wait_prog": T(_push.wait_words(progress, 0), a=(3, 4)),
        "wait_tl": T(_push.wait_words(timeline, 0), a=(3, 4)),
        "intr": T(_push.Push().non_stall_interrupt().words),
        "launch": T(words, a=(qmd_word, -1)),
        # Push.copy: OFFSET_IN_UPPER, source hi, lo, destination hi, lo; LINE_LENGTH_IN, bytes; LAUNCH_DMA.
        "copy": T(_push.Push().copy(0, 0, 1).words, a=(2, 1), b=(4, 3), c=6),
        # Host release: SEM_ADDR_LO, _HI, payload lo, hi.  Copy release: SEMAPHORE_A (hi), _B (lo), payload lo, hi.
        "release": T(rel(0, 0), a=(2, 1) if copy else (1, 2), b=(3, 4)),
        "acquire": T(_push.Push().acquire(0, 0).words, a=(1, 2), b=(3, 4)),
    }
    return out


def spec(*, pushbuf: Any, args: Any, fifo: Any, doorbell: int, words: Any, base: int, copy: bool) -> _native.NvSpec:
    """A queue's NvSpec: its rings (``_rm.Mem``: host and GPU addresses are one), its channel (``_rm.Gpfifo``),
    its words at ``words.va + base`` (the timeline, then the progress word), and its templates."""
    s = _native.NvSpec()
    s.pb = s.pb_va = pushbuf.va
    s.pb_size = pushbuf.size
    if args is not None:
        s.args = s.args_va = args.va
        s.args_size = args.size
    s.gpfifo = fifo.ring.va
    s.gp_put = fifo.ring.va + fifo.userd_offset + _exec_params.USERD_GP_PUT
    s.doorbell = doorbell + _exec_params.USERMODE_NOTIFY_CHANNEL_PENDING
    timeline, progress = words.va + base + TIMELINE_OFFSET, words.va + base + PROGRESS_OFFSET
    s.timeline, s.progress = timeline, progress
    if fifo.notifier.cpu:
        s.notifier = fifo.notifier.va
        ctypes.memmove(s.notifier_base, fifo.notifier_base, 16)
    s.entries, s.token, s.is_copy = fifo.entries, fifo.token, int(copy)
    for name, t in templates(timeline, progress, copy).items():
        setattr(s, name, t)
    return s


class NvQueue:
    """A queue of an NV device: what Python fills receive (submit thread only, see the module docstring).

    Queue 0 is the compute channel, queue 1 the copy channel (HOPPER_DMA_COPY_A
    on subchannel 4).  ``launch(l)`` enqueues a prepared :class:`Launch` on
    the compute channel, ``copy(dst, src, nbytes)`` a copy-engine copy
    (pitch, non-pipelined, flushed) on the copy channel, whichever queue it
    is called on; ``release(address, value)`` (u64 payload, 16-byte aligned,
    the GPU time after it) and ``acquire(address, value)`` (ACQ_CIRC_GEQ) go
    to this queue's channel.  Nothing reaches the GPU until the value's
    release.

    **The two queues are ordered with each other** (unlike CUDA's independent
    streams, because copies feed kernels): before a queue takes new work it
    submits the other queue's pending words and, unless the GPU is already
    past them, acquires the other queue's progress word at the value last
    submitted there.  So ``upload``, ``submit(launch)``, ``download`` give
    the kernel's result.  Arguments are checked here, before the core sees them."""

    def __init__(self, owner: int, spec_: _native.NvSpec, *, index: int, copy: bool, error: Callable[[], str | None]) -> None:
        libs = _native.library()
        if libs is None:  # the backend refuses to open first; this names the cause if it is reached anyway
            raise RuntimeError(_native.status())
        # The blocking binding (the GIL released): any call may wait for the GPU to make ring room.
        self._lib = libs[1]
        self.index = index
        self.engine = "copy" if copy else "compute"
        self._is_copy = copy
        self._owner = owner
        self._error = error
        self._spec = spec_
        self.timeline_address = spec_.timeline
        self.progress_address = spec_.progress
        self._timeline = ctypes.c_uint64.from_address(spec_.timeline)
        self._progress = ctypes.c_uint64.from_address(spec_.progress)
        ptr = self._lib.arig_nv_create(ctypes.byref(spec_))
        if not ptr:
            raise MemoryError("arig_nv_create failed")
        self.ptr: int = ptr
        self.peer: NvQueue | None = None

    def pair(self, other: NvQueue) -> None:
        """The two queues of a device: each orders its work after the other's."""
        self._lib.arig_nv_pair(self.ptr, other.ptr)
        self.peer, other.peer = other, self

    def _check(self, rc: int, what: str) -> None:
        if rc:
            raise _faults.call_error(rc, what, self._error())

    @property
    def done(self) -> int:
        """Submissions the GPU has done (the progress word, which the GPU writes)."""
        return int(self._progress.value)

    @property
    def seq(self) -> int:
        """Submissions made (the progress word's values)."""
        return int(self._lib.arig_nv_seq(self.ptr))

    # -- what fills call -------------------------------------------------------------
    def launch(self, launch: Launch) -> None:
        """Enqueue ``launch`` on the compute channel (its bank 0 and QMD into the argument ring)."""
        if type(launch) is not Launch:
            raise ArigTypeError(f"queue.launch takes an arig.nvrm.Launch, got {type(launch).__name__}")
        if launch.owner != self._owner:
            raise ArigValueError(f"{launch!r} is of a kernel another NV device loaded")
        self._check(self._lib.arig_nv_launch(self.ptr, launch._item[1]), "queue.launch")

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Enqueue a copy-engine copy of ``nbytes`` from GPU address ``src`` to ``dst`` on the copy channel."""
        _push.check_copy_args(dst, src, nbytes)
        if max(dst, src) + nbytes > 1 << 57:
            raise ArigValueError(f"queue.copy: {nbytes} bytes from {src:#x} to {dst:#x} reach past 2**57")
        self._check(self._lib.arig_nv_copy(self.ptr, dst, src, nbytes), "queue.copy")

    def release(self, address: int, value: int) -> None:
        """A semaphore release of ``value`` at ``address`` (16-byte aligned) after the work before it (u64, GPU time)."""
        _check_sem(address, value, 16)
        self._check(self._lib.arig_nv_release(self.ptr, address, value), "queue.release")

    def acquire(self, address: int, value: int) -> None:
        """Make the queue wait until the u64 at ``address`` is >= ``value`` (ACQ_CIRC_GEQ)."""
        _check_sem(address, value, 8)
        self._check(self._lib.arig_nv_acquire(self.ptr, address, value), "queue.acquire")

    # -- submission ----------------------------------------------------------------
    def put_words(self, words: list[int]) -> None:
        """Append pushbuffer words as they are (the channel's first pushbuffer)."""
        arr = (ctypes.c_uint32 * len(words))(*words)
        self._check(self._lib.arig_nv_put(self.ptr, arr, len(words)), "the channel's setup")

    def submit(self, value: int | None = None, interrupt: bool = False) -> None:
        """Submit the pending words (and a timeline release of ``value``, then a non-stall interrupt
        where ``interrupt``) as one GPFIFO entry, and ring the channel's doorbell; ``seq`` counts these.

        The core names this ``arig_nv_kick``; it is the GPU submission, never the core's other
        "kick" (the eventfd write that wakes the loop)."""
        self._check(self._lib.arig_nv_kick(self.ptr, value or 0, int(value is not None), int(interrupt), 0), "a submission")

    def wait(self, seq: int, what: str) -> None:
        """Wait (bounded) until the GPU has done this queue's submission ``seq``."""
        if seq > self.seq:
            raise ArigValueError(f"submission {seq} of {self!r} was never made")
        self._check(self._lib.arig_nv_wait(self.ptr, seq), f"waiting for {what}")

    def destroy(self) -> None:
        if self.ptr:
            self._lib.arig_nv_destroy(self.ptr)
            self.ptr = 0

    def __repr__(self) -> str:
        return f"<arig.nvrm.NvQueue {self.index} ({self.engine}) submitted={self.seq}>"


def _check_sem(address: Any, value: Any, align: int) -> None:
    if isinstance(address, bool) or not isinstance(address, int) or address % align or not 0 <= address < 1 << 57:
        raise ArigValueError(f"a semaphore address must be an int, {align}-byte aligned, below 2**57; got {safe_repr(address)}")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 64:
        raise ArigValueError(f"a semaphore value must be an int in 0..2**64-1, got {safe_repr(value)}")


def open_pair(owner: int, gpu: _rm.Gpu, ch: _rm.Channel, keep: Callable[[_rm.Mem], _rm.Mem]) -> tuple[NvQueue, NvQueue]:
    """The compute and the copy queue of channel group ``ch``, paired; their rings and words are allocated
    through ``keep`` (the device frees them at close, after the queues)."""
    assert ch.copy is not None
    words = keep(gpu.host("timeline", _rm.PAGE_4K))
    parts = [(False, ch.fifo, keep(gpu.vram("pushbuffer", PUSHBUFFER_BYTES)), keep(gpu.vram("arguments", ARGS_BYTES))),
             (True, ch.copy, keep(gpu.vram("copy pushbuffer", PUSHBUFFER_BYTES)), None)]  # fmt: skip
    queues: list[NvQueue] = []
    try:
        for i, (copy, fifo, pushbuf, args) in enumerate(parts):
            s = spec(pushbuf=pushbuf, args=args, fifo=fifo, doorbell=gpu.doorbell, words=words, base=i * WORDS_STRIDE, copy=copy)
            queues.append(NvQueue(owner, s, index=i, copy=copy, error=ch.error))
    except BaseException:
        for q in queues:
            q.destroy()
        raise
    compute, copy_queue = queues
    compute.pair(copy_queue)
    return compute, copy_queue


def start_engines(gpu: _rm.Gpu, ch: _rm.Channel, compute: NvQueue, copy: NvQueue, keep: Callable[[_rm.Mem], _rm.Mem]) -> None:
    """Bind each channel's engine (compute: subchannel 1, with the windows and local memory; copy:
    subchannel 4) and wait until both ran it.  Added as words: the ordering rule is not involved yet."""
    assert gpu.copy_cls is not None
    per_tpc = _push.local_bytes_per_tpc(LOCAL_BYTES_PER_THREAD)
    local = keep(gpu.vram("local", per_tpc * MAX_TPCS, cpu=False))
    compute.put_words(_push.setup(gpu.compute_cls, None, local_address=local.va, local_per_tpc=per_tpc).words)
    compute.submit()
    copy.put_words(_push.Push().set_object(_push.SUBCH_COPY, gpu.copy_cls).words)
    copy.submit()
    t0 = time.monotonic()
    while compute.done < 1 or copy.done < 1:
        err = ch.error()
        if err is not None:
            raise _faults.NvChannelError(err)
        if time.monotonic() - t0 > OPEN_WAIT_S:
            late = [q.engine for q in (compute, copy) if q.done < 1]
            raise DeviceHang(f"the new {' and '.join(late)} channel(s) did not run their first pushbuffer within {OPEN_WAIT_S} s")
        time.sleep(50e-6)
